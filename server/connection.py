"""One client's WebSocket: codec, outgoing frames and closing.

Matches never await a client. Everything sent to a connection goes through
:meth:`Connection.send_frame`, which only appends an already-encoded message to a bounded list
and marks the connection dirty. One callback per event-loop iteration (not one per connection)
then flushes every dirty connection, each with one socket write of all its pending frames,
synchronously: no task and no wake-up per message, and the events of a commit batch (a guess
and its round's reveal, several matches' events) leave together. While the socket's write
buffer is above a high-water mark the frames wait; a client that stops reading until
``send_queue_max`` frames pile up is disconnected (1008) instead of holding up its opponent,
its spectators or the server's memory. It can reconnect and replay what it missed by ``seq``.

The frames are built here (:func:`frame_header`: server frames are never masked and never
compressed, so a data frame is a 2-10 byte header and the payload) and written only while
websockets' protocol object says the connection is OPEN; websockets still owns the handshake,
control frames and the closing handshake. tests/server/test_server_connection.py checks the bytes
against websockets' own serializer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import struct
import weakref
from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection

try:  # websockets' own unmasking, in C when its extension is built
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - the pure-Python wheel
    from websockets.utils import apply_mask
from websockets.frames import DATA_OPCODES, Opcode
from websockets.frames import Frame as WsFrame
from websockets.protocol import Event, State

from moo.errors import MooError
from moo.protocol import Codec

__all__ = [
    "CLOSE_GOING_AWAY",
    "CLOSE_INTERNAL_ERROR",
    "CLOSE_POLICY",
    "CLOSE_REPLACED",
    "CLOSE_RESTART",
    "Connection",
    "FrameConnection",
    "error_message",
    "frame_header",
    "next_frame",
]

log = logging.getLogger("moo.connection")

#: how long a connection remembers that it saw a match end (:meth:`Connection.saw_end`):
#: far longer than a takeover's announcements take to arrive
ENDED_MEMORY_S = 120.0

CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_INTERNAL_ERROR = 1011
CLOSE_RESTART = 1012
#: How long a close may take (flush + closing handshake) before the socket is aborted.
_CLOSE_BUDGET_S = 3.0

#: Application close code: the same player connected again and this connection was replaced.
CLOSE_REPLACED = 4001

#: Bytes in the socket's write buffer above which we stop writing and let frames wait.
WRITE_HIGH_WATER = 64 * 1024
#: How often a connection whose buffer is full is looked at again.
_RETRY_S = 0.05

Frame = str | bytes

class _Flusher:
    """One event loop's flush of every connection that was sent something in an iteration:
    one callback per iteration, however many connections and frames."""

    __slots__ = ("conns", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        #: the connections with frames waiting; not empty exactly while the callback is due
        self.conns: list[Connection] = []

    def add(self, conn: Connection) -> None:
        conns = self.conns
        if not conns:
            self.loop.call_soon(self.run)
        conns.append(conn)

    def run(self) -> None:
        conns, self.conns = self.conns, []
        for conn in conns:
            try:
                conn.flush()
            except Exception:  # one broken connection must not keep the others' frames back
                log.exception("cannot write to %s; closing it", conn.player)
                conn.drop_pending()
                conn.close(CLOSE_INTERNAL_ERROR, "internal error")


#: each event loop's flusher (weak keys: a loop that closes takes its flusher along); a
#: connection looks its own up once, not on every frame it is sent
_flushers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Flusher] = (
    weakref.WeakKeyDictionary()
)


def _flusher_for(loop: asyncio.AbstractEventLoop) -> _Flusher:
    flusher = _flushers.get(loop)
    if flusher is None:
        flusher = _flushers[loop] = _Flusher(loop)
    return flusher


def frame_header(binary: bool, size: int) -> bytes:
    """RFC 6455 header of one unfragmented, unmasked data frame of ``size`` payload bytes."""
    first = 0x82 if binary else 0x81  # FIN + opcode
    if size < 126:
        return bytes((first, size))
    if size < 1 << 16:
        return bytes((first, 126)) + size.to_bytes(2, "big")
    return bytes((first, 127)) + size.to_bytes(8, "big")


_SMALL_TEXT = [frame_header(False, n) for n in range(126)]
_SMALL_BINARY = [frame_header(True, n) for n in range(126)]


def next_frame(buf: bytes, pos: int, limit: int | None) -> tuple[int, int] | None:
    """Where the frame starting at ``buf[pos]`` has its payload: ``(start, end)``, None while
    it is incomplete, or ``(-1, -1)`` when it announces more than ``limit`` bytes (RFC 6455
    section 5.2; the mask key, if any, is the 4 bytes before ``start``)."""
    have = len(buf) - pos
    if have < 2:
        return None
    second = buf[pos + 1]
    size = second & 0x7F
    start = pos + 2
    if size == 126:
        if have < 4:
            return None
        size = int.from_bytes(buf[pos + 2 : pos + 4], "big")
        start = pos + 4
    elif size == 127:
        if have < 10:
            return None
        size = int.from_bytes(buf[pos + 2 : pos + 10], "big")
        start = pos + 10
    if limit is not None and size > limit:
        return (-1, -1)
    if second & 0x80:
        start += 4
    end = start + size
    return (start, end) if end <= len(buf) else None


class FrameConnection(ServerConnection):
    """websockets' server connection that hands a whole message straight to the session.

    Through websockets, every message costs its generator-based parser, then an assembler
    queue entry, a future, a task wake-up and a coroutine resumption before the session sees
    it: at saturation, a fifth of the event loop's time per guess (docs/benchmarks.md, issue
    33). So, once the handshake is done:

    * the frames are split here (:func:`next_frame`). A complete, unfragmented, masked text or
      binary frame without RSV bits is unmasked here and, while the session waits in
      ``recv()`` with nothing queued (:attr:`on_message` set), given to its handler in this
      same callback. Every other frame (control frames, fragments, anything malformed or over
      the size limit) is handed to websockets byte for byte, one whole frame at a time, so its
      parser always starts at a frame boundary and answers, pongs and closes as it always
      has;
    * the handler returns False to have the message queued for ``recv()`` after all (a
      request that must await something); text that is not UTF-8 takes websockets' path too,
      where ``recv()`` turns it into a 1007 close. Either clears :attr:`on_message`, so no
      later frame can overtake one that is queued: the session's requests are still handled
      strictly in the order they arrived.

    If websockets already holds part of the stream when the connection opens (a client that
    sent frames along with its handshake), websockets keeps the framing for good and only
    :meth:`process_event` hands messages over.
    """

    #: the session's handler, set only while its task waits in ``recv()`` with no message
    #: queued (class defaults: an idle connection's ``__dict__`` holds none of these)
    on_message: Callable[[str | bytes], bool] | None = None
    #: complete messages queued for ``recv()`` and not yet taken by the session
    queued: int = 0
    #: whether this class splits the frames (None: not decided before the first data)
    own_framing: bool | None = None
    #: the start of a frame not complete yet
    partial: bytes = b""
    #: a fragmented message is in progress (its frames all go to websockets)
    fragmented: bool = False

    def deliver_to(self, handler: Callable[[str | bytes], bool] | None) -> None:
        """Hand the next messages to ``handler`` (None: queue them for ``recv()``)."""
        self.on_message = handler

    def data_received(self, data: bytes) -> None:
        own = self.own_framing
        if own is None:
            if self.protocol.state is not State.OPEN:  # the handshake is websockets'
                super().data_received(data)
                return
            own = self.own_framing = not self.protocol.reader.buffer
        if not own:
            super().data_received(data)
            return
        if self.partial:
            data, self.partial = self.partial + data, b""
        protocol = self.protocol
        limit = protocol.max_message_size
        pos, size = 0, len(data)
        while pos < size:
            bounds = next_frame(data, pos, limit)
            if bounds is None:
                self.partial = data[pos:]
                return
            start, end = bounds
            if start < 0:  # too large: websockets refuses it (1009) and reads on
                self.own_framing = False
                super().data_received(data[pos:])
                return
            first = data[pos]
            if (
                (first == 0x82 or first == 0x81)  # FIN, no RSV bits, binary or text
                and data[pos + 1] & 0x80  # masked, as a client's frame must be
                and not self.fragmented
                and self.on_message is not None
                and protocol.state is State.OPEN
            ):
                payload = apply_mask(data[start:end], data[start - 4 : start])
                message: str | bytes | None = payload
                if first == 0x81:
                    try:
                        message = payload.decode()
                    except UnicodeDecodeError:
                        message = None
                if message is not None and self.on_message(message):
                    pos = end
                    continue
                self.on_message = None  # websockets queues it for recv(), below
            elif (first & 0x0F) in (0, 1, 2):  # a data frame websockets reads
                self.fragmented = not first & 0x80
            super().data_received(data[pos:end])
            pos = end

    def eof_received(self) -> None:
        if self.partial:  # websockets reports the incomplete frame as it would have
            partial, self.partial = self.partial, b""
            super().data_received(partial)
        return super().eof_received()

    def process_event(self, event: Event) -> None:
        handler = self.on_message
        if handler is not None and type(event) is WsFrame and event.fin:
            data: str | bytes | None = None
            if event.opcode is Opcode.BINARY:
                data = bytes(event.data)  # what recv() returns (no copy: it is bytes already)
            elif event.opcode is Opcode.TEXT:
                with contextlib.suppress(UnicodeDecodeError):
                    data = bytes(event.data).decode()
            if data is not None and handler(data):
                return
        if isinstance(event, WsFrame) and event.opcode in DATA_OPCODES:
            self.on_message = None
            if event.fin:
                self.queued += 1
        super().process_event(event)


class Connection:
    """The server side of one WebSocket, after the handshake."""

    __slots__ = (
        "_closer",
        "_flusher",
        "_pending",
        "_ping_data",
        "_scheduled",
        "_welcome_waiters",
        "binary",
        "closing",
        "codec",
        "ended",
        "last_in",
        "matches",
        "ping_at",
        "player",
        "queue_max",
        "spectating",
        "welcomed",
        "ws",
    )

    def __init__(self, ws: ServerConnection, *, codec: Codec, queue_max: int) -> None:
        self.ws = ws
        self.codec = codec
        self.binary = codec.binary
        self.queue_max = queue_max
        self.player: str | None = None
        #: match ids where this connection holds a seat / watches (lists: almost always 0-1
        #: entries, and an empty set costs 216 bytes against a list's 56, per connection)
        self.matches: list[str] = []
        self.spectating: list[str] = []
        self.closing = False
        #: matches this connection was sent to their ``finished`` event (match id -> loop
        #: time), kept ENDED_MEMORY_S: what follows a match forgets it at its end, and a late
        #: announcement of the match (a takeover's ``Seated``) must not replay it again
        #: (None until the first: most connections never need it)
        self.ended: dict[str, float] | None = None
        #: the seats its ``welcome`` listed are given back (server/session.py): from then on
        #: anything that attaches it to a match sees what that did (:meth:`welcome_done`)
        self.welcomed = False
        self._welcome_waiters: list[asyncio.Future[None]] | None = None
        self._pending: list[Frame] = []
        self._scheduled = False
        self._flusher = _flusher_for(asyncio.get_running_loop())
        self._closer: asyncio.Task[None] | None = None
        #: loop time of the last data frame received (the session stamps it; see heartbeat.py)
        self.last_in = asyncio.get_running_loop().time()
        #: loop time of the last keepalive Ping, and its payload while its Pong is awaited
        self.ping_at = 0.0
        self._ping_data: bytes | None = None

    # -- sending ----------------------------------------------------------------------------
    def encode(self, msg: dict[str, Any]) -> Frame:
        return self.codec.encode(msg)

    def send(self, msg: dict[str, Any]) -> None:
        self.send_frame(self.encode(msg))

    def send_frame(self, frame: Frame) -> None:
        if self.closing:
            return
        pending = self._pending
        if len(pending) >= self.queue_max:
            log.info("closing %s: %d frames unsent (slow client)", self.player, len(pending))
            self.close(CLOSE_POLICY, "too slow: send queue overflow")
            return
        pending.append(frame)
        if not self._scheduled:
            self._scheduled = True
            self._flusher.add(self)

    def drop_pending(self) -> None:
        self._pending.clear()
        self._scheduled = False

    def flush(self) -> bool:
        """Write what is pending now if the socket can take it; True when nothing is left."""
        self._scheduled = False
        pending = self._pending
        if not pending:
            return True
        ws = self.ws
        if ws.protocol.state is not State.OPEN:
            pending.clear()
            return True
        transport = ws.transport
        if transport.get_write_buffer_size() > WRITE_HIGH_WATER:
            self._scheduled = True
            asyncio.get_running_loop().call_later(_RETRY_S, self.flush)
            return False
        protocol = ws.protocol
        # anything websockets itself queued (a Pong, our keepalive Ping) goes first
        parts: list[bytes] = protocol.data_to_send() if protocol.writes else []
        for frame in pending:
            if isinstance(frame, str):
                frame = frame.encode("utf-8")
                size = len(frame)
                parts.append(_SMALL_TEXT[size] if size < 126 else frame_header(False, size))
            else:
                size = len(frame)
                parts.append(_SMALL_BINARY[size] if size < 126 else frame_header(True, size))
            parts.append(frame)
        pending.clear()
        transport.write(b"".join(parts))
        return True

    # -- keepalive ----------------------------------------------------------------------------
    def ping(self, now: float) -> None:
        """Send a keepalive Ping now, registered where websockets matches the Pong to it."""
        ws = self.ws
        if self.closing or ws.protocol.state is not State.OPEN:
            return
        data = struct.pack("!I", random.getrandbits(32))
        while data in ws.pending_pings:
            data = struct.pack("!I", random.getrandbits(32))
        ws.pending_pings[data] = (asyncio.get_running_loop().create_future(), now)
        self._ping_data = data
        self.ping_at = now
        ws.protocol.send_ping(data)
        if not self._pending:  # otherwise the scheduled flush carries it
            out = b"".join(ws.protocol.data_to_send())
            if out:
                ws.transport.write(out)

    def ping_pending(self) -> bool:
        """Whether the last keepalive Ping is still waiting for its Pong."""
        data = self._ping_data
        if data is None:
            return False
        if data in self.ws.pending_pings:
            return True
        self._ping_data = None
        return False

    # -- the welcome's seats ----------------------------------------------------------------------
    def seats_given_back(self) -> None:
        """The session gave back the seats its ``welcome`` listed (or the session is over)."""
        self.welcomed = True
        waiters, self._welcome_waiters = self._welcome_waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def saw_end(self, match_id: str) -> None:
        """This connection was sent ``match_id``'s ``finished`` event (see :attr:`ended`)."""
        now = asyncio.get_running_loop().time()
        ended = self.ended
        if ended is None:
            ended = self.ended = {}
        else:
            for old in [m for m, at in ended.items() if now - at > ENDED_MEMORY_S]:
                del ended[old]
        ended[match_id] = now

    def has_seen_end(self, match_id: str) -> bool:
        """Whether this connection was sent ``match_id`` to its end within ENDED_MEMORY_S."""
        at = None if self.ended is None else self.ended.get(match_id)
        return at is not None and asyncio.get_running_loop().time() - at <= ENDED_MEMORY_S

    async def welcome_done(self) -> None:
        """Wait until :meth:`seats_given_back`: a match attached to a connection in the middle
        of its ``hello`` could be given back a second time by the welcome's list, replaying its
        events twice (the waiters list exists only while somebody waits: most never do)."""
        if self.welcomed:
            return
        waiter = asyncio.get_running_loop().create_future()
        if self._welcome_waiters is None:
            self._welcome_waiters = []
        self._welcome_waiters.append(waiter)
        await waiter

    # -- closing ----------------------------------------------------------------------------
    def close(self, code: int, reason: str) -> None:
        """Close soon, after what is already pending; safe from sync code, repeatedly."""
        if self.closing:
            return
        self.closing = True
        self._closer = asyncio.get_running_loop().create_task(self._close(code, reason))

    async def _close(self, code: int, reason: str) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                while not self.flush():
                    await asyncio.sleep(_RETRY_S)
        self._pending.clear()
        # A peer that never reads can keep websockets' closing handshake waiting on flow
        # control forever; past the budget the socket is aborted so its descriptor is freed.
        try:
            async with asyncio.timeout(_CLOSE_BUDGET_S):
                await self.ws.close(code, reason[:120])
        except TimeoutError:
            self.ws.transport.abort()

    async def finish(self) -> None:
        """The session is over: let a close in progress send its code, then drop the rest."""
        self.closing = True
        self.seats_given_back()  # nothing waits on a connection that is gone
        if self._closer is not None:
            with contextlib.suppress(Exception):
                await self._closer
        self._pending.clear()


def error_message(exc: MooError, ref: Any = None) -> dict[str, Any]:
    """The error reply; an error about a particular match (``in_match``) names it, and one
    about a guess's number (``guess_taken``, ``guess_ahead``) says which number comes next."""
    msg: dict[str, Any] = {"type": "error", "code": exc.code, "message": exc.message}
    if ref is not None:
        msg["ref"] = ref
    match_id = getattr(exc, "match_id", None)
    if match_id is not None:
        msg["match_id"] = match_id
    expected = getattr(exc, "expected", None)
    if expected is not None:
        msg["expected"] = expected
    return msg
