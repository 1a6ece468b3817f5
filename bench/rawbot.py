"""SDK-less load for the hardening runs: raw-WebSocket bots, spectators and a server process.

Why a client of its own, when the SDK (``clients.sdk.Client``) is the project's one protocol
client: raw speed and raw sight. The fault and soak runs drive hundreds of bots from one
process on a 2-core machine that also runs the server under test; the SDK's typed parsing,
per-match state folding, client-side pacing and automatic resume would cost that process CPU
the measurements are about, and would hide from the run what it checks (every close code, every
acknowledged guess as the server sent it). So these bots speak the wire protocol
(docs/protocol.md) with ``websockets`` and the codecs only, and test what the server promises to
any client. A bot keeps its token, survives the server going away (it reconnects
and ``resume``-s from the highest ``seq`` it applied), and records every guess the server
acknowledged, so a fault run can prove none was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import random
import re
import signal
import socket
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from moo.protocol import Codec
from moo.rules import DEFAULT_RULES, score

ROOT = Path(__file__).resolve().parent.parent
JSON, MSGPACK = "moo.v1.json", "moo.v1.msgpack"
LISTENING = re.compile(rb"listening on ws://[^:]+:(\d+)/")
ALL_CODES = DEFAULT_RULES.secrets


class Gone(Exception):
    """The connection is gone (server killed, restarting, or closed us)."""


class RawClient:
    """One WebSocket with a reader task; messages are kept so waiters can scan them."""

    _ids = itertools.count(1)

    def __init__(self, url: str, name: str, subprotocol: str = JSON) -> None:
        self.url = url
        self.name = name
        self.codec = Codec(subprotocol)
        self.subprotocol = subprotocol
        self.token: str | None = None
        self.ws: ClientConnection | None = None
        self.msgs: list[dict[str, Any]] = []
        self.changed = asyncio.Event()
        self.reader: asyncio.Task[None] | None = None
        self.close_code: int | None = None
        self.welcome: dict[str, Any] = {}

    async def connect(self, timeout: float = 10.0) -> dict[str, Any]:
        await self.drop()
        async with asyncio.timeout(timeout):
            self.ws = await connect(
                self.url, subprotocols=[self.subprotocol], open_timeout=timeout  # type: ignore[list-item]
            )
        self.close_code = None
        self.msgs = []
        self.reader = asyncio.get_running_loop().create_task(self._read(self.ws))
        hello: dict[str, Any] = {"type": "hello", "name": self.name, "bot": True}
        if self.token:
            hello["token"] = self.token
        welcome = await self.request(hello, timeout)
        if welcome.get("type") != "welcome":
            raise RuntimeError(f"hello refused: {welcome}")
        self.token = welcome.get("token") or self.token
        self.welcome = welcome
        return welcome

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for frame in ws:
                msg = self.codec.decode(frame)
                if isinstance(msg, dict):
                    self.msgs.append(msg)
                    self.changed.set()
        except ConnectionClosed:
            pass
        finally:
            self.close_code = ws.close_code if ws.close_code is not None else 1006
            self.changed.set()

    @property
    def alive(self) -> bool:
        return self.ws is not None and self.reader is not None and not self.reader.done()

    async def send(self, msg: dict[str, Any]) -> Any:
        if not self.alive or self.ws is None:
            raise Gone(self.name)
        msg = {**msg, "id": next(self._ids)}
        try:
            await self.ws.send(self.codec.encode(msg))
        except ConnectionClosed as exc:
            raise Gone(self.name) from exc
        return msg["id"]

    async def wait(
        self, pred: Callable[[dict[str, Any]], bool], timeout: float, start: int = 0
    ) -> tuple[int, dict[str, Any]]:
        """(index, message) of the first message from ``start`` on satisfying ``pred``."""
        async with asyncio.timeout(timeout):
            i = start
            while True:
                while i < len(self.msgs):
                    if pred(self.msgs[i]):
                        return i, self.msgs[i]
                    i += 1
                if not self.alive:
                    raise Gone(self.name)
                self.changed.clear()
                await self.changed.wait()

    async def request(self, msg: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """The reply to ``msg``; one refused ``rate_limited`` (nothing done: docs/protocol.md)
        is sent again after a pause, as a client that follows the docs does."""
        while True:
            start = len(self.msgs)
            ref = await self.send(msg)

            def answers(m: dict[str, Any], ref: Any = ref) -> bool:
                return bool(m.get("ref") == ref)

            reply = (await self.wait(answers, timeout, start))[1]
            if reply.get("type") != "error" or reply.get("code") != "rate_limited":
                return reply
            await asyncio.sleep(0.25)

    async def drop(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()
        if self.reader is not None:
            with contextlib.suppress(BaseException):
                await self.reader
        self.ws = None
        self.reader = None


@dataclass
class Record:
    """What a bot knows for sure, to be checked against the database afterwards."""

    acked: list[tuple[str, int, int, str]] = field(default_factory=list)  # (match, seat, n, g)
    latencies_ms: list[float] = field(default_factory=list)
    finished: dict[str, dict[str, Any]] = field(default_factory=dict)
    reconnects: int = 0
    unseen_ends: int = 0
    idle_probes: int = 0
    close_codes: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class MatchState:
    """One match as this seat sees it, rebuilt only from the events it received."""

    def __init__(self, match_id: str, seat: int, rng: random.Random) -> None:
        self.match_id = match_id
        self.seat = seat
        self.events: dict[int, dict[str, Any]] = {}
        self.rng = rng
        self.secret = "".join(rng.sample("0123456789", 4))
        self._candidates: list[str] = list(ALL_CODES)
        self._used = 0

    def apply(self, msg: dict[str, Any]) -> None:
        if msg.get("type") == "event" and msg.get("match_id") == self.match_id:
            self.events.setdefault(int(msg["seq"]), msg)

    @property
    def last_seq(self) -> int:
        return max(self.events, default=0)

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [e for _, e in sorted(self.events.items()) if e["kind"] == kind]

    @property
    def finished(self) -> dict[str, Any] | None:
        done = self.kinds("finished")
        return done[0] if done else None

    @property
    def secret_set(self) -> bool:
        return any(e.get("seat") == self.seat for e in self.kinds("secret"))

    @property
    def started(self) -> bool:
        return bool(self.kinds("started"))

    def my_guesses(self) -> list[str]:
        own = [e for e in self.kinds("guess") if e.get("seat") == self.seat]
        return [e.get("guess", "") for e in sorted(own, key=lambda e: e["n"])]

    def responses(self) -> list[tuple[str, int, int]]:
        out: dict[int, tuple[str, int, int]] = {}
        for e in self.kinds("guess"):
            if e.get("seat") == self.seat and "bulls" in e:
                out[e["n"]] = (e["guess"], e["bulls"], e["cows"])
        for e in self.kinds("round"):
            g, b, c = e["results"][self.seat]
            if g is not None:
                out[e["n"]] = (g, b, c)
        return [out[n] for n in sorted(out)]

    def my_turn(self, pacing: str, cap: int = 64) -> bool:
        if self.finished or not self.started:
            return False
        mine = self.my_guesses()
        if len(mine) >= cap or any(b == 4 for _, b, _ in self.responses()):
            return False
        if pacing == "lockstep":
            return len(mine) == len(self.kinds("round"))
        return True

    def next_guess(self) -> str:
        """A random code consistent with every response so far (filtered incrementally, so a
        bot never blocks the shared event loop long enough to distort others' latencies)."""
        responses = self.responses()
        for g, b, cw in responses[self._used :]:
            self._candidates = [c for c in self._candidates if tuple(score(c, g)) == (b, cw)]
        self._used = len(responses)
        tried = set(self.my_guesses())
        pool = [c for c in self._candidates if c not in tried] or list(ALL_CODES)
        return self.rng.choice(pool)


class Bot:
    """A player that queues, plays matches to the end, and rides out server restarts."""

    def __init__(
        self,
        url: str,
        name: str,
        rng: random.Random,
        record: Record,
        subprotocol: str = JSON,
        think_s: float = 0.0,
        reconnect_for_s: float = 60.0,
    ) -> None:
        self.client = RawClient(url, name, subprotocol)
        self.rng = rng
        self.record = record
        self.think_s = think_s
        self.reconnect_for_s = reconnect_for_s
        self.pacing = "lockstep"
        self.in_match = False

    async def reconnect(self) -> None:
        """Dial until the server answers (it may be restarting), then say hello with the token."""
        code = self.client.close_code
        if code is not None:
            self.record.close_codes[code] = self.record.close_codes.get(code, 0) + 1
        deadline = time.monotonic() + self.reconnect_for_s
        delay = 0.05
        while True:
            try:
                await self.client.connect()
                return
            except (OSError, TimeoutError, InvalidHandshake, InvalidStatus, Gone, RuntimeError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def play_matches(
        self, count: int, pacing: str | None = None, stop: asyncio.Event | None = None
    ) -> None:
        """Queue and play ``count`` matches (pacing random if None), reconnecting as needed.

        With ``stop``, the bot ends after the match it is in once ``stop`` is set (a bot that
        is only queued is simply cancelled by its owner).
        """
        await self.reconnect()
        played = 0
        while played < count and not (stop is not None and stop.is_set()):
            self.pacing = pacing or self.rng.choice(["lockstep", "free"])
            state = await self._get_match(stop)
            if state is None:
                return
            self.in_match = True
            try:
                await self._play(state)
            finally:
                self.in_match = False
            played += 1

    async def _get_match(self, stop: asyncio.Event | None = None) -> MatchState | None:
        while True:
            try:
                unfinished = self.client.welcome.get("matches") or []
                if unfinished:
                    m = unfinished[0]
                    self.client.welcome["matches"] = unfinished[1:]
                    state = MatchState(m["match_id"], int(m["seat"]), self.rng)
                    return state
                if stop is not None and stop.is_set():
                    return None
                start = len(self.client.msgs)
                await self.client.request({"type": "queue", "pacing": self.pacing})
                _, msg = await self.client.wait(lambda m: m.get("type") == "match", 120, start)
                state = MatchState(msg["match_id"], int(msg["seat"]), self.rng)
                for m in self.client.msgs[start:]:
                    state.apply(m)
                return state
            except TimeoutError:
                continue  # nobody of our pacing came: queue again (a no-op if still queued)
            except Gone:
                self.record.reconnects += 1
                await self.reconnect()

    async def _play(self, st: MatchState) -> None:
        c = self.client
        cursor = 0
        # Resume first: a match found in ``welcome`` has no events here yet, and a queued one
        # may have produced events before this state existed; duplicates are ignored.
        pacing = await self._resume(st, self.pacing, lost=False)
        if pacing is None:
            return
        while True:
            try:
                for m in c.msgs[cursor:]:
                    st.apply(m)
                    if m.get("type") == "match" and m.get("match_id") == st.match_id:
                        pacing = m["config"]["pacing"]
                cursor = len(c.msgs)
                done = st.finished
                if done is not None:
                    self.record.finished[st.match_id] = done
                    return
                if not st.secret_set:
                    reply = await c.request(
                        {"type": "secret", "match_id": st.match_id, "secret": st.secret}, 30
                    )
                    st.apply(reply)
                elif st.my_turn(pacing):
                    if self.think_s:
                        await asyncio.sleep(self.rng.uniform(0, 2 * self.think_s))
                    guess = st.next_guess()
                    t0 = time.perf_counter()
                    reply = await c.request(
                        {"type": "guess", "match_id": st.match_id, "guess": guess}, 30
                    )
                    if reply.get("type") == "event" and reply.get("kind") == "guess":
                        self.record.latencies_ms.append((time.perf_counter() - t0) * 1000)
                        # The ack says which guess it is (its n may be later than this bot
                        # thought if an unacknowledged guess of ours was stored before a crash).
                        if reply.get("guess") != guess or reply.get("seat") != st.seat:
                            self.record.errors.append(f"ack for another guess: {reply}")
                        self.record.acked.append((st.match_id, st.seat, int(reply["n"]), guess))
                        st.apply(reply)
                    elif reply.get("type") == "error":
                        self._note_error(reply)
                else:
                    try:
                        await c.wait(lambda m: True, 10, cursor)
                    except TimeoutError:
                        # Nothing for 10 s although it is not our turn by our reckoning: ask
                        # the server (a guess is refused with not_your_turn if we were right).
                        self.record.idle_probes += 1
                        reply = await c.request(
                            {"type": "guess", "match_id": st.match_id, "guess": st.next_guess()},
                            30,
                        )
                        if reply.get("type") == "event":
                            self.record.errors.append(
                                f"{self.client.name}: stalled in {st.match_id}, own guesses "
                                f"{len(st.my_guesses())}, rounds {len(st.kinds('round'))}, "
                                f"seat {st.seat}, pacing {pacing}"
                            )
                            st.apply(reply)
            except (Gone, TimeoutError):
                cursor = 0  # a new connection starts a new message list
                resumed = await self._resume(st, pacing, lost=True)
                if resumed is None:
                    return
                pacing = resumed

    async def _resume(self, st: MatchState, pacing: str, *, lost: bool) -> str | None:
        """``resume`` the match until it is answered, on a new connection each time the
        current one is ``lost`` (the next fault may take the new one at once, before the
        answer). The match's pacing; None if it ended while we were away."""
        while True:
            if lost:
                self.record.reconnects += 1
                await self.reconnect()
                self._forget_listed(st.match_id)
            try:
                reply = await self.client.request(
                    {"type": "resume", "match_id": st.match_id, "last_seq": st.last_seq}, 30
                )
            except (Gone, TimeoutError):
                lost = True
                continue
            if reply.get("type") == "error":
                self._ended_away(st, reply)
                return None
            self._check_seat(st, reply)
            return str(reply.get("config", {}).get("pacing", pacing))

    def _forget_listed(self, match_id: str) -> None:
        """The welcome after a mid-match reconnect lists the match being played; once it is
        over that entry is stale and must not be picked up as a new match."""
        listed = self.client.welcome.get("matches") or []
        self.client.welcome["matches"] = [m for m in listed if m.get("match_id") != match_id]

    def _check_seat(self, st: MatchState, reply: dict[str, Any]) -> None:
        seat = reply.get("seat")
        if isinstance(seat, int) and seat != st.seat:
            self.record.errors.append(f"{self.client.name}: thought seat {st.seat}, is {seat}")
            st.seat = seat

    def _ended_away(self, st: MatchState, reply: dict[str, Any]) -> None:
        """``resume`` refused: the match ended (and was retired) while we were away.

        The server keeps only live matches resumable, so a seat that was disconnected at the
        end never receives ``finished``; the fault runs check those matches in the database.
        """
        if reply.get("code") != "unknown_match":
            self._note_error(reply)
        self.record.finished.setdefault(st.match_id, {"reason": "ended while away"})
        self.record.unseen_ends += 1

    def _note_error(self, reply: dict[str, Any]) -> None:
        if reply.get("code") not in ("not_your_turn", "match_finished", "already_set"):
            self.record.errors.append(f"{self.client.name}: {reply}")


class Spectator:
    """Watches live matches one after another; counts what it saw (no secrets expected)."""

    def __init__(self, url: str, name: str, rng: random.Random) -> None:
        self.client = RawClient(url, name, rng.choice([JSON, MSGPACK]))
        self.rng = rng
        self.events = 0
        self.leaks: list[dict[str, Any]] = []

    async def run(self, until: float) -> None:
        while time.monotonic() < until:
            try:
                if not self.client.alive:
                    await self.client.connect()
                listing = await self.client.request({"type": "matches"}, 10)
                live = [m for m in listing.get("matches", []) if m["phase"] != "finished"]
                if not live:
                    await asyncio.sleep(0.5)
                    continue
                mid = self.rng.choice(live)["match_id"]
                start = len(self.client.msgs)
                await self.client.request({"type": "watch", "match_id": mid}, 10)
                with contextlib.suppress(TimeoutError):
                    await self.client.wait(
                        functools.partial(_is_finish_of, mid),
                        min(20.0, max(0.1, until - time.monotonic())),
                        start,
                    )
                for m in self.client.msgs[start:]:
                    if m.get("type") == "event":
                        self.events += 1
                        if m.get("kind") == "secret" and "secret" in m:
                            self.leaks.append(m)
                await self.client.request({"type": "unwatch", "match_id": mid}, 10)
                self.client.msgs.clear()
            except (Gone, TimeoutError, OSError, InvalidHandshake, RuntimeError):
                await asyncio.sleep(0.2)
        await self.client.drop()


def _is_finish_of(match_id: str, msg: dict[str, Any]) -> bool:
    return msg.get("match_id") == match_id and msg.get("kind") == "finished"


# -- the server as a real process ---------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``moo serve`` on a fixed port and database, so clients can find it again after a kill."""

    def __init__(self, db: Path, port: int, *extra: str, env: dict[str, str] | None = None):
        self.db = db
        self.port = port
        # every player of a bench registers from 127.0.0.1: the per-address budget of new
        # names (docs/protocol.md) would refuse all but the first hundred
        budget = () if "--new-names-per-address" in extra else (
            "--new-names-per-address", "1000000")
        self.extra = (*budget, *extra)
        self.env = env or {}
        self.proc: asyncio.subprocess.Process | None = None
        self.log: list[bytes] = []
        self._drain: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self, timeout: float = 30.0) -> float:
        """Start and wait for "listening"; returns the seconds it took."""
        t0 = time.monotonic()
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli", "serve", "--port", str(self.port), "--db",
            str(self.db), *self.extra,
            cwd=ROOT,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **self.env},
        )
        assert self.proc.stderr is not None
        async with asyncio.timeout(timeout):
            while True:
                line = await self.proc.stderr.readline()
                if not line:
                    raise RuntimeError(b"server exited early:\n" + b"".join(self.log[-30:]))
                self.log.append(line)
                if LISTENING.search(line):
                    break
        self._drain = asyncio.get_running_loop().create_task(self._read_log())
        return time.monotonic() - t0

    async def _read_log(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.log.append(line)

    async def stop(self, sig: int = signal.SIGKILL, timeout: float = 20.0) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
        async with asyncio.timeout(timeout):
            code = await self.proc.wait()
        if self._drain is not None:
            with contextlib.suppress(BaseException):
                await self._drain
        return code

    def errors(self) -> list[str]:
        return [
            line.decode(errors="replace").rstrip()
            for line in self.log
            if b" ERROR " in line or b"Traceback" in line
        ]


def logged_guesses(db: Path) -> set[tuple[str, int, int, str]]:
    """Every guess event in the database, as (match, seat, n, guess)."""
    import json

    out = set()
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        for match_id, body in conn.execute("SELECT match_id, body FROM events"):
            e = json.loads(body)
            if e.get("kind") == "guess":
                out.add((match_id, int(e["seat"]), int(e["n"]), str(e["guess"])))
    return out


def unfinished_in_db(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return [r[0] for r in conn.execute("SELECT match_id FROM matches WHERE finished = 0")]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


async def healthz(port: int, timeout: float = 5.0) -> dict[str, Any]:
    """GET /healthz from the server's HTTP front (plain asyncio streams, loopback)."""
    import json

    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        data = await reader.read()
        writer.close()
    body = data.split(b"\r\n\r\n", 1)[1]
    value = json.loads(body)
    assert isinstance(value, dict)
    return value


def proc_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def proc_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))
