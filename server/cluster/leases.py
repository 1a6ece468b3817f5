"""Match ownership in a cluster: node leases with epochs in PostgreSQL, fencing and takeover.

Every node has a row in ``nodes`` (name, epoch, lease end in ms of the *database's* clock) and
every match a row in ``owners`` (match id, node, epoch). A node owns a match while the owner row
names it with its current epoch and its lease has not run out; only then may it append to the
match's log (the store checks this inside each commit and locks the owner rows until the
commit, so a takeover waits for an in-flight commit and then replays a log that includes it).
The SQL is the store's (server/storage_cluster.py); this module decides *when*.

* **Start**: the node's epoch is bumped (a restarted node never silently inherits what its
  previous incarnation owned: those matches are taken over like any dead node's, possibly by
  itself), and its lease begins.
* **Heartbeat** every ``lease/5``: the lease is extended to ``now + 0.7 * lease``. Matches the
  node holds in memory but no longer owns (it was paused past its lease and another node took
  them) are let go of at once.
* **Death notice** (:meth:`Leases.claim_from`): when the broker publishes a node's MQTT will
  (its process lost its connection: killed, or cut off), a survivor ends that node's lease for
  *that epoch* and claims its matches in one transaction, so a crashed node's matches run
  again within a fraction of a second instead of a lease.
* **Takeover scan** every ``lease/20``: unfinished matches whose owner's lease ran out (a
  paused or partitioned node, which no will reports), or whose owner restarted, are claimed
  with a conditional UPDATE (exactly one node wins each) and rebuilt by replay.
* **Stop** (SIGTERM, :meth:`Leases.hand_over`): the node commits what is queued, ends its own
  lease and waits (up to one lease) until the others have taken its matches over.

A paused node (SIGSTOP) cannot fork a match: when it wakes up, its stale appends fail the fence
(:class:`~server.storage_pg.LeaseLost`) and it drops the match.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from moo.errors import StorageError
from server.storage import StoredMatch
from server.storage_cluster import ClusterStore
from server.storage_pg import UNAVAILABLE_ERRORS

__all__ = ["Host", "Leases"]

log = logging.getLogger("moo.cluster")


class Host(Protocol):
    """What the leases act on: the node's matches (the cluster router)."""

    def claiming(self, match_ids: list[str]) -> None:
        """These matches are claimed for this node; their replay follows (requests wait)."""

    def adopt(self, match_ids: list[str], stored: list[StoredMatch]) -> list[str]:
        """Run the claimed ``match_ids`` here from their logs (``stored``; empty if the read
        failed); the ids now live here."""

    def live_seqs(self) -> dict[str, int]:
        """Live matches here -> their durable seq (0: not yet stored)."""

    def let_go(self, match_id: str) -> None:
        """Another node owns ``match_id`` now."""


class Leases:
    """One node's side of the lease protocol."""

    def __init__(self, store: ClusterStore, node: str, host: Host, *, lease_ms: int = 10_000):
        self.store = store
        self.node = node
        self.host = host
        self.lease_ms = lease_ms
        self.ttl_ms = int(lease_ms * 0.7)
        self.heartbeat_s = lease_ms / 5000
        self.scan_s = lease_ms / 20000
        self.epoch = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._renew_failed = False
        #: the store's count of fenced appends when the last renewal looked at it
        self._fenced_seen = 0
        #: matches taken over from dead or paused nodes, and matches let go of (for /metrics)
        self.takeovers = 0
        self.lost = 0
        #: seconds from a death notice to the dead node's matches adopted here (recent ones)
        self.claim_seconds: list[float] = []

    async def start(self) -> None:
        """Begin a new epoch under this node's name and adopt what needs an owner."""
        self.epoch = await self.store.begin_epoch(self.node, self.ttl_ms)
        self.store.fence = (self.node, self.epoch)
        self.store.before_close.append(self.end_lease)
        log.info("node %s: epoch %d, lease %d ms", self.node, self.epoch, self.lease_ms)
        await self.scan()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._every(self.heartbeat_s, self.heartbeat)),
            loop.create_task(self._every(self.scan_s, self.scan)),
        ]

    async def stop(self) -> None:
        """Stop renewing; the lease ends once the store has committed its last appends."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def end_lease(self) -> None:
        """End the lease now (at a graceful stop), so other nodes take over at once."""
        with contextlib.suppress(StorageError):
            await self.store.end_lease(self.node, self.epoch)

    async def hand_over(self, timeout_s: float | None = None) -> int:
        """Drain (SIGTERM): give this node's matches to the other nodes *before* its clients
        are told to reconnect, so they find the matches already moved.

        What the store has queued is committed first; then the lease ends, and the other
        nodes claim the matches on their next scan (``lease/20``) and replay them. This waits
        until none is left to this node (at most ``timeout_s``, default one lease; not at all
        when no other node is alive to take them). Returns how many were still left.
        """
        limit = time.monotonic() + (self.lease_ms / 1000 if timeout_s is None else timeout_s)
        while self.store.has_pending() and time.monotonic() < limit:
            await asyncio.sleep(0.005)  # what clients sent before the drain is stored here
        try:  # (what the log says of a drain: how many matches it moved, not just how it ended)
            log.info("node %s: draining; %d matches to hand over", self.node,
                     len(await self.store.owned_unfinished(self.node, self.epoch)))
        except (StorageError, *UNAVAILABLE_ERRORS) as exc:
            log.warning("node %s: draining; matches to hand over not known: %s", self.node, exc)
        await self.end_lease()
        left = -1
        try:
            others = await self.store.others_alive(self.node)
            while True:
                left = len(await self.store.owned_unfinished(self.node, self.epoch))
                if not left or not others or time.monotonic() >= limit:
                    break
                await asyncio.sleep(self.scan_s / 2)
        except (StorageError, *UNAVAILABLE_ERRORS) as exc:
            log.warning("node %s: hand-over not confirmed: %s", self.node, exc)
        log.info("node %s: lease ended for the drain; %d matches not yet taken over",
                 self.node, max(left, 0))
        return left

    async def _every(self, seconds: float, step: Callable[[], Any]) -> None:
        """Run ``step`` every ``seconds`` until stopped. Nothing it raises may end the loop: a
        node whose renewals stopped would lose every match it runs one lease later."""
        while not self._stopping:
            await asyncio.sleep(seconds)
            try:
                await step()
            except (StorageError, *UNAVAILABLE_ERRORS) as exc:
                log.warning("node %s: %s failed: %s", self.node, step.__name__, exc)
            except Exception:
                log.exception("node %s: %s failed unexpectedly; retried", self.node,
                              step.__name__)

    async def readopt(self) -> int:
        """After a database outage: matches this node still owns but dropped, back by replay."""
        live = self.host.live_seqs()
        ids = [m for m in await self.store.owned_unfinished(self.node, self.epoch)
               if m not in live]
        return len(await self._adopt(ids)) if ids else 0

    async def heartbeat(self) -> None:
        """Extend the lease; let go of live matches this node no longer owns.

        After a failed renewal (the database was away, perhaps longer than the lease), the
        first good one also re-adopts what this node still owns but had to drop meanwhile
        (its appends were refused while the lease was out), so no match is left stuck.
        """
        try:
            renewed = await self.store.renew(self.node, self.epoch, self.ttl_ms)
        except BaseException:
            self._renew_failed = True
            raise
        if not renewed:
            log.error("node %s: epoch %d was replaced by another process", self.node, self.epoch)
        # A fenced append since the last renewal (the lease had lapsed: renewals slowed by the
        # database link, or the node paused) dropped its match here as moved; if no other
        # node took it meanwhile it is still this node's, and nobody else would ever claim
        # it (the scan leaves a live lease's matches alone): it comes back here by replay.
        fenced = self.store.fenced
        if self._renew_failed or (renewed and fenced != self._fenced_seen):
            # (the flags are cleared only once the replay got through: a read that fails
            # here is tried again at the next renewal, not forgotten)
            adopted = await self.readopt()
            self._renew_failed = False
            self._fenced_seen = fenced
            if adopted:
                log.info("node %s: re-adopted %d matches after renewing", self.node, adopted)
        # only matches whose first append (which writes the owner row) has committed
        live = [match_id for match_id, seq in self.host.live_seqs().items() if seq > 0]
        if not live:
            return
        owned = await self.store.owned(live, self.node, self.epoch) if renewed else set()
        for match_id in live:
            if match_id not in owned:
                self.lost += 1
                log.warning("node %s: match %s is owned elsewhere now; letting go",
                            self.node, match_id)
                self.host.let_go(match_id)

    async def scan(self) -> int:
        """Claim unfinished matches whose owner is gone; rebuild them here by replay."""
        ids = await self.store.claim_orphans(self.node, self.epoch)
        adopted = await self._adopt(ids) if ids else []
        if adopted:
            log.info("node %s: took over %d matches", self.node, len(adopted))
        return len(adopted)

    async def claim_from(self, dead: str, dead_epoch: int) -> int:
        """``dead`` lost its broker connection in ``dead_epoch``: take its matches now."""
        if self._stopping or self.epoch == 0 or (dead == self.node and dead_epoch == self.epoch):
            return 0
        started = time.perf_counter()
        claimed_at = started
        ids: list[str] = []

        def claimed(claimed_ids: list[str]) -> None:
            # committed: requests for these matches wait here for their replay, which the
            # log read on the same connection feeds
            nonlocal claimed_at
            claimed_at = time.perf_counter()
            live = self.host.live_seqs()
            ids.extend(m for m in claimed_ids if m not in live)
            if ids:
                self.host.claiming(ids)

        stored: list[StoredMatch] = []
        try:
            stored = await self.store.claim_from(
                dead, dead_epoch, self.node, self.epoch, claimed
            )
        finally:
            read_at = time.perf_counter()
            adopted = self.host.adopt(ids, stored) if ids else []
            self.takeovers += len(adopted)
        if adopted:
            self.claim_seconds.append(time.perf_counter() - started)
            del self.claim_seconds[:-1000]
            # the phases of a takeover after the death check (docs/cluster.md, "Failover")
            log.info("node %s: took over %d matches of %s (epoch %d) on its death notice: "
                     "claim %.3f s, log read %.3f s, restore %.3f s", self.node, len(adopted),
                     dead, dead_epoch, claimed_at - started, read_at - claimed_at,
                     time.perf_counter() - read_at)
        return len(adopted)

    async def _adopt(self, ids: list[str]) -> list[str]:
        live = self.host.live_seqs()
        ids = [m for m in ids if m not in live]
        if not ids:
            return []
        self.host.claiming(ids)
        stored: list[StoredMatch] = []
        try:
            stored = await self.store.stored_matches(ids)
        finally:
            adopted = self.host.adopt(ids, stored)
        self.takeovers += len(adopted)
        return adopted
