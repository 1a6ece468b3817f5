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
import logging
import os
import random
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, TypeVar

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from clients.sdk.messages import (
    ChallengeSent,
    Connected,
    Disconnected,
    ErrorReply,
    History,
    Leaderboard,
    MatchAnnounced,
    MatchesList,
    MatchEvent,
    MatchRecord,
    Message,
    PasswordSet,
    PlayerInfo,
    Queued,
    RoomCreated,
    SignedOut,
    TournamentAck,
    TournamentInfo,
    TournamentsList,
    TournamentUpdate,
    Unqueued,
    Watching,
    Welcome,
    parse,
)
from clients.sdk.state import MatchState
from clients.sdk.wire import ENCODINGS, Wire, decode_frame
from moo.protocol import REQUEST_ID_TYPES
from moo.variants import GameRules, rules_from_dict

__all__ = ["Client", "ConnectionLost", "ServerError"]

log = logging.getLogger("moo.sdk")

DEFAULT_URL = "ws://127.0.0.1:8765/"
#: Close codes after which reconnecting would be wrong: 4001 means another connection with our
#: token took over the seat; reconnecting would just steal it back and forth. 4003: the owner
#: signed out everywhere, so our token is revoked.
NO_RETRY_CODES = frozenset({4001, 4003})
#: hello errors that no amount of retrying fixes.
FATAL_HELLO_CODES = frozenset(
    {"bad_token", "name_taken", "invalid_name", "bad_field", "bad_credentials",
     "too_many_attempts", "too_many_names"}
)

#: Requests that may be sent again after a retryable refusal (see :func:`retryable`): each is
#: either read-only, idempotent on the server (``queue`` while queued, ``watch``, ``resume``,
#: ``unqueue``), or refused when it would repeat something (``secret``: ``already_set``;
#: ``resign``: ``match_finished``; ``guess``: see :meth:`Client._retry_safe`).
RETRY_TYPES = frozenset(
    {"guess", "secret", "resign", "queue", "unqueue", "ping", "matches", "leaderboard",
     "history", "player", "match_record", "watch", "unwatch", "resume",
     # idempotent tournament requests (a second join or watch changes nothing)
     "tournaments", "tournament_join", "tournament_leave", "tournament_watch",
     "tournament_unwatch", "tournament_start",
     # the ladder's: read-only, idempotent, or (a chunk again at its offset) answered as
     # the first (docs/protocol.md, "Retrying safely")
     "ladder_upload", "ladder_mine", "ladder_show", "ladder_page", "ladder_pause",
     "ladder_resume", "ladder_withdraw",
     # safe in effect: a repeat after the first took effect is refused ("already", "not on
     # the ladder"); a cluster answers "try again" while its ladder moves to a new leader
     "ladder_join", "ladder_leave"}
) | REQUEST_ID_TYPES  # sent with a request_id (see Client.request): answered as the first
#: How many times :meth:`Client.request` re-sends a request refused with a retryable error.
RETRIES = 6

M = TypeVar("M", bound=Message)


def retryable(reply: ErrorReply) -> bool:
    """True for refusals that mean "nothing was done, try again soon".

    ``storage_unavailable``: the server could not store the action (a database outage, or a
    cluster node that lost a match's lease) and did not apply it. ``not_available`` with "try
    again" in its message: the server is shutting down, or the cluster node that runs the match
    or the lobby did not answer in time (it may have died; another node takes over). Other
    ``not_available`` refusals (challenging yourself, too many rooms...) are final.
    """
    return reply.code == "storage_unavailable" or (
        reply.code == "not_available" and "try again" in reply.message
    )


def new_request_id() -> str:
    """A fresh ``request_id`` (docs/protocol.md, "Retrying safely"): random, so that no two
    requests of a player share one, whichever device or process sends them."""
    return uuid.uuid4().hex


def url_list(url: str | Sequence[str]) -> list[str]:
    """One URL or several: a list, or one string of comma-separated URLs, in order."""
    items = [url] if isinstance(url, str) else list(url)
    urls = [u.strip() for item in items for u in item.split(",") if u.strip()]
    if not urls:
        raise ValueError("at least one server URL is needed")
    return urls


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


def _resync_default() -> float | None:
    raw = os.environ.get("MOO_RESYNC_AFTER", "").strip().lower()
    if not raw:
        return 15.0
    if raw in ("0", "off", "none", "never"):
        return None
    return float(raw)


class Client:
    """A player's (or a bot's) session with a MOO Arena server.

    ``async with Client(url, "ann") as c:`` connects and says hello; see docs/sdk.md.
    ``token`` reclaims a name taken earlier (the server issues one on first hello, kept in
    :attr:`token`). ``password`` signs in to a name secured with :meth:`set_password`, from
    any device; the server then issues this device's token, which reconnects use (the
    password is tried again only if that token was revoked). ``encoding`` is ``"json"`` or
    ``"msgpack"``.
    """

    def __init__(
        self,
        url: str | Sequence[str] = DEFAULT_URL,
        name: str = "player",
        *,
        token: str | None = None,
        password: str | None = None,
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
        resync_after: float | Literal["env"] | None = "env",
    ) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {sorted(ENCODINGS)}, got {encoding!r}")
        #: Every server address, in order of preference: connecting tries them in order, and a
        #: failed attempt moves on to the next one (a dead cluster node is skipped).
        self.urls = url_list(url)
        self._url_index = 0
        #: The address in use (or tried next).
        self.url = self.urls[0]
        self.name = name
        self.token = token
        self.password = password
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
        #: Seconds without any event of an unfinished match we play before the client asks
        #: for it again (``resume`` from the last seq: a no-op when nothing was missed). The
        #: server promises never to leave a follower in silence (docs/cluster.md, "Delivery"),
        #: so this is only a belt. None: never. By default 15 s, or the environment's
        #: ``MOO_RESYNC_AFTER`` (seconds; ``0`` or ``off``: never; the cluster's tests run
        #: with it off, so that they see the server keep its promise unaided).
        self.resync_after = _resync_default() if resync_after == "env" else resync_after
        self._heard: dict[str, float] = {}
        self._resync: asyncio.Task[None] | None = None
        #: match_id -> what we know about it (matches we sit in or watch).
        self.states: dict[str, MatchState] = {}
        #: hosted tournaments: the latest ``tournament`` object heard of each (joined or
        #: watched), by id
        self.tournaments: dict[str, TournamentInfo] = {}
        self.welcome: Welcome | None = None
        #: How many times the session was re-established after a drop.
        self.reconnects = 0
        self._wire: Wire | None = None
        self._events: asyncio.Queue[Message | _End] = asyncio.Queue()
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._resuming: set[asyncio.Task[None]] = set()
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
        return None if self._wire is None else self._wire.ws

    @property
    def online(self) -> bool:
        return self._online.is_set()

    async def connect(self) -> Welcome:
        """Open the socket and say hello; raises :class:`ServerError` if the hello is refused.

        With several URLs each is tried once, in order; the error of the last one is raised if
        none answers (a refused ``hello`` is raised at once: another node would refuse it too).
        """
        for i in range(len(self.urls)):
            try:
                wire, welcome = await self._open()
                break
            except ServerError:
                raise
            except (OSError, InvalidHandshake, InvalidURI, TimeoutError, ConnectionClosed):
                if i == len(self.urls) - 1:
                    raise
                self._rotate()
        self._wire = wire
        self._online.set()
        self._events.put_nowait(Connected(raw={}, welcome=welcome, reconnect=False))
        # Matches left unfinished by an earlier process (same token): pick them up.
        await self._resume_all(welcome)
        self._reader = asyncio.create_task(self._run(), name=f"moo-sdk-reader-{self.name}")
        if self.resync_after is not None:
            self._resync = asyncio.create_task(self._resync_quiet_matches())
        return welcome

    async def _resync_quiet_matches(self) -> None:
        """Every few seconds: re-``resume`` unfinished matches we play that went quiet."""
        assert self.resync_after is not None
        every = max(0.5, self.resync_after / 3)
        while not self._closing:
            await asyncio.sleep(every)
            if not self.online:
                continue
            now = time.monotonic()
            for match_id, state in list(self.states.items()):
                if state.finished or state.seat is None:
                    self._heard.pop(match_id, None)
                    continue
                heard = self._heard.setdefault(match_id, now)
                if now - heard < self.resync_after:
                    continue
                self._heard[match_id] = now
                with contextlib.suppress(ConnectionClosed, ConnectionLost, OSError):
                    await self._send(self._resume_request(match_id, state.last_seq))

    async def close(self) -> None:
        """Close for good: no reconnect; the event stream ends."""
        self._closing = True
        if self._resync is not None:
            self._resync.cancel()
        was_online = self._online.is_set()
        self._online.clear()
        wire = self._wire
        if wire is not None:
            with contextlib.suppress(Exception):
                await wire.close()
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

    def _rotate(self) -> None:
        """Move on to the next URL of the list (back to the first after the last)."""
        self._url_index = (self._url_index + 1) % len(self.urls)
        self.url = self.urls[self._url_index]

    async def _open(self) -> tuple[Wire, Welcome]:
        """Connect and complete the hello handshake on a fresh socket."""
        wire = await Wire.open(self.url, self.encoding, open_timeout=10)
        try:
            hello: dict[str, Any] = {"type": "hello", "name": self.name, "id": 0,
                                     "client": self.client_name[:64]}
            if self.bot:
                hello["bot"] = True
            if self.token:
                hello["token"] = self.token
            elif self.password is not None:
                hello["password"] = self.password
            await wire.send(hello)
            async with asyncio.timeout(self.request_timeout):
                while True:
                    reply = parse(await wire.receive())
                    if isinstance(reply, ErrorReply):
                        if (reply.code == "bad_token" and "token" in hello
                                and self.password is not None):
                            # our token was revoked (signed out everywhere): the password
                            # still signs in, on the same socket
                            del hello["token"]
                            hello["password"] = self.password
                            await wire.send(hello)
                            continue
                        raise ServerError(reply)
                    if isinstance(reply, Welcome):
                        break
                    # Anything before welcome is unexpected; keep it for the stream.
                    self._events.put_nowait(reply)
        except BaseException:
            with contextlib.suppress(Exception):
                await wire.close()
            raise
        if reply.token:
            self.token = reply.token
        self.name = reply.name or self.name
        self.welcome = reply
        return wire, reply

    async def _resume_all(self, welcome: Welcome) -> None:
        """Ask for everything we missed in each unfinished match (and re-watch spectated ones)."""
        for ref in welcome.matches:
            if ref.match_id not in self.states:
                self.states[ref.match_id] = MatchState(ref.match_id, seat=ref.seat)
        for match_id, state in list(self.states.items()):
            if state.finished:
                continue
            if state.seat is not None:
                await self._send(self._resume_request(match_id, state.last_seq))
            elif match_id in self._watching:
                await self._send({"type": "watch", "match_id": match_id,
                                  "last_seq": state.last_seq})

    def _resume_request(self, match_id: str, last_seq: int) -> dict[str, Any]:
        """A ``resume`` with an id of its own, so a refusal is seen: one that is retryable (a
        cluster whose node died is still handing its matches over: ``not_available`` "try
        again", ``storage_unavailable``) is sent again shortly, instead of leaving the seat
        away until the grace clock forfeits it while this client waits for events."""
        self._next_id += 1
        msg_id = self._next_id
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut

        def done(f: asyncio.Future[Message]) -> None:
            self._pending.pop(msg_id, None)
            if f.cancelled() or f.exception() is not None:
                return  # the connection went: the next reconnect resumes again
            reply = f.result()
            if isinstance(reply, ErrorReply) and retryable(reply) and not self._closing:
                task = asyncio.get_running_loop().create_task(self._resume_again(match_id))
                self._resuming.add(task)
                task.add_done_callback(self._resuming.discard)

        fut.add_done_callback(done)
        return {"type": "resume", "match_id": match_id, "last_seq": last_seq, "id": msg_id}

    async def _resume_again(self, match_id: str) -> None:
        """Re-send a refused reconnect ``resume`` until it is taken (bounded, with backoff)."""
        for attempt in range(60):
            await asyncio.sleep(min(5.0, 0.5 * (attempt + 1)) * self._rng.uniform(0.8, 1.2))
            state = self.states.get(match_id)
            if self._closing or state is None or state.finished or not self.online:
                return
            try:
                await self._request_once("resume", match_id=match_id, last_seq=state.last_seq)
                return
            except ServerError as exc:
                if not retryable(exc.reply):
                    return
            except (ConnectionLost, TimeoutError):
                return  # the next reconnect resumes again

    async def _run(self) -> None:
        """Reader task: read until closed, reconnect if allowed, repeat; then end the stream."""
        try:
            while True:
                wire = self._wire
                assert wire is not None
                try:
                    async for frame in wire.frames():
                        try:
                            msg = decode_frame(frame)
                        except ValueError as exc:
                            log.warning("undecodable frame from server: %s", exc)
                            continue
                        self._dispatch(parse(msg))
                except ConnectionClosed:
                    pass
                self._online.clear()
                code, reason = wire.close_code, wire.close_reason
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
            # server restart instead of having them all knock at the same instant. With several
            # URLs the delay grows once per round of the list, so a dead first node costs one
            # short wait before the next is tried.
            delay = min(self.backoff_max,
                        self.backoff_initial * 2 ** (attempt // len(self.urls)))
            await asyncio.sleep(delay * self._rng.uniform(0.5, 1.0))
            attempt += 1
            try:
                wire, welcome = await self._open()
            except ServerError as exc:
                if exc.code in FATAL_HELLO_CODES:
                    log.warning("reconnect refused: %s", exc)
                    self._events.put_nowait(exc.reply)
                    return False
                continue
            except (OSError, InvalidHandshake, InvalidURI, TimeoutError, ConnectionClosed,
                    ValueError) as exc:
                log.info("reconnect attempt %d to %s failed: %s", attempt, self.url, exc)
                self._rotate()
                continue
            self._wire = wire
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
            self._heard[msg.match_id] = time.monotonic()
        elif isinstance(msg, Watching):
            state = self.states.setdefault(msg.match_id, MatchState(msg.match_id))
            if len(msg.players) == 2:
                state.players = (msg.players[0], msg.players[1])
            if msg.config:
                state.config = msg.config
                state.rules = rules_from_dict(dict(msg.config.get("rules") or {}))
        elif isinstance(msg, MatchAnnounced):
            state = self.states.get(msg.match_id)
            if state is None:
                state = self.states[msg.match_id] = MatchState(msg.match_id)
            elif state.last_seq > 0:
                # The server answers a ``resume`` (after a reconnect, or a retry's catch-up)
                # with ``match`` again; it is not a new match, and ``wait_match`` must not
                # mistake it for one. The request's own future still gets the reply.
                fresh = False
            state.seat = msg.seat
            state.config = msg.config
            state.rules = msg.rules
        elif isinstance(msg, TournamentUpdate) and msg.tournament is not None:
            self.tournaments[msg.tournament.tournament_id] = msg.tournament
        elif isinstance(msg, ErrorReply) and msg.ref is None and msg.code == "rate_limited" \
                and self._pending:
            # The server refused a frame it could not decode, so without saying which
            # request it was (a refusal of a request names it: docs/protocol.md): fail the
            # oldest one so its caller sees the refusal instead of a timeout.
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

    def discard_pending(self) -> int:
        """Drop the messages waiting on the event stream; how many there were.

        For a program that reuses one connection for one task after another (the tournament
        runner's pooled connections): what an earlier match left behind must not be read as
        part of the next. The end of the stream, if it came, stays.
        """
        dropped = 0
        ended = False
        while not self._events.empty():
            if isinstance(self._events.get_nowait(), _End):
                ended = True
            else:
                dropped += 1
        if ended:
            self._events.put_nowait(_END)
        return dropped

    # -- requests ------------------------------------------------------------------------------
    async def _send(self, message: dict[str, Any]) -> None:
        if self._bucket is not None:
            await self._bucket.take()
        wire = self._wire
        if wire is None:
            raise ConnectionLost("not connected")
        await wire.send(message)

    async def send(self, type: str, **fields: Any) -> None:
        """Fire and forget (no ``id``): errors arrive on the event stream."""
        await self._wait_online()
        await self._send({"type": type, **fields})

    async def wait_online(self, timeout: float | None = None) -> bool:
        """Wait until the session is up (again); False if it ended or ``timeout`` passed.

        For callers that saw :class:`ConnectionLost` and want to go on after the reconnect.
        """
        while not self._online.is_set():
            if self._closing or self._ended:
                return False
            try:
                async with asyncio.timeout(timeout):
                    # wake up if the reader gives up (the stream ends) as well as on success
                    waiter = asyncio.ensure_future(self._online.wait())
                    reader = self._reader
                    waits: set[asyncio.Future[Any]] = {waiter}
                    if reader is not None and not reader.done():
                        waits.add(reader)
                    try:
                        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        waiter.cancel()
                    if reader is None or reader.done():
                        return self._online.is_set()
            except TimeoutError:
                return False
        return True

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

        A request of :data:`RETRY_TYPES` refused with a :func:`retryable` error is sent again
        (up to :data:`RETRIES` times, with the reconnect backoff, waiting for the session to
        be back online and catching the match up with ``resume`` first) when
        :meth:`_retry_safe` says it cannot apply twice.

        A lobby or tournament request that makes something (``moo.protocol.REQUEST_ID_TYPES``)
        gets a ``request_id`` here, once, before the first try: every retry sends the same
        one, so the server answers it with what the first try did (the same match, room or
        tournament; docs/protocol.md, "Retrying safely"), and such a request is also sent
        again after the connection dropped before its answer came (once reconnected).
        """
        attempt = 0
        if type in REQUEST_ID_TYPES and "request_id" not in fields:
            fields["request_id"] = new_request_id()
        while True:
            before = self._own_moves(fields.get("match_id"))
            try:
                return await self._request_once(type, **fields)
            except ConnectionLost:
                if (not self.reconnect or "request_id" not in fields or self._closing
                        or attempt >= RETRIES):
                    raise
                attempt += 1
                log.info("%s: the connection dropped before its answer; sending it again",
                         type)
            except ServerError as exc:
                if (not self.reconnect or type not in RETRY_TYPES or not retryable(exc.reply)
                        or attempt >= RETRIES):
                    raise
                attempt += 1
                delay = min(self.backoff_max, self.backoff_initial * 2**attempt)
                log.info("%s refused (%s); retrying in %.1f s", type, exc, delay)
                await asyncio.sleep(delay * self._rng.uniform(0.5, 1.0))
                if not await self._retry_safe(type, fields, before):
                    raise

    def _own_moves(self, match_id: object) -> int:
        """How many of our own guesses the match state holds (-1 if we know no such match)."""
        state = self.states.get(match_id) if isinstance(match_id, str) else None
        return -1 if state is None else len(state.mine())

    async def _retry_safe(self, type: str, fields: dict[str, Any], before: int) -> bool:
        """Catch the match up, then say whether re-sending ``type`` cannot apply it twice.

        The match is resumed (a request: its ``match`` reply comes before the replayed events,
        which a ``ping`` round trip then lets arrive) so :attr:`states` shows what the server
        stored. A numbered ``guess`` (``n``, as :meth:`guess` sends it) is always safe: the
        server answers the same number and guess again with the original event, never a
        second guess. An unnumbered one is re-sent only if our number of guesses is still what
        it was before the first try: an unacknowledged guess that the server did store (a
        forwarded request whose answer was lost) is not played twice. ``secret`` and
        ``resign`` are safe (the server refuses a second one); lobby and read-only requests
        are idempotent.
        """
        match_id = fields.get("match_id")
        if type == "guess" and "n" in fields:
            return True
        if type in ("guess", "secret", "resign") and isinstance(match_id, str) \
                and match_id in self.states:
            with contextlib.suppress(ServerError, ConnectionLost, TimeoutError):
                await self._request_once("resume", match_id=match_id,
                                         last_seq=self.states[match_id].last_seq)
                await self._request_once("ping")
            state = self.states[match_id]
            if state.finished:
                return False
            if type == "guess":
                return self._own_moves(match_id) == before
        return True

    async def _request_once(self, type: str, **fields: Any) -> Message:
        """One try of :meth:`request`."""
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
            if fut.done() and not fut.cancelled():
                fut.exception()  # failed by the reader while the send was failing: seen
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
                    rated: bool | None = None, rules: GameRules | None = None,
                    assist: bool | None = None) -> Queued:
        """Join the quick-pair queue; the ``match`` comes later on the stream (see wait_match).

        ``rules`` (default: the server's default game) pairs you only with players who asked
        for the same rules (docs/protocol.md, "Variants")."""
        fields: dict[str, Any] = {"pool": pool, **_rules(rules), **_opt(assist=assist)}
        if pacing is not None:
            fields["pacing"] = pacing
        if rated is not None:
            fields["rated"] = rated
        return await self._expect(Queued, "queue", **fields)

    async def unqueue(self) -> Unqueued:
        return await self._expect(Unqueued, "unqueue")

    async def challenge(self, opponent: str, pacing: str | None = None,
                        rules: GameRules | None = None) -> ChallengeSent:
        return await self._expect(ChallengeSent, "challenge", opponent=opponent,
                                  **_opt(pacing=pacing), **_rules(rules))

    async def accept(self, challenge_id: str) -> MatchAnnounced:
        return await self._expect(MatchAnnounced, "accept", challenge_id=challenge_id)

    async def decline(self, challenge_id: str) -> None:
        await self.send("decline", challenge_id=challenge_id)

    async def create_room(self, pacing: str | None = None, rules: GameRules | None = None,
                          rated: bool | None = None, assist: bool | None = None) -> RoomCreated:
        return await self._expect(RoomCreated, "room_create",
                                  **_opt(pacing=pacing, rated=rated, assist=assist),
                                  **_rules(rules))

    async def join_room(self, code: str) -> MatchAnnounced:
        return await self._expect(MatchAnnounced, "room_join", code=code)

    async def play_bot(self, strategy: str = "random", pacing: str | None = None,
                       rules: GameRules | None = None, rated: bool | None = None,
                       assist: bool | None = None) -> MatchAnnounced:
        return await self._expect(MatchAnnounced, "play_bot", strategy=strategy,
                                  **_opt(pacing=pacing, rated=rated, assist=assist),
                                  **_rules(rules))

    async def rematch(self, match_id: str) -> None:
        """Offer/accept a rematch; the new ``match`` arrives on the stream when both asked.
        (With a ``request_id``: a retry of the request by hand is answered as the first.)"""
        await self.send("rematch", match_id=match_id, request_id=new_request_id())

    async def matches(self) -> MatchesList:
        return await self._expect(MatchesList, "matches")

    async def leaderboard(self, by: str = "rating") -> Leaderboard:
        return await self._expect(Leaderboard, "leaderboard", by=by)

    # accounts and history (docs/protocol.md, "Accounts" and "History and players")
    async def set_password(self, password: str, old_password: str | None = None) -> PasswordSet:
        """Secure this name with a password (8-128 characters), or change it (then
        ``old_password`` is required). Other devices can then sign in with ``password=``."""
        reply = await self._expect(PasswordSet, "set_password", password=password,
                                   **_opt(old_password=old_password))
        if self.password is not None:
            self.password = password
        return reply

    async def sign_out_all(self) -> SignedOut:
        """Revoke every token of this name (other devices are closed with 4003); this client
        keeps working with the new token, stored in :attr:`token`."""
        reply = await self._expect(SignedOut, "sign_out_all")
        self.token = reply.token
        return reply

    async def history(self, player: str | None = None, cursor: str | None = None,
                      limit: int | None = None) -> History:
        """One page of finished matches, newest first (``player`` defaults to yourself)."""
        return await self._expect(History, "history",
                                  **_opt(player=player, cursor=cursor, limit=limit))

    async def match_record(self, match_id: str) -> MatchRecord:
        """Every event of a finished match, to replay it and check its commitments."""
        return await self._expect(MatchRecord, "match_record", match_id=match_id)

    async def player(self, name: str) -> PlayerInfo:
        return await self._expect(PlayerInfo, "player", name=name)

    async def wait_match(self, timeout: float | None = None) -> MatchAnnounced:
        """Consume the stream up to the next ``match`` (after ``queue`` or a room/challenge)."""
        async with asyncio.timeout(timeout):
            while True:
                msg = await self.receive()
                if isinstance(msg, MatchAnnounced):
                    return msg

    # hosted tournaments (docs/protocol.md, "Tournaments")
    async def create_tournament(
        self, name: str, format: str, *, rounds: int | None = None,
        duration_s: int | None = None, rules: GameRules | None = None, pool: str | None = None,
        start_in_s: int | None = None, secrets: str | None = None, rated: bool | None = None,
        pacing: str | None = None,
    ) -> TournamentInfo:
        """Create a tournament (you are not in it: :meth:`join_tournament` to play)."""
        reply = await self._expect(
            TournamentUpdate, "tournament_create", name=name, format=format,
            **_opt(rounds=rounds, duration_s=duration_s, pool=pool, start_in_s=start_in_s,
                   secrets=secrets, rated=rated, pacing=pacing),
            **_rules(rules),
        )
        assert reply.tournament is not None
        return reply.tournament

    async def tournaments_list(self) -> list[dict[str, Any]]:
        return list((await self._expect(TournamentsList, "tournaments")).tournaments)

    async def join_tournament(self, tournament_id: str) -> None:
        """Join; from now on the server's ``tournament`` updates arrive on the stream (and
        are kept in :attr:`tournaments`), and ``match`` for each game it pairs you in."""
        await self._expect(TournamentAck, "tournament_join", tournament_id=tournament_id)

    async def leave_tournament(self, tournament_id: str) -> None:
        await self._expect(TournamentAck, "tournament_leave", tournament_id=tournament_id)

    # the ladder, for a connected bot (docs/ladder.md, "Connected bots")
    async def join_ladder(self, rules: GameRules | None = None) -> dict[str, Any]:
        """Put this bot (a client that said hello with ``bot=True``) on the ladder of the
        family of ``rules`` (default: the server's default rules): from now on, while the
        connection is open, the server pairs it and announces each game as a ``match``
        (:meth:`next_match`, :attr:`states`). Returns its ``bot`` object (kind
        ``connected``). Joining when it is on the ladder already answers the same bot."""
        reply = await self.request("ladder_join", **_rules(rules))
        return dict(reply.raw["bot"])

    async def leave_ladder(self) -> dict[str, Any]:
        """Take this bot out of pairing (``offline``; its games and rating stay). Returns
        ``{"bot", "games"}``: its ``bot`` object and the ids of its ladder games paired
        already and not finished, which it should still play (a game against a hosted bot
        starts when a worker takes it)."""
        reply = await self.request("ladder_leave")
        return {"bot": dict(reply.raw["bot"]), "games": list(reply.raw.get("games", []))}

    async def watch_tournament(self, tournament_id: str) -> TournamentInfo:
        """The tournament now; its updates then arrive on the stream."""
        reply = await self._expect(TournamentUpdate, "tournament_watch",
                                   tournament_id=tournament_id)
        assert reply.tournament is not None
        return reply.tournament

    async def start_tournament(self, tournament_id: str) -> TournamentInfo:
        """Start an upcoming tournament you created now rather than at its time (it begins
        at the server's next look; a started one is answered as it is)."""
        reply = await self._expect(TournamentUpdate, "tournament_start",
                                   tournament_id=tournament_id)
        assert reply.tournament is not None
        return reply.tournament

    async def unwatch_tournament(self, tournament_id: str) -> None:
        await self._expect(TournamentAck, "tournament_unwatch", tournament_id=tournament_id)

    # match
    async def set_secret(self, match_id: str, secret: str) -> Message:
        return await self.request("secret", match_id=match_id, secret=secret)

    async def guess(self, match_id: str, guess: str, n: int | None = None) -> Message:
        """Returns our own ``guess`` event (free pacing: with the response already in it).

        The guess is numbered (``n``: by default one more than the guesses of ours that the
        match state holds), and the number is fixed before the first try, so a retry after a
        lost answer is the same guess and gets its original event back: it can never count
        twice (docs/protocol.md, "Retrying safely"). Only a match this client knows nothing
        of is guessed in without a number.
        """
        if n is None:
            state = self.states.get(match_id)
            if state is not None and state.seat is not None:
                n = len(state.mine()) + 1
        if n is None:
            return await self.request("guess", match_id=match_id, guess=guess)
        return await self.request("guess", match_id=match_id, guess=guess, n=n)

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


def _rules(rules: GameRules | None) -> dict[str, Any]:
    """The ``rules`` field of a lobby request, or nothing for the server's default game."""
    return {} if rules is None else {"rules": rules.to_dict()}


def _opt(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}
