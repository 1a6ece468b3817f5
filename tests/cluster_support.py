"""Cluster nodes for the tests: real ``moo serve`` subprocesses sharing one PostgreSQL database.

Each node listens on a free port (``--port 0``; the port is read from its log) and keeps its
stderr, so a failing test can show what the node said. Nothing waits on a sleep: callers poll
the database or a node's state with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aiomqtt
import asyncpg
import pytest

from bench.harness.services import TcpCut
from server.cluster.transport import PREFIX
from server.cluster.wire import Message, decode
from tests.mqtt_support import Broker
from tests.patience import patience
from tests.server.test_server_http import http_get
from tests.server_support import Client

M = TypeVar("M", bound=Message)

ROOT = Path(__file__).resolve().parent.parent
LISTENING = re.compile(rb"listening on ws://[^:]+:(\d+)/")
#: what deploy/local-cluster.sh runs besides PostgreSQL, Mosquitto and the nodes
DEMO_TOOLS = ("haproxy", "openssl", "curl")


def _tool(name: str) -> str | None:
    return shutil.which(name) or (f"/usr/sbin/{name}" if os.access(f"/usr/sbin/{name}", os.X_OK)
                                  else None)


def problem() -> str | None:
    """Why the demo cluster (HAProxy in front) cannot run here, or None."""
    missing = [name for name in DEMO_TOOLS if _tool(name) is None]
    return f"{', '.join(missing)} not installed" if missing else None


@pytest.fixture(scope="session")
def haproxy() -> str:
    """HAProxy's binary (and the demo cluster's other tools): what marks a test ``cluster``."""
    why = problem()
    if why is not None:
        pytest.fail(f"{why} (apt-get install {' '.join(DEMO_TOOLS)}; ./dev test does as root)",
                    pytrace=False)
    found = _tool("haproxy")
    assert found is not None
    return found


class Node:
    def __init__(self, name: str, proc: asyncio.subprocess.Process, port: int) -> None:
        self.name = name
        self.proc = proc
        self.port = port
        self.log: list[bytes] = []
        self._drain: asyncio.Task[None] | None = None

    def text(self) -> str:
        return b"".join(self.log).decode(errors="replace")

    async def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)  # a paused node must be able to exit
            self.proc.send_signal(sig)
        rc = await asyncio.wait_for(self.proc.wait(), patience(30))
        await self.drained()
        return rc

    async def drained(self) -> None:
        """Wait for the exited node's standard error to be read to its end, so its pipe is
        closed on this event loop (a transport left open is closed by the garbage collector
        after the loop is gone: "Event loop is closed" in whatever test runs then)."""
        if self._drain is not None:
            await asyncio.wait_for(self._drain, patience(10))


async def start_node(
    db: str, name: str, *, bus: str = "mqtt://127.0.0.1:1", lease_ms: int = 2000,
    extra: tuple[str, ...] = (),
) -> Node:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", "serve", "--port", "0", "--db", db,
        "--cluster", bus, "--node", name, "--lease-ms", str(lease_ms),
        "--bot-delay-ms", "0", "--grace-ms", "60000",
        # the tests' players all register their names from 127.0.0.1
        "--new-names-per-address", "1000000", *extra,
        cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    lines: list[bytes] = []
    async with asyncio.timeout(patience(60)):
        while True:
            line = await proc.stderr.readline()
            if not line:
                raise AssertionError(f"node {name} exited early:\n" + b"".join(lines).decode())
            lines.append(line)
            if found := LISTENING.search(line):
                break
    node = Node(name, proc, int(found.group(1)))
    node.log = lines

    async def drain() -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            node.log.append(line)

    node._drain = asyncio.get_running_loop().create_task(drain())
    return node


@asynccontextmanager
async def nodes(db: str, *names: str, **kwargs: Any) -> AsyncIterator[list[Node]]:
    """Start the named nodes one after another; kill whatever still runs at the end."""
    started: list[Node] = []
    try:
        for name in names:
            started.append(await start_node(db, name, **kwargs))
        yield started
    finally:
        for node in started:
            if node.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(node.proc.pid, signal.SIGCONT)
                node.proc.kill()
                await node.proc.wait()
            with contextlib.suppress(TimeoutError):  # (a child may still hold the pipe)
                await node.drained()


@asynccontextmanager
async def database_relay(db: str) -> AsyncIterator[tuple[TcpCut, str]]:
    """A TCP relay in front of the database that the test can cut, stall or slow
    (bench/harness/services.py), and the URL that reaches the database through it; at the end
    the relay flows again and is taken down."""
    cut = TcpCut(urlsplit(db).port or 5432)
    await cut.up()
    try:
        yield cut, db.replace(f":{urlsplit(db).port}/", f":{cut.port}/")
    finally:
        cut.flow()
        if cut.is_up:
            await cut.down()


async def query(db: str, sql: str, *args: Any) -> list[Any]:
    conn = await asyncpg.connect(db)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def until(
    check: Callable[[], Awaitable[bool]], timeout: float, what: str, poll: float = 0.05
) -> float:
    """Poll ``check`` until true; returns the seconds it took. ``timeout`` is a safety net in
    seconds on an idle machine, grown for this one's load (tests/patience.py)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    limit = patience(timeout)
    while not await check():
        if loop.time() - start > limit:
            raise AssertionError(f"timed out after {limit:g}s waiting for {what}")
        await asyncio.sleep(poll)
    return loop.time() - start


async def challenge_match(port: int) -> tuple[Client, Client, str]:
    """ann (JSON) challenges bob (MessagePack) on the node at ``port`` to a free match, which
    that node then owns: returns ann, bob and the match id (secrets not set yet)."""
    ann = await Client.hello(port, "ann")
    bob = await Client.hello(port, "bob", "moo.v1.msgpack")
    sent = await ann.request({"type": "challenge", "opponent": "bob", "pacing": "free"})
    offer = await bob.expect(lambda m: m.get("challenge_id") == sent["challenge_id"])
    accepted = await bob.request({"type": "accept", "challenge_id": offer["challenge_id"]})
    return ann, bob, str(accepted["match_id"])


@pytest.fixture(autouse=True)
def client_resync_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cluster test runs with the SDK's quiet-match resync off (``MOO_RESYNC_AFTER=0``,
    inherited by the ``moo`` processes the tests start): the server must keep every follower
    fed by itself (docs/cluster.md, "Delivery"), not with the clients' help."""
    monkeypatch.setenv("MOO_RESYNC_AFTER", "0")


async def following_a(*ns: Node) -> None:
    """Every node of ``ns`` on the bus, agreeing that node a leads the lobby (its /healthz)."""
    for n in ns:
        async def up(n: Node = n) -> bool:
            _, _, body = await http_get(n.port, "/healthz")
            health = json.loads(body)
            return bool(health["bus"] == "ok" and health["lobby_leader"] == "a")

        await until(up, 20, f"{n.name} on the bus, following a")


@asynccontextmanager
async def bus_items_to(broker: Broker, node: str, kind: type[M]) -> AsyncIterator[list[M]]:
    """The items of ``kind`` the broker hands on to ``node`` from now on, read by a subscriber
    of the test's own: the witness that a node's message has reached the broker. A reply the
    sending node gave its client after publishing is none: the publish may still be in the
    relay between that node and the broker, and a cut of the relay loses it (the node sends
    it again only once it is back on the bus). The subscriber sees them also while ``node``
    has no session to be given them."""
    items: list[M] = []
    async with aiomqtt.Client("127.0.0.1", broker.port) as client:
        await client.subscribe(f"{PREFIX}/node/{node}", qos=1)

        async def read() -> None:
            async for message in client.messages:
                assert isinstance(message.payload, bytes), message.payload
                envelope, _ = decode(message.payload)
                items.extend(i for i in envelope.items if isinstance(i, kind))

        reader = asyncio.get_running_loop().create_task(read())
        try:
            yield items
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader


async def matches_of(db: str, name: str) -> list[str]:
    """The ids of the stored matches in which ``name`` plays."""
    rows = await query(db, "SELECT match_id FROM matches"
                           " WHERE jsonb_exists(meta::jsonb -> 'players', $1)", name)
    return [r[0] for r in rows]
