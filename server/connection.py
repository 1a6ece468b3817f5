"""One client's WebSocket: framing, codec choice, outgoing queue and closing.

Matches never await a client. Everything sent to a connection goes through
:meth:`Connection.send_frame`, which only appends an already-encoded frame to a bounded
queue drained by the connection's single writer task; a client that stops reading fills its
queue and is disconnected (it can reconnect and replay what it missed by ``seq``) instead of
holding up its opponent, its spectators or the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from moo.errors import MooError
from moo.protocol import Codec

__all__ = ["CLOSE_GOING_AWAY", "CLOSE_POLICY", "CLOSE_REPLACED", "CLOSE_RESTART", "Connection"]

log = logging.getLogger("moo.connection")

CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_RESTART = 1012
#: Application close code: the same player connected again and this connection was replaced.
CLOSE_REPLACED = 4001

Frame = str | bytes


class Connection:
    """The server side of one WebSocket, after the handshake."""

    __slots__ = (
        "_queue",
        "_wake",
        "_writer",
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
        self.player: str | None = None
        #: match ids where this connection holds a seat / watches
        self.matches: set[str] = set()
        self.spectating: set[str] = set()
        self.closing = False
        self._queue: deque[Frame] = deque(maxlen=None)
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self.queue_max = queue_max

    def start(self) -> None:
        self._writer = asyncio.get_running_loop().create_task(self._drain())

    # -- sending ----------------------------------------------------------------------------
    def encode(self, msg: dict[str, Any]) -> Frame:
        return self.codec.encode(msg)

    def send(self, msg: dict[str, Any]) -> None:
        self.send_frame(self.encode(msg))

    def send_frame(self, frame: Frame) -> None:
        if self.closing:
            return
        if len(self._queue) >= self.queue_max:
            log.info("closing %s: send queue full (slow client)", self.player)
            self.close(CLOSE_POLICY, "too slow: send queue overflow")
            return
        self._queue.append(frame)
        self._wake.set()

    def send_error(self, exc: MooError, ref: Any = None) -> None:
        self.send(error_message(exc, ref))

    async def _drain(self) -> None:
        queue, wake, ws = self._queue, self._wake, self.ws
        try:
            while True:
                await wake.wait()
                wake.clear()
                while queue:
                    await ws.send(queue.popleft())
        except ConnectionClosed:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:  # pragma: no cover - defensive: never kill the loop
            log.exception("writer of %s failed", self.player)

    async def flush(self, timeout: float = 1.0) -> None:
        """Give queued frames a moment to go out (used before closing on purpose)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self._queue and self._writer is not None and not self._writer.done():
                    await asyncio.sleep(0)

    # -- closing ----------------------------------------------------------------------------
    def close(self, code: int, reason: str) -> None:
        """Close soon, after what is already queued; safe to call from sync code, repeatedly."""
        if self.closing:
            return
        self.closing = True
        asyncio.get_running_loop().create_task(self._close(code, reason))

    async def _close(self, code: int, reason: str) -> None:
        await self.flush()
        await self.ws.close(code, reason[:120])

    async def finish(self) -> None:
        self.closing = True
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._writer


def error_message(exc: MooError, ref: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"type": "error", "code": exc.code, "message": exc.message}
    if ref is not None:
        msg["ref"] = ref
    return msg
