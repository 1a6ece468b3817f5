"""Protocol v1 conformance, written from docs/protocol.md the way an outside client author would.

Each test checks promises of the document against a real server over real sockets, with a raw
WebSocket client (``websockets.asyncio``) that encodes frames itself (``json`` / ``msgpack``),
never through the project's codecs or SDK, and runs once per encoding (``moo.v1.json``,
``moo.v1.msgpack``). The server is started in-process on a free port with only the settings a
test needs changed (shorter timeouts, a tighter rate), as an operator could. Every wait has a
deadline, nothing sleeps for timing: a broken promise fails, it never hangs.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import itertools
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import msgpack
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Origin, Subprotocol

from server.app import App
from server.lobby import Lobby
from tests.server_support import server_settings

ENCODINGS = ["moo.v1.json", "moo.v1.msgpack"]
pytestmark = pytest.mark.parametrize("enc", ENCODINGS)

WAIT = 15.0
ALPHABET = "0123456789"
#: the canonical rules object of classic 4-of-10 MOO, the default (docs/protocol.md, Variants)
CLASSIC = {"game": "moo", "length": 4, "alphabet": ALPHABET, "repeats_in_guess": False}
ALL_CODES = [
    "".join(p) for p in itertools.permutations(ALPHABET, 4)
]  # the default rules: 4 distinct digits


def bulls_cows(secret: str, guess: str) -> tuple[int, int]:
    """Scoring as the doc's rules say (distinct digits): right place, and right digit elsewhere."""
    bulls = sum(a == b for a, b in zip(secret, guess, strict=True))
    return bulls, len(set(secret) & set(guess)) - bulls


# -- a client written from the doc -----------------------------------------------------------------
class Peer:
    """One WebSocket connection that keeps every message it received, in order."""

    _ids = itertools.count(1)

    def __init__(self, ws: ClientConnection, enc: str) -> None:
        self.ws = ws
        self.enc = enc
        self.binary = enc == "moo.v1.msgpack"
        self.inbox: list[dict[str, Any]] = []
        self.seen: list[dict[str, Any]] = []
        self.welcome: dict[str, Any] = {}

    @classmethod
    async def open(cls, port: int, enc: str, **kwargs: Any) -> Peer:
        ws = await connect(f"ws://127.0.0.1:{port}/", subprotocols=[Subprotocol(enc)], **kwargs)
        return cls(ws, enc)

    @classmethod
    async def hello(cls, port: int, enc: str, name: str, **fields: Any) -> Peer:
        peer = await cls.open(port, enc)
        welcome = await peer.request({"type": "hello", "name": name, **fields})
        assert welcome["type"] == "welcome", welcome
        peer.welcome = welcome
        return peer

    @property
    def name(self) -> str:
        return str(self.welcome["name"])

    def encode(self, msg: Any) -> str | bytes:
        if self.binary:
            return bytes(msgpack.packb(msg, use_bin_type=True))
        return json.dumps(msg)

    async def send(self, msg: dict[str, Any]) -> Any:
        if "id" not in msg:
            msg = {**msg, "id": next(self._ids)}
        await self.ws.send(self.encode(msg))
        return msg["id"]

    async def send_raw(self, frame: str | bytes) -> None:
        await self.ws.send(frame)

    async def _next(self) -> dict[str, Any]:
        frame = await self.ws.recv()
        # The doc: text frames for JSON, binary frames for MessagePack.
        if self.binary:
            assert isinstance(frame, bytes), frame
            msg = msgpack.unpackb(frame, raw=False)
        else:
            assert isinstance(frame, str), frame
            msg = json.loads(frame)
        assert isinstance(msg, dict) and isinstance(msg.get("type"), str), msg
        self.seen.append(msg)
        return msg

    async def expect(
        self, pred: Callable[[dict[str, Any]], bool], timeout: float = WAIT
    ) -> dict[str, Any]:
        for i, msg in enumerate(self.inbox):
            if pred(msg):
                return self.inbox.pop(i)
        async with asyncio.timeout(timeout):
            while True:
                msg = await self._next()
                if pred(msg):
                    return msg
                self.inbox.append(msg)

    async def request(self, msg: dict[str, Any]) -> dict[str, Any]:
        ref = await self.send(msg)
        return await self.expect(lambda m: m.get("ref") == ref)

    async def error(self, msg: dict[str, Any], code: str) -> dict[str, Any]:
        reply = await self.request(msg)
        assert reply["type"] == "error" and reply["code"] == code, (msg, reply)
        assert isinstance(reply["message"], str) and reply["message"]
        return reply

    async def of_type(self, kind: str, **fields: Any) -> dict[str, Any]:
        return await self.expect(
            lambda m: m["type"] == kind and all(m.get(k) == v for k, v in fields.items())
        )

    async def event(self, match_id: str, kind: str, **fields: Any) -> dict[str, Any]:
        return await self.expect(
            lambda m: m["type"] == "event"
            and m["match_id"] == match_id
            and m["kind"] == kind
            and all(m.get(k) == v for k, v in fields.items())
        )

    def events(self, match_id: str) -> list[dict[str, Any]]:
        """This match's events as the doc says to apply them: by seq, repeats ignored."""
        out: dict[int, dict[str, Any]] = {}
        for m in self.seen:
            if m["type"] == "event" and m["match_id"] == match_id:
                out.setdefault(m["seq"], m)
        return [out[k] for k in sorted(out)]

    async def closed(self, timeout: float = WAIT) -> int | None:
        async with asyncio.timeout(timeout):
            try:
                while True:
                    await self._next()
            except ConnectionClosed:
                pass
            await self.ws.wait_closed()
        return self.ws.close_code

    async def nothing_more(self, match_id: str, kinds: set[str]) -> None:
        """After a ping round trip (the server answers in order), no event of ``kinds`` came."""
        assert (await self.request({"type": "ping"}))["type"] == "pong"
        got = [m for m in self.seen if m["type"] == "event" and m["match_id"] == match_id]
        assert not [m for m in got if m["kind"] in kinds], got

    async def close(self) -> None:
        await self.ws.close()


@asynccontextmanager
async def arena(tmp_path: Path, **settings: Any) -> AsyncIterator[App]:
    """A real server on a free port; ``settings`` as an operator would set them."""
    app = App(dataclasses.replace(server_settings(tmp_path), **settings))
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


async def pair_in_room(
    app: App, enc: str, pacing: str = "lockstep", rated: bool = True
) -> tuple[Peer, Peer, str]:
    """ann makes a room, bob joins: returns (seat 0, seat 1, match_id)."""
    ann = await Peer.hello(app.port, enc, "ann")
    bob = await Peer.hello(app.port, enc, "bob")
    room = await ann.request({"type": "room_create", "pacing": pacing, "rated": rated})
    assert room["type"] == "room" and room["pacing"] == pacing and room["rated"] is rated
    joined = await bob.request({"type": "room_join", "code": room["code"]})
    assert joined["type"] == "match"
    mid = joined["match_id"]
    other = await ann.of_type("match", match_id=mid)
    by_seat = {joined["seat"]: bob, other["seat"]: ann}
    assert set(by_seat) == {0, 1}
    return by_seat[0], by_seat[1], mid


async def set_secrets(p0: Peer, p1: Peer, mid: str, s0: str = "0123", s1: str = "4567") -> None:
    for peer, secret in ((p0, s0), (p1, s1)):
        ack = await peer.request({"type": "secret", "match_id": mid, "secret": secret})
        assert ack["type"] == "event" and ack["kind"] == "secret" and ack["secret"] == secret
    for peer in (p0, p1):
        await peer.event(mid, "started")


def check_log(events: list[dict[str, Any]]) -> None:
    """Every event has the documented envelope; seq counts from 1 without gaps."""
    for e in events:
        assert {"type", "match_id", "seq", "kind", "at"} <= e.keys(), e
        assert isinstance(e["at"], int)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def check_fairness(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The fairness check of the doc: commitments at started match the reveal at finished."""
    started = next(e for e in events if e["kind"] == "started")
    fin = next(e for e in events if e["kind"] == "finished")
    assert fin["commitments"] == started["commitments"]
    for i in (0, 1):
        digest = hashlib.sha256((fin["salts"][i] + fin["secrets"][i]).encode()).hexdigest()
        assert digest == started["commitments"][i]
    return fin


# -- transport, encodings, framing -----------------------------------------------------------------
async def test_subprotocol_selects_the_encoding_and_frame_type(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        peer = await Peer.open(app.port, enc)
        assert peer.ws.subprotocol == enc
        # the wrong frame type for the encoding is undecodable, and nothing else happens
        wrong: str | bytes = b'{"type":"ping"}' if enc == "moo.v1.json" else '{"type":"ping"}'
        await peer.send_raw(wrong)
        assert (await peer.of_type("error"))["code"] == "undecodable"
        assert (await peer.request({"type": "ping"}))["type"] == "pong"
        # no subprotocol offered: JSON
        bare = await connect(f"ws://127.0.0.1:{app.port}/")
        assert bare.subprotocol is None
        await bare.send('{"type":"ping","id":"p"}')
        assert json.loads(await asyncio.wait_for(bare.recv(), WAIT)) == {"type": "pong", "ref": "p"}
        await bare.close()
        # only unknown subprotocols offered: opened anyway, none selected, JSON spoken
        future = await connect(f"ws://127.0.0.1:{app.port}/",
                               subprotocols=[Subprotocol("moo.v2.json")])
        assert future.subprotocol is None
        await future.send('{"type":"ping","id":"q"}')
        assert json.loads(await asyncio.wait_for(future.recv(), WAIT)) == {"type": "pong",
                                                                           "ref": "q"}
        await future.close()


async def test_origin_policy_and_connection_cap(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path, max_connections=2) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        sub = [Subprotocol(enc)]
        with pytest.raises(InvalidStatus) as refused:
            await connect(url, subprotocols=sub, origin=Origin("http://evil.example"))
        assert refused.value.response.status_code == 403
        same = await connect(url, subprotocols=sub, origin=Origin(f"http://127.0.0.1:{app.port}"))
        program = await connect(url, subprotocols=sub)  # no Origin: a program
        with pytest.raises(InvalidStatus) as full:
            await connect(url, subprotocols=sub)
        assert full.value.response.status_code == 503
        await same.close()
        await program.close()


async def test_undecodable_unknown_and_ill_typed_messages_change_nothing(
    tmp_path: Path, enc: str
) -> None:
    async with arena(tmp_path) as app:
        peer = await Peer.hello(app.port, enc, "ann")
        garbage: str | bytes = "{not json" if enc == "moo.v1.json" else b"\xc1"
        await peer.send_raw(garbage)
        err = await peer.of_type("error")
        assert err["code"] == "undecodable" and "ref" not in err
        await peer.error({"type": "teleport"}, "unknown_type")
        await peer.error({"type": "ping", "extra": 1}, "bad_field")
        await peer.error({"type": "guess", "match_id": "m1"}, "bad_field")  # missing guess
        await peer.error({"type": "guess", "match_id": "m1", "guess": 123}, "bad_field")
        await peer.error({"type": "queue", "pool": "robots"}, "bad_field")
        await peer.error({"type": "queue", "rated": "no"}, "bad_field")
        await peer.send_raw(peer.encode([1, 2]))
        assert (await peer.of_type("error"))["code"] == "bad_field"
        # none of it queued anybody or changed the player
        assert not cast(Lobby, app.lobby).queue
        assert (await peer.request({"type": "ping"}))["type"] == "pong"


async def test_request_ids(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        peer = await Peer.hello(app.port, enc, "ann")
        for good in ("x" * 64, "", 0, 2**53 - 1):
            assert await peer.request({"type": "ping", "id": good}) == {"type": "pong", "ref": good}
        for bad in ("x" * 65, 2**53, -1, None, 1.5, True, {"a": 1}, [1]):
            await peer.send({"type": "ping", "id": bad})
            err = await peer.of_type("error")
            assert err["code"] == "bad_field" and "ref" not in err, (bad, err)
        # no id at all: the reply simply has no ref
        await peer.send_raw(peer.encode({"type": "ping"}))
        assert await peer.of_type("pong") == {"type": "pong"}


async def test_message_size_limit_and_transport_ceiling(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        peer = await Peer.hello(app.port, enc, "ann")

        def sized(total: int) -> str | bytes:
            frame = peer.encode({"type": "ping", "pad": ""})
            pad = total - len(frame if isinstance(frame, bytes) else frame.encode())
            padded = peer.encode({"type": "ping", "pad": "x" * pad})
            # msgpack's str header grows with the length: trim to the exact size wanted
            while len(padded if isinstance(padded, bytes) else padded.encode()) > total:
                pad -= 1
                padded = peer.encode({"type": "ping", "pad": "x" * pad})
            return padded

        exact = sized(4096)
        assert len(exact if isinstance(exact, bytes) else exact.encode()) == 4096
        await peer.send_raw(exact)  # at the limit: a well-formed but refused field
        assert (await peer.of_type("error"))["code"] == "bad_field"
        for total in (4097, 65536):
            await peer.send_raw(sized(total))
            err = await peer.of_type("error")
            assert err["code"] == "too_large" and "ref" not in err
            assert (await peer.request({"type": "ping"}))["type"] == "pong"  # still usable
        await peer.send_raw(sized(65537))
        assert await peer.closed() == 1009


async def test_rate_limit_before_and_after_hello(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path, rate_per_s=0.01, rate_burst=5) as app:
        for say_hello in (False, True):
            if say_hello:
                peer = await Peer.hello(app.port, enc, "ann")
            else:
                peer = await Peer.open(app.port, enc)
            burst = 4 if say_hello else 5  # hello took one token
            for _ in range(burst):
                assert (await peer.request({"type": "ping"}))["type"] == "pong"
            sent = [await peer.send({"type": "ping", "match_id": "m1"})]
            await peer.send_raw(b"\xc1" if peer.binary else "{not json")
            sent += [await peer.send({"type": "ping"}) for _ in range(8)]
            code = await peer.closed()
            limited = [m for m in peer.seen if m["type"] == "error"]
            assert code == 1008
            # nine refusals in a row are answered, each with the refused request's id (and
            # match_id) so the client knows which to send again; the frame that does not
            # decode without one; the tenth closes
            assert [m["code"] for m in limited] == ["rate_limited"] * 9
            assert [m.get("ref") for m in limited] == [sent[0], None, *sent[1:8]]
            assert limited[0]["match_id"] == "m1"
            assert not any(m["type"] == "pong" for m in peer.seen[-9:])


async def test_handshake_and_idle_timeouts(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path, handshake_timeout_s=0.3, idle_timeout_s=0.5) as app:
        silent = await Peer.open(app.port, enc)
        assert await silent.closed() == 1008  # no hello in time
        idle = await Peer.hello(app.port, enc, "ann")
        assert await idle.closed() == 1001  # no message for idle_timeout_s


async def test_graceful_stop_closes_with_1012(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        peer = await Peer.hello(app.port, enc, "ann")
        await app.stop()
        assert await peer.closed() == 1012


# -- session ---------------------------------------------------------------------------------------
async def test_hello_welcome_and_names(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        peer = await Peer.open(app.port, enc)
        pong = await peer.request({"type": "ping", "id": "early"})  # any time: before hello too
        assert pong == {"type": "pong", "ref": "early"}
        await peer.error({"type": "queue"}, "not_hello")
        # a malformed message gets the error it would get after hello: checked first
        await peer.error({"type": "teleport"}, "unknown_type")
        await peer.error({"type": "queue", "pool": "robots"}, "bad_field")
        await peer.error({"type": "hello"}, "bad_field")  # no name and no token
        # string caps count the text as sent, surrounding whitespace included
        err = await peer.error({"type": "hello", "name": " " * 62 + "ann"}, "bad_field")
        assert "longer than 64 characters" in err["message"]
        await peer.error({"type": "hello", "name": "no spaces"}, "invalid_name")
        await peer.error({"type": "hello", "name": "x" * 25}, "invalid_name")
        await peer.error({"type": "hello", "name": "Random-Bot"}, "name_taken")  # hosted bot
        await peer.error({"type": "hello", "name": "x", "token": "forged"}, "bad_token")
        welcome = await peer.request(
            {"type": "hello", "name": "ann", "client": "conformance", "protocol": 1}
        )
        assert welcome["type"] == "welcome" and welcome["name"] == "ann"
        assert welcome["protocol"] == 1 and isinstance(welcome["server"], str)
        assert welcome["matches"] == [] and isinstance(welcome["token"], str)
        await peer.error({"type": "hello", "name": "bob"}, "not_available")  # a second hello
        # the name is owned: without its token (any case) it is bad_token
        other = await Peer.open(app.port, enc)
        await other.error({"type": "hello", "name": "ANN"}, "bad_token")
        # with it, the name comes back (no new token) and the old connection is replaced
        again = await other.request({"type": "hello", "name": "ignored", "token": welcome["token"]})
        assert again["type"] == "welcome" and again["name"] == "ann" and "token" not in again
        assert await peer.closed() == 4001
        # the token alone names the player: no name needed
        third = await Peer.open(app.port, enc)
        alone = await third.request({"type": "hello", "token": welcome["token"]})
        assert alone["type"] == "welcome" and alone["name"] == "ann"
        assert await other.closed() == 4001


# -- a whole match ---------------------------------------------------------------------------------
async def test_lockstep_match_against_a_hosted_bot(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path, bot_delay_ms=0) as app:
        ann = await Peer.hello(app.port, enc, "ann")
        await ann.error({"type": "play_bot", "strategy": "nobody"}, "unknown_strategy")
        m = await ann.request({"type": "play_bot", "strategy": "random"})
        assert m["type"] == "match" and m["seat"] == 0 and m["opponent"] == "random-bot"
        config = m["config"]
        assert {
            "rules", "pacing", "guess_cap", "clock_total_ms", "clock_guess_ms", "secret_ms",
            "grace_ms", "show_guesses", "rated",
        } <= config.keys()
        assert config["rules"] == {
            "game": "moo", "length": 4, "alphabet": ALPHABET, "repeats_in_guess": False,
        }
        assert config["pacing"] == "lockstep" and config["rated"] is True
        mid = m["match_id"]
        created = await ann.event(mid, "created")
        assert created["players"] == ["ann", "random-bot"] and created["config"] == config
        await ann.error({"type": "guess", "match_id": mid, "guess": "0123"}, "wrong_phase")
        for bad, code in (
            ("0012", "repeated_symbol"), ("012", "wrong_length"), ("01234", "wrong_length"),
            (" 123", "unknown_symbol"), ("0123 ", "unknown_symbol"), ("\t123", "unknown_symbol"),
            ("01\n3", "unknown_symbol"), ("\u00a0123", "unknown_symbol"),
            ("12\u20033", "unknown_symbol"), ("abcd", "unknown_symbol"),
        ):
            err = await ann.error({"type": "secret", "match_id": mid, "secret": bad}, code)
            assert err["match_id"] == mid
        err = await ann.error(
            {"type": "secret", "match_id": mid, "secret": "01234"}, "wrong_length"
        )
        assert "got 5" in err["message"]  # counts the characters actually sent
        ack = await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
        assert ack["kind"] == "secret" and ack["seat"] == 0 and ack["secret"] == "0123"
        await ann.error({"type": "secret", "match_id": mid, "secret": "4567"}, "already_set")
        bot_secret = await ann.event(mid, "secret", seat=1)
        assert "secret" not in bot_secret
        started = await ann.event(mid, "started")
        assert len(started["commitments"]) == 2
        await ann.error({"type": "secret", "match_id": mid, "secret": "4567"}, "already_set")
        await ann.error({"type": "guess", "match_id": mid, "guess": " 4567"}, "unknown_symbol")
        # play by elimination until the match ends
        candidates, n = list(ALL_CODES), 0
        while True:
            guess = candidates[0]
            ack = await ann.request({"type": "guess", "match_id": mid, "guess": guess})
            n += 1
            assert ack["kind"] == "guess" and ack["n"] == n and ack["guess"] == guess
            assert "bulls" not in ack  # lockstep: no response before the round is revealed
            rnd = await ann.event(mid, "round", n=n)
            mine = rnd["results"][0]
            assert mine[0] == guess
            candidates = [c for c in candidates if bulls_cows(c, guess) == (mine[1], mine[2])]
            if mine[1] == 4 or rnd["results"][1][1] == 4:
                break
        fin = await ann.event(mid, "finished")
        events = ann.events(mid)
        check_log(events)
        check_fairness(events)
        assert fin["reason"] == "solved" and fin["counts"] == [n, n]  # lockstep: equal counts
        solved = [mine[1] == 4, rnd["results"][1][1] == 4]
        assert fin["solved"] == solved
        assert fin["winner"] == (None if all(solved) else solved.index(True))
        assert bulls_cows(fin["secrets"][1], guess) == (mine[1], mine[2])
        await ann.error({"type": "guess", "match_id": mid, "guess": "0123"}, "match_finished")
        await ann.error({"type": "resign", "match_id": mid}, "match_finished")


async def test_lockstep_guess_twice_in_a_round_is_not_your_turn(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        p0, p1, mid = await pair_in_room(app, enc)
        await set_secrets(p0, p1, mid)
        g = await p0.request({"type": "guess", "match_id": mid, "guess": "9876"})
        assert g["guess"] == "9876" and "bulls" not in g
        other = await p1.event(mid, "guess", seat=0)
        assert other["n"] == 1 and "guess" not in other and "bulls" not in other
        await p0.error({"type": "guess", "match_id": mid, "guess": "8765"}, "not_your_turn")
        await p1.request({"type": "guess", "match_id": mid, "guess": "0123"})  # p1 solves
        for peer in (p0, p1):
            rnd = await peer.event(mid, "round", n=1)
            assert rnd["results"] == [["9876", 0, 2], ["0123", 4, 0]]  # show_guesses: true
            fin = await peer.event(mid, "finished")
            assert fin["winner"] == 1 and fin["counts"] == [1, 1] and fin["solved"] == [False, True]


async def test_free_match_shows_responses_at_once_and_ends_when_decided(
    tmp_path: Path, enc: str
) -> None:
    async with arena(tmp_path) as app:
        p0, p1, mid = await pair_in_room(app, enc, pacing="free")
        await set_secrets(p0, p1, mid)
        g = await p0.request({"type": "guess", "match_id": mid, "guess": "4567"})  # solves
        assert (g["bulls"], g["cows"], g["n"]) == (4, 0, 1)
        seen = await p1.event(mid, "guess", seat=0)
        assert seen["guess"] == "4567" and seen["bulls"] == 4  # shown to all in free pacing
        await p0.nothing_more(mid, {"finished"})  # p1 may still tie with one guess
        await p0.error({"type": "guess", "match_id": mid, "guess": "4567"}, "not_your_turn")
        await p1.request({"type": "guess", "match_id": mid, "guess": "3210"})
        fin = await p0.event(mid, "finished")
        assert fin["winner"] == 0 and fin["reason"] == "solved" and fin["counts"] == [1, 1]
        check_fairness(p0.events(mid))


async def test_resign_and_finished_before_start_has_null_secrets(
    tmp_path: Path, enc: str
) -> None:
    async with arena(tmp_path) as app:
        p0, p1, mid = await pair_in_room(app, enc)
        await p0.request({"type": "secret", "match_id": mid, "secret": "0123"})
        r = await p1.request({"type": "resign", "match_id": mid})
        assert r["kind"] == "resign" and r["seat"] == 1
        fin = await p0.event(mid, "finished")
        assert fin["winner"] == 0 and fin["reason"] == "resign"
        assert fin["secrets"] == ["0123", None] and fin["salts"][1] is None
        assert fin["commitments"][1] is None and fin["counts"] == [0, 0]


async def test_secret_clock_times_out(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path, secret_ms=1000) as app:
        p0, p1, mid = await pair_in_room(app, enc)
        await p0.request({"type": "secret", "match_id": mid, "secret": "0123"})
        t = await p0.event(mid, "timeout")
        assert t["seat"] == 1 and t["clock"] == "secret"
        fin = await p1.event(mid, "finished")
        assert fin["winner"] == 0 and fin["reason"] == "timeout" and fin["secrets"][1] is None


async def test_seat_and_match_errors(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        _p0, _p1, mid = await pair_in_room(app, enc)
        eve = await Peer.hello(app.port, enc, "eve")
        await eve.error({"type": "secret", "match_id": mid, "secret": "0123"}, "not_your_seat")
        await eve.error({"type": "resume", "match_id": mid}, "not_your_seat")
        err = await eve.error({"type": "guess", "match_id": "nope", "guess": "0123"},
                              "unknown_match")
        assert err["match_id"] == "nope"
        await eve.error({"type": "watch", "match_id": "nope"}, "unknown_match")
        await eve.error({"type": "rematch", "match_id": "nope"}, "unknown_match")
        # wrong_length counts the characters actually sent, however many
        for sent in ("0" * 3, "1234567890" * 2, "9" * 600):
            err = await _p0.error({"type": "secret", "match_id": mid, "secret": sent},
                                  "wrong_length")
            assert err["message"].endswith(f"got {len(sent)}"), err


# -- lobby -----------------------------------------------------------------------------------------
async def test_queue_pools_pacing_and_rated(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        ann = await Peer.hello(app.port, enc, "ann")
        bob = await Peer.hello(app.port, enc, "bob")
        prog = await Peer.hello(app.port, enc, "prog", bot=True)
        # a person in the programs' pool is refused at once
        await ann.error({"type": "queue", "pool": "bots"}, "wrong_pool")
        q = await ann.request({"type": "queue"})
        assert q == {"type": "queued", "pool": "any", "pacing": "lockstep", "rated": True,
                     "rules": CLASSIC, "ref": q["ref"]}
        # queueing again replaces the entry: the latest terms count
        q = await ann.request({"type": "queue", "pool": "humans", "rated": False})
        assert (q["pool"], q["rated"]) == ("humans", False)
        # a rated request never pairs with an unrated one; humans never with a program
        await bob.request({"type": "queue", "rated": True})
        await prog.request({"type": "queue", "rated": False})
        await bob.request({"type": "queue", "pacing": "free", "rated": False})
        for peer in (ann, bob, prog):
            assert not [m for m in peer.seen if m["type"] == "match"]
        un = await prog.request({"type": "unqueue"})
        assert un["type"] == "unqueued" and un["reason"] == "requested"
        await bob.request({"type": "queue", "rated": False})  # lockstep, unrated: pairs
        m = await bob.of_type("match")
        assert m["opponent"] == "ann" and m["config"]["rated"] is False
        assert (await ann.of_type("match"))["match_id"] == m["match_id"]
        # programs pair with programs in the bots pool
        bot2 = await Peer.hello(app.port, enc, "prog2", bot=True)
        await prog.request({"type": "queue", "pool": "bots"})
        await bot2.request({"type": "queue", "pool": "bots", "pacing": "lockstep"})
        assert (await bot2.of_type("match"))["opponent"] == "prog"


async def test_unrated_matches_stay_off_the_leaderboard(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path, bot_delay_ms=0) as app:
        ann = await Peer.hello(app.port, enc, "ann")
        for rated in (False, True):
            m = await ann.request({"type": "play_bot", "strategy": "first", "rated": rated})
            assert m["config"]["rated"] is rated
            await ann.request({"type": "resign", "match_id": m["match_id"]})
            await ann.event(m["match_id"], "finished")
            board = await ann.request({"type": "leaderboard"})
            rows = {row["name"]: row for row in board["players"]}
            if not rated:
                assert board["by"] == "rating" and "ann" not in rows
        row = rows["ann"]
        assert row["games"] == 1 and row["losses"] == 1
        assert {"name", "rating", "mu", "sigma", "games", "wins", "draws", "losses",
                "avg_guesses", "avg_time_s"} <= row.keys()
        by_avg = await ann.request({"type": "leaderboard", "by": "average"})
        assert by_avg["by"] == "average" and len(by_avg["players"]) <= 50


async def test_challenge_decline_and_accept(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        ann = await Peer.hello(app.port, enc, "ann")
        bob = await Peer.hello(app.port, enc, "bob")
        await ann.error({"type": "challenge", "opponent": "nobody"}, "unknown_player")
        await ann.error({"type": "challenge", "opponent": "ANN"}, "not_available")
        sent = await ann.request({"type": "challenge", "opponent": "BOB", "rated": False})
        assert sent["type"] == "challenge_sent" and sent["to"] == "bob"
        cid = sent["challenge_id"]
        offer = await bob.of_type("challenge")
        assert offer == {"type": "challenge", "challenge_id": cid, "from": "ann",
                         "pacing": "lockstep", "rated": False, "rules": CLASSIC}
        declined = await bob.request({"type": "decline", "challenge_id": cid})
        assert declined["type"] == "declined" and declined["challenge_id"] == cid
        told = await ann.of_type("declined")
        assert told["challenge_id"] == cid and "ref" not in told
        await bob.error({"type": "accept", "challenge_id": cid}, "not_available")
        cid = (await ann.request({"type": "challenge", "opponent": "bob", "pacing": "free"}))[
            "challenge_id"
        ]
        await bob.of_type("challenge", challenge_id=cid)
        await ann.error({"type": "accept", "challenge_id": cid}, "not_available")  # not hers
        m = await bob.request({"type": "accept", "challenge_id": cid})
        assert m["type"] == "match" and m["opponent"] == "ann" and m["config"]["pacing"] == "free"
        assert (await ann.of_type("match"))["match_id"] == m["match_id"]


async def test_rooms_join_cancel_and_errors(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        ann = await Peer.hello(app.port, enc, "ann")
        bob = await Peer.hello(app.port, enc, "bob")
        await ann.error({"type": "room_cancel"}, "no_room")
        room = await ann.request({"type": "room_create"})
        code = room["code"]
        assert len(code) == 6 and room["pacing"] == "lockstep" and room["rated"] is True
        await ann.error({"type": "room_join", "code": code}, "not_available")  # her own
        await bob.error({"type": "room_join", "code": "ZZZZZZ"}, "unknown_room")
        closed = await ann.request({"type": "room_cancel"})
        assert closed["type"] == "room_closed" and closed["code"] == code
        assert closed["reason"] == "cancelled"
        await bob.error({"type": "room_join", "code": code}, "unknown_room")
        a = (await ann.request({"type": "room_create"}))["code"]
        b = (await ann.request({"type": "room_create"}))["code"]
        await ann.error({"type": "room_cancel", "code": "ZZZZZZ"}, "no_room")
        one = await ann.request({"type": "room_cancel", "code": b.lower()})
        assert one["code"] == b
        m = await bob.request({"type": "room_join", "code": f" {a.lower()} "})
        assert m["type"] == "match" and m["opponent"] == "ann"


async def test_one_live_match_for_a_person(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path, bot_delay_ms=0) as app:
        ann = await Peer.hello(app.port, enc, "ann")
        bob = await Peer.hello(app.port, enc, "bob")
        carl = await Peer.hello(app.port, enc, "carl")
        # ann waits in the queue and has a room; then plays a bot: both are dropped, told why
        await ann.request({"type": "queue", "pacing": "free"})
        code = (await ann.request({"type": "room_create"}))["code"]
        m = await ann.request({"type": "play_bot", "strategy": "first"})
        live = m["match_id"]
        unq = await ann.of_type("unqueued")
        assert unq["reason"] == "matched" and "ref" not in unq
        rc = await ann.of_type("room_closed")
        assert rc == {"type": "room_closed", "code": code, "reason": "matched"}
        notices = [x["type"] for x in ann.seen if x["type"] in ("unqueued", "room_closed", "match")]
        assert notices == ["unqueued", "room_closed", "match"]  # before the new match
        await bob.error({"type": "room_join", "code": code}, "unknown_room")
        # every way into a second match is refused with in_match naming the live one
        cid = (await bob.request({"type": "challenge", "opponent": "ann"}))["challenge_id"]
        offer = await ann.of_type("challenge")  # still delivered mid-match
        assert offer["challenge_id"] == cid
        bob_room = (await bob.request({"type": "room_create"}))["code"]
        for request in (
            {"type": "queue"},
            {"type": "play_bot", "strategy": "random"},
            {"type": "room_create"},
            {"type": "room_join", "code": bob_room},
            {"type": "challenge", "opponent": "carl"},
            {"type": "accept", "challenge_id": cid},
            {"type": "rematch", "match_id": live},
        ):
            err = await ann.error(request, "in_match")
            assert err["match_id"] == live, request
        assert [x for x in ann.seen if x["type"] == "match"] == [m]
        # resign, then accept: the client's choice
        await ann.request({"type": "resign", "match_id": live})
        await ann.event(live, "finished")
        m2 = await ann.request({"type": "accept", "challenge_id": cid})
        assert m2["type"] == "match" and m2["opponent"] == "bob"
        # bob's open room closed when his match started
        assert (await bob.of_type("room_closed"))["code"] == bob_room
        # a challenge reaches bob mid-match; his own challenge is refused while he plays
        cid2 = (await carl.request({"type": "challenge", "opponent": "bob"}))["challenge_id"]
        await bob.of_type("challenge", challenge_id=cid2)
        err = await bob.error({"type": "challenge", "opponent": "carl"}, "in_match")
        assert err["match_id"] == m2["match_id"]
        # programs are exempt: several matches at once
        prog = await Peer.hello(app.port, enc, "prog", bot=True)
        first = await prog.request({"type": "play_bot", "strategy": "first"})
        second = await prog.request({"type": "play_bot", "strategy": "first"})
        assert first["type"] == second["type"] == "match"
        assert first["match_id"] != second["match_id"]


async def test_rematch(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        p0, p1, mid = await pair_in_room(app, enc, rated=False)
        await p0.request({"type": "resign", "match_id": mid})
        await p1.event(mid, "finished")
        sent = await p0.request({"type": "rematch", "match_id": mid})
        assert sent == {"type": "rematch_sent", "match_id": mid, "ref": sent["ref"]}
        assert (await p1.of_type("rematch_offer")) == {"type": "rematch_offer", "match_id": mid}
        m1 = await p1.request({"type": "rematch", "match_id": mid})
        m0 = await p0.of_type("match", match_id=m1["match_id"])
        assert m1["seat"] == 0 and m0["seat"] == 1  # seats swapped
        assert m1["config"]["rated"] is False  # same terms


# -- reconnecting ----------------------------------------------------------------------------------
async def test_hello_with_token_puts_the_player_back_into_its_seat(
    tmp_path: Path, enc: str
) -> None:
    async with arena(tmp_path) as app:
        p0, p1, mid = await pair_in_room(app, enc)
        await set_secrets(p0, p1, mid)
        token = p0.welcome["token"]
        await p0.close()
        away = await p1.event(mid, "away", seat=0)
        back = await Peer.hello(app.port, enc, "x", token=token)
        listed = back.welcome["matches"]
        assert listed == [{"match_id": mid, "seat": 0, "seq": away["seq"], "phase": "playing"}]
        # without any resume: match, the events from seq 1, then back
        m = await back.of_type("match", match_id=mid)
        assert m["seat"] == 0 and m["opponent"] == p1.name and "ref" not in m
        await back.event(mid, "back", seat=0)
        await p1.event(mid, "back", seat=0)
        check_log(back.events(mid))
        # live events reach it and it sees its match end
        await p1.request({"type": "resign", "match_id": mid})
        fin = await back.event(mid, "finished")
        assert fin["winner"] == 0
        # resume stays harmless: it replays, and repeated seqs are ignored
        again = await back.request({"type": "resume", "match_id": mid, "last_seq": 2})
        assert again["type"] == "match" and again["match_id"] == mid
        replay = await back.expect(lambda x: x.get("kind") == "finished" and x is not fin)
        assert replay["seq"] == fin["seq"]
        assert [e["seq"] for e in back.events(mid)] == list(range(1, fin["seq"] + 1))


async def test_a_replaced_connection_is_invisible_to_the_opponent(
    tmp_path: Path, enc: str
) -> None:
    async with arena(tmp_path) as app:
        p0, p1, mid = await pair_in_room(app, enc)
        await set_secrets(p0, p1, mid)
        newer = await Peer.hello(app.port, enc, "x", token=p0.welcome["token"])
        assert await p0.closed() == 4001
        await newer.of_type("match", match_id=mid)
        g = await newer.request({"type": "guess", "match_id": mid, "guess": "9876"})
        assert g["kind"] == "guess"
        await p1.event(mid, "guess", seat=0)
        await p1.nothing_more(mid, {"away", "back"})
        await newer.nothing_more(mid, {"away", "back"})


async def test_not_coming_back_in_time_forfeits(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path, grace_ms=300) as app:
        p0, p1, mid = await pair_in_room(app, enc)
        await set_secrets(p0, p1, mid)
        await p0.close()
        await p1.event(mid, "away", seat=0)
        t = await p1.event(mid, "timeout")
        assert t["seat"] == 0 and t["clock"] == "grace"
        fin = await p1.event(mid, "finished")
        assert fin["winner"] == 1 and fin["reason"] == "disconnect"


# -- spectators ------------------------------------------------------------------------------------
async def test_watch_listing_and_unwatch(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        p0, p1, mid = await pair_in_room(app, enc)
        await p0.request({"type": "secret", "match_id": mid, "secret": "0123"})
        eve = await Peer.hello(app.port, enc, "eve")
        listing = await eve.request({"type": "matches"})
        (row,) = listing["matches"]
        assert row == {"match_id": mid, "players": [p0.name, p1.name], "pacing": "lockstep",
                       "rules": CLASSIC, "phase": "secrets", "counts": [0, 0]}
        w = await eve.request({"type": "watch", "match_id": mid})
        assert w["type"] == "watching" and w["match_id"] == mid and len(w["players"]) == 2
        assert w["config"]["pacing"] == "lockstep"
        secret = await eve.event(mid, "secret", seat=0)
        assert "secret" not in secret  # replayed, without the secret
        await p1.request({"type": "secret", "match_id": mid, "secret": "4567"})
        await eve.event(mid, "started")  # live
        assert (await eve.request({"type": "matches"}))["matches"][0]["phase"] == "playing"
        un = await eve.request({"type": "unwatch", "match_id": mid})
        assert un["type"] == "unwatched" and un["match_id"] == mid
        await p0.request({"type": "resign", "match_id": mid})
        await p1.event(mid, "finished")
        await eve.nothing_more(mid, {"resign", "finished"})
        # a finished match can be watched: replayed to its end, secrets revealed
        await eve.request({"type": "watch", "match_id": mid})
        fin = await eve.event(mid, "finished")
        assert fin["secrets"] == ["0123", "4567"]


# -- limits and clocks -----------------------------------------------------------------------------
async def test_open_rooms_and_challenges_are_bounded(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path) as app:
        ann = await Peer.hello(app.port, enc, "ann")
        bob = await Peer.hello(app.port, enc, "bob")
        for _ in range(3):
            assert (await ann.request({"type": "room_create"}))["type"] == "room"
        await ann.error({"type": "room_create"}, "not_available")
        for _ in range(10):
            sent = await ann.request({"type": "challenge", "opponent": "bob"})
            assert sent["type"] == "challenge_sent"
        await ann.error({"type": "challenge", "opponent": "bob"}, "not_available")
        assert (await bob.request({"type": "ping"}))["type"] == "pong"  # in order after them
        assert len([m for m in bob.seen if m["type"] == "challenge"]) == 10


async def test_guess_cap_draws_and_guess_clock_times_out(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path, guess_cap=1) as app:
        p0, p1, mid = await pair_in_room(app, enc, pacing="free")
        await set_secrets(p0, p1, mid)
        await p0.request({"type": "guess", "match_id": mid, "guess": "9876"})
        await p0.error({"type": "guess", "match_id": mid, "guess": "8765"}, "not_your_turn")
        await p1.request({"type": "guess", "match_id": mid, "guess": "9876"})
        fin = await p0.event(mid, "finished")
        assert fin["winner"] is None and fin["reason"] == "guess_cap"
        assert fin["solved"] == [False, False]
    async with arena(tmp_path / "clock", clock_guess_ms=400) as app:
        p0, p1, mid = await pair_in_room(app, enc)
        await set_secrets(p0, p1, mid)
        await p0.request({"type": "guess", "match_id": mid, "guess": "9876"})
        t = await p0.event(mid, "timeout")  # p1 owes its round-1 guess
        assert t["seat"] == 1 and t["clock"] == "guess"
        fin = await p0.event(mid, "finished")
        assert fin["winner"] == 0 and fin["reason"] == "timeout"


async def _raw_websocket(port: int, enc: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """An RFC 6455 client by hand, so that it can leave the server's Pings unanswered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Protocol: {enc}\r\n\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
    assert head.startswith(b"HTTP/1.1 101"), head
    accept = base64.b64encode(
        hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
    )
    assert b"Sec-WebSocket-Accept: " + accept in head
    return reader, writer


def _client_frame(opcode: int, payload: bytes) -> bytes:
    """One masked client frame (payloads under 126 bytes here)."""
    assert len(payload) < 126
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes((0x80 | opcode, 0x80 | len(payload))) + mask + body


async def _server_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    b0, b1 = await reader.readexactly(2)
    size = b1 & 0x7F
    if size == 126:
        size = int.from_bytes(await reader.readexactly(2), "big")
    elif size == 127:
        size = int.from_bytes(await reader.readexactly(8), "big")
    assert not b1 & 0x80  # server frames are never masked
    return b0 & 0x0F, await reader.readexactly(size)


async def test_unanswered_keepalive_ping_closes_with_1011(tmp_path: Path, enc: str) -> None:
    async with arena(tmp_path, ping_interval_s=0.3) as app:
        reader, writer = await _raw_websocket(app.port, enc)
        hello = {"type": "hello", "name": "mute", "id": 1}
        if enc == "moo.v1.json":
            writer.write(_client_frame(0x1, json.dumps(hello).encode()))
        else:
            writer.write(_client_frame(0x2, msgpack.packb(hello)))
        opcodes = []
        async with asyncio.timeout(WAIT):
            while True:
                opcode, payload = await _server_frame(reader)
                opcodes.append(opcode)
                if opcode == 0x8:  # close
                    break
        assert opcodes[0] == (0x1 if enc == "moo.v1.json" else 0x2)  # welcome
        assert 0x9 in opcodes  # a Ping came and was left unanswered
        assert int.from_bytes(payload[:2], "big") == 1011
        writer.close()
