"""A cluster of the harness's own: PostgreSQL, a broker, and N ``moo serve --cluster`` nodes,
each node reaching the broker and the database through a relay of its own that the nemesis can
cut (bench/harness/services.py).

Nodes listen on fixed ports, so a node started again after a kill is found where it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

import asyncpg

from bench.harness.services import Broker, PrivatePostgres, TcpCut, free_port

ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(rb"listening on ws://[^:]+:(\d+)/")
DATABASE = "moo"


class Node:
    """One ``moo serve --cluster`` process on a fixed port: started, signalled, started again."""

    def __init__(self, name: str, port: int, args: list[str], log_dir: Path | None) -> None:
        self.name = name
        self.port = port
        self.args = args
        self.proc: asyncio.subprocess.Process | None = None
        self.log: deque[bytes] = deque(maxlen=20000)
        self.log_file = log_dir / f"{name}.log" if log_dir is not None else None
        self.paused = False
        self._drain: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self, timeout: float = 120.0) -> float:
        """Start; the seconds until it listens (it has adopted what it owns by then)."""
        t0 = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli", "serve", "--port", str(self.port), "--node", self.name,
            *self.args, cwd=ROOT, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stderr is not None
        first: list[bytes] = []  # this start's lines, for the log file
        try:
            async with asyncio.timeout(timeout):
                while True:
                    line = await proc.stderr.readline()
                    if not line:
                        raise RuntimeError(
                            f"node {self.name} exited early:\n"
                            + b"".join(list(self.log)[-30:]).decode(errors="replace"))
                    self.log.append(line)
                    first.append(line)
                    if LISTENING.search(line):
                        break
        except BaseException:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        self.proc = proc
        self.paused = False
        self._drain = asyncio.get_running_loop().create_task(self._keep_log(proc, first))
        return time.monotonic() - t0

    async def _keep_log(self, proc: asyncio.subprocess.Process, first: list[bytes]) -> None:
        assert proc.stderr is not None
        out = open(self.log_file, "ab") if self.log_file is not None else None  # noqa: SIM115
        try:
            if out is not None:
                out.write(b"".join(first))
                out.flush()
            while line := await proc.stderr.readline():
                self.log.append(line)
                if out is not None:
                    out.write(line)
                    out.flush()  # (a test killed on its timeout leaves the file complete)
        finally:
            if out is not None:
                out.close()

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        if sig == signal.SIGSTOP:
            self.paused = True
        elif sig == signal.SIGCONT:
            self.paused = False

    async def stop(self, sig: int, timeout: float = 120.0) -> int:
        """Send ``sig`` (a SIGTERM drains) and wait for the process to end; its exit code."""
        proc = self.proc
        if proc is None:
            return 0
        if proc.returncode is None:
            if self.paused:
                proc.send_signal(signal.SIGCONT)
            proc.send_signal(sig)
        rc = await asyncio.wait_for(proc.wait(), timeout)
        if self._drain is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._drain, 5)
        self.proc = None
        self.paused = False
        return rc

    def errors(self) -> list[str]:
        return [
            line.decode(errors="replace").rstrip()
            for line in self.log
            if b" ERROR " in line or b"Traceback" in line or b'"level": "ERROR"' in line
        ]


class Cluster:
    """The database, the broker, per node a relay to each, and the nodes; :meth:`close`
    removes everything it made."""

    def __init__(self, n: int = 3, lease_ms: int = 3000, grace_ms: int = 60000,
                 log_dir: Path | None = None, pg: PrivatePostgres | None = None) -> None:
        self.n = n
        self.lease_ms = lease_ms
        self.grace_ms = grace_ms
        logs = os.environ.get("MOO_HARNESS_LOGS")
        self.log_dir = log_dir or (Path(logs) if logs else None)
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)  # (a missing one kept nothing)
        self.tmp = tempfile.TemporaryDirectory(prefix="moo-harness-")
        self.pg: PrivatePostgres | None = pg
        self.own_pg = pg is None
        self.broker: Broker | None = None
        self.to_broker: list[TcpCut] = []
        self.to_db: list[TcpCut] = []
        self.nodes: list[Node] = []

    @property
    def db_url(self) -> str:
        assert self.pg is not None
        return self.pg.url.rsplit("/", 1)[0] + "/" + DATABASE

    async def open(self) -> None:
        if self.pg is None:
            self.pg = PrivatePostgres()
        await asyncio.to_thread(self.pg.init)
        await asyncio.to_thread(self.pg.start)
        admin = await asyncpg.connect(self.pg.url)
        try:
            await admin.execute(f'CREATE DATABASE "{DATABASE}"')
        finally:
            await admin.close()
        self.broker = Broker(Path(self.tmp.name))
        await self.broker.start()
        for i in range(self.n):
            name = chr(ord("a") + i)
            mq, db = TcpCut(self.broker.port), TcpCut(self.pg.port)
            await mq.up()
            await db.up()
            self.to_broker.append(mq)
            self.to_db.append(db)
            args = [
                "--db", f"postgresql://postgres@127.0.0.1:{db.port}/{DATABASE}",
                "--cluster", f"mqtt://127.0.0.1:{mq.port}",
                "--lease-ms", str(self.lease_ms), "--grace-ms", str(self.grace_ms),
                "--max-connections", "20000",
                # every player's first hello registers a name, all from 127.0.0.1
                "--new-names-per-address", "1000000",
            ]
            self.nodes.append(Node(name, free_port(), args, self.log_dir))
        for node in self.nodes:
            await node.start()
        for node in self.nodes:
            await self.on_bus(node)

    def ports(self) -> list[tuple[str, int]]:
        return [(node.name, node.port) for node in self.nodes]

    async def healthz(self, node: Node, timeout: float = 5.0) -> dict[str, Any]:
        from bench.rawbot import healthz

        return await healthz(node.port, timeout)

    async def on_bus(self, node: Node, timeout: float = 120.0) -> None:
        """Until ``node`` says it is on the bus (its /healthz)."""
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(OSError, ValueError, TimeoutError, IndexError):
                    if (await self.healthz(node)).get("bus") == "ok":
                        return
                await asyncio.sleep(0.1)

    async def query(self, sql: str, *args: Any) -> list[Any]:
        conn = await asyncpg.connect(self.db_url)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def owners(self, match_ids: list[str]) -> dict[str, str]:
        """The node that owns each of ``match_ids`` now (by the database)."""
        rows = await self.query(
            "SELECT match_id, node FROM owners WHERE match_id = ANY($1::text[])", match_ids)
        return {r[0]: r[1] for r in rows}

    async def unfinished_of(self, node: str) -> set[str]:
        """Every unfinished match ``node`` owns now (by the database), whether or not the
        harness has heard of it yet."""
        rows = await self.query(
            "SELECT o.match_id FROM owners o JOIN matches m ON m.match_id = o.match_id"
            " WHERE o.node = $1 AND m.finished = 0", node)
        return {r[0] for r in rows}

    def errors(self) -> list[str]:
        return [f"{n.name}: {line}" for n in self.nodes for line in n.errors()]

    async def close(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                await node.stop(signal.SIGKILL, 20)
        for relay in self.to_broker + self.to_db:
            if relay.is_up:
                with contextlib.suppress(Exception):
                    await relay.down()
        if self.broker is not None:
            self.broker.kill()
        if self.pg is not None and self.own_pg:
            self.pg.destroy()
        self.tmp.cleanup()
