"""The SQLite store: group commit, durability callbacks, players and statistics."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from moo.errors import NameTaken
from server.storage import SQLiteStore, StatDelta
from tests.patience import patience


async def test_appends_from_many_matches_share_commits_and_all_become_durable(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3", commit_window_ms=5)
    await store.open()
    loop = asyncio.get_running_loop()
    futures = []
    for i in range(200):
        fut: asyncio.Future[BaseException | None] = loop.create_future()
        store.append(
            f"m{i}",
            [{"seq": 1, "kind": "created", "at": 0, "players": ["a", "b"]}],
            fut.set_result,
            meta={"players": ["a", "b"], "bots": [None, None]},
        )
        futures.append(fut)
    async with asyncio.timeout(patience(10)):
        results = await asyncio.gather(*futures)
    assert results == [None] * 200
    assert store.ops == 200 and store.commits < 200  # grouped
    await store.close()
    # committed means on disk: a fresh connection sees every row
    rows = sqlite3.connect(tmp_path / "db.sqlite3").execute("SELECT count(*) FROM events")
    assert rows.fetchone()[0] == 200


async def test_a_batch_of_any_size_lands_row_for_row(tmp_path: Path) -> None:
    """Rows go in as fixed-size multi-row INSERTs: every size must split without loss."""
    store = SQLiteStore(tmp_path / "db.sqlite3", commit_window_ms=50)
    await store.open()
    loop = asyncio.get_running_loop()
    sizes = [1, 2, 3, 5, 17, 64, 255, 256, 257, 345]
    futures = []
    for i, n in enumerate(sizes):
        fut: asyncio.Future[BaseException | None] = loop.create_future()
        events = [
            {"seq": s, "kind": "guess", "at": s, "guess": f"{s:04d}"} for s in range(1, n + 1)
        ]
        store.append(f"m{i}", events, fut.set_result, meta={"n": n})
        futures.append(fut)
    assert await asyncio.gather(*futures) == [None] * len(sizes)
    assert store.commits == 1  # all in one batch, so one multi-chunk bulk insert
    for i, n in enumerate(sizes):
        got = await store.match_events(f"m{i}")
        assert got is not None and [e["seq"] for e in got] == list(range(1, n + 1))
        assert got[-1]["guess"] == f"{n:04d}"
        tail = await store.match_events(f"m{i}", after=n - 1)
        assert tail == got[-1:]
    await store.close()


async def test_a_failing_append_does_not_take_its_batch_with_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3")
    await store.open()
    loop = asyncio.get_running_loop()
    done = [loop.create_future() for _ in range(3)]
    event = {"seq": 1, "kind": "created", "at": 0}
    store.append("m", [event], done[0].set_result, meta={})
    store.append("m", [event], done[1].set_result)  # duplicate seq: refused
    store.append("n", [event], done[2].set_result, meta={})
    out = await asyncio.gather(*done)
    assert out[0] is None and out[2] is None
    assert isinstance(out[1], sqlite3.IntegrityError)
    assert await store.match_events("m") == [event]
    assert await store.match_events("zzz") is None
    await store.close()


async def test_players_and_statistics(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3")
    await store.open()
    await store.register_player("Ann", "h1", bot=False)
    with pytest.raises(NameTaken):
        await store.register_player("ann", "h2", bot=False)
    record = await store.player_by_token("h1")
    assert record is not None and record.name == "Ann" and not record.bot
    assert await store.player_by_token("nope") is None
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[BaseException | None] = loop.create_future()
    store.append(
        "m1",
        [{"seq": 1, "kind": "created", "at": 0}],
        fut.set_result,
        meta={},
        finished=True,
        stats=[StatDelta("Ann", "win", 5, 60_000), StatDelta("bob", "loss", None, 60_000)],
    )
    assert await fut is None
    fut2: asyncio.Future[BaseException | None] = loop.create_future()
    store.append(
        "m2", [{"seq": 1, "kind": "created", "at": 0}], fut2.set_result, meta={},
        finished=True, stats=[StatDelta("Ann", "draw", 7, 30_000)],
    )
    assert await fut2 is None
    ann = await store.player_stats("ann")
    assert ann is not None
    assert (ann.games, ann.wins, ann.draws, ann.losses, ann.solved) == (2, 1, 1, 0, 2)
    assert ann.avg_guesses == 6.0 and ann.avg_time_ms == 45_000
    board = await store.leaderboard("rating")
    assert [row["name"] for row in board] == ["Ann", "bob"]
    assert (await store.leaderboard("average"))[0]["avg_guesses"] == 6.0
    assert await store.unfinished_matches() == []
    await store.close()


@pytest.mark.parametrize(
    "event",
    [
        {"seq": 1, "kind": "created", "at": 0, "players": ["Ann", "bob"], "config": {"a": None}},
        {"seq": 9, "kind": "round", "at": 2**53, "n": 3, "results": [["0123", 1, 2], [None, 0, 0]]},
        {"seq": 2, "kind": "x", "at": -1, "s": 'é"\\\n\u2028\U0001f600', "f": 1.5, "t": True},
    ],
)
def test_the_stored_json_is_exactly_what_json_dumps_makes(event: dict[str, object]) -> None:
    from server.storage import _dumps

    assert _dumps(event) == json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    assert json.loads(_dumps(event)) == event
    with pytest.raises(TypeError):
        _dumps({"not": object()})
