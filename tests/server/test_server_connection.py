"""Connection limits that need no match: slow readers, silent clients, the token bucket."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from websockets.asyncio.connection import Connection as WsConnection
from websockets.datastructures import Headers
from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.streams import StreamReader

from moo.protocol import Codec
from server.connection import (
    WRITE_HIGH_WATER,
    Connection,
    FrameConnection,
    frame_header,
    next_frame,
)
from server.heartbeat import Heartbeat
from server.ratelimit import TokenBucket
from tests.patience import patience
from tests.server_support import Client, free_match, running, server_settings


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
    async with asyncio.timeout(patience(5)):
        await ws.close_called.wait()
    assert ws.closed is not None and ws.closed[0] == 1008
    assert ws.transport.written == []  # nothing more was pushed at the stuck peer


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 4096, 65535, 65536, 70000])
@pytest.mark.parametrize("binary", [False, True])
def test_frames_are_byte_identical_to_websockets_own(size: int, binary: bool) -> None:
    payload = bytes(i % 251 for i in range(size))
    theirs = Frame(Opcode.BINARY if binary else Opcode.TEXT, payload).serialize(
        mask=False, extensions=[]
    )
    assert frame_header(binary, size) + payload == theirs


def _parse_frames(data: bytes) -> list[Frame]:
    """Unmasked frames as a client reads them, with websockets' own parser."""
    reader = StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    frames = []
    while reader.buffer:
        parser = Frame.parse(reader.read_exact, mask=False)
        try:
            next(parser)
        except StopIteration as done:
            frames.append(done.value)
        else:
            raise AssertionError("truncated frame")
    return frames


async def test_a_burst_of_frames_leaves_in_one_write_per_connection() -> None:
    socks = [FakeSocket(), FakeSocket()]
    conns = [Connection(s, codec=Codec("moo.v1.json"), queue_max=16) for s in socks]  # type: ignore[arg-type]
    sizes = [0, 100, 200, 70_000]  # small frames (header table) and 2- and 8-byte lengths
    for i in sizes:
        for conn in conns:
            conn.send({"type": "pong", "n": "x" * i})
    assert all(s.transport.written == [] for s in socks)  # nothing before the loop turns
    await asyncio.sleep(0)
    for sock in socks:
        (data,) = sock.transport.written
        texts = [bytes(f.data).decode() for f in _parse_frames(data)]
        assert texts == [f'{{"type":"pong","n":"{"x" * i}"}}' for i in sizes]


async def test_a_connection_that_cannot_be_written_does_not_hold_back_the_others() -> None:
    socks = [FakeSocket(), FakeSocket(), FakeSocket()]

    def broken(data: bytes) -> None:
        raise OSError("socket gone")

    socks[1].transport.write = broken  # type: ignore[method-assign]
    conns = [Connection(s, codec=Codec("moo.v1.json"), queue_max=16) for s in socks]  # type: ignore[arg-type]
    for conn in conns:
        conn.send({"type": "pong"})
    await asyncio.sleep(0)
    assert len(socks[0].transport.written) == len(socks[2].transport.written) == 1
    assert conns[1].closing
    async with asyncio.timeout(patience(5)):
        await socks[1].close_called.wait()
    assert socks[1].closed is not None and socks[1].closed[0] == 1011
    conns[0].send({"type": "pong"})  # the flush machinery still runs for everyone else
    await asyncio.sleep(0)
    assert len(socks[0].transport.written) == 2


async def test_no_hello_in_time_closes_with_1008(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, handshake_timeout_s=0.3)) as app:
        c = await Client.open(app.port)
        assert await c.closed() == 1008


async def test_idle_connection_is_closed(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, idle_timeout_s=0.3)) as app:
        c = await Client.hello(app.port, "ann")
        assert await c.closed() == 1001


async def _until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait for a condition the server reaches on its own schedule (polled; the timeout is a
    safety net, grown for the machine's load)."""
    async with asyncio.timeout(patience(timeout)):
        while not condition():
            await asyncio.sleep(0.02)


async def test_quiet_client_is_pinged_and_stays_connected(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, ping_interval_s=0.2)) as app:
        # How late a Pong may be is not this test's point (a busy machine delays the client's
        # answer): a generous deadline, so that only a Pong that never comes would close it.
        app.heartbeat.ping_timeout_s = patience(30)
        c = await Client.hello(app.port, "ann")
        # a Ping goes out only once the previous one is answered: 3 pings, 2 Pongs back at least
        await _until(lambda: app.heartbeat.pings >= 3)
        assert app.heartbeat.dead_closed == 0 and app.heartbeat.idle_closed == 0
        assert (await c.request({"type": "ping"}))["type"] == "pong"
        assert len(app.connections) == 1


async def test_busy_client_is_not_pinged(tmp_path: Path) -> None:
    """Every frame from the client stamps its connection, and the keepalive pings only a
    connection quiet for a whole interval since its last frame. Driven by hand with explicit
    times (``Heartbeat.check``), so that no pause of a busy machine can make a gap."""
    async with running(server_settings(tmp_path, ping_interval_s=0)) as app:
        c = await Client.hello(app.port, "ann")
        (conn,) = app.connections
        keepalive = Heartbeat([conn], idle_timeout_s=0, ping_interval_s=0.5)
        for _ in range(5):
            stamped = conn.last_in
            assert (await c.request({"type": "ping"}))["type"] == "pong"
            assert conn.last_in > stamped  # the frame proved the peer alive
            keepalive.check(conn, conn.last_in + 0.49)
        assert keepalive.pings == 0 and not conn.ping_pending()
        keepalive.check(conn, conn.last_in + 0.5)  # a whole interval of silence
        assert keepalive.pings == 1 and conn.ping_pending()
        await _until(lambda: not conn.ping_pending())  # the client's Pong came back


async def test_client_that_never_answers_pings_is_closed_with_1011(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, ping_interval_s=0.2)) as app:
        c = await Client.hello(app.port, "ann")
        c.ws.transport.pause_reading()  # the peer hangs: no Pong will ever come back
        await _until(lambda: app.heartbeat.dead_closed == 1)
        assert app.heartbeat.pings == 1
        c.ws.transport.resume_reading()
        assert await c.closed() == 1011
        await _until(lambda: not app.connections)


def test_token_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=2.0, burst=3, clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.5  # one token back
    assert bucket.take() and not bucket.take()
    now[0] += 100
    assert sum(bucket.take() for _ in range(10)) == 3


# -- messages handed to the session as they are parsed (server/connection.py, FrameConnection) --
async def test_a_move_behind_a_request_that_awaits_is_answered_after_it(tmp_path: Path) -> None:
    """Moves are applied in the callback that parsed them only while the session has nothing
    queued: a guess sent right behind a request that awaits the database must not overtake it
    (its append would then join the same commit and its acknowledgement arrive first)."""
    async with running(server_settings(tmp_path)) as app:
        ann, bob, mid = await free_match(app.port)
        slow = await ann.send({"type": "history"})
        move = await ann.send({"type": "guess", "match_id": mid, "guess": "1234"})
        await ann.expect(lambda m: m.get("ref") == move)
        refs = [m.get("ref") for m in ann.seen if m.get("ref") in (slow, move)]
        assert refs == [slow, move]
        await ann.close()
        await bob.close()


async def test_a_fragmented_message_is_read_and_the_next_ones_too(tmp_path: Path) -> None:
    """A message in several frames takes websockets' own path; those after it are still read."""
    async with running(server_settings(tmp_path)) as app:
        ann, bob, mid = await free_match(app.port)
        await ann.ws.send(['{"type":"ping",', '"id":"frag"}'])
        assert (await ann.expect(lambda m: m.get("ref") == "frag"))["type"] == "pong"
        ack = await ann.request({"type": "guess", "match_id": mid, "guess": "1234"})
        assert (ack["kind"], ack["n"], ack["bulls"], ack["cows"]) == ("guess", 1, 0, 1)
        assert (await ann.request({"type": "ping"}))["type"] == "pong"
        await ann.close()
        await bob.close()


async def test_text_that_is_not_utf8_still_closes_with_1007(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        ann, bob, _ = await free_match(app.port)
        await ann.ws.send(b'{"type":"ping","id":"\xff"}', text=True)
        assert await ann.closed() == 1007
        await bob.close()


def test_serve_raises_its_open_file_limit_towards_max_connections() -> None:
    """A soft limit of 1024 descriptors would refuse accepts long before max_connections;
    `moo serve` raises it as far as the hard limit allows (in a child: this process keeps its
    own limit)."""
    import subprocess
    import sys

    script = (
        "import resource; from server.cli import raise_fd_limit\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "print(raise_fd_limit(1000), resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2]).stdout.split()
    returned, now, hard = (int(x) for x in out)
    want = 1000 + 256
    assert returned == now == (want if hard < 0 else min(want, hard))


def _client_frame(payload: bytes, first: int = 0x82, mask: bytes = b"\x01\x02\x03\x04") -> bytes:
    """A client's frame as it is on the wire: masked (RFC 6455 section 5.3)."""
    size = len(payload)
    if size < 126:
        head = bytes((first, 0x80 | size))
    elif size < 1 << 16:
        head = bytes((first, 0x80 | 126)) + size.to_bytes(2, "big")
    else:
        head = bytes((first, 0x80 | 127)) + size.to_bytes(8, "big")
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


@pytest.mark.parametrize("size", [0, 5, 125, 126, 300, 65535, 65536])
def test_next_frame_finds_the_payload_only_once_the_frame_is_complete(size: int) -> None:
    frame = _client_frame(bytes(range(256)) * (size // 256) + bytes(size % 256))
    buf = b"xy" + frame + b"\x81"  # something before, the start of the next frame after
    start, end = 2 + len(frame) - size, 2 + len(frame)
    for cut in range(2, len(frame) + 2):
        assert next_frame(buf[:cut], 2, None) is None
    assert next_frame(buf, 2, None) == (start, end)
    assert next_frame(buf, 2, size) == (start, end)
    if size:
        assert next_frame(buf, 2, size - 1) == (-1, -1)
    assert next_frame(buf, end, None) is None  # one byte of the next frame: incomplete


class _Recorder:
    def __init__(self, answer: bool = True) -> None:
        self.got: list[str | bytes] = []
        self.answer = answer

    def __call__(self, message: str | bytes) -> bool:
        self.got.append(message)
        return self.answer


class ReadingTransport(FakeTransport):
    """A socket that records what is written and lets websockets pause its reading."""

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def is_closing(self) -> bool:
        return False


def _open_frame_connection() -> tuple[FrameConnection, ReadingTransport]:
    """A server connection past its handshake, on a transport that records what it writes
    (websockets' own connection set-up, without the server's handler task)."""
    protocol = ServerProtocol(state=State.OPEN, max_size=1000)  # its parser reads frames
    conn = FrameConnection(protocol, server=None)  # type: ignore[arg-type]
    conn.request = Request("/", Headers())  # the handshake's, as if it had been read
    transport = ReadingTransport()
    WsConnection.connection_made(conn, transport)  # type: ignore[arg-type]
    return conn, transport


async def test_frames_split_anywhere_reach_the_session_whole_and_in_order() -> None:
    conn, _ = _open_frame_connection()
    handler = _Recorder()
    conn.deliver_to(handler)
    stream = (_client_frame(b"one") + _client_frame("twö".encode(), first=0x81)
              + _client_frame(b"x" * 300))
    for i in range(len(stream)):  # one byte per read: every frame arrives in pieces
        conn.data_received(stream[i : i + 1])
    assert handler.got == [b"one", "twö", b"x" * 300]
    assert conn.queued == 0


async def test_what_the_session_declines_is_queued_for_recv_and_nothing_overtakes_it() -> None:
    conn, _ = _open_frame_connection()
    handler = _Recorder(answer=False)  # "this one needs the task"
    conn.deliver_to(handler)
    conn.data_received(_client_frame(b"slow") + _client_frame(b"next"))
    assert handler.got == [b"slow"]  # the second frame was not offered ahead of the first
    assert conn.on_message is None and conn.queued == 2
    assert await conn.recv() == b"slow"
    assert await conn.recv() == b"next"


async def test_control_frames_and_fragments_are_websockets_own() -> None:
    conn, transport = _open_frame_connection()
    handler = _Recorder()
    conn.deliver_to(handler)
    ping = _client_frame(b"hi", first=0x89)
    fragments = _client_frame(b"ab", first=0x02) + _client_frame(b"cd", first=0x80)
    conn.data_received(ping + fragments + _client_frame(b"after"))
    assert transport.written == [bytes((0x8A, 2)) + b"hi"]  # websockets answered the Ping
    assert handler.got == []  # the fragments went to recv(), and so did what followed
    assert await conn.recv() == b"abcd"
    assert await conn.recv() == b"after"


async def test_an_oversized_frame_is_left_to_websockets_which_refuses_it() -> None:
    conn, transport = _open_frame_connection()
    conn.deliver_to(_Recorder())
    conn.data_received(_client_frame(b"y" * 1001))
    assert conn.protocol.state is not State.OPEN  # failed with 1009 (message too big)
    close = transport.written[0]  # a Close frame with code 1009 (message too big)
    assert close[0] == 0x88 and int.from_bytes(close[2:4], "big") == 1009
