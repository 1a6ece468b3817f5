"""History and players over the wire: ``history`` (paged), ``match_record`` (replayable, with the
commitments checkable), ``player`` and the leaderboard's ``provisional`` / ``vs_minimum``, and
the HTTP routes that serve the page for shareable links."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bots.estimator import weights
from bots.tree import shipped_distribution
from server import sql
from tests.patience import patience
from tests.server_support import ENCODINGS, Client, running, server_settings

pytestmark = pytest.mark.parametrize("enc", ENCODINGS)


async def _room_match(a: Client, b: Client) -> str:
    """ann (seat 0) solves in one guess, bob misses: a finished lockstep match."""
    room = await a.request({"type": "room_create"})
    mb = await b.request({"type": "room_join", "code": room["code"]})
    mid = str(mb["match_id"])
    await a.of_type("match")
    await a.request({"type": "secret", "match_id": mid, "secret": "0123"})
    await b.request({"type": "secret", "match_id": mid, "secret": "4567"})
    await a.event(mid, "started")
    await a.request({"type": "guess", "match_id": mid, "guess": "4567"})
    await b.request({"type": "guess", "match_id": mid, "guess": "9876"})
    await a.event(mid, "finished")
    await b.event(mid, "finished")
    return mid


async def test_history_record_and_player_after_a_match(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        b = await Client.hello(app.port, "bob", enc)
        # a live match has no record yet: its secrets are not public
        room = await a.request({"type": "room_create"})
        live = (await b.request({"type": "room_join", "code": room["code"]}))["match_id"]
        err = await a.request({"type": "match_record", "match_id": live})
        assert err["type"] == "error" and err["code"] == "not_finished"
        await a.of_type("match")
        await a.request({"type": "resign", "match_id": live})
        await b.event(live, "finished")
        mid = await _room_match(a, b)

        hist = await a.request({"type": "history"})
        assert hist["type"] == "history" and hist["player"] == "ann" and hist["next"] is None
        newest = hist["matches"][0]
        assert newest["match_id"] == mid and newest["players"] == ["ann", "bob"]
        assert (newest["seat"], newest["opponent"], newest["result"]) == (0, "bob", "win")
        assert newest["reason"] == "solved" and newest["counts"] == [1, 1]
        assert newest["rated"] is True and newest["config"]["pacing"] == "lockstep"
        assert isinstance(newest["ended_at"], int)
        assert [m["result"] for m in hist["matches"]] == ["win", "loss"]  # resigned first one
        # anyone may look at anyone's history, whatever the spelling
        other = await a.request({"type": "history", "player": "BOB"})
        assert other["player"] == "bob"
        assert [(m["seat"], m["result"]) for m in other["matches"]] == [(1, "loss"), (1, "win")]

        rec = await b.request({"type": "match_record", "match_id": mid})
        assert rec["type"] == "match_record" and rec["players"] == ["ann", "bob"]
        assert rec["config"]["pacing"] == "lockstep" and rec["config"]["rules"]["length"] == 4
        kinds = [e["kind"] for e in rec["events"]]
        assert kinds[0] == "created" and kinds[-1] == "finished" and "round" in kinds
        assert [e["seq"] for e in rec["events"]] == sorted(e["seq"] for e in rec["events"])
        # as a spectator sees it: no secret before the end, then everything to check fairness
        assert all("secret" not in e and "salt" not in e for e in rec["events"]
                   if e["kind"] == "secret")
        started = next(e for e in rec["events"] if e["kind"] == "started")
        fin = rec["events"][-1]
        assert fin["secrets"] == ["0123", "4567"]
        for seat in (0, 1):
            digest = hashlib.sha256((fin["salts"][seat] + fin["secrets"][seat]).encode())
            assert digest.hexdigest() == started["commitments"][seat]
        rnd = next(e for e in rec["events"] if e["kind"] == "round")
        assert rnd["results"] == [["4567", 4, 0], ["9876", 0, 0]]
        err = await a.request({"type": "match_record", "match_id": "mnothere"})
        assert err["code"] == "no_such_match"

        ann = await b.request({"type": "player", "name": "ANN"})
        assert ann["type"] == "player" and ann["name"] == "ann"
        assert (ann["games"], ann["wins"], ann["losses"], ann["draws"]) == (2, 1, 1, 0)
        assert ann["provisional"] is True and ann["sigma"] > 6
        assert ann["distribution"] == {"1": 1}
        exact = weights(shipped_distribution("minimum"))[1]  # solving in 1 beats minimum
        assert ann["vs_minimum"]["score"] == round(exact, 4) and ann["vs_minimum"]["n"] == 2
        bob = await a.request({"type": "player", "name": "bob"})
        assert bob["distribution"] == {} and bob["vs_minimum"] is None  # never solved
        err = await a.request({"type": "player", "name": "nobody"})
        assert err["code"] == "unknown_player"

        board = await a.request({"type": "leaderboard"})
        rows = {r["name"]: r for r in board["players"]}
        assert rows["ann"]["provisional"] is True
        assert rows["ann"]["vs_minimum"] == ann["vs_minimum"]
        assert rows["bob"]["vs_minimum"] is None


async def _room_match_with(a: Client, b: Client, extra: dict[str, Any], secrets: tuple[str, str],
                           guesses: tuple[str, str]) -> str:
    """A room made with ``extra`` (rules, assist): one lockstep round, ann solves."""
    room = await a.request({"type": "room_create", **extra})
    assert room["type"] == "room", room
    mid = str((await b.request({"type": "room_join", "code": room["code"]}))["match_id"])
    await a.of_type("match")
    await a.request({"type": "secret", "match_id": mid, "secret": secrets[0]})
    await b.request({"type": "secret", "match_id": mid, "secret": secrets[1]})
    await a.event(mid, "started")
    await a.request({"type": "guess", "match_id": mid, "guess": guesses[0]})
    await b.request({"type": "guess", "match_id": mid, "guess": guesses[1]})
    fin = await a.event(mid, "finished")
    assert fin["winner"] == 0
    return mid


async def test_score_against_minimum_counts_classic_unassisted_matches_only(
    tmp_path: Path, enc: str
) -> None:
    """A Mastermind match and an assisted practice match are in the history but not in the
    distribution or ``vs_minimum``: the minimum strategy's figures are for 4 of 10 MOO."""
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        b = await Client.hello(app.port, "bob", enc)
        await _room_match(a, b)  # classic: ann solves in 1
        await _room_match_with(
            a, b, {"rules": {"game": "mastermind", "length": 4, "alphabet": "123456"}},
            ("1122", "3456"), ("3456", "1111"),
        )
        await _room_match_with(
            a, b, {"rated": False, "assist": True}, ("0123", "4567"), ("4567", "9876"),
        )
        hist = await a.request({"type": "history"})
        assert len(hist["matches"]) == 3  # every match is in the history
        ann = await b.request({"type": "player", "name": "ann"})
        assert ann["distribution"] == {"1": 1} and ann["vs_minimum"]["n"] == 1, ann
        bob = await a.request({"type": "player", "name": "bob"})
        assert bob["vs_minimum"] is None and bob["distribution"] == {}


async def test_history_pages_are_stable(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        ids: list[str] = []

        async def one_match() -> None:
            m = await a.request({"type": "play_bot", "strategy": "random"})
            await a.request({"type": "resign", "match_id": m["match_id"]})
            await a.event(m["match_id"], "finished")
            ids.append(m["match_id"])

        for _ in range(5):
            await one_match()
        first = await a.request({"type": "history", "limit": 2})
        assert [m["match_id"] for m in first["matches"]] == ids[::-1][:2]
        assert isinstance(first["next"], str)
        await one_match()  # a match ending meanwhile does not shift the next pages
        seen = [m["match_id"] for m in first["matches"]]
        cursor: Any = first["next"]
        while cursor is not None:
            page = await a.request({"type": "history", "limit": 2, "cursor": cursor})
            assert 1 <= len(page["matches"]) <= 2
            seen += [m["match_id"] for m in page["matches"]]
            cursor = page["next"]
        assert seen == ids[:5][::-1]
        assert all(m["result"] == "loss" and m["reason"] == "resign" and m["opponent"]
                   == "random-bot" for m in first["matches"])
        # the bot's side is history too
        bot = await a.request({"type": "history", "player": "random-bot", "limit": 50})
        assert len(bot["matches"]) == 6 and {m["result"] for m in bot["matches"]} == {"win"}
        for bad in ({"cursor": "garbage!"}, {"cursor": ""}, {"limit": 0}, {"limit": 51},
                    {"limit": "2"}, {"player": 7}):
            err = await a.request({"type": "history", **bad})
            assert err["type"] == "error" and err["code"] == "bad_field", bad
        err = await a.request({"type": "history", "player": "nobody"})
        assert err["code"] == "unknown_player"


async def test_history_query_uses_the_index(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)):
        pass
    conn = sqlite3.connect(tmp_path / "moo.sqlite3")
    plan = " ".join(
        str(row[-1]) for row in conn.execute(
            "EXPLAIN QUERY PLAN " + sql.HISTORY_BEFORE.sqlite, ("ann", 1, "m", 0, 20)
        )
    )
    assert "SEARCH results USING PRIMARY KEY" in plan and "TEMP B-TREE" not in plan


async def test_page_routes_serve_the_web_client(tmp_path: Path, enc: str) -> None:
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<title>MOO</title>")

    def get(url: str) -> tuple[int, str, bytes]:
        try:
            with urllib.request.urlopen(url, timeout=patience(5)) as r:
                return r.status, r.headers["Content-Type"], r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, "", b""

    async with running(server_settings(tmp_path)) as app:
        base = f"http://127.0.0.1:{app.port}"
        for path in ("/match/m0123456789ab", "/player/ann", "/player/A.b-c_d",
                     "/tournament/t0123456789ab", "/bot/b0123456789ab"):
            status, kind, body = await asyncio.to_thread(get, base + path)
            assert status == 200 and body == b"<title>MOO</title>"
            assert kind.startswith("text/html")
        for path in ("/match/", "/match/a/b", "/players/ann", "/tournament/", "/tournaments/t1",
                     "/bot/", "/bots/b1"):
            assert (await asyncio.to_thread(get, base + path))[0] == 404


async def test_a_database_from_before_history_is_indexed_once(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        b = await Client.hello(app.port, "bob", enc)
        mid = await _room_match(a, b)
    # what an older server left: no results index, schema version 2 (before accounts/history)
    conn = sqlite3.connect(tmp_path / "moo.sqlite3")
    conn.execute("DROP TABLE results")
    conn.execute("DELETE FROM schema_version WHERE version >= 3")
    conn.commit()
    conn.close()
    async with running(server_settings(tmp_path)) as app:
        c = await Client.hello(app.port, "carl", enc)
        hist = await c.request({"type": "history", "player": "bob"})
        assert [(m["match_id"], m["result"]) for m in hist["matches"]] == [(mid, "loss")]
        # the old token still takes the name back
        again = await Client.open(app.port, enc)
        welcome = await again.request({"type": "hello", "name": "ann", "token": a.token})
        assert welcome["type"] == "welcome"


async def test_a_cluster_nodes_player_cache_expires(tmp_path: Path, enc: str) -> None:
    """A cluster node never sees the matches other nodes finish, so its cached distributions
    are re-read once older than the TTL; on a single node the arena's finish invalidates."""
    from server.history import History
    from server.storage import StatDelta
    from server.storage_sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "h.sqlite3")
    await store.open()
    try:
        single, node = History(store, None), History(store, None, cache_ttl_s=60.0)
        await store.register_player("ann", "t", bot=False)
        assert (await single.player("ann"))["distribution"] == {}
        assert (await node.player("ann"))["distribution"] == {}
        done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        # a match "another node" finished: written to the shared store, never seen here
        store.append(
            "m1",
            [{"seq": 1, "kind": "created", "at": 1, "players": ["ann", "bob"], "config": {}},
             {"seq": 2, "kind": "finished", "at": 2, "winner": 0, "reason": "solved",
              "counts": [5, 5], "solved": [True, False]}],
            done.set_result, meta={"bots": [None, None]}, finished=True,
            stats=[StatDelta("ann", "win", 5, 1)],
        )
        assert await done is None
        assert (await node.player("ann"))["distribution"] == {}  # still fresh: cached
        node._cached_at["ann"] -= 61.0  # the entry grows older than the TTL
        assert (await node.player("ann"))["distribution"] == {"5": 1}
        assert (await single.player("ann"))["distribution"] == {}  # only the arena invalidates
    finally:
        await store.close()
