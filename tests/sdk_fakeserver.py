"""A small in-process server that follows docs/protocol.md, for unit-testing the SDK.

It drives the real :class:`moo.match.Match` (so scoring, visibility and the race rule are the
real ones) but implements only the lobby parts the clients use: hello/welcome with tokens,
play_bot, queue pairing, secret, guess, resign, resume, ping. Tests can also make it misbehave
on purpose (drop a connection, send an event twice) to check the client's resilience, which is
awkward to provoke in the real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from bots.base import Strategy
from bots.registry import create
from moo.commitment import new_salt
from moo.errors import MooError, NotHello, UnknownMatch
from moo.match import Match, MatchConfig
from moo.protocol import SUBPROTOCOLS, codec_for, decode_client
from moo.rules import Response, Rules


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Hosted:
    match: Match
    #: seat -> player name (or None for the server's bot)
    humans: list[str | None]
    bot: Strategy | None = None
    bot_seat: int | None = None
    watchers: set[str] = field(default_factory=set)


class FakeServer:
    def __init__(self, config: MatchConfig | None = None) -> None:
        self.config = config or MatchConfig(secret_ms=None)
        self.tokens: dict[str, str] = {}
        self.conns: dict[str, ServerConnection] = {}
        self.codecs: dict[str, Any] = {}
        self.matches: dict[str, Hosted] = {}
        self.queue: list[str] = []
        self.received: list[dict[str, Any]] = []
        self.hellos = 0
        self.duplicate_events = False
        #: answer this many ``resume`` requests with a retryable refusal first (a cluster still
        #: handing a dead node's matches over: ``not_available`` "... try again")
        self.refuse_resumes = 0
        #: names whose match events are silently not sent (until removed)
        self.lose_events_for: set[str] = set()
        #: request types whose next request is read and then its connection dropped, the
        #: answer never sent (each type once): the SDK's retry after a reconnect
        self.drop_on: set[str] = set()
        self._ids = itertools.count(1)
        self._server: Server | None = None
        self.url = ""

    async def __aenter__(self) -> FakeServer:
        self._server = await serve(
            self.handler, "127.0.0.1", 0,
            subprotocols=[Subprotocol(s) for s in SUBPROTOCOLS],
        )
        port = next(iter(self._server.sockets)).getsockname()[1]
        self.url = f"ws://127.0.0.1:{port}/"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def drop(self, name: str) -> None:
        """Simulate a network failure on ``name``'s connection."""
        ws = self.conns.get(name)
        if ws is not None:
            ws.transport.abort()

    # -- plumbing -----------------------------------------------------------------------------
    async def send(self, name: str, msg: dict[str, Any]) -> None:
        ws = self.conns.get(name)
        if ws is None:
            return
        if name in self.lose_events_for and msg.get("type") == "event":
            return  # as a relay a cluster lost: the connection stays, the event never comes
        with contextlib.suppress(ConnectionClosed):
            await ws.send(self.codecs[name].encode(msg))

    async def handler(self, ws: ServerConnection) -> None:
        codec = codec_for(ws.subprotocol)
        name: str | None = None
        try:
            async for frame in ws:
                try:
                    msg = decode_client(codec, frame)
                    self.received.append(msg)
                    ref = msg.get("id")
                    if name is None:
                        if msg["type"] != "hello":
                            raise NotHello("the first message must be hello")
                        name = await self.hello(ws, codec, msg)
                        continue
                    await self.dispatch(name, msg, ref)
                except MooError as exc:
                    err = {"type": "error", "code": exc.code, "message": exc.message}
                    if isinstance(msg, dict) and msg.get("id") is not None:
                        err["ref"] = msg["id"]
                    if isinstance(msg, dict) and "match_id" in msg:
                        err["match_id"] = msg["match_id"]
                    await ws.send(codec.encode(err))
        except ConnectionClosed:
            pass
        finally:
            if name is not None and self.conns.get(name) is ws:
                del self.conns[name]
                if name in self.queue:
                    self.queue.remove(name)
                for mid, hosted in self.matches.items():
                    if name in hosted.humans and not hosted.match.finished:
                        seat = hosted.humans.index(name)
                        await self.emit(mid, hosted.match.disconnect(seat, now_ms()))

    async def hello(self, ws: ServerConnection, codec: Any, msg: dict[str, Any]) -> str:
        self.hellos += 1
        name = str(msg["name"])
        token = msg.get("token")
        welcome: dict[str, Any] = {"type": "welcome", "name": name, "protocol": 1,
                                   "server": "fake/0"}
        if name in self.tokens:
            if token != self.tokens[name]:
                err = {"type": "error", "code": "name_taken" if token is None else "bad_token",
                       "message": "that name belongs to someone else", "ref": msg.get("id")}
                await ws.send(codec.encode(err))
                await ws.close()
                raise ConnectionClosed(None, None)
        else:
            self.tokens[name] = welcome["token"] = secrets.token_hex(8)
        old = self.conns.get(name)
        self.conns[name] = ws
        self.codecs[name] = codec
        if old is not None:
            await old.close(4001, "replaced")
        welcome["matches"] = [
            {"match_id": mid, "seat": h.humans.index(name), "seq": h.match.seq,
             "phase": h.match.phase}
            for mid, h in self.matches.items()
            if name in h.humans and not h.match.finished
        ]
        if msg.get("id") is not None:
            welcome["ref"] = msg["id"]
        await ws.send(codec.encode(welcome))
        for mid, h in self.matches.items():
            if name in h.humans and not h.match.finished:
                await self.emit(mid, h.match.reconnect(h.humans.index(name), now_ms()))
        return name

    async def emit(self, match_id: str, events: list[dict[str, Any]],
                   requester: str | None = None, ref: Any = None) -> None:
        hosted = self.matches[match_id]
        for event in events:
            for seat, who in enumerate(hosted.humans):
                if who is None:
                    continue
                view = hosted.match.view(event, seat)
                if view is None:
                    continue
                out = {"type": "event", "match_id": match_id, **view}
                if who == requester and ref is not None:
                    out["ref"] = ref
                    ref = None
                await self.send(who, out)
                if self.duplicate_events:
                    await self.send(who, {k: v for k, v in out.items() if k != "ref"})

    async def start_match(self, players: list[str | None], names: tuple[str, str],
                          ref_for: str | None, ref: Any, bot: str | None = None) -> None:
        mid = f"m{next(self._ids)}"
        match, events = Match.create(mid, names, self.config, now_ms())
        hosted = Hosted(match, players)
        self.matches[mid] = hosted
        for seat, who in enumerate(players):
            if who is None:
                continue
            msg: dict[str, Any] = {"type": "match", "match_id": mid, "seat": seat,
                                   "opponent": names[1 - seat],
                                   "config": self.config.to_dict()}
            if who == ref_for and ref is not None:
                msg["ref"] = ref
            await self.send(who, msg)
        await self.emit(mid, events)
        if bot is not None:
            seat = players.index(None)
            hosted.bot, hosted.bot_seat = create(bot), seat
            assert isinstance(self.config.rules, Rules)
            hosted.bot.new_match(self.config.rules, random.Random(7))
            secret = random.Random().choice(self.config.rules.secrets)
            await self.emit(mid, match.set_secret(seat, secret, new_salt(), now_ms()))

    async def bot_moves(self, match_id: str) -> None:
        hosted = self.matches[match_id]
        match, bot, seat = hosted.match, hosted.bot, hosted.bot_seat
        if bot is None or seat is None:
            return
        while match.owes_move(seat):
            events = match.guess(seat, bot.next_guess(), now_ms())
            for e in events:
                if e["kind"] == "guess" and e["seat"] == seat:
                    bot.observe(e["guess"], Response(e["bulls"], e["cows"]))
            await self.emit(match_id, events)

    def hosted(self, name: str, match_id: str) -> tuple[Hosted, int]:
        hosted = self.matches.get(match_id)
        if hosted is None or name not in hosted.humans:
            raise UnknownMatch(f"no match {match_id!r}")
        return hosted, hosted.humans.index(name)

    async def dispatch(self, name: str, msg: dict[str, Any], ref: Any) -> None:
        kind = msg["type"]
        reply_to = self.conns[name]
        codec = self.codecs[name]

        async def reply(out: dict[str, Any]) -> None:
            if ref is not None:
                out["ref"] = ref
            await reply_to.send(codec.encode(out))

        if kind in self.drop_on:
            self.drop_on.discard(kind)
            self.drop(name)
            return
        if kind == "ping":
            await reply({"type": "pong"})
        elif kind == "play_bot":
            strategy = msg["strategy"]
            await self.start_match([name, None], (name, f"{strategy}-bot"), name, ref, bot=strategy)
        elif kind == "queue":
            await reply({"type": "queued", "pool": msg.get("pool", "any"),
                         "pacing": msg.get("pacing", "lockstep")})
            if name not in self.queue:
                self.queue.append(name)
            if len(self.queue) >= 2:
                a, b = self.queue.pop(0), self.queue.pop(0)
                await self.start_match([a, b], (a, b), None, None)
        elif kind == "secret":
            hosted, seat = self.hosted(name, msg["match_id"])
            events = hosted.match.set_secret(seat, msg["secret"], new_salt(), now_ms())
            await self.emit(msg["match_id"], events, name, ref)
            await self.bot_moves(msg["match_id"])
        elif kind == "guess":
            hosted, seat = self.hosted(name, msg["match_id"])
            n = msg.get("n")
            if n is not None and hosted.match.repeat_of(seat, msg["guess"], n):
                # a retry: the original event again (docs/protocol.md, "Retrying safely")
                original = next(e for e in hosted.match.events if e["kind"] == "guess"
                                and e["seat"] == seat and e["n"] == n)
                view = hosted.match.view(original, seat)
                assert view is not None
                await reply({"type": "event", "match_id": msg["match_id"], **view})
                return
            events = hosted.match.guess(seat, msg["guess"], now_ms(), n)
            await self.emit(msg["match_id"], events, name, ref)
            await self.bot_moves(msg["match_id"])
        elif kind == "resign":
            hosted, seat = self.hosted(name, msg["match_id"])
            await self.emit(msg["match_id"], hosted.match.resign(seat, now_ms()), name, ref)
        elif kind == "resume":
            if self.refuse_resumes > 0:
                self.refuse_resumes -= 1
                await reply({"type": "error", "code": "not_available",
                             "message": "the match is moving to another node; try again"})
                return
            hosted, seat = self.hosted(name, msg["match_id"])
            last = msg.get("last_seq", 0)
            for event in hosted.match.events[last:]:
                view = hosted.match.view(event, seat)
                if view is not None:
                    await self.send(name, {"type": "event", "match_id": msg["match_id"], **view})
        elif kind == "matches":
            await reply({"type": "matches", "matches": [
                {"match_id": mid, "players": list(h.match.players),
                 "pacing": h.match.config.pacing, "phase": h.match.phase,
                 "counts": [s.count for s in h.match.seats]}
                for mid, h in self.matches.items() if not h.match.finished
            ]})
        elif kind == "leaderboard":
            await reply({"type": "leaderboard", "by": msg.get("by", "rating"), "players": [
                {"name": "ann", "rating": 1500.0, "games": 1, "wins": 1, "draws": 0,
                 "losses": 0, "avg_guesses": 5.0, "avg_time_s": 1.5},
            ]})
        else:
            await reply({"type": "error", "code": "not_available",
                         "message": f"the fake server does not do {kind!r}"})

    async def wait_until(self, predicate: Any, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                await asyncio.sleep(0.01)
