"""A replay reads the log once, however slow the read (issue 31).

A ``watch`` or ``resume`` of a live match reads the events its client missed from the store,
while the match goes on being played. Before, the arena read again until it had caught up with
what was durable; over a slow link to the database (the fault harness's ``slow-db``: every
chunk held 200 ms each way) each read took as long as the next commits, so the replay chased
them and the client waited 4-5 s for events played meanwhile: silences the checker counts.
Now the match keeps what is committed while a read is in flight, and one read is enough.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moo.rules import score
from server.settings import Settings
from server.storage import Event
from server.storage_sqlite import SQLiteStore
from tests.server_support import Client, free_match, running, server_settings


class HeldReads(SQLiteStore):
    """A store whose log reads, once ``hold`` is set, return only when it is cleared, as a
    read over a slow link would: its rows are those of the moment it ran."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.db, commit_window_ms=settings.commit_window_ms,
                         synchronous=settings.sqlite_synchronous)
        self.hold: asyncio.Event | None = None
        self.reads: list[int] = []  # ``after`` of each read of a log
        self.read_done = asyncio.Event()

    async def match_events(self, match_id: str, after: int = 0) -> list[Event] | None:
        rows = await super().match_events(match_id, after)
        self.reads.append(after)
        hold = self.hold
        if hold is not None:
            self.read_done.set()
            await hold.wait()
        return rows


def _seqs(client: Client, mid: str) -> list[int]:
    return [int(m["seq"]) for m in client.events(mid)]


async def test_a_watch_whose_read_is_slow_gets_what_was_played_meanwhile_from_one_read(
    tmp_path: Path,
) -> None:
    settings = server_settings(tmp_path)
    store = HeldReads(settings)
    async with running(settings, store) as app:
        port = app.port
        ann, bob, mid = await free_match(port)
        first = await ann.request({"type": "guess", "match_id": mid, "guess": "5678", "n": 1})
        assert first["type"] == "event", first
        carl = await Client.hello(port, "carl")
        store.hold = asyncio.Event()
        store.reads.clear()
        watch = await carl.send({"type": "watch", "match_id": mid, "last_seq": 0})
        await store.read_done.wait()  # carl's replay has read the log; its answer is slow
        played: list[dict[str, Any]] = []
        for n, guess in enumerate(("6789", "4578"), start=2):  # played during the read
            played.append(await ann.request(
                {"type": "guess", "match_id": mid, "guess": guess, "n": n}))
        assert [p["kind"] for p in played] == ["guess", "guess"], played
        store.hold.set()
        watching = await carl.expect(lambda m: m.get("ref") == watch)
        assert watching["type"] == "watching", watching
        last = int(played[-1]["seq"])
        await carl.expect(lambda m: m.get("type") == "event" and m.get("seq") == last)
        assert store.reads == [0]  # one read, not one per commit it met
        assert _seqs(carl, mid) == list(range(1, last + 1))  # each event once, in order
        shown = [m["guess"] for m in carl.events(mid) if m["kind"] == "guess"]
        assert shown == ["5678", "6789", "4578"]
        assert [m["bulls"] for m in carl.events(mid) if m["kind"] == "guess"] == [
            score("4567", g)[0] for g in shown]
        for c in (ann, bob, carl):
            await c.close()



async def test_a_follower_attached_again_whose_match_moves_during_the_read_goes_to_the_movers(
    tmp_path: Path,
) -> None:
    """A follower attached again from its cursor (a match back here after a failed write) is
    given the events it missed from the log first. When the match moves to another node while
    that read is in flight, the follower is parked as moved and the movers are told (on a
    cluster, the router then follows the match at its new owner from the follower's cursor);
    before, it was dropped with a warning and heard nothing more of the match."""
    from server.arena import FollowerAt
    from server.matches import SPECTATOR

    settings = server_settings(tmp_path)
    store = HeldReads(settings)
    async with running(settings, store) as app:
        arena = app.arena
        ann, bob, mid = await free_match(app.port)
        await ann.request({"type": "guess", "match_id": mid, "guess": "5678", "n": 1})
        carl = await Client.hello(app.port, "carl")
        watching = await carl.request({"type": "watch", "match_id": mid, "last_seq": 0})
        assert watching["type"] == "watching", watching
        (conn,) = arena.live[mid].spectators
        cursor = arena.live[mid].durable_seq
        arena.unwatch(conn, mid)  # (as if its match had been dropped here with it)
        moved: list[str] = []
        arena.movers.append(moved.append)
        follower = FollowerAt(conn, SPECTATOR, cursor - 1)
        store.hold = asyncio.Event()
        arena.reseat(mid, [follower])
        await store.read_done.wait()
        # another node runs it now: the seats attached here go (carl is not attached yet)
        assert [f.viewer for f in arena.let_go(mid)] == [0, 1]
        store.hold.set()
        for _ in range(100):  # the reseat's task ends as soon as it runs again
            if not arena.reseating:
                break
            await asyncio.sleep(0)
        assert not arena.reseating
        assert moved == [mid]
        assert arena.unpark(mid) == [follower]  # for the router, with its cursor
        for c in (ann, bob, carl):
            await c.close()
