"""What a cluster stands on, each of it started, stopped and cut by the fault harness.

The harness must restart the database and the broker and cut one node from either, so it owns
every one of them rather than borrowing the machine's: a PostgreSQL server made with ``initdb``
(:class:`PrivatePostgres`, also the tests' private server), a Mosquitto broker on a fixed port
(:class:`Broker`), and between each node and each service a TCP relay (:class:`TcpCut`) that
can be severed -- every connection through it reset, new ones refused -- and healed, which is a
network partition as the node sees it, or made slow, stalled or lossy, which is a bad network.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

_PREFIX = "moo-test-pg-"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- PostgreSQL --------------------------------------------------------------------------------
def bindir() -> Path | None:
    """The newest PostgreSQL server binaries installed, or None."""
    root = Path("/usr/lib/postgresql")
    versions = sorted(
        (p for p in root.glob("*/bin") if (p / "initdb").exists() and (p / "pg_ctl").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return versions[-1] if versions else None


def postgres_problem() -> str | None:
    """Why a private server cannot run here, or None."""
    if bindir() is None:
        return "PostgreSQL's server binaries are not in /usr/lib/postgresql/*/bin"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, but there is no postgres user to run the server as"
    return None


def _owner_alive(base: Path) -> bool:
    try:
        pid = int((base / "owner").read_text())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class PrivatePostgres:
    """One throw-away PostgreSQL cluster: ``init()``, ``start()``, ``stop()`` (fast shutdown:
    sessions are terminated, as in a real restart), ``start()`` again on the same port,
    ``destroy()``. Debian's binaries, trust auth on 127.0.0.1, no fsync (the data is thrown
    away); run as root, the server runs as ``postgres``, which PostgreSQL requires.

    ``timeout`` bounds each ``pg_ctl`` step (a safety net: the steps end when the server is up
    or down)."""

    def __init__(self, timeout: float = 120.0) -> None:
        found, why = bindir(), postgres_problem()
        if found is None or why is not None:
            raise RuntimeError(f"{why} (apt-get install postgresql)")
        self.bindir = found
        self.timeout = timeout
        _sweep()
        # not under a test's tmp_path: its parents are private to root, and the server runs
        # as ``postgres``
        self.base = Path(tempfile.mkdtemp(prefix=_PREFIX))
        (self.base / "owner").write_text(str(os.getpid()))
        self.data = self.base / "data"
        self.port = free_port()
        as_root = os.geteuid() == 0
        self._user: pwd.struct_passwd | None = pwd.getpwnam("postgres") if as_root else None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        cmd = [str(self.bindir / argv[0]), *argv[1:]]
        kwargs: dict[str, object] = {}
        if self._user is not None:  # PostgreSQL refuses to run as root
            kwargs = {"user": self._user.pw_uid, "group": self._user.pw_gid}
        done = subprocess.run(  # type: ignore[call-overload]
            cmd, capture_output=True, text=True, timeout=self.timeout, cwd=self.base, **kwargs
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed: {done.stdout}{done.stderr}")

    def init(self) -> None:
        if self._user is not None:
            os.chown(self.base, self._user.pw_uid, self._user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--no-sync", "-E", "UTF8")

    def start(self) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.base}"
                   " -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
                   " -c max_connections=300")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.base / "log"), "-o", options,
                  "-w", "-t", str(int(self.timeout)), "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t",
                  str(int(self.timeout)), "stop")

    def destroy(self) -> None:
        _destroy(self.base)


def _destroy(base: Path) -> None:
    data = base / "data"
    if (data / "postmaster.pid").exists() and (found := bindir()) is not None:
        user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        kwargs: dict[str, object] = {}
        if user is not None:
            kwargs = {"user": user.pw_uid, "group": user.pw_gid}
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(  # type: ignore[call-overload]
                [str(found / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True, timeout=60, cwd=base, **kwargs,
            )
    shutil.rmtree(base, ignore_errors=True)


def _sweep() -> None:
    """Stop and remove the servers of runs that died without cleaning up (killed)."""
    for base in Path(tempfile.gettempdir()).glob(_PREFIX + "*"):
        if base.is_dir() and (base / "owner").exists() and not _owner_alive(base):
            _destroy(base)


# -- Mosquitto ---------------------------------------------------------------------------------
def mosquitto_binary() -> str | None:
    found = shutil.which("mosquitto")
    if found is None and os.access("/usr/sbin/mosquitto", os.X_OK):
        found = "/usr/sbin/mosquitto"
    return found


class Broker:
    """``mosquitto -c CONF`` on 127.0.0.1:PORT with the settings docs/cluster.md recommends;
    stopped and started again on the same port (a broker restart)."""

    def __init__(self, folder: Path, port: int | None = None, timeout: float = 30.0) -> None:
        binary = mosquitto_binary()
        if binary is None:
            raise RuntimeError("mosquitto is not installed (apt-get install mosquitto)")
        self.binary = binary
        self.port = port or free_port()
        self.timeout = timeout
        self.conf = folder / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
            "set_tcp_nodelay true\nmax_queued_messages 100000\nmax_inflight_messages 0\n"
            "log_dest stderr\nlog_type error\n"
        )
        self.log = folder / "mosquitto.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    async def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([self.binary, "-c", str(self.conf)],
                                         stdout=log, stderr=log)
        deadline = time.monotonic() + self.timeout
        while True:  # ready when the port accepts a connection
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                await writer.wait_closed()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"mosquitto did not start: {self.log.read_text(errors='replace')}"
                    ) from None
                await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            await asyncio.to_thread(self.proc.wait, self.timeout)
        self.proc = None

    def kill(self) -> None:
        """Stop at once, from anywhere (a teardown without an event loop)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(self.timeout)
        self.proc = None


# -- partitions and slow links ------------------------------------------------------------------
class TcpCut:
    """A TCP relay to ``127.0.0.1:target_port`` that can be cut (every connection through it
    reset, new ones refused) and healed: the service going away, as one client sees it.

    It is also the harness's bad network, the fault real links give most often. Each direction
    of each connection is a reader that stamps every chunk with the time it may be delivered
    and a writer that delivers the chunks in order at those times, so a link can be made
    **slow** (each chunk held a latency plus uniform jitter, order kept, as TCP keeps it),
    **stalled** (nothing delivered for a while, every connection kept open: a frozen route or
    a full buffer; what arrived meanwhile is delivered at the end), stalled one way only (the
    service's replies held while the client's requests go through: a request that lands and
    whose answer comes late) and **lossy** (a random share of the open connections reset at
    once, new ones accepted: the flaky middlebox).
    """

    def __init__(self, target_port: int, port: int = 0) -> None:
        self.target_port = target_port
        self.server: asyncio.Server | None = None
        self.port = port
        self.writers: set[asyncio.StreamWriter] = set()
        #: each open connection: (the client's side, the service's side), in opening order
        self.pairs: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        #: per-chunk delay in seconds: ``latency + uniform(-jitter, +jitter)``, at least 0
        self.latency = 0.0
        self.jitter = 0.0
        self.rng = random.Random()
        self._flowing = asyncio.Event()
        self._flowing.set()
        #: cleared: the service's replies are held (the client's requests still go through)
        self._replying = asyncio.Event()
        self._replying.set()

    @property
    def is_up(self) -> bool:
        return self.server is not None

    async def up(self) -> None:
        """Listen (again, on the same port once one was given or chosen)."""
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        """Reset every connection through the relay and refuse new ones."""
        assert self.server is not None
        self.server.close()
        for w in list(self.writers):
            w.transport.abort()
        await self.server.wait_closed()
        self.server = None

    def slow(self, latency_s: float, jitter_s: float = 0.0) -> None:
        """Hold every chunk from now on ``latency_s`` plus up to ``jitter_s`` either way
        (``slow(0)`` makes the link fast again)."""
        self.latency, self.jitter = latency_s, jitter_s

    def stall(self) -> None:
        """Deliver nothing, in either direction, until :meth:`flow`; connections stay open."""
        self._flowing.clear()

    def hold_replies(self) -> None:
        """Deliver nothing from the service to its clients until :meth:`flow`, while what the
        clients send still reaches it: requests land, their answers come late."""
        self._replying.clear()

    def flow(self) -> None:
        self._flowing.set()
        self._replying.set()

    def drop(self, share: float) -> int:
        """Reset ``share`` of the connections open now (both ends of each), chosen at random;
        the relay keeps accepting. Returns how many were reset."""
        victims = [pair for pair in self.pairs if self.rng.random() < share]
        for client_side, service_side in victims:
            client_side.transport.abort()
            service_side.transport.abort()
        return len(victims)

    def _delay(self) -> float:
        if self.latency <= 0 and self.jitter <= 0:
            return 0.0
        return max(0.0, self.latency + self.rng.uniform(-self.jitter, self.jitter))

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self.writers |= {writer, up_w}
        pair = (writer, up_w)
        self.pairs.append(pair)

        async def pipe(
            r: asyncio.StreamReader, w: asyncio.StreamWriter, gate: asyncio.Event
        ) -> None:
            chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

            async def deliver() -> None:
                due_last = 0.0
                while True:
                    due, data = await chunks.get()
                    if not data:
                        return
                    # in order: a chunk never overtakes the one before it (jitter or not)
                    due_last = max(due, due_last)
                    wait = due_last - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    await self._flowing.wait()
                    await gate.wait()
                    w.write(data)
                    await w.drain()

            delivering = asyncio.get_running_loop().create_task(deliver())
            try:
                while data := await r.read(65536):
                    chunks.put_nowait((time.monotonic() + self._delay(), data))
                    if delivering.done():
                        break
                chunks.put_nowait((0.0, b""))
                await delivering
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                delivering.cancel()
                w.transport.abort()
                self.writers.discard(w)

        try:
            await asyncio.gather(pipe(reader, up_w, self._flowing),
                                 pipe(up_r, writer, self._replying))
        finally:
            self.pairs.remove(pair)
