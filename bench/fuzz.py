"""Fuzz the whole inbound path: frame -> decode -> validate -> dispatch -> match state machine.

Two modes share one frame generator:

* ``inproc`` (default): the real :func:`server.session.run_session` runs against in-memory
  WebSocket stand-ins, over a real :class:`server.app.App` with its SQLite store, so every
  frame goes through exactly the code a socket frame goes through, minus the kernel. Fast
  enough for 10**6 frames.
* ``sockets``: the same frames over real loopback WebSockets to a server in this process.

Every frame is checked for the server's promises:

* no crash: the session keeps running (a closed session is a failure unless the frame was
  meant to close it) and nothing is logged at ERROR level;
* every refusal is answered with an ``error`` whose code is a *specific* code of
  ``moo/errors.py`` (not a base-class code), echoing the frame's ``id`` as ``ref`` when sane;
* a refused frame changes nothing: the arena's and lobby's state (seq, phase, seats, queue,
  challenges, rooms, who is online, and the full per-viewer summaries of the matches the frame
  could touch) is identical before and after;
* a frame that is not refused is answered too (a reply, or its event once durable).

Why raw frames and not the SDK: most fuzzed frames are ones no client library would send
(broken encodings, wrong types, unknown fields), so they are built and sent byte for byte.

    python -m bench.fuzz --frames 1000000 --seed 1            # the long run
    python -m bench.fuzz --mode sockets --frames 20000        # over real sockets
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import random
import string
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import msgpack
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK
from websockets.protocol import State

import moo.errors as errors_module
from moo.errors import MooError
from moo.protocol import CLIENT_MESSAGES, MAX_MESSAGE_BYTES, TRANSPORT_FACTOR, Codec, Field
from server.app import App
from server.connection import Connection
from server.lobby import Lobby
from server.review_worker import TIME_LIMIT_S as ANALYSIS_LIMIT_S
from server.session import run_session
from server.settings import Settings

JSON, MSGPACK = "moo.v1.json", "moo.v1.msgpack"
#: Codes of the base classes: a refusal must be more specific than these.
GENERIC_CODES = {"error", "bad_message", "match_error", "lobby_error"}
SPECIFIC_CODES = {
    cls.code
    for cls in vars(errors_module).values()
    if isinstance(cls, type) and issubclass(cls, MooError)
} - GENERIC_CODES

#: Requests that docs/protocol.md lets succeed without a reply to the sender: none (even
#: ``decline`` answers ``declined`` to the decliner).
SILENT_WHEN_ACCEPTED: set[str] = set()

WEIRD_STRINGS = [
    "",
    " ",
    "\x00",
    "😀" * 8,
    "\u202eevil",
    "\u200b\u200b",
    "ｆｕｌｌ",
    "١٢٣٤",
    "a" * 65,
    "a" * 200,
    "名前",
    "\ud800",
    "\udfff x",
    "null",
    "0123\n",
    "<script>",
    "' OR 1=1 --",
    "%s%n",
]
WEIRD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**31,
    2**53,
    2**63,
    -(2**63),
    2**64 - 1,
    1.5,
    float("inf"),
    [],
    {},
    [1, [2, [3]]],
    {"a": {"b": 1}},
    b"\x00\x01",
]


class Violation(AssertionError):
    """A broken promise, with the frame that broke it."""


@dataclasses.dataclass
class Stats:
    frames: int = 0
    refused: int = 0
    accepted: int = 0
    by_label: Counter[str] = dataclasses.field(default_factory=Counter)
    by_code: Counter[str] = dataclasses.field(default_factory=Counter)
    violations: list[str] = dataclasses.field(default_factory=list)
    harness_errors: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        rate = self.frames / self.seconds if self.seconds else 0.0
        return (
            f"{self.frames} frames in {self.seconds:.1f} s ({rate:.0f}/s): "
            f"{self.refused} refused, {self.accepted} accepted, "
            f"{len(self.violations)} violations, {len(self.harness_errors)} harness errors"
        )


# -- the generator --------------------------------------------------------------------------
class World:
    """What the generator may aim at: names and ids that exist (or nearly do)."""

    def __init__(self) -> None:
        self.own_matches: dict[str, list[str]] = {}
        self.other_matches: dict[str, list[str]] = {}
        self.finished: list[str] = []
        self.names: list[str] = []
        self.challenges: list[str] = []
        self.rooms: list[str] = []


class FrameGen:
    """Frames for one session: valid, nearly valid, and garbage, deterministically seeded."""

    def __init__(self, rng: random.Random, world: World) -> None:
        self.rng = rng
        self.world = world
        self.kinds: list[tuple[str, Callable[[str, Codec], tuple[str | bytes, str]]]] = [
            ("game", self.game),
            ("game", self.game),
            ("game", self.game),
            ("schema", self.schema_valid),
            ("mutated", self.mutated),
            ("mutated", self.mutated),
            ("mutated", self.mutated),
            ("truncated", self.truncated),
            ("bitflip", self.bitflip),
            ("random", self.random_frame),
            ("oversized", self.oversized),
            ("deep", self.deep),
            ("quirks", self.quirks),
            ("wrong_frame_type", self.wrong_frame_type),
        ]

    def frame(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        label, make = self.rng.choice(self.kinds)
        frame, sub = make(player, codec)
        return frame, f"{label}:{sub}" if sub else label

    # -- encoding helpers
    def encode(self, codec: Codec, msg: Any) -> str | bytes:
        if codec.binary:
            return bytes(
                msgpack.packb(
                    msg,
                    use_bin_type=self.rng.random() < 0.9,
                    unicode_errors="surrogatepass",  # lone surrogates become invalid UTF-8
                )
            )
        text = json.dumps(msg, ensure_ascii=self.rng.random() < 0.5)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # A text frame on the wire is valid UTF-8 (websockets checks), so a lone surrogate
            # can only arrive escaped: "\ud800".
            text = json.dumps(msg, ensure_ascii=True)
        return text

    def text(self) -> str:
        r = self.rng.random()
        if r < 0.3:
            return self.rng.choice(WEIRD_STRINGS)
        if r < 0.6:
            alphabet = string.printable + "éß漢字😀\u0301\u200d"
            return "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(0, 20)))
        return "".join(self.rng.choice("0123456789") for _ in range(self.rng.randint(0, 6)))

    def match_id(self, player: str) -> str:
        w, r = self.world, self.rng.random()
        own, other = w.own_matches.get(player, []), w.other_matches.get(player, [])
        if r < 0.55 and own:
            return self.rng.choice(own)
        if r < 0.7 and other:
            return self.rng.choice(other)
        if r < 0.8 and w.finished:
            return self.rng.choice(w.finished)
        if r < 0.9:
            return "m" + "".join(self.rng.choice("0123456789abcdef") for _ in range(12))
        return self.text()[:40]

    def code(self) -> str:
        r = self.rng.random()
        if r < 0.6:
            return "".join(self.rng.sample("0123456789", 4))
        if r < 0.7:
            return " " + "".join(self.rng.sample("0123456789", 4)) + " "
        return self.text()[:16]

    def value_for(self, player: str, name: str, spec: Field) -> Any:
        if name == "match_id":
            return self.match_id(player)
        if name in ("secret", "guess"):
            return self.code()
        if name in ("opponent",) and self.world.names and self.rng.random() < 0.7:
            return self.rng.choice(self.world.names)
        if name == "challenge_id" and self.world.challenges and self.rng.random() < 0.5:
            return self.rng.choice(self.world.challenges)
        if name == "code" and self.world.rooms and self.rng.random() < 0.5:
            return self.rng.choice(self.world.rooms)
        if name == "strategy":
            return self.rng.choice(["random", "nope", "bots.base:Strategy", self.text()])
        if spec.choices:
            return self.rng.choice(spec.choices)
        if spec.type is bool:
            return self.rng.random() < 0.5
        if spec.type is int:
            return self.rng.choice([0, 1, 5, 1000, spec.max])
        return self.text()[: spec.max_len]

    def message(self, player: str, kinds: list[str] | None = None) -> dict[str, Any]:
        kind = self.rng.choice(kinds or list(CLIENT_MESSAGES))
        msg: dict[str, Any] = {"type": kind}
        for name, spec in CLIENT_MESSAGES[kind].items():
            if spec.required or self.rng.random() < 0.5:
                msg[name] = self.value_for(player, name, spec)
        if self.rng.random() < 0.8:
            msg["id"] = self.rng.choice([self.rng.randint(0, 10**6), f"r{self.rng.randint(0, 99)}"])
        return msg

    # -- frame families
    def game(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        """Well-formed match traffic, aimed at own, other, finished and unknown matches."""
        kinds = ["guess", "guess", "guess", "secret", "resign", "resume", "watch", "unwatch"]
        msg = self.message(player, kinds)
        if msg["type"] == "resign" and self.rng.random() < 0.9:
            msg["match_id"] = "m-nope"  # keep matches alive long enough to be useful
        return self.encode(codec, msg), msg["type"]

    def schema_valid(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        msg = self.message(player, [k for k in CLIENT_MESSAGES if k not in ("resign",)])
        return self.encode(codec, msg), msg["type"]

    def mutated(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        msg = self.message(player)
        how = self.rng.choice(
            ["drop", "unknown_field", "wrong_type", "weird_id", "weird_type", "non_str_key",
             "not_a_map"]
        )
        fields = [k for k in msg if k != "type"]
        if how == "drop" and fields:
            del msg[self.rng.choice(fields)]
        elif how == "unknown_field":
            msg[self.rng.choice(["x", "secret", "seat", "__proto__", self.text()])] = 1
        elif how == "wrong_type" and fields:
            msg[self.rng.choice(fields)] = self.rng.choice([*WEIRD_VALUES, self.text()])
        elif how == "weird_id":
            msg["id"] = self.rng.choice(WEIRD_VALUES + WEIRD_STRINGS)
        elif how == "weird_type":
            msg["type"] = self.rng.choice(WEIRD_VALUES + WEIRD_STRINGS + ["GUESS", "guess "])
        elif how == "non_str_key" and codec.binary:
            msg[self.rng.choice([1, -5, 2.5, b"k", None, True])] = "v"  # type: ignore[index]
        elif how == "not_a_map":
            return self.encode(codec, self.rng.choice([list(msg.items()), msg["type"], 7])), how
        if not codec.binary:
            msg = {str(k): v for k, v in msg.items()}
            msg = json.loads(json.dumps(msg, default=lambda b: list(b)))
        return self.encode(codec, msg), how

    def truncated(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        frame = self.encode(codec, self.message(player))
        return frame[: self.rng.randint(0, max(0, len(frame) - 1))], ""

    def bitflip(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        encoded = self.encode(codec, self.message(player))
        data = bytearray(
            encoded.encode("utf-8", "surrogatepass") if isinstance(encoded, str) else encoded
        )
        for _ in range(self.rng.randint(1, 4)):
            if data:
                data[self.rng.randrange(len(data))] ^= 1 << self.rng.randrange(8)
        if codec.binary:
            return bytes(data), ""
        return data.decode("utf-8", errors="replace"), ""

    def random_frame(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        n = self.rng.choice([0, 1, 2, 8, 64, 512, 4096])
        raw = self.rng.randbytes(self.rng.randint(0, n))
        if codec.binary:
            return raw, "bytes"
        return raw.decode("utf-8", errors="replace"), "text"

    def oversized(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        msg = self.message(player)
        # half just over the message limit (too_large, the connection goes on), half over the
        # transport ceiling (closed with 1009)
        ceiling = MAX_MESSAGE_BYTES * TRANSPORT_FACTOR
        if self.rng.random() < 0.5:
            msg["pad"] = "x" * self.rng.randint(MAX_MESSAGE_BYTES - 40, MAX_MESSAGE_BYTES * 2)
        else:
            msg["pad"] = "x" * self.rng.randint(ceiling, ceiling + MAX_MESSAGE_BYTES)
        return self.encode(codec, msg), ""

    def deep(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        depth = self.rng.choice([50, 500, 1000, 2000, 4000])
        if codec.binary:
            return b"\x91" * depth + b"\xc0", ""
        if self.rng.random() < 0.5:
            return "[" * depth + "]" * depth, "list"
        return '{"type":' * depth + "1" + "}" * depth, "map"

    def quirks(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        if codec.binary:
            options: list[bytes] = [
                b"\xc1",  # never used
                b"\xd4\x01\x00",  # ext type
                b"\x81\xa4type\xc7\x01\x05\x00",  # map with ext value
                b"\x82\xa4type\xa4ping\xa4type\xa4pong",  # duplicate keys
                b"\xdf\xff\xff\xff\xff",  # map claiming 4 G entries
                b"\xdb\xff\xff\xff\xff",  # str claiming 4 GB
                b"\x81\xa4type\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00",  # NaN type
                b"\x81\xa4type\xa4ping\x00",  # trailing garbage
            ]
            return self.rng.choice(options), ""
        texts = [
            '{"type":"ping","id":NaN}',
            '{"type":"ping","id":Infinity}',
            '{"type":"ping","id":1e999}',
            '{"type":"ping","id":-0}',
            '{"type":"ping","id":1.0}',
            '{"type":"ping","type":"guess"}',
            '\ufeff{"type":"ping"}',
            '{"type":"ping"} trailing',
            '{"type":"ping","id":"\\ud800"}',
            '{"type":"\\u0000ping"}',
            '{"type":"ping","id":' + "9" * 4000 + "}",
            "null",
            '"ping"',
            "",
        ]
        return self.rng.choice(texts), ""

    def wrong_frame_type(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        msg = self.message(player)
        if codec.binary:
            return json.dumps(msg), ""
        return bytes(msgpack.packb(msg, unicode_errors="surrogatepass")), ""


# -- in-process transport -------------------------------------------------------------------
class _MemoryProtocol:
    """The part of websockets' sans-I/O protocol object the server writes frames through."""

    def __init__(self, ws: MemoryWebSocket) -> None:
        self.ws = ws
        self.writes: list[bytes] = []  # control frames websockets would have queued: none

    @property
    def state(self) -> State:
        return State.OPEN if self.ws.closed is None else State.CLOSED

    def send_text(self, data: bytes) -> None:
        self.ws.sent.append(data.decode("utf-8"))

    def send_binary(self, data: bytes) -> None:
        self.ws.sent.append(bytes(data))

    def send_ping(self, data: bytes) -> None:
        """A live client's WebSocket stack answers a keepalive Ping by itself: so does this
        one, at once (a long run under load outlasts the ping interval, and an unanswered Ping
        would close the connection with 1011 in the middle of the fuzzing)."""
        self.ws.pending_pings.pop(data, None)

    def data_to_send(self) -> list[bytes]:
        return []


class _MemoryTransport:
    """Takes the server's raw WebSocket frames and files their payloads as the client sees them."""

    def __init__(self, sent: list[str | bytes]) -> None:
        self.sent = sent

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: bytes) -> None:
        at = 0
        while at < len(data):
            first, size = data[at], data[at + 1] & 0x7F
            at += 2
            if size >= 126:
                width = 2 if size == 126 else 8
                size = int.from_bytes(data[at : at + width], "big")
                at += width
            payload = bytes(data[at : at + size])
            at += size
            if first == 0x81:
                self.sent.append(payload.decode("utf-8"))  # raises on lone surrogates
            elif first == 0x82:
                self.sent.append(payload)
            else:
                raise AssertionError(f"unexpected frame {first:#x} from the server")


class MemoryWebSocket:
    """Stands in for ``websockets``' ServerConnection: what a session and its connection use
    (``recv``, ``close``, ``subprotocol``, and ``protocol``/``transport`` for writing)."""

    def __init__(self, subprotocol: str) -> None:
        self.subprotocol = subprotocol
        self.inbox: asyncio.Queue[str | bytes | None] = asyncio.Queue()
        self.sent: list[str | bytes] = []
        self.waiting = asyncio.Event()
        self.closed: tuple[int, str] | None = None
        self.protocol = _MemoryProtocol(self)
        self.transport = _MemoryTransport(self.sent)
        # what the session and the heartbeat touch on a real connection
        self.request = self.response = None
        self.pending_pings: dict[bytes, object] = {}

    async def recv(self) -> str | bytes:
        self.waiting.set()
        frame = await self.inbox.get()
        self.waiting.clear()
        if frame is None or self.closed is not None:
            raise ConnectionClosedOK(None, None)
        return frame

    async def send(self, frame: str | bytes) -> None:
        if self.closed is not None:
            raise ConnectionClosedOK(None, None)
        if isinstance(frame, str):
            self.protocol.send_text(frame.encode("utf-8"))  # raises on lone surrogates
        else:
            self.protocol.send_binary(frame)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.closed is None:
            self.closed = (code, reason)
            self.inbox.put_nowait(None)


def _stuck(conn: Connection | None) -> bool:
    """Frames wait for a connection that will never send them (its flush/writer failed)."""
    if conn is None:
        return False
    writer = getattr(conn, "_writer", None)
    if writer is not None:
        return bool(writer.done())
    pending = getattr(conn, "_pending", None)
    return bool(pending) and not getattr(conn, "_scheduled", False)


def _queued(conn: Connection | None) -> bool:
    """Frames that will still go out without anyone doing anything."""
    if conn is None or _stuck(conn):
        return False
    queue = getattr(conn, "_queue", None)
    if queue is not None:
        return len(queue) > 0
    return bool(getattr(conn, "_pending", None))


class Session:
    """One client of the in-process server: its socket, its codec, its task."""

    def __init__(self, app: App, name: str, subprotocol: str) -> None:
        self.app = app
        self.name = name
        self.codec = Codec(subprotocol)
        self.ws = MemoryWebSocket(subprotocol)
        self.task = asyncio.get_running_loop().create_task(run_session(app, self.ws))  # type: ignore[arg-type]
        self.token: str | None = None

    @property
    def conn(self) -> Connection | None:
        for c in self.app.connections:
            if c.ws is self.ws:  # type: ignore[comparison-overlap]
                return c
        return None

    def decoded(self, start: int = 0) -> list[dict[str, Any]]:
        return [self.codec.decode(f) for f in self.ws.sent[start:]]

    async def settle(self, timeout: float = 5.0) -> None:
        """Until the session waits for its next frame and its writer has sent everything."""
        async with asyncio.timeout(timeout):
            while True:
                await asyncio.sleep(0)
                if self.task.done():
                    return
                if self.ws.waiting.is_set() and self.ws.inbox.empty() and not self.queued():
                    await asyncio.sleep(0)
                    if self.ws.waiting.is_set() and not self.queued():
                        return

    def queued(self) -> bool:
        return _queued(self.conn)

    async def feed(self, frame: str | bytes, timeout: float = 5.0) -> None:
        self.ws.waiting.clear()
        self.ws.inbox.put_nowait(frame)
        await self.settle(timeout)

    async def request(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A well-formed request from the harness itself; returns the reply with its ref."""
        ref = f"h{id(msg)}"
        start = len(self.ws.sent)
        await self.feed(self.codec.encode({**msg, "id": ref}))
        async with asyncio.timeout(5):
            while True:
                for m in self.decoded(start):
                    if m.get("ref") == ref:
                        return m
                await asyncio.sleep(0.001)


class InProcessFuzzer:
    """Drives sessions of a real App with generated frames and checks every promise."""

    PLAYERS = (("ann", JSON), ("bob", MSGPACK), ("cat", MSGPACK), ("dan", JSON))

    def __init__(self, seed: int, db_dir: Path) -> None:
        self.rng = random.Random(seed)
        self.world = World()
        self.gen = FrameGen(self.rng, self.world)
        self.db_dir = db_dir
        self.stats = Stats()
        self.sessions: dict[str, Session] = {}
        self.errors_logged: list[str] = []

    async def start(self) -> None:
        settings = Settings(
            host="127.0.0.1",
            port=0,
            db=str(self.db_dir / "fuzz.sqlite3"),
            sqlite_synchronous="OFF",
            commit_window_ms=0.0,
            rate_per_s=1e9,
            rate_burst=10**9,
            secret_ms=0,
            grace_ms=10**9,
            idle_timeout_s=10**6,
            handshake_timeout_s=10**6,
            bot_delay_ms=10**9,  # hosted bots never move inside a run: no state change by timer
            argon2_time_cost=1,  # fuzzed set_password frames: hash cheaply
            argon2_memory_kib=64,
            argon2_parallelism=1,
            send_queue_max=10**6,
            static_dir=str(self.db_dir / "web"),
        )
        self.app = App(settings)
        await self.app.start()
        asyncio.get_running_loop().set_exception_handler(_loop_error)
        handler = _ErrorCollector(self.errors_logged)
        logging.getLogger("moo").addHandler(handler)
        for name, sub in self.PLAYERS:
            await self.connect(name, sub)
        self.world.names = [n for n, _ in self.PLAYERS] + ["nobody", "ANN", "random-bot"]
        await self.refresh_matches()

    async def stop(self) -> None:
        for s in self.sessions.values():
            await s.ws.close()
        await self.app.stop()

    async def connect(self, name: str, sub: str) -> Session:
        old = self.sessions.get(name)
        s = Session(self.app, name, sub)
        # programs (bot: true): the fuzzer keeps several matches per pair going at once, which
        # docs/protocol.md allows programs only (a person plays one live match at a time)
        hello: dict[str, Any] = {"type": "hello", "name": name, "bot": True}
        if old is not None:
            for m in old.decoded():  # a fuzzed sign_out_all rotated the token
                if m.get("type") == "signed_out":
                    old.token = m["token"]
        if old is not None and old.token:
            hello["token"] = old.token
        welcome = await s.request(hello)
        assert welcome["type"] == "welcome", welcome
        s.token = welcome.get("token") or (old.token if old else None)
        self.sessions[name] = s
        return s

    # -- keeping interesting targets around
    async def new_match(self, a: str, b: str, pacing: str, secrets: bool) -> str:
        sa, sb = self.sessions[a], self.sessions[b]
        # The fuzzer's own challenges pile up (a player may have 10 open): answer them first.
        for cid, ch in list(cast(Lobby, self.app.lobby).challenges.items()):
            target = self.sessions.get(ch.target)
            if target is not None and ch.source_name == a:
                await target.feed(target.codec.encode({"type": "decline", "challenge_id": cid}))
        sent = await sa.request({"type": "challenge", "opponent": b, "pacing": pacing})
        assert sent["type"] == "challenge_sent", sent
        reply = await sb.request({"type": "accept", "challenge_id": sent["challenge_id"]})
        assert reply["type"] == "match", reply
        mid = str(reply["match_id"])
        await self.barrier()
        if secrets:
            for s in (sa, sb):
                r = await s.request({"type": "secret", "match_id": mid, "secret": "0123"})
                assert r.get("type") == "event", r
        return mid

    async def refresh_matches(self) -> None:
        """Keep each pair in a match in the secrets phase and one in play; retire the rest."""
        arena = self.app.arena
        for ids in list(self.world.own_matches.values()):
            for mid in ids:
                if mid not in arena.live and mid not in self.world.finished:
                    self.world.finished.append(mid)
        self.world.finished = self.world.finished[-20:]
        for name in self.sessions:
            mine = sorted(arena.by_player.get(name, ()))
            for mid in mine[:-6]:  # bound the number of live matches a player sits in
                if mid in arena.live:
                    await self.sessions[name].request({"type": "resign", "match_id": mid})
        for a, b in (("ann", "bob"), ("cat", "dan")):
            phases = [
                arena.live[m].match.phase
                for m in arena.by_player.get(a, ())
                if m in arena.live and arena.live[m].match.seat_of(b) is not None
            ]
            if "secrets" not in phases:
                await self.new_match(a, b, self.rng.choice(["lockstep", "free"]), False)
            if "playing" not in phases:
                await self.new_match(a, b, self.rng.choice(["lockstep", "free"]), True)
        await self.barrier()
        for name in self.sessions:
            own = sorted(m for m in arena.by_player.get(name, ()) if m in arena.live)
            self.world.own_matches[name] = own
            self.world.other_matches[name] = sorted(set(arena.live) - set(own))
        self.world.challenges = sorted(cast(Lobby, self.app.lobby).challenges)
        self.world.rooms = sorted(cast(Lobby, self.app.lobby).rooms)

    async def barrier(self) -> None:
        """Everything appended so far is committed and its callbacks have run."""
        await self.app.store.player_by_token("barrier")
        for s in self.sessions.values():
            await s.settle()

    # -- the checks
    def snapshot(self, player: str, frame_match: Any) -> Any:
        arena, lobby = self.app.arena, cast(Lobby, self.app.lobby)
        live = tuple(
            (
                mid,
                lm.match.seq,
                lm.match.phase,
                tuple(id(c) for c in lm.conns),
                tuple(sorted(id(c) for c in lm.spectators)),
            )
            for mid, lm in sorted(arena.live.items())
        )
        deep_ids = set(arena.by_player.get(player, ()))
        if isinstance(frame_match, str):
            deep_ids.add(frame_match)
        deep = tuple(
            _state(arena.live[mid].match) for mid in sorted(m for m in deep_ids if m in arena.live)
        )
        lobby_state = (
            tuple((w.player, w.pool, w.pacing) for w in lobby.queue),
            tuple(sorted(lobby.challenges)),
            tuple(sorted(lobby.rooms)),
            tuple(sorted(lobby.online)),
            tuple(sorted((k, tuple(sorted(v))) for k, v in arena.by_player.items())),
            tuple(sorted(arena.recent)),
            tuple(sorted((m, tuple(sorted(w))) for m, w in lobby.wishes.items())),
        )
        return live, deep, lobby_state

    async def one(self, player: str) -> None:
        s = self.sessions[player]
        frame, label = self.gen.frame(player, s.codec)
        probe = _probe(s.codec, frame)
        before = self.snapshot(player, probe.get("match_id"))
        start = len(s.ws.sent)
        # An analysis runs the exact solver in a child process (server/review_worker.py): its
        # session waits for it, up to the documented limit, and is stuck only past that.
        wait = ANALYSIS_LIMIT_S + 10.0 if probe.get("type") == "analysis" else 5.0
        try:
            await s.feed(frame, timeout=wait)
        except TimeoutError:
            self.stats.frames += 1
            self.stats.violations.append(f"[{label}] session stuck; frame={frame[:200]!r}")
            await self.connect(player, s.codec.subprotocol)
            return
        replies = s.decoded(start)
        self.stats.frames += 1
        self.stats.by_label[label.split(":")[0]] += 1
        problem = None
        if s.task.done():
            problem = f"session ended: {s.task.exception() if not s.task.cancelled() else ''}"
        errs = [r for r in replies if r.get("type") == "error"]
        if errs:
            self.stats.refused += 1
            err = errs[0]
            self.stats.by_code[err.get("code", "?")] += 1
            after = self.snapshot(player, probe.get("match_id"))
            if err.get("code") not in SPECIFIC_CODES:
                problem = f"unspecific error code {err.get('code')!r}"
            elif after != before:
                problem = f"refused ({err.get('code')}) but state changed: {_diff(before, after)}"
            elif _sane_id(probe.get("id")) and err.get("ref") != probe.get("id"):
                problem = f"error without ref {probe.get('id')!r}: {err}"
        elif problem is None:
            self.stats.accepted += 1
            # Let whatever the frame started become durable (and its callbacks run), so the
            # next frame's before/after comparison sees only that frame's doing.
            await self.barrier()
            kind = probe.get("type")
            silent = isinstance(kind, str) and kind in SILENT_WHEN_ACCEPTED
            if not s.decoded(start) and not silent:
                problem = "no answer at all"
        if _LOOP_ERRORS:
            self.errors_logged.extend(_LOOP_ERRORS)
            _LOOP_ERRORS.clear()
        if self.errors_logged:
            problem = (problem or "") + f" server logged: {self.errors_logged[:3]}"
            self.errors_logged.clear()
        if problem is None and _stuck(s.conn):
            problem = "the connection can no longer send (its flush/writer failed)"
        if problem:
            self.stats.violations.append(f"[{label}] {problem}; frame={frame[:1000]!r}")
            await self.repair(player)

    async def repair(self, player: str) -> None:
        """After a violation: a fresh session for that player, so the run goes on."""
        old = self.sessions[player]
        if old.task.done() or old.ws.closed is not None or _stuck(old.conn):
            await old.ws.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await old.task  # its teardown (detach, leave) happens now, not mid-frame
            new = await self.connect(player, old.codec.subprotocol)
            # What a real client does after reconnecting: resume every match it sits in.
            for mid in sorted(self.app.arena.by_player.get(player, ())):
                await new.request({"type": "resume", "match_id": mid, "last_seq": 0})
        else:
            await old.settle()

    async def run(self, frames: int, duration: float | None = None) -> Stats:
        t0 = time.monotonic()
        names = [n for n, _ in self.PLAYERS]
        while self.stats.frames < frames:
            if self.stats.frames % 500 == 0:
                await self.refresh_matches()
                if duration is not None and time.monotonic() - t0 > duration:
                    break
            try:
                await self.one(self.rng.choice(names))
            except Exception as exc:  # a bug of the harness must not end a long run unseen
                self.stats.harness_errors.append(repr(exc)[:200])
                if len(self.stats.harness_errors) > 100:
                    raise
        await self.barrier()
        self.stats.seconds = time.monotonic() - t0
        return self.stats


#: Exceptions nobody handled (asyncio's "Exception in callback ..."), from any world.
_LOOP_ERRORS: list[str] = []


def _loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    exc = context.get("exception")
    _LOOP_ERRORS.append(f"unhandled in event loop: {context.get('message')}: {exc!r}"[:300])


class _ErrorCollector(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(level=logging.ERROR)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        cause = f": {record.exc_info[1]!r}" if record.exc_info else ""
        self.sink.append((record.getMessage() + cause)[:300])


def _state(m: Any) -> str:
    """Everything a match's replay produces (the seats in full, phase, result, clocks)."""
    return repr(
        (m.seats, m.phase, m.rounds_done, m.result, m.secret_deadline, m.last_at, len(m.events))
    )


def _diff(before: Any, after: Any) -> str:
    """The first differing leaf of two snapshots, short enough for a report line."""
    if isinstance(before, tuple) and isinstance(after, tuple) and len(before) == len(after):
        for b, a in zip(before, after):
            if b != a:
                return _diff(b, a)
    if isinstance(before, str) and isinstance(after, str):
        i = next((i for i, (x, y) in enumerate(zip(before, after)) if x != y), 0)
        return f"{before[max(0, i - 60) : i + 60]!r} -> {after[max(0, i - 60) : i + 60]!r}"
    return f"{str(before)[:160]} -> {str(after)[:160]}"


def _probe(codec: Codec, frame: str | bytes) -> dict[str, Any]:
    """The frame's id, type and match_id as the harness can see them (nothing if undecodable)."""
    with contextlib.suppress(Exception):
        value = codec.decode(frame)
        if isinstance(value, dict):
            return {k: value[k] for k in ("id", "type", "match_id") if k in value}
    return {}


def _sane_id(rid: Any) -> bool:
    return (isinstance(rid, str) and len(rid) <= 64) or (
        isinstance(rid, int) and not isinstance(rid, bool) and 0 <= rid < 2**53
    )


async def fuzz_inproc(
    frames: int, seed: int, duration: float | None = None, worlds: int = 1
) -> Stats:
    """``worlds`` independent servers fuzzed concurrently (seeds seed, seed+1, ...).

    Most of a frame's time is spent waiting (the store's writer thread, the writer task), so
    several independent worlds in one event loop multiply throughput without sharing state.
    """
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="moo-fuzz-") as tmp:
        fuzzers = []
        for i in range(worlds):
            (Path(tmp) / str(i)).mkdir()
            fuzzers.append(InProcessFuzzer(seed + i, Path(tmp) / str(i)))
        try:
            for f in fuzzers:
                await f.start()
            share = -(-frames // worlds)
            parts = await asyncio.gather(*(f.run(share, duration) for f in fuzzers))
        finally:
            for f in fuzzers:
                with contextlib.suppress(Exception):
                    await f.stop()
    total = Stats()
    for part in parts:
        total.frames += part.frames
        total.refused += part.refused
        total.accepted += part.accepted
        total.by_label.update(part.by_label)
        total.by_code.update(part.by_code)
        total.violations.extend(part.violations)
        total.harness_errors.extend(part.harness_errors)
    total.seconds = time.monotonic() - t0
    return total


# -- over real sockets ------------------------------------------------------------------------
async def fuzz_sockets(frames: int, seed: int, reply_timeout: float = 5.0) -> Stats:
    """The same generator over loopback WebSockets: every frame answered or closed for cause."""
    from websockets.asyncio.client import connect

    rng = random.Random(seed)
    world = World()
    gen = FrameGen(rng, world)
    stats = Stats()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="moo-fuzz-") as tmp:
        settings = Settings(
            host="127.0.0.1",
            port=0,
            db=str(Path(tmp) / "fuzz.sqlite3"),
            sqlite_synchronous="OFF",
            rate_per_s=1e9,
            rate_burst=10**9,
            secret_ms=0,
            bot_delay_ms=10**9,
            argon2_time_cost=1,  # fuzzed set_password frames: hash cheaply
            argon2_memory_kib=64,
            argon2_parallelism=1,
            static_dir=str(Path(tmp) / "web"),
        )
        app = App(settings)
        await app.start()
        logged: list[str] = []
        logging.getLogger("moo").addHandler(_ErrorCollector(logged))
        try:
            clients: dict[str, Any] = {}
            tokens: dict[str, str] = {}
            names = [("ann", JSON), ("bob", MSGPACK)]
            world.names = ["ann", "bob", "nobody"]

            async def dial(name: str, sub: str) -> Any:
                ws = await connect(
                    f"ws://127.0.0.1:{app.port}/", subprotocols=[sub], max_size=None  # type: ignore[list-item]
                )
                codec = Codec(sub)
                hello: dict[str, Any] = {"type": "hello", "name": name, "id": 0, "bot": True}
                if name in tokens:
                    hello["token"] = tokens[name]
                await ws.send(codec.encode(hello))
                welcome = codec.decode(await ws.recv())
                assert welcome["type"] == "welcome", welcome
                tokens.setdefault(name, welcome.get("token"))
                return ws

            for name, sub in names:
                clients[name] = await dial(name, sub)
            sent = 0
            while sent < frames:
                name, sub = rng.choice(names)
                codec = Codec(sub)
                frame, label = gen.frame(name, codec)
                ws = clients[name]
                raw = frame.encode("utf-8", "surrogatepass") if isinstance(frame, str) else frame
                size = len(raw)
                sent += 1
                stats.frames += 1
                stats.by_label[label.split(":")[0]] += 1
                try:
                    await ws.send(frame)
                    async with asyncio.timeout(reply_timeout):
                        reply = codec.decode(await ws.recv())
                except UnicodeEncodeError:
                    stats.by_code["(client cannot send)"] += 1
                    continue
                except Exception as exc:
                    code = getattr(getattr(exc, "rcvd", None), "code", None)
                    if size > MAX_MESSAGE_BYTES * TRANSPORT_FACTOR and code == 1009:
                        stats.refused += 1
                        stats.by_code["close 1009"] += 1
                    else:
                        stats.violations.append(
                            f"[{label}] {type(exc).__name__} close={code}; frame={frame[:120]!r}"
                        )
                    clients[name] = await dial(name, sub)
                    continue
                # drain anything else already queued (events of accepted actions)
                with contextlib.suppress(TimeoutError, ConnectionClosed):
                    async with asyncio.timeout(0.002):
                        while True:
                            await ws.recv()
                if ws.close_code is not None:  # closed right after what it had queued
                    if size > MAX_MESSAGE_BYTES * TRANSPORT_FACTOR and ws.close_code == 1009:
                        stats.by_code["close 1009"] += 1
                    else:
                        stats.violations.append(
                            f"[{label}] closed {ws.close_code}; frame={frame[:1000]!r}"
                        )
                    clients[name] = await dial(name, sub)
                if reply.get("type") == "signed_out":  # sign_out_all rotated the token
                    tokens[name] = reply["token"]
                if reply.get("type") == "error":
                    stats.refused += 1
                    stats.by_code[reply.get("code")] += 1
                    if reply.get("code") not in SPECIFIC_CODES:
                        stats.violations.append(f"[{label}] unspecific {reply}")
                else:
                    stats.accepted += 1
                if logged:
                    stats.violations.append(f"[{label}] server logged {logged[:2]}")
                    logged.clear()
            for ws in clients.values():
                await ws.close()
            health_ok = app.health()["status"] == "ok"
            if not health_ok:
                stats.violations.append("server unhealthy after the run")
        finally:
            await app.stop()
    stats.seconds = time.monotonic() - t0
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["inproc", "sockets"], default="inproc")
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--duration", type=float, default=None, help="stop after this many s")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--worlds", type=int, default=4, help="independent servers at once")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    parser.add_argument("--reply-timeout", type=float, default=5.0, help="sockets mode: s")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    if args.mode == "inproc":
        stats = asyncio.run(fuzz_inproc(args.frames, args.seed, args.duration, args.worlds))
    else:
        stats = asyncio.run(fuzz_sockets(args.frames, args.seed, args.reply_timeout))
    print(stats.line())
    print("families:", dict(stats.by_label.most_common()))
    print("refusals:", dict(stats.by_code.most_common()))
    for v in stats.violations[:50]:
        print("VIOLATION", v)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "mode": args.mode,
                    "seed": args.seed,
                    "frames": stats.frames,
                    "refused": stats.refused,
                    "accepted": stats.accepted,
                    "seconds": round(stats.seconds, 1),
                    "violations": stats.violations,
                    "harness_errors": stats.harness_errors,
                    "families": dict(stats.by_label),
                    "codes": dict(stats.by_code),
                },
                indent=1,
            )
        )
    return 1 if stats.violations or stats.harness_errors else 0


if __name__ == "__main__":
    sys.exit(main())
