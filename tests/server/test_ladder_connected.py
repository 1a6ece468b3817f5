"""Connected bots on the ladder (docs/ladder.md, "Connected bots"): a client that said hello
with ``bot: true`` joins with ``ladder_join`` and is paired like a hosted bot while it is
connected. The hosted side is played here by the test (with the job's token, as the worker
would), so nothing runs in the sandbox."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from bots.registry import create
from clients.botrunner import MatchOutcome, StrategyPlayer, play_match
from clients.sdk import Client as SdkClient
from clients.sdk import MatchAnnounced
from server.ladder_records import CONNECTION_GONE
from tests.cluster_support import until
from tests.ladder_support import GOOD, check, claim, submit, worker
from tests.pg_support import pg_url
from tests.server_support import Client, running, server_settings

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here


def _settings(tmp_path: Path, **overrides: Any) -> Any:
    return server_settings(tmp_path, ladder_worker_key="k", **overrides)


async def _seat(client: SdkClient, match_id: str) -> MatchAnnounced:
    """The client's seat of ``match_id``, once the server has told it of the match."""
    state = client.states.get(match_id)
    while state is None or state.seat is None or not state.config:
        await client.receive()
        state = client.states.get(match_id)
    return MatchAnnounced(raw={}, match_id=match_id, seat=state.seat,
                          opponent=state.opponent or "", config=state.config)


async def _play(client: SdkClient, match_id: str, seed: int) -> MatchOutcome:
    announced = await _seat(client, match_id)
    return await play_match(client, announced, StrategyPlayer(create("first")),
                            random.Random(seed))


async def _standings(client: Client) -> dict[str, dict[str, Any]]:
    rows = (await client.request({"type": "ladder_show"}))["standings"]
    return {r["bot"]: r for r in rows}


async def test_a_connected_sdk_bot_and_a_hosted_bot_play_both_games_and_are_rated(
        tmp_path: Path) -> None:
    async with running(_settings(tmp_path)) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        ann = await Client.hello(app.port, "ann")
        w = await worker(app.port)
        alpha = (await submit(ann, GOOD, name="alpha"))["bot"]["bot_id"]
        await check(w, True)
        job = await claim(w)
        assert job is not None and job["kind"] == "eval"
        await w.request({"type": "worker_done", "job_id": job["job_id"], "reason": "random"})
        sdk = SdkClient(url, "cbot", bot=True)
        await sdk.connect()
        try:
            bot = await sdk.join_ladder()
            assert (bot["name"], bot["owner"], bot["kind"], bot["status"]) == (
                "cbot", "cbot", "connected", "active")
            assert bot["exact"]["status"] == "not_computed"
            play = None
            while play is None:  # the scheduler pairs them within a tick
                await w.expect(lambda m: m.get("type") == "worker_nudge")
                play = await claim(w)
            assert play["kind"] == "play"
            # the job carries the hosted side only, in the first seat of the first game
            assert [b["bot_id"] for b in play["bots"]] == [alpha]
            assert len(play["matches"]) == 2
            hosted = SdkClient(url, play["bots"][0]["player"], token=play["bots"][0]["token"],
                               bot=True)
            await hosted.connect()
            try:
                for n, match_id in enumerate(play["matches"]):
                    mine, theirs = await asyncio.gather(_play(sdk, match_id, n),
                                                        _play(hosted, match_id, 10 + n))
                    assert mine.opponent == "alpha" and theirs.opponent == "cbot"
                    assert mine.outcome in ("win", "draw", "loss") and mine.failure is None
                    assert theirs.outcome != "aborted"
                    assert hosted.states[match_id].seat == n  # bots[0] sits in seat n
                    noted = await w.request({"type": "worker_game", "job_id": play["job_id"],
                                             "match_id": match_id, "seat": n})
                    assert noted["type"] == "worker_noted"
            finally:
                await hosted.close()
            await w.request({"type": "worker_done", "job_id": play["job_id"]})

            async def rated() -> bool:
                rows = await _standings(ann)
                return all(r["games"] == 2 for r in rows.values()) and len(rows) == 2

            await until(rated, 30, "two games each in the standings")
            rows = await _standings(ann)
            assert {b: r["kind"] for b, r in rows.items()} == {
                "alpha": "hosted", "cbot": "connected"}
            c = rows["cbot"]
            assert c["owner"] == "cbot" and c["status"] == "active" and c["forfeits"] == 0
            assert c["rating"] is not None and c["low"] <= c["rating"] <= c["high"]
            assert c["wins"] + c["draws"] + c["losses"] == 2
            assert rows["alpha"]["wins"] == c["losses"]
            page = await ann.request({"type": "ladder_page", "bot_id": c["bot_id"]})
            assert page["bot"]["kind"] == "connected" and page["versions"] == []
            assert sorted(g["match_id"] for g in page["recent"]) == sorted(play["matches"])
            assert {g["opponent"] for g in page["recent"]} == {"alpha"}
            assert [h["games"] for h in page["history"]] == [2]
            history = await ann.request({"type": "history", "player": "cbot"})
            assert {m["match_id"] for m in history["matches"]} == set(play["matches"])
        finally:
            await sdk.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "moo.sqlite3")
    return str(request.getfixturevalue("pg_url"))


async def test_a_connected_bot_that_goes_away_forfeits_and_is_not_paired_again(
        tmp_path: Path, db: str) -> None:
    async with running(_settings(tmp_path, grace_ms=300, db=db)) as app:
        one = await Client.hello(app.port, "one", bot=True)
        two = await Client.hello(app.port, "two", bot=True)
        for conn in (one, two):
            joined = await conn.request({"type": "ladder_join"})
            assert joined["type"] == "ladder_status", joined
        # two connected bots need no worker: their two games start at once
        first = [await one.of_type("match") for _ in range(2)]
        games = [m["match_id"] for m in first]
        assert {m["opponent"] for m in first} == {"two"} and {m["seat"] for m in first} == {
            0, 1}
        two.ws.transport.abort()  # gone without a closing handshake
        for match_id in games:
            finished = await one.event(match_id, "finished")
            assert finished["reason"] == "disconnect"
        for match_id in games:
            game = app.ladder.games[match_id]
            assert game.finished and not game.void
            lost = 1 - game.seat_of(app.ladder.bot_named("one").bot_id)  # type: ignore[union-attr]
            assert game.winner == 1 - lost and game.failure_of(lost) == CONNECTION_GONE

        async def offline() -> bool:
            return bool((await _standings(one))["two"]["status"] == "offline")

        await until(offline, 30, "the bot that went away to be offline")
        rows = await _standings(one)
        assert (rows["two"]["losses"], rows["two"]["forfeits"], rows["two"]["kind"]) == (
            2, 2, "connected")
        assert (rows["one"]["wins"], rows["one"]["forfeits"]) == (2, 0)
        # pairing goes on without it: a third bot is paired with the first one
        three = await Client.hello(app.port, "three", bot=True)
        await three.request({"type": "ladder_join"})
        nxt = await one.of_type("match")
        assert nxt["opponent"] == "three"
        two_id = rows["two"]["bot_id"]
        assert all(g.finished for g in app.ladder.games.values() if two_id in g.bots)
        # back: it joins again and keeps its record
        back = await Client.hello(app.port, "two", token=two.token, bot=True)
        joined = await back.request({"type": "ladder_join"})
        assert joined["bot"]["status"] == "active" and joined["bot"]["bot_id"] == two_id


async def test_joining_and_leaving_say_clearly_what_is_wrong(tmp_path: Path) -> None:
    async with running(_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann")
        refused = await ann.request({"type": "ladder_join"})
        assert refused["code"] == "not_available" and "bot: true" in refused["message"].replace(
            "'bot': true", "bot: true")
        bot = await Client.hello(app.port, "cbot", bot=True)
        bad = await bot.request({"type": "ladder_join", "rules": {"game": "chess"}})
        assert bad["code"] == "bad_rules", bad
        left = await bot.request({"type": "ladder_leave"})
        assert left["code"] == "not_available" and "not on the ladder" in left["message"]
        joined = await bot.request({"type": "ladder_join"})
        assert joined["bot"]["kind"] == "connected" and joined["bot"]["status"] == "active"
        twice = await bot.request({"type": "ladder_join"})  # a retry: answered as the first
        assert twice["type"] == "ladder_status" and twice["bot"] == joined["bot"], twice
        bot_id = joined["bot"]["bot_id"]
        for kind in ("ladder_pause", "ladder_resume", "ladder_withdraw"):
            no = await bot.request({"type": kind, "bot_id": bot_id})
            assert no["code"] == "not_available" and "connected bot" in no["message"], no
        mine = (await bot.request({"type": "ladder_mine"}))["bots"]
        assert [(b["bot_id"], b["kind"], b["versions"]) for b in mine] == [
            (bot_id, "connected", [])]
        left = await bot.request({"type": "ladder_leave"})
        assert left["type"] == "ladder_status" and left["bot"]["status"] == "offline"
        assert left["games"] == []  # no game of it paired and not finished
        rows = await _standings(ann)
        assert rows["cbot"]["status"] == "offline" and rows["cbot"]["games"] == 0
        again = await bot.request({"type": "ladder_join"})
        assert again["bot"]["status"] == "active" and again["bot"]["bot_id"] == bot_id
        # it stays where it is after a restart of the server's ladder state
        await app.ladder.load()
        assert app.ladder.bots[bot_id].kind == "connected"
        assert app.ladder.bots[bot_id].status == "active"


async def test_a_connected_bot_back_within_the_grace_stays_on_the_ladder(
        tmp_path: Path) -> None:
    async with running(_settings(tmp_path)) as app:  # grace_ms: 60 s
        one = await Client.hello(app.port, "one", bot=True)
        joined = await one.request({"type": "ladder_join"})
        one.ws.transport.abort()
        await app.ladder.tick()  # it is seen gone, within the grace
        assert app.ladder.bots[joined["bot"]["bot_id"]].status == "active"
        back = await Client.hello(app.port, "one", token=one.token, bot=True)
        again = await back.request({"type": "ladder_join"})  # nothing to do: still on it
        assert again["type"] == "ladder_status" and again["bot"]["status"] == "active", again
        assert again["bot"]["bot_id"] == joined["bot"]["bot_id"]
        two = await Client.hello(app.port, "two", bot=True)
        await two.request({"type": "ladder_join"})
        paired = await back.of_type("match")  # paired on its new connection
        assert paired["opponent"] == "two" and paired["config"]["ladder"]
        assert not app.ladder.away


async def test_a_node_that_stops_leading_forgets_whom_it_saw_away(tmp_path: Path) -> None:
    """On a cluster the leader counts a connected bot's absence from when it saw it gone; a
    node that stops leading forgets it with the rest of the ladder, so that leading again
    later it counts anew from its new reading, not from an absence it saw long before."""
    async with running(_settings(tmp_path)) as app:
        one = await Client.hello(app.port, "one", bot=True)
        joined = await one.request({"type": "ladder_join"})
        one.ws.transport.abort()
        await until(lambda: _seen_away(app.ladder, joined["bot"]["bot_id"]), 10,
                    "the bot seen gone")
        app.ladder.set_leading(False)
        assert app.ladder.away == {} and app.ladder.bots == {}


async def _seen_away(ladder: Any, bot_id: str) -> bool:
    await ladder.tick()
    return bot_id in ladder.away
