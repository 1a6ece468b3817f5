"""The SDK across a server's death: a list of URLs, SIGKILL and restart, retryable refusals.

A real ``moo serve`` (SQLite) is killed with SIGKILL mid-match and started again on the same
port; the client, given a dead URL first and the live one second, must reconnect (rotating
through the list), resume from its last applied seq and finish the match with nobody
forfeiting.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.typing import Subprotocol

from bots.registry import create
from clients.botrunner import StrategyPlayer, play_match
from clients.sdk import (
    Client,
    Connected,
    Disconnected,
    ErrorReply,
    GuessMade,
    ServerError,
    retryable,
    url_list,
)
from moo.protocol import SUBPROTOCOLS
from tests.cluster_support import client_resync_off  # noqa: F401
from tests.failover_support import Server, dead_url
from tests.patience import patience

#: the scripted server selects the subprotocol offered, as an arena does (docs/protocol.md,
#: "Encodings"): the SDK takes a server that does not for something else (NotAnArena)
ARENA = [Subprotocol(s) for s in SUBPROTOCOLS]


def test_url_list_keeps_order_and_splits_commas() -> None:
    assert url_list("ws://a/") == ["ws://a/"]
    assert url_list(["ws://a/,ws://b/", " ws://c/ "]) == ["ws://a/", "ws://b/", "ws://c/"]
    with pytest.raises(ValueError, match="at least one"):
        url_list([" , "])


def test_only_try_again_refusals_are_retryable() -> None:
    def err(code: str, message: str) -> ErrorReply:
        return ErrorReply(raw={}, code=code, message=message)

    assert retryable(err("storage_unavailable", "storage unavailable: disk full"))
    assert retryable(err("not_available", "node b did not answer; try again"))
    assert not retryable(err("not_available", "joining your own room"))
    assert not retryable(err("not_your_turn", "try again"))


async def test_first_url_dead_then_sigkill_and_restart_mid_match(tmp_path: Path) -> None:
    server = Server(tmp_path / "arena.db")
    await server.start()
    dead = dead_url()
    client = Client([dead, server.url], "phoenix", backoff_initial=0.1, backoff_max=1.0,
                    max_attempts=40)
    try:
        await client.connect()
        assert client.url == server.url  # the dead first URL was skipped
        announced = await client.play_bot("random", pacing="lockstep")
        mid = announced.match_id
        await client.set_secret(mid, "0123")
        state = client.states[mid]
        async with asyncio.timeout(patience(10)):
            while not state.owes_guess:
                await client.receive()
        await client.guess(mid, "4567")
        async with asyncio.timeout(patience(10)):
            while state.rounds_done < 1:
                await client.receive()
        await server.kill()
        seen: list[object] = []
        async with asyncio.timeout(patience(10)):
            while not any(isinstance(m, Disconnected) for m in seen):
                seen.append(await client.receive())
        await server.start()  # same port, same database: the match is replayed
        async with asyncio.timeout(patience(30)):
            while not any(isinstance(m, Connected) and m.reconnect for m in seen):
                seen.append(await client.receive())
        drop = next(m for m in seen if isinstance(m, Disconnected))
        assert drop.code != 1012 and drop.will_retry  # an abnormal close, not a drain
        assert client.reconnects == 1 and client.url == server.url
        outcome = await play_match(client, announced, StrategyPlayer(create("random")),
                                   random.Random(7), timeout=patience(60))
        assert outcome.outcome in ("win", "loss", "draw"), outcome
        assert state.result is not None and state.result.reason in ("solved", "guess_cap")
        # the guess made before the kill is kept, and nothing was played twice
        mine = state.mine()
        assert mine[0].guess == "4567"
        assert len(mine) == state.counts[state.seat or 0] == outcome.guesses
    finally:
        await client.close()
        await server.stop()


class _Refusing:
    """A scripted server: the first ``guess`` is refused with a retryable error.

    With ``stored=True`` the refused guess was nevertheless stored (a forwarded request whose
    answer was lost): the SDK must see it in the replay after ``resume`` and not send it again.
    Only the messages this test needs are spoken, each as docs/protocol.md says.
    """

    def __init__(self, code: str, message: str, *, stored: bool) -> None:
        self.code, self.message, self.stored = code, message, stored
        self.guesses: list[str] = []
        self.received: list[dict[str, Any]] = []
        self.events: list[dict[str, object]] = []
        self.refused = False

    def _event(self, kind: str, **fields: object) -> dict[str, object]:
        event = {"type": "event", "match_id": "m1", "seq": len(self.events) + 1, "kind": kind,
                 "at": 0, **fields}
        self.events.append(event)
        return event

    async def handler(self, ws: ServerConnection) -> None:
        async for frame in ws:
            msg = json.loads(frame)
            self.received.append(msg)
            ref, kind = msg.get("id"), msg["type"]
            if kind == "hello":
                await ws.send(json.dumps({"type": "welcome", "name": msg["name"], "ref": ref,
                                          "token": "t", "matches": []}))
            elif kind == "play_bot":
                await ws.send(json.dumps({"type": "match", "match_id": "m1", "seat": 0,
                                          "opponent": "bot", "ref": ref,
                                          "config": {"pacing": "free"}}))
                self._event("started", commitments=["a", "b"])
            elif kind == "guess":
                self.guesses.append(msg["guess"])
                made = [e for e in self.events if e["kind"] == "guess"]
                if "n" in msg and msg["n"] <= len(made):  # a numbered retry: the original
                    await ws.send(json.dumps({**made[msg["n"] - 1], "ref": ref}))
                    continue
                event = self._event("guess", seat=0, n=len(made) + 1, guess=msg["guess"],
                                    bulls=0, cows=1) if self.stored or self.refused else None
                if not self.refused:
                    self.refused = True
                    await ws.send(json.dumps({"type": "error", "code": self.code, "ref": ref,
                                              "message": self.message, "match_id": "m1"}))
                elif event is not None:
                    await ws.send(json.dumps({**event, "ref": ref}))
            elif kind == "resume":
                await ws.send(json.dumps({"type": "match", "match_id": "m1", "seat": 0,
                                          "opponent": "bot", "ref": ref,
                                          "config": {"pacing": "free"}}))
                for event in self.events[msg.get("last_seq", 0):]:
                    await ws.send(json.dumps(event))
            elif kind == "ping":
                await ws.send(json.dumps({"type": "pong", "ref": ref}))


@pytest.mark.parametrize("code,message", [
    ("storage_unavailable", "storage unavailable: the lease of this match was lost"),
    ("not_available", "node b did not answer; try again"),
])
async def test_a_refused_unstored_guess_is_sent_again(code: str, message: str) -> None:
    script = _Refusing(code, message, stored=False)
    async with serve(script.handler, "127.0.0.1", 0, subprotocols=ARENA) as server:
        port = server.sockets[0].getsockname()[1]
        async with Client(f"ws://127.0.0.1:{port}/", "ann", backoff_initial=0.01,
                          rate_per_s=None) as client:
            await client.play_bot("random")
            reply = await client.guess("m1", "0123")
            assert isinstance(reply, GuessMade) and reply.n == 1
            assert script.guesses == ["0123", "0123"]  # refused once, then stored once
            assert [t.guess for t in client.states["m1"].mine()] == ["0123"]


async def test_a_refused_numbered_guess_that_was_stored_gets_its_event_on_retry() -> None:
    """The SDK numbers every guess: the retry of one whose answer was lost although it was
    stored is the same guess, and the server answers it with the original event."""
    script = _Refusing("not_available", "node b did not answer; try again", stored=True)
    async with serve(script.handler, "127.0.0.1", 0, subprotocols=ARENA) as server:
        port = server.sockets[0].getsockname()[1]
        async with Client(f"ws://127.0.0.1:{port}/", "ann", backoff_initial=0.01,
                          rate_per_s=None) as client:
            await client.play_bot("random")
            reply = await client.guess("m1", "0123")
            assert isinstance(reply, GuessMade) and reply.n == 1 and reply.guess == "0123"
            assert script.guesses == ["0123", "0123"]  # sent twice, stored once
            assert [e["n"] for e in script.events if e["kind"] == "guess"] == [1]
            assert [t.guess for t in client.states["m1"].mine()] == ["0123"]
            sent = [m for m in script.received if m["type"] == "guess"]
            assert [m.get("n") for m in sent] == [1, 1]


async def test_a_refused_unnumbered_guess_that_was_stored_is_not_played_twice() -> None:
    script = _Refusing("not_available", "node b did not answer; try again", stored=True)
    async with serve(script.handler, "127.0.0.1", 0, subprotocols=ARENA) as server:
        port = server.sockets[0].getsockname()[1]
        async with Client(f"ws://127.0.0.1:{port}/", "ann", backoff_initial=0.01,
                          rate_per_s=None) as client:
            await client.play_bot("random")
            with pytest.raises(ServerError) as refused:
                await client.request("guess", match_id="m1", guess="0123")
            assert refused.value.code == "not_available"
            assert script.guesses == ["0123"]  # the replay showed it stored: not re-sent
            assert [t.guess for t in client.states["m1"].mine()] == ["0123"]


async def test_a_final_not_available_is_not_retried() -> None:
    script = _Refusing("not_available", "watching 32 matches already; unwatch one first",
                       stored=False)
    async with serve(script.handler, "127.0.0.1", 0, subprotocols=ARENA) as server:
        port = server.sockets[0].getsockname()[1]
        async with Client(f"ws://127.0.0.1:{port}/", "ann", rate_per_s=None) as client:
            await client.play_bot("random")
            with pytest.raises(ServerError):
                await client.guess("m1", "0123")
            assert script.guesses == ["0123"]


async def test_a_ladder_join_refused_while_the_ladder_moves_is_sent_again() -> None:
    """A cluster's ladder moving to a new leader answers ``ladder_join`` "try again": the SDK
    sends it again (docs/sdk.md), so ``moo bot --ladder`` joins instead of giving up."""
    received: list[str] = []

    async def handler(ws: ServerConnection) -> None:
        async for frame in ws:
            msg = json.loads(frame)
            ref, kind = msg.get("id"), msg["type"]
            received.append(kind)
            if kind == "hello":
                await ws.send(json.dumps({"type": "welcome", "name": msg["name"], "ref": ref,
                                          "token": "t", "matches": []}))
            elif kind == "ladder_join" and received.count(kind) == 1:
                await ws.send(json.dumps({
                    "type": "error", "code": "not_available", "ref": ref,
                    "message": "the ladder is moving to another node; try again"}))
            elif kind == "ladder_join":
                await ws.send(json.dumps({"type": "ladder_status", "ref": ref, "bot": {
                    "bot_id": "b1", "name": "cbot", "kind": "connected",
                    "status": "active"}}))

    async with serve(handler, "127.0.0.1", 0, subprotocols=ARENA) as server:
        port = server.sockets[0].getsockname()[1]
        async with Client(f"ws://127.0.0.1:{port}/", "cbot", bot=True, backoff_initial=0.01,
                          rate_per_s=None) as client:
            bot = await client.join_ladder()
            assert (bot["bot_id"], bot["status"]) == ("b1", "active")
            assert received.count("ladder_join") == 2
