"""Connection limits that need no match: slow readers, silent clients, the token bucket."""

from __future__ import annotations

import asyncio
from pathlib import Path

from websockets.protocol import State
from websockets.server import ServerProtocol

from moo.protocol import Codec
from server.connection import WRITE_HIGH_WATER, Connection
from server.ratelimit import TokenBucket
from tests.server_support import Client, running, server_settings


class FakeTransport:
    """A socket whose peer stopped reading: its write buffer never drains."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.buffered = 0

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def write(self, data: bytes) -> None:
        self.written.append(data)
        self.buffered += len(data)


class FakeSocket:
    def __init__(self) -> None:
        self.protocol = ServerProtocol()
        self.protocol.state = State.OPEN
        self.transport = FakeTransport()
        self.closed: tuple[int, str] | None = None
        self.close_called = asyncio.Event()

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)
        self.close_called.set()


async def test_frames_of_one_loop_iteration_leave_in_one_write() -> None:
    ws = FakeSocket()
    conn = Connection(ws, codec=Codec("moo.v1.json"), queue_max=8)  # type: ignore[arg-type]
    for i in range(3):
        conn.send({"type": "pong", "n": i})
    assert ws.transport.written == []  # nothing written synchronously
    await asyncio.sleep(0)  # one loop iteration
    assert len(ws.transport.written) == 1
    assert ws.transport.written[0].count(b"pong") == 3


async def test_a_slow_reader_is_dropped_instead_of_buffered_without_bound() -> None:
    ws = FakeSocket()
    conn = Connection(ws, codec=Codec("moo.v1.json"), queue_max=8)  # type: ignore[arg-type]
    ws.transport.buffered = 10 * WRITE_HIGH_WATER  # the peer is not reading
    for i in range(8):
        conn.send({"type": "pong", "n": i})
    assert not conn.closing
    conn.send({"type": "pong", "n": 8})  # one too many
    assert conn.closing
    async with asyncio.timeout(5):
        await ws.close_called.wait()
    assert ws.closed is not None and ws.closed[0] == 1008
    assert ws.transport.written == []  # nothing more was pushed at the stuck peer


async def test_no_hello_in_time_closes_with_1008(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, handshake_timeout_s=0.3)) as app:
        c = await Client.open(app.port)
        assert await c.closed() == 1008


async def test_idle_connection_is_closed(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, idle_timeout_s=0.3)) as app:
        c = await Client.hello(app.port, "ann")
        assert await c.closed() == 1001


def test_token_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=2.0, burst=3, clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.5  # one token back
    assert bucket.take() and not bucket.take()
    now[0] += 100
    assert sum(bucket.take() for _ in range(10)) == 3
