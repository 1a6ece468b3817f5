"""The fault harness's bad network (bench/harness/services.py ``TcpCut``): a slow link holds
every chunk at least its latency and keeps the order, a stalled one delivers nothing until it
flows again and loses nothing, one whose replies are held delivers the requests only, a lossy
one resets the share of connections it is told to and
keeps accepting. An echo service behind the relay shows what a node would see."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from bench.harness.services import TcpCut


@pytest.fixture
async def echo() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A TCP echo service; the list records every chunk it received, in order."""
    got: list[bytes] = []

    async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        with_errors = (ConnectionError, asyncio.IncompleteReadError)
        try:
            while data := await r.read(65536):
                got.append(data)
                w.write(data)
                await w.drain()
        except with_errors:
            pass
        finally:
            w.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1], got
    server.close()
    await server.wait_closed()


async def _link(port: int) -> TcpCut:
    link = TcpCut(port)
    await link.up()
    return link


async def test_a_slow_link_holds_each_way_and_keeps_the_order(
    echo: tuple[int, list[bytes]],
) -> None:
    port, _ = echo
    link = await _link(port)
    link.slow(0.1, 0.05)
    r, w = await asyncio.open_connection("127.0.0.1", link.port)
    t0 = time.monotonic()
    lines = [f"{i:03d}\n".encode() for i in range(40)]
    for line in lines:  # one chunk each, with jitter: still in order at the other end
        w.write(line)
        await w.drain()
        await asyncio.sleep(0)
    back = b"".join([await r.readline() for _ in lines])
    # each chunk was held at least latency - jitter on the way there and again on the way back
    assert time.monotonic() - t0 >= 2 * (0.1 - 0.05)
    assert back == b"".join(lines)
    link.slow(0.0)  # fast again: what follows is not held
    w.close()
    await link.down()


async def test_a_stalled_link_delivers_nothing_until_it_flows_and_loses_nothing(
    echo: tuple[int, list[bytes]],
) -> None:
    port, got = echo
    link = await _link(port)
    r, w = await asyncio.open_connection("127.0.0.1", link.port)
    w.write(b"before\n")
    assert await r.readline() == b"before\n"
    link.stall()
    w.write(b"during\n")
    await w.drain()
    # The relay has read the chunk (it is waiting to deliver it); the service has not seen it,
    # however long it waits: give the loop time enough to have delivered it if it would.
    await asyncio.sleep(0.3)
    assert got == [b"before\n"]
    assert len(link.pairs) == 1  # the connection is still open
    link.flow()
    assert await r.readline() == b"during\n"
    w.close()
    await link.down()


async def test_a_link_holding_replies_delivers_requests_and_answers_late(
    echo: tuple[int, list[bytes]],
) -> None:
    port, got = echo
    link = await _link(port)
    r, w = await asyncio.open_connection("127.0.0.1", link.port)
    link.hold_replies()
    w.write(b"landed\n")
    await w.drain()
    async with asyncio.timeout(10):  # the request goes through: the service has it
        while got != [b"landed\n"]:
            await asyncio.sleep(0.01)
    # its answer is held, however long the client waits (the echo was written at once)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(r.readline(), 0.3)
    assert len(link.pairs) == 1
    link.flow()
    assert await r.read(65536) == b"landed\n"
    w.close()
    await link.down()


async def test_a_lossy_link_resets_the_share_it_is_told_and_keeps_accepting(
    echo: tuple[int, list[bytes]],
) -> None:
    port, _ = echo
    link = await _link(port)
    link.rng.seed(5)
    conns = [await asyncio.open_connection("127.0.0.1", link.port) for _ in range(20)]
    for i, (r, w) in enumerate(conns):  # every connection through before the drop
        w.write(b"%d\n" % i)
        assert await r.readline() == b"%d\n" % i
    reset = link.drop(0.5)
    assert 0 < reset < 20
    echoed = 0
    for r, w in conns:  # the dropped ones see their connection end, the others still echo
        try:
            w.write(b"again\n")
            await w.drain()
            line = await r.readline()
        except ConnectionError:
            line = b""
        assert line in (b"", b"again\n")
        echoed += line == b"again\n"
    assert echoed == 20 - reset
    new_r, new_w = await asyncio.open_connection("127.0.0.1", link.port)  # still accepting
    new_w.write(b"new\n")
    assert await new_r.readline() == b"new\n"
    for _r, w in [*conns, (new_r, new_w)]:
        w.close()
    await link.down()
