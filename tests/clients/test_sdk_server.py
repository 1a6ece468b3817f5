"""The SDK against the real server app (in-process, free port, database in tmp_path)."""

from __future__ import annotations

import argparse
import asyncio
import random

import pytest

from bots.registry import create
from clients.botrunner import StrategyPlayer, _connection, _Run, play_match
from clients.sdk import (
    ChallengeReceived,
    ChallengeSent,
    Client,
    Connected,
    Declined,
    Disconnected,
    GuessMade,
    Leaderboard,
    MatchesList,
    ServerError,
)
from clients.sdk.tokens import TokenStore
from tests.client_support import moo_serve
from tests.patience import patience
from tests.server_support import running, server_settings


@pytest.fixture(autouse=True)
def _tokens(tmp_path, monkeypatch):
    monkeypatch.setenv("MOO_TOKENS", str(tmp_path / "tokens.json"))


@pytest.mark.parametrize("encoding", ["json", "msgpack"])
async def test_play_the_servers_bot_to_the_end(tmp_path, encoding):
    async with (
        running(server_settings(tmp_path)) as app,
        Client(f"ws://127.0.0.1:{app.port}/", "sdk-" + encoding, encoding=encoding) as client,
    ):
        announced = await client.play_bot("random")
        outcome = await play_match(client, announced, StrategyPlayer(create("random")),
                                   random.Random(5), timeout=patience(30))
        assert outcome.outcome in ("win", "loss", "draw"), outcome
        assert outcome.reason == "solved"
        assert outcome.fair is True
        with pytest.raises(ServerError) as err:
            await client.guess(announced.match_id, "0123")
        assert err.value.code == "match_finished"
        assert isinstance(await client.matches(), MatchesList)
        board = await client.leaderboard()
        assert isinstance(board, Leaderboard)
        [me] = [row for row in board.players if row.name == client.name]
        assert me.games == 1 and me.wins + me.draws + me.losses == 1
        assert (await client.leaderboard(by="average")).by == "average"


async def test_invalid_guess_is_explained_and_not_counted(tmp_path):
    async with (
        running(server_settings(tmp_path)) as app,
        Client(f"ws://127.0.0.1:{app.port}/", "typo") as client,
    ):
        announced = await client.play_bot("random")
        mid = announced.match_id
        await client.set_secret(mid, "0123")
        state = client.states[mid]
        async with asyncio.timeout(patience(5)):
            while not state.owes_guess:
                await client.receive()
        for bad, code in (("0012", "repeated_symbol"), ("01234", "wrong_length"),
                          ("01a3", "unknown_symbol")):
            with pytest.raises(ServerError) as err:
                await client.guess(mid, bad)
            assert err.value.code == code
        assert state.counts[0] == 0


async def test_reconnect_mid_match_resumes_and_finishes(tmp_path):
    async with running(server_settings(tmp_path)) as app:
        client = Client(f"ws://127.0.0.1:{app.port}/", "phoenix", backoff_initial=0.05)
        await client.connect()
        announced = await client.play_bot("random")
        mid = announced.match_id
        await client.set_secret(mid, "0123")
        state = client.states[mid]
        async with asyncio.timeout(patience(5)):
            while not state.owes_guess:
                await client.receive()
        await client.guess(mid, "4567")
        async with asyncio.timeout(patience(5)):
            while state.rounds_done < 1:
                await client.receive()
        token = client.token
        # A network failure, not a clean close: the server must see us go away.
        assert client.connection is not None
        client.connection.transport.abort()
        seen: list[object] = []
        async with asyncio.timeout(patience(10)):
            while not any(isinstance(m, Connected) and m.reconnect for m in seen):
                seen.append(await client.receive())
        assert any(isinstance(m, Disconnected) and m.will_retry for m in seen)
        assert client.token == token and client.reconnects == 1
        outcome = await play_match(client, announced, StrategyPlayer(create("random")),
                                   random.Random(6), timeout=patience(30))
        assert outcome.outcome in ("win", "loss", "draw"), outcome
        assert outcome.reason == "solved"
        # Every guess counted once even though the log was replayed on resume.
        assert state.counts[0] == outcome.guesses == len(state.mine())
        assert all(t.response is not None for t in state.mine())
        await client.close()


async def test_spectator_watches_a_live_match(tmp_path):
    async with running(server_settings(tmp_path)) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        async with Client(url, "player") as player, Client(url, "fan") as fan:
            announced = await player.play_bot("random")
            mid = announced.match_id
            listing = await fan.matches()
            assert mid in [m.match_id for m in listing.matches]
            await fan.watch(mid)
            outcome = await play_match(player, announced, StrategyPlayer(create("random")),
                                       random.Random(8), timeout=patience(30))
            seen = fan.states[mid]
            async with asyncio.timeout(patience(10)):
                while not seen.finished:
                    await fan.receive()
            assert seen.seat is None and seen.players == ("player", "random-bot")
            assert seen.counts == player.states[mid].counts
            assert seen.result is not None and seen.fairness() == [True, True]
            # A spectator sees every guess text and response once the match is over.
            mine = player.states[mid].mine()
            assert [t.guess for t in seen.history[0]] == [t.guess for t in mine]
            assert outcome.outcome in ("win", "loss", "draw")


async def test_free_pacing_shows_responses_at_once(tmp_path):
    async with (
        running(server_settings(tmp_path)) as app,
        Client(f"ws://127.0.0.1:{app.port}/", "freebird") as client,
    ):
        announced = await client.play_bot("random", pacing="free")
        assert announced.pacing == "free"
        mid = announced.match_id
        await client.set_secret(mid, "0123")
        state = client.states[mid]
        async with asyncio.timeout(patience(5)):
            while not state.owes_guess:
                await client.receive()
        mine = await client.guess(mid, "4567")
        assert isinstance(mine, GuessMade) and mine.bulls is not None and mine.cows is not None
        outcome = await play_match(client, announced, StrategyPlayer(create("random")),
                                   random.Random(9), timeout=patience(30))
        assert outcome.outcome in ("win", "loss", "draw")
        assert state.mine()[0].guess == "4567"


async def test_client_rides_through_a_server_restart(tmp_path):
    """SIGTERM closes with 1012; the SDK reconnects to the restarted server and resumes."""
    with moo_serve(tmp_path) as url:
        client = Client(url, "survivor", backoff_initial=0.1, max_attempts=20)
        await client.connect()
        announced = await client.play_bot("random")
        mid = announced.match_id
        await client.set_secret(mid, "0123")
        state = client.states[mid]
        async with asyncio.timeout(patience(5)):
            while not state.owes_guess:
                await client.receive()
        await client.guess(mid, "4567")
        async with asyncio.timeout(patience(5)):
            while state.rounds_done < 1:
                await client.receive()
    # The server is gone now; start it again on the same port with the same database.
    port = int(url.rsplit(":", 1)[1].strip("/"))
    with moo_serve(tmp_path, port=port):
        seen: list[object] = []
        async with asyncio.timeout(patience(20)):
            while not any(isinstance(m, Connected) and m.reconnect for m in seen):
                seen.append(await client.receive())
        closes = [m for m in seen if isinstance(m, Disconnected)]
        assert closes and closes[0].code == 1012
        outcome = await play_match(client, announced, StrategyPlayer(create("random")),
                                   random.Random(10), timeout=patience(30))
        assert outcome.outcome in ("win", "loss", "draw"), outcome
        assert state.mine()[0].guess == "4567" and state.counts[0] == outcome.guesses
        await client.close()


async def test_challenge_accept_and_decline(tmp_path):
    async with running(server_settings(tmp_path)) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        async with Client(url, "alice") as alice, Client(url, "bob") as bob:
            sent = await alice.challenge("bob")
            assert isinstance(sent, ChallengeSent) and sent.to == "bob"
            async with asyncio.timeout(patience(5)):
                got = await bob.receive()
                while not isinstance(got, ChallengeReceived):
                    got = await bob.receive()
            assert got.sender == "alice" and got.challenge_id == sent.challenge_id
            await bob.decline(got.challenge_id)
            async with asyncio.timeout(patience(5)):
                declined = await alice.receive()
                while not isinstance(declined, Declined):
                    declined = await alice.receive()
            assert declined.challenge_id == sent.challenge_id

            sent = await alice.challenge("bob", pacing="free")
            async with asyncio.timeout(patience(5)):
                got = await bob.receive()
                while not isinstance(got, ChallengeReceived):
                    got = await bob.receive()
            assert got.pacing == "free"
            for_bob = await bob.accept(got.challenge_id)
            for_alice = await alice.wait_match(timeout=patience(5))
            assert for_bob.match_id == for_alice.match_id
            assert {for_bob.seat, for_alice.seat} == {0, 1} and for_bob.pacing == "free"
            results = await asyncio.gather(
                play_match(alice, for_alice, StrategyPlayer(create("random")), random.Random(1)),
                play_match(bob, for_bob, StrategyPlayer(create("random")), random.Random(2)),
            )
            assert {r.outcome for r in results} in ({"win", "loss"}, {"draw"})


async def test_bot_runner_finishes_a_match_left_by_a_crashed_run(tmp_path):
    async with running(server_settings(tmp_path)) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        crashed = Client(url, "phoenix-bot", bot=True, reconnect=False)
        await crashed.connect()
        assert crashed.token is not None
        TokenStore().put(url, "phoenix-bot", crashed.token)
        announced = await crashed.play_bot("random")
        mid = announced.match_id
        await crashed.set_secret(mid, "0123")
        state = crashed.states[mid]
        async with asyncio.timeout(patience(5)):
            while not state.owes_guess:
                await crashed.receive()
        await crashed.guess(mid, "4567")
        assert crashed.connection is not None
        crashed.connection.transport.abort()  # the process "dies" mid-match
        await crashed.close()

        args = argparse.Namespace(url=url, encoding="json", cmd=None, strategy="random",
                                  move_timeout=10.0, vs_bot="random", room=None, pool="any",
                                  pacing=None, json=False, rules=None)
        run = _Run(args)
        await _connection(run, "phoenix-bot", 0, 1, TokenStore())
        assert not run.errors
        [outcome] = run.outcomes
        assert outcome.match_id == mid and outcome.resumed
        assert outcome.outcome in ("win", "loss", "draw") and outcome.reason == "solved"
        assert outcome.secret == "0123"
