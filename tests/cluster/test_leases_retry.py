"""The lease heartbeat's replay of dropped matches, against an in-memory store and host.

After a failed renewal (the database away, maybe longer than the lease) the first good
renewal replays the matches this node still owns but dropped meanwhile. When that replay's
own read fails, the next renewal must try again: until issue 33 the "renewal failed" mark
was cleared before the replay ran, so one failed read left the matches out of memory for
good while the node's lease stayed alive (no other node claims those).
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from moo.errors import StorageError
from server.cluster.leases import Leases
from server.storage import StoredMatch
from server.storage_cluster import ClusterStore


class _Store:
    """The few calls the heartbeat makes, with reads that fail while ``reads_fail`` > 0."""

    def __init__(self) -> None:
        self.fenced = 0
        self.renew_fails = False
        self.reads_fail = 0
        self.unfinished = ["m1"]

    async def renew(self, node: str, epoch: int, ttl_ms: int) -> bool:
        if self.renew_fails:
            raise StorageError("storage unavailable: the link is down")
        return True

    async def owned_unfinished(self, node: str, epoch: int) -> list[str]:
        if self.reads_fail:
            self.reads_fail -= 1
            raise StorageError("storage unavailable: the read broke")
        return list(self.unfinished)

    async def stored_matches(self, ids: list[str]) -> list[StoredMatch]:
        return [StoredMatch(m, {}, []) for m in ids]

    async def owned(self, ids: list[str], node: str, epoch: int) -> set[str]:
        return set(ids)


class _Host:
    def __init__(self) -> None:
        self.live: dict[str, int] = {}

    def claiming(self, match_ids: list[str]) -> None:
        pass

    def adopt(self, match_ids: list[str], stored: list[StoredMatch]) -> list[str]:
        for sm in stored:
            self.live[sm.match_id] = 1
        return [sm.match_id for sm in stored]

    def live_seqs(self) -> dict[str, int]:
        return dict(self.live)

    def let_go(self, match_id: str) -> None:
        self.live.pop(match_id, None)


def _leases() -> tuple[Leases, _Store, _Host]:
    store, host = _Store(), _Host()
    leases = Leases(cast(ClusterStore, cast(Any, store)), "a", host)
    leases.epoch = 3
    return leases, store, host


async def test_a_failed_replay_after_a_failed_renewal_is_tried_at_the_next_renewal() -> None:
    leases, store, host = _leases()
    store.renew_fails = True
    with pytest.raises(StorageError):
        await leases.heartbeat()
    store.renew_fails = False
    store.reads_fail = 1
    with pytest.raises(StorageError):
        await leases.heartbeat()  # renewed, but the replay's read broke
    assert host.live == {}
    await leases.heartbeat()
    assert host.live == {"m1": 1} and leases.takeovers == 1


async def test_a_failed_replay_after_a_fenced_commit_is_tried_at_the_next_renewal() -> None:
    leases, store, host = _leases()
    store.fenced = 1  # a commit was fenced since the last look: its match dropped here
    store.reads_fail = 1
    with pytest.raises(StorageError):
        await leases.heartbeat()
    assert host.live == {}
    await leases.heartbeat()
    assert host.live == {"m1": 1}
    store.unfinished = ["m1", "m2"]  # nothing new fenced: no replay, nothing read
    await leases.heartbeat()
    assert host.live == {"m1": 1}
