"""A single ``moo serve`` (SQLite) that the failover tests kill with SIGKILL and restart.

The server is a real subprocess; its port is read from its log on the first start and reused
on restarts, so clients with that URL find it again. Nothing waits on a sleep: callers poll
with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import socket
import sys
from pathlib import Path

from tests.patience import patience

ROOT = Path(__file__).resolve().parent.parent
LISTENING = re.compile(rb"listening on ws://[^:]+:(\d+)/")


def dead_url() -> str:
    """A ws:// URL where nothing listens (a port just bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"ws://127.0.0.1:{port}/"


class Server:
    """One ``moo serve`` process on a SQLite file; :meth:`kill` and :meth:`start` again."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.port = 0
        self.proc: asyncio.subprocess.Process | None = None
        self.log: list[bytes] = []
        self._drain: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    async def start(self) -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli", "serve", "--port", str(self.port), "--db", str(self.db),
            "--bot-delay-ms", "0", "--grace-ms", "60000",
            cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stderr is not None
        async with asyncio.timeout(patience(60)):
            while True:
                line = await proc.stderr.readline()
                if not line:
                    raise AssertionError("server exited early:\n" + b"".join(self.log).decode())
                self.log.append(line)
                if found := LISTENING.search(line):
                    break
        self.port = int(found.group(1))
        self.proc = proc

        async def drain() -> None:
            assert proc.stderr is not None
            while line := await proc.stderr.readline():
                self.log.append(line)

        self._drain = asyncio.get_running_loop().create_task(drain())

    async def kill(self) -> None:
        """SIGKILL: no drain, no goodbye; clients see their sockets break."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(self.proc.wait(), patience(30))
        await self._drained()

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        await self._drained()

    async def _drained(self) -> None:
        """Its standard error read to the end, so that its pipe is closed on this event loop,
        not by the garbage collector after the loop is gone ("Event loop is closed")."""
        if self._drain is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._drain, patience(10))
