"""The ladder's store on both backends (SQLite and PostgreSQL give the same answers): hosted
bots, versions, games and the workers' jobs, claimed once each (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL), renewed, done, and let go of when a lease runs out or a worker goes. Every test
runs on both backends; PostgreSQL is the machine's server with a fresh database per test
(tests/pg_support.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from moo.errors import NameTaken
from server.settings import Settings
from server.storage import Store
from server.stores import make_store
from tests.ladder_support import GOOD, submit, worker
from tests.pg_support import pg_url
from tests.server_support import Client, running, server_settings

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "db.sqlite3")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def store(db: str) -> AsyncIterator[Store]:
    s = make_store(Settings(db=db, commit_window_ms=5))
    await s.open()
    try:
        yield s
    finally:
        await s.close()


def _bot(bot_id: str, name: str) -> tuple[object, ...]:
    return (bot_id, name, "ann", "moo:4:0123456789", "{}", "checking", "", None, 1, 1000,
            "{}")


async def test_bots_versions_and_games_round_trip(store: Store) -> None:
    await store.ladder_new_bot(_bot("b1", "alpha"), "t1", ("b1", 1, "ab", 3, "AAAA", 1000),
                               ("j1", "check", '{"bot_id":"b1","version":1}', 1000))
    with pytest.raises(NameTaken):  # the name is a player's: taken, and nothing is written
        await store.ladder_new_bot(_bot("b2", "ALPHA"), "t2", ("b2", 1, "ab", 3, "AAAA", 1),
                                   ("j2", "check", "{}", 1))
    assert [r[0] for r in await store.ladder_bots()] == ["b1"]
    assert await store.ladder_program("b1", 1) == "AAAA"
    await store.ladder_update_bot(("active", "", 1, None, "{}", "b1"),
                                  ("accepted", "", "b1", 1))
    row = (await store.ladder_bots())[0]
    assert (row[5], row[7], row[8]) == ("active", 1, None)
    assert (await store.ladder_versions("b1"))[0][4] == "accepted"
    await store.ladder_add_pairing(
        [("m1", "moo:4:0123456789", "p1", "b1", "b9", 1, 1, 2000),
         ("m2", "moo:4:0123456789", "p1", "b9", "b1", 1, 1, 2000)],
        ("j3", "play", json.dumps({"matches": ["m1", "m2"]}), 2000))
    assert await store.ladder_game_end("m1", 3000, 0, "solved") is True
    assert await store.ladder_game_end("m1", 3001, 1, "solved") is False  # once
    await store.ladder_game_failure("m1", 1, "crash: x", "err")
    games = {r[0]: r for r in await store.ladder_games()}
    assert games["m1"][8:] == (3000, 0, "solved", "", "crash: x", "", "err", 0)
    assert games["m2"][8] is None
    assert await store.ladder_void(["m1", "m2"]) == ["m2"]  # only the game not ended
    await store.ladder_add_history([("b1", 2, 3000, 1510.5, 1400.0, None)])
    await store.ladder_add_history([("b1", 2, 3001, 1.0, 1.0, 1.0)])  # a point stays
    assert await store.ladder_history("b1", 10) == [(3000, 2, 1510.5, 1400.0, None)]


async def test_each_job_is_claimed_once_and_let_go_of_by_its_lease(store: Store) -> None:
    for n in range(6):
        kind = "play" if n % 2 else "check"
        await store.ladder_add_pairing([], (f"j{n}", kind, "{}", 1000 + n))
    # six workers claim at once: each gets its own job (PostgreSQL: SKIP LOCKED)
    claimed = await asyncio.gather(*(store.ladder_claim(f"w{n}", 10_000) for n in range(8)))
    got = [c[0] for c in claimed if c is not None]
    assert sorted(got) == [f"j{n}" for n in range(6)] and claimed.count(None) == 2
    by_worker = {f"w{n}": c[0] for n, c in enumerate(claimed) if c is not None}
    w_j0 = next(w for w, j in by_worker.items() if j == "j0")
    assert await store.ladder_renew("j0", w_j0, 50_000) is True
    assert await store.ladder_renew("j0", "someone-else", 50_000) is False
    done = await store.ladder_job_done("j1", next(w for w, j in by_worker.items()
                                                 if j == "j1"))
    assert done is not None and done[0] == "j1"
    assert await store.ladder_job_done("j1", "anyone") is None  # once
    # at 20 s the leases of all but j0 (renewed) ran out: checks queued again, play jobs lost
    lost = await store.ladder_expire(20_000)
    assert sorted(r[0] for r in lost) == ["j2", "j3", "j4", "j5"]
    open_jobs = {r[0]: r[3] for r in await store.ladder_open_jobs()}
    assert open_jobs == {"j0": "claimed", "j2": "queued", "j4": "queued"}
    # a worker that goes lets go of its claims at once
    lost = await store.ladder_expire(-1, w_j0)
    assert [r[0] for r in lost] == ["j0"]
    again = await store.ladder_claim("w9", 30_000)
    assert again is not None and again[0] == "j0"  # the oldest queued first


async def test_the_ladder_on_each_backend(db: str, tmp_path: Path) -> None:
    settings = server_settings(tmp_path, db=db, ladder_worker_key="k")
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann")
        bot_id = (await submit(ann, GOOD, name="alpha"))["bot"]["bot_id"]
        w = await worker(app.port)
        job = (await w.request({"type": "worker_claim"}))["job"]
        assert job["bot_id"] == bot_id and job["kind"] == "check"
        await w.request({"type": "worker_done", "job_id": job["job_id"], "accepted": True})
        told = await ann.of_type("ladder_checked")
        assert told["accepted"] is True and told["bot"]["status"] == "active"
    async with running(settings) as app:  # read back after a restart
        assert app.ladder.bots[bot_id].status == "active"
        assert app.ladder.bots[bot_id].version == 1


async def test_checks_then_one_evaluation_then_games_then_the_other_evaluations(
        store: Store) -> None:
    await store.ladder_add_pairing([], ("e1", "eval", "{}", 1000))
    await store.ladder_add_pairing([], ("e2", "eval", "{}", 1500))
    await store.ladder_add_pairing([], ("p1", "play", "{}", 2000))
    await store.ladder_add_pairing([], ("c1", "check", "{}", 3000))
    await store.ladder_add_pairing([], ("c0", "check", "{}", 2500))
    order = []
    for n in range(6):
        row = await store.ladder_claim(f"w{n}", 10_000)
        order.append(None if row is None else row[0])
    # one evaluation ahead of the games while none is being computed, the others after them
    assert order == ["c0", "c1", "e1", "p1", "e2", None]


async def test_a_connected_bot_and_a_pairing_without_a_job(store: Store) -> None:
    """A connected bot (server/ladder_connected.py): its row alone (its player exists, it has
    no program), version 0; a pairing of two of them stores its games and no job."""
    row = ("c1", "cbot", "cbot", "moo:4:0123456789", "{}", "active", "", 0, None, 1000, "{}")
    await store.ladder_new_connected(row)
    with pytest.raises(NameTaken):
        await store.ladder_new_connected(("c2", "CBOT", "cbot", "moo:4:0123456789", "{}",
                                          "active", "", 0, None, 1001, "{}"))
    await store.ladder_new_connected(("c3", "dbot", "dbot", "moo:4:0123456789", "{}",
                                      "active", "", 0, None, 1002, "{}"))
    assert [(r[0], r[7]) for r in await store.ladder_bots()] == [("c1", 0), ("c3", 0)]
    await store.ladder_add_pairing(
        [("m1", "moo:4:0123456789", "p1", "c1", "c3", 0, 0, 2000),
         ("m2", "moo:4:0123456789", "p1", "c3", "c1", 0, 0, 2000)], None)
    assert sorted(r[0] for r in await store.ladder_games()) == ["m1", "m2"]
    assert await store.ladder_open_jobs() == []
    await store.ladder_update_bot(("offline", "", 0, None, "{}", "c1"))
    assert (await store.ladder_bots())[0][5] == "offline"
