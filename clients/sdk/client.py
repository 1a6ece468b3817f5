"""The asyncio client: one WebSocket session with typed messages, replies and reconnects.

Design notes (the *why*):

* One reader task owns the socket's receive side. Every frame becomes a typed
  :class:`~clients.sdk.messages.Message`; match events are folded into :attr:`Client.states`
  first (dropping replays by ``seq``), then the message resolves the request that caused it
  (matched on ``ref``) and is queued for :meth:`Client.events`. So a caller can either ``await``
  a request's reply or iterate the stream, and both views agree.
* Requests carry an integer ``id``. The protocol has no separate acks: the reply is the first
  message with our ``ref`` (a ``queued``, a ``match``, the first match event, or an ``error``).
* Reconnecting is the client's job, not the caller's: on an unexpected close it retries with
  exponential backoff and jitter (so a restarted server is not hit by every client at the same
  instant), re-sends ``hello`` with the token, then ``resume``s every unfinished match from its
  last applied ``seq``. Replayed events that were already applied are dropped by
  :meth:`MatchState.apply`, so consumers see every event once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import msgpack
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.typing import Subprotocol

from clients.sdk.messages import (
    ChallengeSent,
    Connected,
    Disconnected,
    ErrorReply,
    Leaderboard,
    MatchAnnounced,
    MatchesList,
    MatchEvent,
    Message,
    Queued,
    RoomCreated,
    Unqueued,
    Watching,
    Welcome,
    parse,
)
from clients.sdk.state import MatchState
from moo.protocol import SUBPROTOCOLS, Codec
from moo.rules import Rules

__all__ = ["Client", "ConnectionLost", "ServerError"]

log = logging.getLogger("moo.sdk")

DEFAULT_URL = "ws://127.0.0.1:8765/"
ENCODINGS = {"json": SUBPROTOCOLS[0], "msgpack": SUBPROTOCOLS[1]}
#: Close codes after which reconnecting would be wrong: 4001 means another connection with our
#: token took over the seat; reconnecting would just steal it back and forth.
NO_RETRY_CODES = frozenset({4001})
#: hello errors that no amount of retrying fixes.
FATAL_HELLO_CODES = frozenset({"bad_token", "name_taken", "invalid_name", "bad_field"})

M = TypeVar("M", bound=Message)


class ServerError(Exception):
    """The server refused a request (``error`` message); nothing changed on the server."""

    def __init__(self, reply: ErrorReply) -> None:
        super().__init__(f"{reply.code}: {reply.message}")
        self.reply = reply
        self.code = reply.code
        self.message = reply.message


class ConnectionLost(Exception):
    """The connection dropped before a reply came (the request may or may not have applied)."""


class _End:
    """Sentinel closing the event stream."""


_END = _End()


class Client:
    """A player's (or a bot's) session with a MOO Arena server.

    ``async with Client(url, "ann") as c:`` connects and says hello; see docs/sdk.md.
    ``token`` reclaims a name taken earlier (the server issues one on first hello, kept in
    :attr:`token`). ``encoding`` is ``"json"`` or ``"msgpack"``.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        name: str = "player",
        *,
        token: str | None = None,
        bot: bool = False,
        encoding: str = "json",
        reconnect: bool = True,
        max_attempts: int | None = 10,
        backoff_initial: float = 0.2,
        backoff_max: float = 8.0,
        request_timeout: float = 30.0,
        client_name: str = "moo-sdk",
        rate_per_s: float | None = 18.0,
        rate_burst: int = 30,
        buffer_events: bool = True,
    ) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {sorted(ENCODINGS)}, got {encoding!r}")
        self.url = url
        self.name = name
        self.token = token
        self.bot = bot
        self.encoding = encoding
        self.reconnect = reconnect
        self.max_attempts = max_attempts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.request_timeout = request_timeout
        self.client_name = client_name
        #: False for programs that only await replies and read :attr:`states`: then server
        #: messages are not queued for :meth:`events`, which nobody would drain.
        self.buffer_events = buffer_events
        #: match_id -> what we know about it (matches we sit in or watch).
        self.states: dict[str, MatchState] = {}
        self.welcome: Welcome | None = None
        #: How many times the session was re-established after a drop.
        self.reconnects = 0
        self._ws: ClientConnection | None = None
        self._codec = Codec(ENCODINGS[encoding])
        self._events: asyncio.Queue[Message | _End] = asyncio.Queue()
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._next_id = 0
        self._watching: set[str] = set()
        self._reader: asyncio.Task[None] | None = None
        self._online = asyncio.Event()
        self._closing = False
        self._ended = False
        self._rng = random.Random()
        #: Client-side pacing just under the server's default token bucket (20/s, burst 40):
        #: a fast bot is slowed down here instead of having requests refused there.
        self._bucket = _Bucket(rate_per_s, rate_burst) if rate_per_s else None

    # -- life cycle ----------------------------------------------------------------------------
    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def connection(self) -> ClientConnection | None:
        """The live socket, if any (tests abort its transport to simulate a network failure)."""
        return self._ws

    @property
    def online(self) -> bool:
        return self._online.is_set()

    async def connect(self) -> Welcome:
        """Open the socket and say hello; raises :class:`ServerError` if the hello is refused."""
        ws, welcome = await self._open()
        self._ws = ws
        self._online.set()
        self._events.put_nowait(Connected(raw={}, welcome=welcome, reconnect=False))
        # Matches left unfinished by an earlier process (same token): pick them up.
        await self._resume_all(welcome)
        self._reader = asyncio.create_task(self._run(), name=f"moo-sdk-reader-{self.name}")
        return welcome

    async def close(self) -> None:
        """Close for good: no reconnect; the event stream ends."""
        self._closing = True
        was_online = self._online.is_set()
        self._online.clear()
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(Exception):
                await ws.close()
        if self._reader is not None:
            if not was_online and not self._reader.done():
                self._reader.cancel()  # it is backing off between reconnect attempts
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._reader, 5.0)
            if not self._reader.done():
                self._reader.cancel()
        self._fail_pending("client closed")
        if not self._ended:
            self._ended = True
            self._events.put_nowait(_END)

    async def _open(self) -> tuple[ClientConnection, Welcome]:
        """Connect and complete the hello handshake on a fresh socket."""
        ws = await connect(
            self.url,
            subprotocols=[Subprotocol(ENCODINGS[self.encoding])],
            open_timeout=10,
            max_size=2**20,
        )
        try:
            self._codec = Codec(ws.subprotocol or SUBPROTOCOLS[0])
            hello: dict[str, Any] = {"type": "hello", "name": self.name, "id": 0,
                                     "client": self.client_name[:64]}
            if self.bot:
                hello["bot"] = True
            if self.token:
                hello["token"] = self.token
            await ws.send(self._codec.encode(hello))
            async with asyncio.timeout(self.request_timeout):
                while True:
                    reply = parse(_decode(await ws.recv()))
                    if isinstance(reply, ErrorReply):
                        raise ServerError(reply)
                    if isinstance(reply, Welcome):
                        break
                    # Anything before welcome is unexpected; keep it for the stream.
                    self._events.put_nowait(reply)
        except BaseException:
            with contextlib.suppress(Exception):
                await ws.close()
            raise
        if reply.token:
            self.token = reply.token
        self.name = reply.name or self.name
        self.welcome = reply
        return ws, reply

    async def _resume_all(self, welcome: Welcome) -> None:
        """Ask for everything we missed in each unfinished match (and re-watch spectated ones)."""
        for ref in welcome.matches:
            if ref.match_id not in self.states:
                self.states[ref.match_id] = MatchState(ref.match_id, seat=ref.seat)
        for match_id, state in list(self.states.items()):
            if state.finished:
                continue
            if state.seat is not None:
                await self._send({"type": "resume", "match_id": match_id,
                                  "last_seq": state.last_seq})
            elif match_id in self._watching:
                await self._send({"type": "watch", "match_id": match_id,
                                  "last_seq": state.last_seq})

    async def _run(self) -> None:
        """Reader task: read until closed, reconnect if allowed, repeat; then end the stream."""
        try:
            while True:
                ws = self._ws
                assert ws is not None
                try:
                    async for frame in ws:
                        try:
                            msg = _decode(frame)
                        except ValueError as exc:
                            log.warning("undecodable frame from server: %s", exc)
                            continue
                        self._dispatch(parse(msg))
                except ConnectionClosed:
                    pass
                self._online.clear()
                code, reason = ws.close_code, ws.close_reason or ""
                self._fail_pending(f"connection closed ({code} {reason})".strip())
                retry = self.reconnect and not self._closing and code not in NO_RETRY_CODES
                if self._closing:
                    break
                self._events.put_nowait(
                    Disconnected(raw={}, code=code, reason=reason, will_retry=retry)
                )
                if not retry or not await self._reconnect():
                    break
        finally:
            self._online.clear()
            self._fail_pending("connection closed")
            if not self._ended:
                self._ended = True
                self._events.put_nowait(_END)

    async def _reconnect(self) -> bool:
        """Back off, reconnect, hello with the token, resume. False when giving up."""
        attempt = 0
        while not self._closing:
            if self.max_attempts is not None and attempt >= self.max_attempts:
                log.warning("giving up after %d reconnect attempts", attempt)
                return False
            # Exponential backoff with jitter: spreads a crowd of clients over time after a
            # server restart instead of having them all knock at the same instant.
            delay = min(self.backoff_max, self.backoff_initial * 2**attempt)
            await asyncio.sleep(delay * self._rng.uniform(0.5, 1.0))
            attempt += 1
            try:
                ws, welcome = await self._open()
            except ServerError as exc:
                if exc.code in FATAL_HELLO_CODES:
                    log.warning("reconnect refused: %s", exc)
                    self._events.put_nowait(exc.reply)
                    return False
                continue
            except (OSError, InvalidHandshake, InvalidURI, TimeoutError, ConnectionClosed,
                    ValueError) as exc:
                log.info("reconnect attempt %d failed: %s", attempt, exc)
                continue
            self._ws = ws
            self.reconnects += 1
            self._events.put_nowait(Connected(raw={}, welcome=welcome, reconnect=True))
            try:
                await self._resume_all(welcome)
            except ConnectionClosed:
                continue
            self._online.set()
            return True
        return False

    def _fail_pending(self, why: str) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionLost(why))
        self._pending.clear()

    def _dispatch(self, msg: Message) -> None:
        fresh = True
        if isinstance(msg, MatchEvent):
            state = self.states.get(msg.match_id)
            if state is None:
                state = self.states[msg.match_id] = MatchState(msg.match_id)
            # A replay of something already applied: nobody needs to see it twice.
            fresh = state.apply(msg)
        elif isinstance(msg, Watching):
            state = self.states.setdefault(msg.match_id, MatchState(msg.match_id))
            if len(msg.players) == 2:
                state.players = (msg.players[0], msg.players[1])
            if msg.config:
                state.config = msg.config
                state.rules = Rules.from_dict(dict(msg.config.get("rules") or {}))
        elif isinstance(msg, MatchAnnounced):
            state = self.states.get(msg.match_id)
            if state is None:
                state = self.states[msg.match_id] = MatchState(msg.match_id)
            elif state.last_seq > 0 and msg.ref is None:
                # The server answers a (re)connect's ``resume`` with ``match`` again; it is not
                # a new match, and ``wait_match`` must not mistake it for one.
                fresh = False
            state.seat = msg.seat
            state.config = msg.config
            state.rules = msg.rules
        elif isinstance(msg, ErrorReply) and msg.ref is None and msg.code == "rate_limited" \
                and self._pending:
            # The server refused a request without saying which (it has not decoded it yet):
            # fail the oldest one so its caller sees the refusal instead of a timeout.
            oldest = min(self._pending)
            msg = ErrorReply(raw=msg.raw, ref=oldest, code=msg.code, message=msg.message)
        if isinstance(msg.ref, int) and not isinstance(msg.ref, bool):
            fut = self._pending.pop(msg.ref, None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
        if fresh and self.buffer_events:
            self._events.put_nowait(msg)

    # -- the event stream --------------------------------------------------------------------------
    async def events(self) -> AsyncIterator[Message]:
        """Every message in arrival order (replies too), until the client is closed for good."""
        while True:
            msg = await self._events.get()
            if isinstance(msg, _End):
                self._events.put_nowait(msg)  # let other/later readers end too
                return
            yield msg

    def __aiter__(self) -> AsyncIterator[Message]:
        return self.events()

    async def receive(self, timeout: float | None = None) -> Message:
        """The next message; raises :class:`ConnectionLost` once the stream has ended."""
        async with asyncio.timeout(timeout):
            msg = await self._events.get()
        if isinstance(msg, _End):
            self._events.put_nowait(msg)
            raise ConnectionLost("the client is closed")
        return msg

    def pending_messages(self) -> int:
        return self._events.qsize()

    # -- requests ------------------------------------------------------------------------------
    async def _send(self, message: dict[str, Any]) -> None:
        if self._bucket is not None:
            await self._bucket.take()
        ws = self._ws
        if ws is None:
            raise ConnectionLost("not connected")
        await ws.send(self._codec.encode(message))

    async def send(self, type: str, **fields: Any) -> None:
        """Fire and forget (no ``id``): errors arrive on the event stream."""
        await self._wait_online()
        await self._send({"type": type, **fields})

    async def _wait_online(self) -> None:
        if self._closing or self._ended:
            raise ConnectionLost("the client is closed")
        if not self._online.is_set():
            try:
                async with asyncio.timeout(self.request_timeout):
                    await self._online.wait()
            except TimeoutError:
                raise ConnectionLost("not connected") from None

    async def request(self, type: str, **fields: Any) -> Message:
        """Send with an ``id`` and wait for the first message carrying it as ``ref``.

        Raises :class:`ServerError` for an ``error`` reply, :class:`ConnectionLost` if the
        connection drops first (after a reconnect the caller can look at :attr:`states` to see
        whether the action took effect), ``TimeoutError`` after ``request_timeout``.
        """
        await self._wait_online()
        self._next_id += 1
        msg_id = self._next_id
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut
        try:
            await self._send({"type": type, "id": msg_id, **fields})
            async with asyncio.timeout(self.request_timeout):
                reply = await fut
        except ConnectionClosed as exc:
            raise ConnectionLost(str(exc)) from None
        finally:
            self._pending.pop(msg_id, None)
        if isinstance(reply, ErrorReply):
            raise ServerError(reply)
        return reply

    async def _expect(self, cls: type[M], type: str, **fields: Any) -> M:
        reply = await self.request(type, **fields)
        if not isinstance(reply, cls):
            raise ServerError(
                ErrorReply(raw=reply.raw, code="unexpected_reply",
                           message=f"expected {cls.__name__} for {type!r}, got {reply!r}")
            )
        return reply

    # lobby
    async def ping(self) -> Message:
        return await self.request("ping")

    async def queue(self, pool: str = "any", pacing: str | None = None,
                    rated: bool | None = None) -> Queued:
        """Join the quick-pair queue; the ``match`` comes later on the stream (see wait_match)."""
        fields: dict[str, Any] = {"pool": pool}
        if pacing is not None:
            fields["pacing"] = pacing
        if rated is not None:
            fields["rated"] = rated
        return await self._expect(Queued, "queue", **fields)

    async def unqueue(self) -> Unqueued:
        return await self._expect(Unqueued, "unqueue")

    async def challenge(self, opponent: str, pacing: str | None = None) -> ChallengeSent:
        return await self._expect(ChallengeSent, "challenge", opponent=opponent,
                                  **_opt(pacing=pacing))

    async def accept(self, challenge_id: str) -> MatchAnnounced:
        return await self._expect(MatchAnnounced, "accept", challenge_id=challenge_id)

    async def decline(self, challenge_id: str) -> None:
        await self.send("decline", challenge_id=challenge_id)

    async def create_room(self, pacing: str | None = None) -> RoomCreated:
        return await self._expect(RoomCreated, "room_create", **_opt(pacing=pacing))

    async def join_room(self, code: str) -> MatchAnnounced:
        return await self._expect(MatchAnnounced, "room_join", code=code)

    async def play_bot(self, strategy: str = "random", pacing: str | None = None) -> MatchAnnounced:
        return await self._expect(MatchAnnounced, "play_bot", strategy=strategy,
                                  **_opt(pacing=pacing))

    async def rematch(self, match_id: str) -> None:
        """Offer/accept a rematch; the new ``match`` arrives on the stream when both asked."""
        await self.send("rematch", match_id=match_id)

    async def matches(self) -> MatchesList:
        return await self._expect(MatchesList, "matches")

    async def leaderboard(self, by: str = "rating") -> Leaderboard:
        return await self._expect(Leaderboard, "leaderboard", by=by)

    async def wait_match(self, timeout: float | None = None) -> MatchAnnounced:
        """Consume the stream up to the next ``match`` (after ``queue`` or a room/challenge)."""
        async with asyncio.timeout(timeout):
            while True:
                msg = await self.receive()
                if isinstance(msg, MatchAnnounced):
                    return msg

    # match
    async def set_secret(self, match_id: str, secret: str) -> Message:
        return await self.request("secret", match_id=match_id, secret=secret)

    async def guess(self, match_id: str, guess: str) -> Message:
        """Returns our own ``guess`` event (free pacing: with the response already in it)."""
        return await self.request("guess", match_id=match_id, guess=guess)

    async def resign(self, match_id: str) -> Message:
        return await self.request("resign", match_id=match_id)

    async def resume(self, match_id: str) -> None:
        """Ask for events after our last applied seq (done automatically after reconnects).

        Not awaited as a request: if nothing is missing, the server has nothing to send.
        """
        state = self.states.get(match_id)
        await self.send("resume", match_id=match_id, last_seq=state.last_seq if state else 0)

    async def watch(self, match_id: str) -> None:
        """Spectate: public events are replayed then streamed; re-watched after reconnects."""
        self._watching.add(match_id)
        state = self.states.setdefault(match_id, MatchState(match_id))
        await self.send("watch", match_id=match_id, last_seq=state.last_seq)

    async def unwatch(self, match_id: str) -> None:
        self._watching.discard(match_id)
        await self.send("unwatch", match_id=match_id)


class _Bucket:
    """A token bucket: ``rate`` messages a second on average, bursts up to ``burst``."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    async def take(self) -> None:
        while True:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep((1 - self.tokens) / self.rate)


def _opt(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _decode(frame: str | bytes) -> dict[str, Any]:
    """Decode a server frame. No 4096-byte cap: replies like ``leaderboard`` may be larger."""
    if isinstance(frame, str):
        value = json.loads(frame)
    else:
        try:
            value = msgpack.unpackb(frame, raw=False, strict_map_key=False)
        except Exception as exc:
            raise ValueError(f"not MessagePack: {type(exc).__name__}") from None
    if not isinstance(value, dict):
        raise ValueError("a server message is a map")
    return value
