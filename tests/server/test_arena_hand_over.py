"""A move handed over with its seat, and the fence's refusal of its commit (issue 33).

When a match leaves a node while a seat's move is still committing there, the move travels
with the seat to the match's new owner, which answers it (server/arena.py, ``hand_over``). If
the commit is then refused by the fence, the move was applied nowhere; the cluster's bus may
be down at that moment, so nothing could take it to the new owner. The arena then asks its
recallers (the cluster's forwarding) whether the move can be taken back, and answers it
itself if so. Here the commit is held and refused on cue, the match let go in between, as a
woken paused owner's heartbeat did in test_cluster_leases.py (a fresh clone's run,
2026-11-30: its stale guess was never answered in a cluster without a broker).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from server.app import App
from server.settings import Settings
from server.storage import Done, Event, StatDelta
from server.storage_pg import LeaseLost
from server.storage_sqlite import SQLiteStore
from tests.server_support import Client, free_match, running, server_settings


class HeldCommits(SQLiteStore):
    """A store that, once ``hold`` is set, keeps the next append's commit waiting; the
    test then ends it with an exception of its choice."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.db, commit_window_ms=settings.commit_window_ms,
                         synchronous=settings.sqlite_synchronous)
        self.hold = False
        self.held: Done | None = None
        self.holding = asyncio.Event()

    def append(
        self,
        match_id: str,
        events: Sequence[Event],
        done: Done,
        *,
        meta: dict[str, Any] | None = None,
        finished: bool = False,
        stats: Sequence[StatDelta] = (),
    ) -> None:
        if self.hold:
            self.hold = False
            self.held = done
            self.holding.set()
            return
        super().append(match_id, events, done, meta=meta, finished=finished, stats=stats)


async def test_a_handed_over_move_refused_by_the_fence_and_recalled_is_answered_here(
    tmp_path: Path,
) -> None:
    """ann's guess is committing when the match is let go (its followers handed over, her
    move with her seat); then the commit is refused by the fence, and the recaller takes
    the move back: ann hears ``storage_unavailable`` for it from here ("try again")."""
    settings = server_settings(tmp_path)
    store = HeldCommits(settings)
    asked: list[Any] = []
    async with running(settings, store) as app:
        ann, bob, mid = await free_match(app.port)

        def recall(conn: Any, match_id: str, ref: Any) -> bool:
            asked.append((match_id, ref))
            return True

        app.arena.recallers.append(recall)
        ref = await _let_go_mid_commit_then_fenced(app, store, ann, mid)
        reply = await ann.expect(lambda m: m.get("ref") == ref)
        assert reply["type"] == "error" and reply["code"] == "storage_unavailable", reply
        assert reply["match_id"] == mid
        assert asked == [(mid, ref)]
        assert not any(m.get("ref") == ref for m in bob.seen)
        for c in (ann, bob):
            await c.close()


async def test_a_handed_over_move_not_recalled_is_left_to_the_new_owner(tmp_path: Path) -> None:
    """The recaller could not take it back (it went to the new owner already, or the bus is
    up and will): this node does not answer it, so the new owner's answer is the only one.
    The client hears nothing from here: ann's connection gets no message with the ``ref``
    before her next request's answer (asked after the commit's refusal was handled)."""
    settings = server_settings(tmp_path)
    store = HeldCommits(settings)
    async with running(settings, store) as app:
        ann, bob, mid = await free_match(app.port)
        app.arena.recallers.append(lambda conn, match_id, ref: False)
        ref = await _let_go_mid_commit_then_fenced(app, store, ann, mid)
        later = await ann.request({"type": "ping"})
        assert later["type"] == "pong" and later.get("ref") != ref
        assert [m for m in ann.seen if m.get("ref") == ref] == []
        for c in (ann, bob):
            await c.close()


async def _let_go_mid_commit_then_fenced(app: App, store: HeldCommits, ann: Client,
                                         mid: str) -> Any:
    """ann guesses; while its commit is held, the match is let go (another node runs it) and
    its followers handed over, her guess with her seat; then the fence refuses the commit.
    Returns the guess's ``ref``."""
    store.hold = True
    ref = await ann.send({"type": "guess", "match_id": mid, "guess": "5678", "n": 1})
    await store.holding.wait()
    handed = [app.arena.hand_over(f) for f in app.arena.let_go(mid)]
    assert [m["guess"] for moves in handed for m in moves] == ["5678"]
    assert store.held is not None
    store.held(LeaseLost("this node no longer owns the match; reconnect and resume it"))
    return ref
