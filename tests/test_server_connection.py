"""Connection limits that need no match: slow readers, silent clients, the token bucket."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moo.protocol import Codec
from server.connection import Connection
from server.ratelimit import TokenBucket
from tests.server_support import Client, running, server_settings


class StuckSocket:
    """A peer that never reads: every send blocks until the connection is closed."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.closed: tuple[int, str] | None = None
        self.gate = asyncio.Event()

    async def send(self, frame: Any) -> None:
        self.sent.append(frame)
        await self.gate.wait()

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)
        self.gate.set()


async def test_a_slow_reader_is_dropped_instead_of_buffered_without_bound() -> None:
    ws = StuckSocket()
    conn = Connection(ws, codec=Codec("moo.v1.json"), queue_max=8)  # type: ignore[arg-type]
    conn.start()
    for i in range(8 + 1 + 5):  # one frame is stuck in send(); 8 wait; the next overflows
        conn.send({"type": "pong", "n": i})
        await asyncio.sleep(0)
    assert conn.closing
    async with asyncio.timeout(5):
        while ws.closed is None:
            await asyncio.sleep(0.01)
    assert ws.closed[0] == 1008
    await conn.finish()


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
