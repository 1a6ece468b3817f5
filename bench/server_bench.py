"""Server benchmarks: the match server against a bare websockets echo server, same harness.

Two scenarios, each run against both servers in the same invocation so that the figures are
ratios measured under the same (shared, noisy) machine conditions:

* ``saturation``: N concurrent lockstep matches (2N connections), every player guessing as fast
  as the protocol allows (send a guess, wait for its acknowledgement, wait for the round's
  reveal, guess again). Reports acknowledged guesses per second; the echo server answers the
  identical frames with the same connections.
* ``steady``: N matches, every player guessing every ``interval`` seconds. Reports p50/p99
  latency from sending a guess to receiving its acknowledgement, and the server's resident
  memory growth per connection.

Each server runs in its own process (``moo serve`` on a fresh SQLite file in a temporary
directory, or ``python -m bench.echo_server``); this process is the load generator. Loopback
only, bounded in connections and seconds, and everything is torn down at the end.

Why raw sockets and not the SDK (``clients.sdk``, the project's one protocol client): the same
players must drive the bare echo server, which speaks no protocol (no ``hello``, no ``welcome``),
and the figure is a ratio of two servers' speed, so the load generator must cost as little and
add as little as possible: no typed parsing, state folding, pacing bucket or reader task.

    python -m bench.server_bench --matches 1000 --seconds 10 --steady-seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from moo.protocol import Codec
from moo.rules import DEFAULT_RULES

ROOT = Path(__file__).resolve().parent.parent
LISTENING = re.compile(rb"listening on ws://[^:]+:(\d+)/")
SECRETS = ("0123", "4567")
#: guesses that never solve either secret, so matches last as long as the run
GUESSES = [c for c in DEFAULT_RULES.secrets if c not in SECRETS][::7]


# -- server processes --------------------------------------------------------------------------
@dataclass
class ServerProc:
    kind: str
    proc: asyncio.subprocess.Process
    port: int
    tmp: tempfile.TemporaryDirectory[str] | None = None
    log: list[bytes] = field(default_factory=list)
    pid: int = 0

    def __post_init__(self) -> None:
        self.pid = self.pid or self.proc.pid

    def rss_kib(self) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def cpu_s(self) -> float:
        with open(f"/proc/{self.pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(parts[11]) + int(parts[12])) / ticks

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(15):
                    await self.proc.wait()
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self.tmp is not None:
            self.tmp.cleanup()


async def start(
    kind: str, synchronous: str, attach: str | None = None, db: str | None = None,
    *, ladder_worker: bool = False,
) -> ServerProc:
    if attach:  # "PID:PORT" of a server started by hand (e.g. under a profiler)
        pid, port = (int(x) for x in attach.split(":"))
        proc = await asyncio.create_subprocess_exec("tail", f"--pid={pid}", "-f", "/dev/null")
        server = ServerProc(kind, proc, port)
        server.pid = pid
        return server
    tmp = None
    env = dict(os.environ)
    if kind == "moo":
        tmp = tempfile.TemporaryDirectory(prefix="moo-bench-")
        cmd = [
            sys.executable, "-m", "cli", "serve", "--port", "0",
            "--db", db or str(Path(tmp.name) / "bench.sqlite3"),
            "--rate-per-s", "10000", "--rate-burst", "10000", "--max-connections", "20000",
            "--new-names-per-address", "1000000", "--sqlite-synchronous", synchronous,
        ]
        if not ladder_worker:
            # the server alone: its own bot worker (a child polling for ladder work) is not
            # part of what is measured against the echo server
            cmd.append("--no-ladder-worker")
        env.update(MOO_GUESS_CAP="10000", MOO_SECRET_MS="0")
    else:
        cmd = [sys.executable, "-m", "bench.echo_server", "--port", "0"]
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=ROOT, env=env, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    lines: list[bytes] = []
    async with asyncio.timeout(20):
        while True:
            line = await proc.stderr.readline()
            if not line:
                raise RuntimeError(b"server died:\n" + b"".join(lines))
            lines.append(line)
            if found := LISTENING.search(line):
                break
    server = ServerProc(kind, proc, int(found.group(1)), tmp, lines)

    async def drain() -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            server.log.append(line)

    asyncio.get_running_loop().create_task(drain())
    return server


# -- the client harness (identical for both servers) --------------------------------------------
class Player:
    _ids = itertools.count(1)

    def __init__(self, ws: ClientConnection, codec: Codec, lockstep_rounds: bool) -> None:
        self.ws = ws
        self.codec = codec
        self.lockstep_rounds = lockstep_rounds
        self.match_id = "echo"
        self.n = 0
        self.latencies: list[float] = []
        self.acked = 0
        self.round_seen = 0

    async def recv(self) -> dict[str, Any]:
        msg = self.codec.decode(await self.ws.recv())
        assert isinstance(msg, dict)
        return msg

    async def request(self, msg: dict[str, Any]) -> dict[str, Any]:
        ref = next(self._ids)
        await self.ws.send(self.codec.encode({**msg, "id": ref}))
        while True:
            reply = await self.recv()
            if reply.get("ref") == ref:
                return reply

    async def guess(self, stop: float) -> bool:
        """One guess: (lockstep) wait for the previous round's reveal, send, await the ack.

        The reveal is awaited *before* the next guess and only until ``stop`` (perf_counter
        time), so a player whose opponent has already stopped does not wait for a round that
        will never come. Returns False when it gave up.
        """
        if self.lockstep_rounds and self.round_seen < self.n:
            try:
                async with asyncio.timeout(max(0.0, stop - time.perf_counter())):
                    while self.round_seen < self.n:
                        self._note(await self.recv())
            except TimeoutError:
                return False
        self.n += 1
        ref = next(self._ids)
        msg = {"type": "guess", "match_id": self.match_id, "guess": GUESSES[self.n % len(GUESSES)],
               "id": ref}
        t0 = time.perf_counter()
        await self.ws.send(self.codec.encode(msg))
        while True:
            reply = await self.recv()
            self._note(reply)
            # the arena acknowledges with ref; the echo server returns our id
            if reply.get("ref", reply.get("id")) == ref:
                break
        self.latencies.append(time.perf_counter() - t0)
        if reply.get("type") == "error":
            raise RuntimeError(f"guess refused: {reply}")
        self.acked += 1
        return True

    def _note(self, msg: dict[str, Any]) -> None:
        if msg.get("kind") == "round":
            self.round_seen = max(self.round_seen, int(msg["n"]))


async def _bounded(n: int, jobs: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    sem = asyncio.Semaphore(n)

    async def one(job: Callable[[], Awaitable[Any]]) -> Any:
        async with sem:
            return await job()

    return await asyncio.gather(*(one(j) for j in jobs))


async def setup(
    server: ServerProc, matches: int, subprotocol: str, name_prefix: str = "b",
    ports: list[int] | None = None, split: bool = False,
) -> list[Player]:
    """Connect and pair the players. With ``ports`` (a cluster, bench/cluster_bench.py),
    match i's seat 0 connects to ``ports[i % n]`` and its seat 1 to the same node, or with
    ``split`` to the next one."""
    codec = Codec(subprotocol)
    moo = server.kind == "moo"

    def url_of(i: int) -> str:
        if not ports:
            return f"ws://127.0.0.1:{server.port}/"
        match, seat = divmod(i, 2)
        return f"ws://127.0.0.1:{ports[(match + (seat if split else 0)) % len(ports)]}/"

    async def open_player(i: int) -> Player:
        ws = await connect(url_of(i), subprotocols=[subprotocol], compression=None,  # type: ignore[list-item]
                           max_size=2**16, ping_interval=None, open_timeout=60)
        p = Player(ws, codec, lockstep_rounds=moo)
        if moo:
            welcome = await p.request({"type": "hello", "name": f"{name_prefix}{i}", "bot": True})
            assert welcome["type"] == "welcome", welcome
        return p

    players = await _bounded(64, [partial(open_player, i) for i in range(2 * matches)])
    if moo:
        async def pair(a: Player, b: Player) -> None:
            room = await a.request({"type": "room_create"})
            m = await b.request({"type": "room_join", "code": room["code"]})
            a.match_id = b.match_id = m["match_id"]
            while (await a.recv()).get("type") != "match":
                pass
            await a.request({"type": "secret", "match_id": a.match_id, "secret": SECRETS[0]})
            await b.request({"type": "secret", "match_id": b.match_id, "secret": SECRETS[1]})

        await _bounded(64, [partial(pair, players[2 * i], players[2 * i + 1])
                            for i in range(matches)])
    return players


async def saturate(players: list[Player], seconds: float) -> tuple[int, float]:
    stop = time.perf_counter() + seconds
    before = sum(p.acked for p in players)

    async def run(p: Player) -> None:
        while time.perf_counter() < stop and await p.guess(stop):
            pass

    t0 = time.perf_counter()
    async with asyncio.timeout(seconds + 60):
        await asyncio.gather(*(run(p) for p in players))
    return sum(p.acked for p in players) - before, time.perf_counter() - t0


async def steady(players: list[Player], seconds: float, interval: float) -> None:
    stop = time.perf_counter() + seconds
    for p in players:
        p.latencies.clear()

    async def run(p: Player) -> None:
        await asyncio.sleep(random.uniform(0, interval))
        due = time.perf_counter()
        while due < stop and await p.guess(stop):
            due += interval
            await asyncio.sleep(max(0.0, due - time.perf_counter()))

    async with asyncio.timeout(seconds + 60):
        await asyncio.gather(*(run(p) for p in players))


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


# -- load-generator workers ------------------------------------------------------------------------
# The load generator is split over several processes so that it, not the server, has the CPU
# to spare: each worker drives its share of the matches, and the parent lines the phases up
# with a barrier and measures the server between them.


def _worker(
    index: int, kind: str, port: int, matches: int, args: argparse.Namespace,
    barrier: Any, results: Any, ports: list[int] | None = None, split: bool = False,
) -> None:
    async def run() -> None:
        server = ServerProc(kind, None, port, pid=-1)  # type: ignore[arg-type]
        players = await setup(server, matches, args.subprotocol, name_prefix=f"w{index}b",
                              ports=ports, split=split)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, barrier.wait)  # setup done
        if args.steady_seconds > 0:
            await loop.run_in_executor(None, barrier.wait)  # go
            await steady(players, args.steady_seconds, args.interval)
            results.put(("steady", index, [x for p in players for x in p.latencies]))
            await loop.run_in_executor(None, barrier.wait)  # steady done
        if args.seconds > 0:
            await loop.run_in_executor(None, barrier.wait)  # go
            acked, elapsed = await saturate(players, args.seconds)
            results.put(("saturation", index, (acked, elapsed)))
            await loop.run_in_executor(None, barrier.wait)  # saturation done
        for p in players:
            await p.ws.close()

    asyncio.run(run())


class Workers:
    """The load-generator processes of one scenario, lined up phase by phase.

    ``args`` carries ``workers``, ``matches``, ``subprotocol``, ``steady_seconds``,
    ``interval`` and ``seconds``; the workers run the phases whose length is > 0, in that
    order (steady, then saturation), and the caller measures the server around each
    :meth:`phase`. With ``ports`` (bench/cluster_bench.py) the players spread over several
    nodes as :func:`setup` says.
    """

    def __init__(
        self, args: argparse.Namespace, kind: str, port: int,
        ports: list[int] | None = None, split: bool = False,
    ) -> None:
        import multiprocessing as mp

        self.args = args
        ctx = mp.get_context("spawn")  # a forked child would inherit this running loop
        self.barrier = ctx.Barrier(args.workers + 1)
        self.results: Any = ctx.Queue()
        shares = [args.matches // args.workers + (i < args.matches % args.workers)
                  for i in range(args.workers)]
        self.procs = [
            ctx.Process(target=_worker, args=(i, kind, port, share, args, self.barrier,
                                              self.results, ports, split))
            for i, share in enumerate(shares)
        ]

    async def _sync(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.barrier.wait, 600)

    async def start(self) -> None:
        """Start the workers and wait until every player is connected and paired."""
        for proc in self.procs:
            proc.start()
        await self._sync()

    async def phase(self, kind: str) -> list[Any]:
        """Run the next phase (``steady`` or ``saturation``); each worker's result."""
        def collect() -> list[Any]:
            wait = 60 + self.args.steady_seconds + self.args.seconds
            got = [self.results.get(timeout=wait) for _ in self.procs]
            assert all(k == kind for k, _, _ in got)
            return [v for _, _, v in got]

        await self._sync()
        parts = await asyncio.get_running_loop().run_in_executor(None, collect)
        await self._sync()
        return parts

    def close(self) -> None:
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()


def _commit_counts(health: dict[str, Any]) -> tuple[int, int]:
    """The moo server's (commits, committed operations) so far, from its /healthz."""
    return int(health["commits"]), int(health["committed_ops"])


async def _commits(server: ServerProc) -> tuple[int, int] | None:
    """The same, asked of the server now; None for the echo server, which commits nothing."""
    return _commit_counts(await _healthz(server.port)) if server.kind == "moo" else None


def _commits_between(before: tuple[int, int], after: tuple[int, int]) -> dict[str, float]:
    """Commits in a phase and operations per commit: how far group commit gathered."""
    commits, ops = after[0] - before[0], after[1] - before[1]
    return {"commits": commits, "ops_per_commit": round(ops / max(1, commits), 2)}


async def _healthz(port: int) -> dict[str, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    async with asyncio.timeout(30):
        data = await reader.read()
    writer.close()
    body = json.loads(data.partition(b"\r\n\r\n")[2])
    assert isinstance(body, dict)
    return body


async def scenario(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    server = await start(kind, args.synchronous, args.attach, args.db)
    workers = Workers(args, kind, server.port)
    try:
        rss0 = server.rss_kib()
        t0 = time.perf_counter()
        await workers.start()
        setup_s = time.perf_counter() - t0
        rss_setup = server.rss_kib()
        connections = 2 * args.matches
        print(f"{kind}: {connections} connections ready in {setup_s:.1f}s", file=sys.stderr)
        out: dict[str, Any] = {"server": kind, "connections": connections,
                               "load_workers": args.workers, "setup_s": round(setup_s, 1)}
        if args.steady_seconds > 0:
            commits0 = await _commits(server)
            cpu0 = server.cpu_s()
            lat = [x for part in await workers.phase("steady") for x in part]
            cpu = server.cpu_s() - cpu0
            out["steady"] = {
                "guesses": len(lat),
                "p50_ms": round(_pct(lat, 0.50) * 1000, 2),
                "p99_ms": round(_pct(lat, 0.99) * 1000, 2),
                "max_ms": round(max(lat) * 1000, 2) if lat else None,
                "mean_ms": round(statistics.fmean(lat) * 1000, 2) if lat else None,
                "server_cpu_share": round(cpu / args.steady_seconds, 3),
            }
            if commits0 is not None:  # the server's own view: frame in -> ack queued (last 5000)
                health = await _healthz(server.port)
                out["steady"]["server_side_ack_ms"] = health.get("ack_latency_ms")
                out["steady"]["commits"] = _commits_between(commits0, _commit_counts(health))
        rss1 = server.rss_kib()
        if args.seconds > 0:
            commits0 = await _commits(server)
            cpu0 = server.cpu_s()
            parts = await workers.phase("saturation")
            cpu = server.cpu_s() - cpu0
            commits1 = await _commits(server)
            acked = sum(a for a, _ in parts)
            elapsed = max(e for _, e in parts)
            out["saturation"] = {
                "guesses": acked,
                "guesses_per_s": round(acked / elapsed),
                "server_cpu_s": round(cpu, 2),
                "server_cpu_us_per_guess": round(cpu / max(1, acked) * 1e6, 1),
            }
            if commits0 is not None and commits1 is not None:
                out["saturation"]["commits"] = _commits_between(commits0, commits1)
        out["rss_kib"] = {"idle": rss0, "after_setup": rss_setup, "after_steady": rss1}
        # after setup: connections, players and matches (secrets set), no guesses yet;
        # after steady: plus the in-memory event logs of every match's guesses so far
        out["kib_per_connection"] = round((rss1 - rss0) / connections, 1)
        out["kib_per_connection_after_setup"] = round((rss_setup - rss0) / connections, 1)
        return out
    finally:
        workers.close()
        await server.stop()


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {
        "matches": args.matches,
        "subprotocol": args.subprotocol,
        "sqlite_synchronous": args.synchronous,
        "db": "sqlite" if not args.db else args.db.split("://")[0],
        "load_workers": args.workers,
        "cpus": os.cpu_count(),
        "loadavg_before": os.getloadavg()[0],
    }
    for kind in args.servers.split(","):
        results[kind] = await scenario(kind, args)
    if "moo" in results and "echo" in results:
        moo, echo = results["moo"], results["echo"]
        if "saturation" in moo:
            results["saturation_ratio"] = round(
                moo["saturation"]["guesses_per_s"] / echo["saturation"]["guesses_per_s"], 3
            )
            results["cpu_per_guess_ratio"] = round(
                moo["saturation"]["server_cpu_us_per_guess"]
                / echo["saturation"]["server_cpu_us_per_guess"], 2
            )
        if "steady" in moo:
            results["steady_p99_ratio"] = round(
                moo["steady"]["p99_ms"] / echo["steady"]["p99_ms"], 2
            )
    results["loadavg_after"] = os.getloadavg()[0]
    return results


def summary(results: dict[str, Any]) -> str:
    """The three figures issue 33 sets targets for, as one line: match server / echo server
    (targets: saturation >= 0.8, CPU per guess <= 1.3, steady p99 <= 1.5), with the load."""
    echo, moo = results.get("echo", {}), results.get("moo", {})
    parts = []
    if "saturation_ratio" in results:
        parts.append(
            f"saturation {results['saturation_ratio']:.2f} x echo"
            f" ({moo['saturation']['guesses_per_s']} / {echo['saturation']['guesses_per_s']}"
            " guesses/s)"
        )
        parts.append(
            f"CPU per guess {results['cpu_per_guess_ratio']:.2f} x"
            f" ({moo['saturation']['server_cpu_us_per_guess']} /"
            f" {echo['saturation']['server_cpu_us_per_guess']} us)"
        )
    if "steady_p99_ratio" in results:
        parts.append(
            f"steady p99 {results['steady_p99_ratio']:.2f} x"
            f" ({moo['steady']['p99_ms']} / {echo['steady']['p99_ms']} ms)"
        )
    parts.append(
        f"load average {results['loadavg_before']:.1f} -> {results['loadavg_after']:.1f}"
        f" on {results['cpus']} CPUs"
    )
    return "summary: " + "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matches", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4, help="load-generator processes")
    parser.add_argument("--seconds", type=float, default=10.0, help="saturation phase (0: skip)")
    parser.add_argument("--steady-seconds", type=float, default=20.0, help="0: skip")
    parser.add_argument("--interval", type=float, default=2.0, help="steady: s between guesses")
    parser.add_argument("--subprotocol", default="moo.v1.msgpack",
                        choices=["moo.v1.json", "moo.v1.msgpack"])
    parser.add_argument("--servers", default="echo,moo", help="comma list: echo,moo")
    parser.add_argument("--synchronous", default="FULL", help="moo server's sqlite_synchronous")
    parser.add_argument(
        "--db", help="moo server's database instead of a fresh SQLite file, e.g. an empty"
        " postgresql://HOST/DBNAME (docs/benchmarks.md, Cluster)",
    )
    parser.add_argument("--attach", metavar="PID:PORT",
                        help="measure a server already running (with --servers moo or echo)")
    args = parser.parse_args()
    if (
        not 1 <= args.workers <= 16
        or not 1 <= args.matches <= 5000
        or args.seconds > 300
        or args.steady_seconds > 300
    ):
        parser.error("bounded: 1-5000 matches, at most 300 s per phase")
    results = asyncio.run(amain(args))
    print(json.dumps(results, indent=2))
    print(summary(results), file=sys.stderr)


if __name__ == "__main__":
    main()
