"""SDK unit tests against the in-process fake server (tests/sdk_fakeserver.py)."""

from __future__ import annotations

import asyncio
import random

import pytest

from bots.base import Strategy
from bots.registry import create
from clients.botrunner import StrategyPlayer, play_match
from clients.sdk import (
    Client,
    Connected,
    ConnectionLost,
    Created,
    Disconnected,
    Finished,
    GuessMade,
    Leaderboard,
    MatchAnnounced,
    MatchesList,
    MatchEvent,
    MatchState,
    Pong,
    RoundRevealed,
    SecretSet,
    ServerError,
    Started,
    UnknownEvent,
    UnknownMessage,
    parse,
)
from tests.patience import patience
from tests.sdk_fakeserver import FakeServer


def test_parse_is_typed_and_lenient():
    event = parse({"type": "event", "match_id": "m1", "seq": 7, "kind": "round", "at": 5,
                   "n": 2, "results": [["0123", 1, 2], [None, 0, 1]], "future_field": 1})
    assert isinstance(event, RoundRevealed)
    assert event.results == (("0123", 1, 2), (None, 0, 1))
    assert isinstance(parse({"type": "event", "seq": 1, "kind": "sparkles"}), UnknownEvent)
    assert isinstance(parse({"type": "brand_new"}), UnknownMessage)
    fin = parse({"type": "event", "match_id": "m", "seq": 9, "kind": "finished", "winner": None,
                 "reason": "guess_cap", "counts": [64, 64], "solved": [False, False],
                 "secrets": ["0123", "4567"], "salts": ["a", "b"], "commitments": ["x", "y"]})
    assert isinstance(fin, Finished) and fin.winner is None and fin.counts == (64, 64)


def ev(**fields) -> MatchEvent:
    msg = parse({"type": "event", "match_id": "m1", **fields})
    assert isinstance(msg, MatchEvent)
    return msg


def test_state_ignores_replayed_seq_and_tracks_lockstep_reveal():
    state = MatchState("m1", seat=0)
    created = ev(seq=1, kind="created", players=["ann", "bob"], config={"pacing": "lockstep"})
    assert state.apply(created)
    assert not state.apply(created)  # same seq again: ignored
    state.apply(ev(seq=2, kind="started", commitments=["a", "b"]))
    assert state.owes_guess
    state.apply(ev(seq=3, kind="guess", seat=0, n=1, guess="0123"))
    assert not state.owes_guess and state.mine()[0].response is None
    state.apply(ev(seq=4, kind="guess", seat=1, n=1))
    state.apply(ev(seq=5, kind="round", n=1, results=[["0123", 1, 1], ["9876", 0, 0]]))
    assert state.owes_guess
    assert state.mine()[0].response == (1, 1)
    assert state.theirs()[0].guess == "9876"
    assert state.counts == (1, 1)


async def test_lobby_requests_carry_a_request_id_kept_across_a_retry():
    """``play_bot`` (a request that makes something) gets a ``request_id``; its connection
    drops before the answer and the SDK, back online, sends it again under the same one
    (docs/protocol.md, "Retrying safely"); a second request gets a new one."""
    async with FakeServer() as server, Client(server.url, "ann") as client:
        server.drop_on.add("play_bot")
        announced = await client.play_bot("random")
        assert isinstance(announced, MatchAnnounced)
        sent = [m for m in server.received if m["type"] == "play_bot"]
        assert len(sent) == 2 and client.reconnects == 1
        assert sent[0]["request_id"] == sent[1]["request_id"]
        assert sent[0]["id"] != sent[1]["id"]
        await client.resign(announced.match_id)
        await client.play_bot("random")
        third = [m for m in server.received if m["type"] == "play_bot"][-1]
        assert third["request_id"] != sent[0]["request_id"]
        # requests that make nothing carry none
        await client.ping()
        assert all("request_id" not in m for m in server.received
                   if m["type"] in ("ping", "hello", "resign"))


async def test_play_bot_match_to_the_end_with_typed_events():
    async with FakeServer() as server, Client(server.url, "ann") as client:
        assert client.token  # issued on first hello
        assert isinstance(await client.ping(), Pong)
        announced = await client.play_bot("random")
        assert isinstance(announced, MatchAnnounced) and announced.seat == 0
        mid = announced.match_id
        reply = await client.set_secret(mid, "0123")
        assert isinstance(reply, SecretSet) and reply.secret == "0123"
        with pytest.raises(ServerError) as err:
            await client.guess(mid, "0012")
        assert err.value.code == "repeated_symbol"
        assert "distinct" in err.value.message
        state = client.states[mid]
        left = list(state.rules.secrets)
        while not state.finished:
            if state.owes_guess:
                g = left[0]
                mine = await client.guess(mid, g)
                assert isinstance(mine, GuessMade) and mine.guess == g
            else:
                await client.receive(timeout=patience(5))
                turns = state.mine()
                if turns and turns[-1].response is not None:
                    last = turns[-1]
                    assert last.guess is not None and last.response is not None
                    left = state.rules.consistent(left, last.guess, last.response)
        kinds = []
        while client.pending_messages():
            kinds.append(type(await client.receive(timeout=patience(1))))
        assert state.result is not None
        assert state.fairness() == [True, True]
        assert state.outcome in ("win", "loss", "draw")
        lb = await client.leaderboard()
        assert isinstance(lb, Leaderboard) and lb.players[0].name == "ann"
        assert isinstance(await client.matches(), MatchesList)


async def test_msgpack_encoding_works_too():
    async with FakeServer() as server, Client(server.url, "mp", encoding="msgpack") as client:
        assert client.connection is not None
        assert client.connection.subprotocol == "moo.v1.msgpack"
        announced = await client.play_bot("random")
        outcome = await play_match(client, announced, StrategyPlayer(create("random")),
                                   random.Random(1), timeout=patience(20))
        assert outcome.outcome in ("win", "loss", "draw")
        assert outcome.fair is True


async def test_duplicated_events_are_seen_once():
    async with FakeServer() as server, Client(server.url, "dup") as client:
        server.duplicate_events = True
        announced = await client.play_bot("random")
        outcome = await play_match(client, announced, StrategyPlayer(create("random")),
                                   random.Random(2), timeout=patience(20))
        assert outcome.outcome in ("win", "loss", "draw")
        state = client.states[announced.match_id]
        assert state.counts[0] == outcome.guesses
        assert state.last_seq == len(server.matches[announced.match_id].match.events)


async def _one_round_in(server: FakeServer) -> tuple[Client, MatchAnnounced, MatchState]:
    """rex plays the random bot, its secret set and its first round answered."""
    client = Client(server.url, "rex", backoff_initial=0.01)
    await client.connect()
    announced = await client.play_bot("random")
    await client.set_secret(announced.match_id, "0123")
    state = client.states[announced.match_id]
    await client.guess(announced.match_id, "4567")
    await server.wait_until(lambda: state.rounds_done == 1 and state.owes_guess)
    return client, announced, state


async def test_a_refused_reconnect_resume_is_sent_again():
    """After a reconnect the SDK resumes its matches by itself; a retryable refusal (a cluster
    still moving a dead node's matches) must not leave the match unresumed, waiting for events
    that never come while the seat's grace clock runs out."""
    async with FakeServer() as server:
        client, announced, _ = await _one_round_in(server)
        server.refuse_resumes = 2
        server.drop("rex")
        await server.wait_until(
            lambda: sum(m["type"] == "resume" for m in server.received) == 3, timeout=patience(15)
        )
        assert server.refuse_resumes == 0
        outcome = await play_match(client, announced, StrategyPlayer(create("random")),
                                   random.Random(3), timeout=patience(20))
        assert outcome.outcome in ("win", "loss", "draw")
        await client.close()


async def test_a_match_gone_quiet_is_resumed_again():
    """Events a server lost on the way (the connection stayed up) must not leave the client
    waiting forever: after ``resync_after`` seconds without an event it resumes the match."""
    async with FakeServer() as server:
        client = Client(server.url, "rex", backoff_initial=0.01, resync_after=0.3)
        await client.connect()
        announced = await client.play_bot("random")
        mid = announced.match_id
        await client.set_secret(mid, "0123")
        state = client.states[mid]
        server.lose_events_for.add("rex")
        await client.send("guess", match_id=mid, guess="4567")  # its events are lost
        await server.wait_until(
            lambda: len(server.matches[mid].match.seats[0].guesses) == 1, timeout=patience(5)
        )
        assert state.counts[0] == 0  # the client never heard of its own guess
        server.lose_events_for.clear()
        await server.wait_until(lambda: state.counts[0] == 1, timeout=patience(5))  # resynced
        assert any(m["type"] == "resume" for m in server.received)
        outcome = await play_match(client, announced, StrategyPlayer(create("random")),
                                   random.Random(4), timeout=patience(20))
        assert outcome.outcome in ("win", "loss", "draw")
        await client.close()


async def test_reconnect_resumes_mid_match_and_finishes():
    async with FakeServer() as server:
        client, announced, state = await _one_round_in(server)
        mid = announced.match_id
        token = client.token
        seq_at_drop = state.last_seq
        server.drop("rex")
        # Events arrive while we are away: the bot keeps its side; our resume must get them.
        disconnected = None
        while disconnected is None:
            msg = await client.receive(timeout=patience(5))
            if isinstance(msg, Disconnected):
                disconnected = msg
        assert disconnected.will_retry
        msg = await client.receive(timeout=patience(5))
        assert isinstance(msg, Connected) and msg.reconnect
        assert client.token == token
        await server.wait_until(lambda: any(m["type"] == "resume" for m in server.received))
        resumes = [m for m in server.received if m["type"] == "resume"]
        # with an id of its own, so that a refusal is seen (and a retryable one retried)
        assert [{k: v for k, v in m.items() if k != "id"} for m in resumes] == [
            {"type": "resume", "match_id": mid, "last_seq": seq_at_drop}
        ] and isinstance(resumes[0].get("id"), int)
        outcome = await play_match(client, announced, StrategyPlayer(create("random")),
                                   random.Random(3), timeout=patience(20))
        assert outcome.outcome in ("win", "loss", "draw")
        assert client.reconnects == 1
        assert server.hellos == 2
        await client.close()


async def test_reconnect_resends_pending_resume_and_dedups_replay():
    """A resume from seq 0 replays everything: the state must not double-count."""
    async with FakeServer() as server, Client(server.url, "zed") as client:
        announced = await client.play_bot("random")
        mid = announced.match_id
        await client.set_secret(mid, "0123")
        await client.guess(mid, "4567")
        state = client.states[mid]
        await server.wait_until(lambda: state.rounds_done == 1)
        before = state.last_seq
        await client.send("resume", match_id=mid, last_seq=0)
        await client.ping()  # the pong comes after the whole replay
        assert state.last_seq == before
        assert state.counts[0] == 1 and state.rounds_done == 1


async def test_name_taken_is_a_server_error():
    async with FakeServer() as server, Client(server.url, "ann"):
        with pytest.raises(ServerError) as err:
            async with Client(server.url, "ann", reconnect=False):
                pass
        assert err.value.code == "name_taken"


async def test_events_iterator_ends_after_close():
    async with FakeServer() as server:
        client = Client(server.url, "it")
        await client.connect()
        await client.play_bot("random")
        await client.close()
        seen = [m async for m in client.events()]
        assert any(isinstance(m, Created) for m in seen)
        assert isinstance(seen[0], Connected)
        assert not any(isinstance(m, Started) for m in seen)


async def test_request_times_out_instead_of_hanging():
    async with FakeServer() as server:
        client = Client(server.url, "slow", request_timeout=0.5)
        await client.connect()
        announced = await client.play_bot("random")
        await client.ping()
        last = client.states[announced.match_id].last_seq
        # A resume with nothing missing produces no reply at all: the request must time out.
        with pytest.raises(TimeoutError):
            await client.request("resume", match_id=announced.match_id, last_seq=last)
        with pytest.raises(ServerError):
            await client.request("resume", match_id="nope")
        await client.close()


@pytest.fixture(autouse=True)
def _no_tokens(tmp_path, monkeypatch):
    monkeypatch.setenv("MOO_TOKENS", str(tmp_path / "tokens.json"))


async def test_wait_match_after_queue_pairs_two_clients():
    async with FakeServer() as server, Client(server.url, "q1") as a, Client(server.url, "q2") as b:
        await a.queue()
        await b.queue()
        ma, mb = await asyncio.gather(a.wait_match(timeout=patience(5)),
                                      b.wait_match(timeout=patience(5)))
        assert ma.match_id == mb.match_id and {ma.seat, mb.seat} == {0, 1}


async def test_gives_up_after_max_attempts_and_close_is_prompt():
    async with FakeServer() as server:
        client = Client(server.url, "lonely", backoff_initial=0.01, backoff_max=0.02,
                        max_attempts=3)
        await client.connect()
    # The server is gone for good: three quick attempts, then the stream ends.
    kinds = []
    async with asyncio.timeout(patience(5)):
        async for msg in client:
            kinds.append(type(msg))
    assert Disconnected in kinds
    with pytest.raises(ConnectionLost):
        await client.ping()
    async with asyncio.timeout(patience(30)):
        await client.close()

    async with FakeServer() as server:
        # a backoff of an hour: a close() that waited it out would meet the safety net below
        patient = Client(server.url, "patient", backoff_initial=3600, backoff_max=3600)
        await patient.connect()
    async with asyncio.timeout(patience(5)):
        while not isinstance(await patient.receive(), Disconnected):
            pass
    async with asyncio.timeout(patience(30)):  # does not wait out the backoff
        await patient.close()
    assert not patient.online


async def test_a_strategy_that_raises_resigns_only_its_match():
    class Broken(Strategy):
        name = "broken"

        def new_match(self, rules, rng):
            pass

        def next_guess(self):
            raise RuntimeError("no consistent code left")

        def observe(self, guess, response):
            pass

    async with FakeServer() as server, Client(server.url, "broken") as client:
        outcome = await play_match(client, await client.play_bot("random"),
                                   StrategyPlayer(Broken()), random.Random(1), timeout=patience(10))
        assert outcome.outcome == "loss" and outcome.reason == "resign"
        assert outcome.failure == "RuntimeError: no consistent code left"
        assert outcome.secret == client.states[outcome.match_id].secret  # the secret was set


async def test_without_the_stream_state_and_replies_are_enough():
    async with FakeServer() as server, Client(server.url, "quiet", buffer_events=False) as c:
        announced = await c.play_bot("random")
        mid = announced.match_id
        await c.set_secret(mid, "0123")
        state = c.states[mid]
        left = list(state.rules.secrets)
        while not state.finished:
            await server.wait_until(lambda: state.owes_guess or state.finished)
            mine = state.mine()
            if mine and mine[-1].guess is not None and mine[-1].response is not None:
                left = state.rules.consistent(left, mine[-1].guess, mine[-1].response)
            if state.owes_guess:
                await c.guess(mid, left[0])
        assert state.outcome in ("win", "loss", "draw")
        assert c.pending_messages() <= 1  # at most the Connected notice
