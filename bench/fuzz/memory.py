"""In-memory stand-ins for websockets' server connection, and one fuzzed client over them.

They let :func:`server.session.run_session` run unchanged with no kernel sockets underneath,
which is what makes 10**6 frames affordable: every frame still goes through the server's own
decode, validate and dispatch code, and its replies come back as the client would see them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from websockets.exceptions import ConnectionClosedOK
from websockets.protocol import State

from moo.protocol import Codec
from server.app import App
from server.connection import Connection
from server.session import run_session


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


def stuck(conn: Connection | None) -> bool:
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
    if conn is None or stuck(conn):
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
