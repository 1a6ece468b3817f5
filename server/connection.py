"""One client's WebSocket: codec, outgoing frames and closing.

Matches never await a client. Everything sent to a connection goes through
:meth:`Connection.send_frame`, which only appends an already-encoded frame to a bounded list and
marks the connection for a flush at the end of the current event-loop iteration. The flush
writes every pending frame in one socket write, synchronously: no task and no wake-up per
message, and the events of a commit batch (a guess and its round's reveal, several matches'
events) leave together. While the socket's write buffer is above a high-water mark the frames
wait; a client that stops reading until ``send_queue_max`` frames pile up is disconnected
(1008) instead of holding up its opponent, its spectators or the server's memory. It can
reconnect and replay what it missed by ``seq``.

The writes go through websockets' sans-I/O protocol object (``ws.protocol``), the same one its
own ``send()`` uses, so framing and state checks stay websockets'.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.protocol import State

from moo.errors import MooError
from moo.protocol import Codec

__all__ = [
    "CLOSE_GOING_AWAY",
    "CLOSE_POLICY",
    "CLOSE_REPLACED",
    "CLOSE_RESTART",
    "Connection",
    "error_message",
]

log = logging.getLogger("moo.connection")

CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
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


class Connection:
    """The server side of one WebSocket, after the handshake."""

    __slots__ = (
        "_closer",
        "_pending",
        "_scheduled",
        "binary",
        "closing",
        "codec",
        "matches",
        "player",
        "queue_max",
        "spectating",
        "ws",
    )

    def __init__(self, ws: ServerConnection, *, codec: Codec, queue_max: int) -> None:
        self.ws = ws
        self.codec = codec
        self.binary = codec.binary
        self.queue_max = queue_max
        self.player: str | None = None
        #: match ids where this connection holds a seat / watches
        self.matches: set[str] = set()
        self.spectating: set[str] = set()
        self.closing = False
        self._pending: list[Frame] = []
        self._scheduled = False
        self._closer: asyncio.Task[None] | None = None

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
            asyncio.get_running_loop().call_soon(self.flush)

    def send_error(self, exc: MooError, ref: Any = None) -> None:
        self.send(error_message(exc, ref))

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
        for frame in pending:
            if isinstance(frame, str):
                protocol.send_text(frame.encode("utf-8"))
            else:
                protocol.send_binary(frame)
        pending.clear()
        data = b"".join(protocol.data_to_send())
        if data:
            transport.write(data)
        return True

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
        if self._closer is not None:
            with contextlib.suppress(Exception):
                await self._closer
        self._pending.clear()


def error_message(exc: MooError, ref: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"type": "error", "code": exc.code, "message": exc.message}
    if ref is not None:
        msg["ref"] = ref
    return msg
