"""Cluster benchmark: the server benchmark's harness against N cluster nodes (docs/cluster.md).

For each configuration it starts a fresh PostgreSQL database, a Mosquitto broker on a free port
and N ``moo serve --cluster`` nodes, each confined to the same CPU share: ``--cpu-quota F``
puts every node in its own cgroup (v1 ``cpu`` controller, needs root) limited to F of one core,
``--cpus`` pins node i with ``taskset`` to a CPU list instead. Then ``bench/server_bench.py``'s
load-generator workers (``--workers`` processes, the same code) connect the players: match i's
seat 0 to node ``i % N``; its seat 1 to the same node, or with ``--split`` to the next one
(every action of that seat then crosses the bus). Phases as in the server benchmark: steady
(every player guesses every ``--interval`` s: acknowledgement latency, client side and each
node's own figures) then saturation (acknowledged guesses/s). CPU is read from /proc for each
node, the broker and the PostgreSQL backends serving the benchmark's database; a node's CPU
against its quota (and the cgroup's throttling count) shows whether the nodes were the limit.

``--compare 1 2`` (or ``2 2split``) runs several configurations back to back in one
invocation, ``--repeat`` times, alternating, and prints each run and its ratios to the first
configuration of the same repetition (the figures that matter on a shared machine).
Everything is torn down at the end, the databases dropped and the cgroups removed.

    python -m bench.cluster_bench --compare 1 2 2split --repeat 3 --cpu-quota 0.25 \\
        --cpu-shares 8192 --matches 300 --workers 4 --steady-seconds 0 --seconds 10   # (b)
    python -m bench.cluster_bench --compare 2 2split --repeat 3 --matches 500 --workers 3 \\
        --steady-seconds 20 --interval 1 --seconds 0 --cpu-shares 8192                # (c)

``--cpu-shares`` puts everything the benchmark runs (nodes, broker, load workers, the
PostgreSQL backends of its database, itself) in one cgroup weighted against the machine's
other jobs: on a shared machine they otherwise decide the latency tail. Per phase it also
reports each node's run-queue wait (``schedstat``) and, in the steady phase, the share of its
recent PostgreSQL commits slower than 10/25/50 ms (``/metrics``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiomqtt
import asyncpg

from bench.server_bench import LISTENING, ROOT, Workers, _healthz, _pct

PG = os.environ.get("MOO_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
CGROUP_CPU = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:  # a PostgreSQL backend that ended meanwhile
        return 0.0
    return (int(parts[11]) + int(parts[12])) / TICK


def _runqueue_wait_s(pid: int) -> float:
    """Seconds the process's threads spent runnable but waiting for a CPU (schedstat)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return total / 1e9


class CpuQuota:
    """One cgroup v1 ``cpu`` group: limited to ``fraction`` of one core (CFS quota), and/or
    weighted ``shares`` against the machine's other processes (default weight 1024)."""

    def __init__(self, name: str, fraction: float | None = None, shares: int | None = None,
                 parent: CpuQuota | None = None) -> None:
        self.path: Path = (parent.path if parent is not None else CGROUP_CPU) / name
        self.path.mkdir()
        if fraction is not None:
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(round(fraction * PERIOD_US)))
        if shares is not None:
            (self.path / "cpu.shares").write_text(str(shares))

    def stat(self) -> dict[str, int]:
        out = {}
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, value = line.split()
            out[key] = int(value)
        return out

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))  # the whole process, all threads

    def remove(self) -> None:
        for pid in (self.path / "cgroup.procs").read_text().split():
            try:  # back to the root group, or rmdir fails
                (CGROUP_CPU / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # exited meanwhile
        self.path.rmdir()


class Node:
    def __init__(self, name: str, proc: asyncio.subprocess.Process, port: int,
                 quota: CpuQuota | None) -> None:
        self.name = name
        self.proc = proc
        self.port = port
        self.quota = quota

    def cpu_s(self) -> float:
        return _cpu_s(self.proc.pid)


async def _start_node(db: str, bus: str, name: str, cpus: str | None,
                      quota: CpuQuota | None) -> Node:
    cmd = [
        sys.executable, "-m", "cli", "serve", "--port", "0", "--db", db, "--cluster", bus,
        "--node", name, "--rate-per-s", "10000", "--rate-burst", "10000",
        "--max-connections", "20000", "--new-names-per-address", "1000000",
    ]
    if cpus is not None:
        cmd = ["taskset", "-c", cpus, *cmd]
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MOO_GUESS_CAP": "10000", "MOO_SECRET_MS": "0"},
    )
    assert proc.stderr is not None
    try:
        if quota is not None:
            quota.add(proc.pid)
        async with asyncio.timeout(60):
            while True:
                line = await proc.stderr.readline()
                if not line:
                    raise RuntimeError(f"node {name} died")
                if found := LISTENING.search(line):
                    break
    except BaseException:
        if proc.returncode is None:  # never leave a half-started node behind
            proc.kill()
            await proc.wait()
        raise

    keep = os.environ.get("MOO_BENCH_NODE_LOG")  # a directory: each node's stderr there

    async def drain() -> None:
        assert proc.stderr is not None
        with open(Path(keep) / f"{name}.log", "ab") if keep else open(os.devnull, "wb") as f:
            while line := await proc.stderr.readline():
                f.write(line)

    asyncio.get_running_loop().create_task(drain())
    return Node(name, proc, int(found.group(1)), quota)


class BrokerCount:
    """The broker's own message counters (``$SYS``, published every second here)."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    async def follow(self, port: int) -> None:
        async with aiomqtt.Client("127.0.0.1", port) as client:
            await client.subscribe("$SYS/broker/messages/+")
            await client.subscribe("$SYS/broker/publish/messages/+")
            async for message in client.messages:
                key = str(message.topic).removeprefix("$SYS/broker/")
                self.values[key] = int(bytes(message.payload))  # type: ignore[arg-type]

    async def fresh(self) -> dict[str, int]:
        """The counters after the broker's next $SYS update (it publishes every second, and
        only what changed; the values are retained, so the first ones come at once)."""
        await asyncio.sleep(1.2)
        return dict(self.values)


async def _commit_tail(port: int) -> dict[str, float]:
    """Of the node's recent PostgreSQL commits (its /metrics window, up to 5000): the share
    that took longer than 10, 25 and 50 ms (is a latency tail the database's?)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    async with asyncio.timeout(30):
        data = (await reader.read()).decode()
    writer.close()
    below: dict[str, float] = {}
    for line in data.splitlines():
        if line.startswith("moo_storage_commit_seconds_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            below[le] = float(line.rsplit(" ", 1)[1])
    total = below.get("+Inf", 0.0)
    if not total:
        return {}
    return {f"over_{ms}ms": round(1 - below[bound] / total, 4)
            for ms, bound in (("10", "0.01"), ("25", "0.025"), ("50", "0.05")) if bound in below}


async def _pg_backends(admin: asyncpg.Connection, db: str) -> list[int]:
    rows = await admin.fetch("SELECT pid FROM pg_stat_activity WHERE datname = $1", db)
    return [int(r[0]) for r in rows]


async def run_once(args: argparse.Namespace, n_nodes: int, split: bool) -> dict[str, Any]:
    """One configuration: fresh database, broker and ``n_nodes`` nodes (every match's seats
    on two of them with ``split``); the phases."""
    name = f"moo_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(PG + "/postgres")
    await admin.execute(f'CREATE DATABASE "{name}"')
    db = f"{PG}/{name}"
    tmp = tempfile.TemporaryDirectory(prefix="moo-cluster-bench-")
    broker: asyncio.subprocess.Process | None = None
    nodes: list[Node] = []
    quotas: list[CpuQuota] = []
    # --cpu-shares: everything of the benchmark in one weighted group (node quotas inside)
    group = CpuQuota(f"{name}_all", shares=args.cpu_shares) if args.cpu_shares else None
    counting: asyncio.Task[None] | None = None
    workers: Workers | None = None
    try:
        port = _free_port()
        conf = Path(tmp.name) / "mosquitto.conf"
        conf.write_text(
            f"listener {port} 127.0.0.1\nallow_anonymous true\nsys_interval 1\n"
            + ("set_tcp_nodelay true\n" if args.broker_nodelay else "")
        )
        mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        broker = await asyncio.create_subprocess_exec(
            mosquitto, "-c", str(conf),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )
        if group is not None:
            group.add(broker.pid)
            group.add(os.getpid())
        cpus = args.cpus or [None] * n_nodes
        for i in range(n_nodes):
            quota = None
            if args.cpu_quota is not None:
                quota = CpuQuota(f"n{i}" if group else f"{name}_n{i}", args.cpu_quota,
                                 parent=group)
                quotas.append(quota)
            elif group is not None:
                quota = group
            nodes.append(await _start_node(db, f"mqtt://127.0.0.1:{port}", f"n{i}",
                                           cpus[i % len(cpus)], quota))
        for node in nodes:  # every node on the bus before the first hello
            async with asyncio.timeout(30):
                while (await _healthz(node.port)).get("bus") != "ok":
                    await asyncio.sleep(0.1)
        counter = BrokerCount()
        counting = asyncio.get_running_loop().create_task(counter.follow(port))
        t0 = time.perf_counter()
        workers = Workers(args, "moo", nodes[0].port, ports=[n.port for n in nodes],
                          split=split)
        await workers.start()
        if group is not None:  # the load generators and the database's backends for it
            for pid in [w.pid for w in workers.procs] + await _pg_backends(admin, name):
                if pid is not None:
                    group.add(pid)
        out: dict[str, Any] = {
            "nodes": n_nodes, "matches": args.matches, "split": split,
            "load_workers": args.workers, "cpus": args.cpus, "cpu_quota": args.cpu_quota,
            "setup_s": round(time.perf_counter() - t0, 1),
            "loadavg_before": round(os.getloadavg()[0], 2),
        }

        async def measured(phase: str) -> tuple[list[Any], dict[str, Any]]:
            backends = await _pg_backends(admin, name)
            assert broker is not None and workers is not None
            msgs0 = await counter.fresh()
            commits0 = [await _healthz(n.port) for n in nodes]
            t0 = time.perf_counter()
            cpu0 = [n.cpu_s() for n in nodes]
            wait0 = [_runqueue_wait_s(n.proc.pid) for n in nodes]
            stat0 = [q.stat() for q in quotas]
            pg0, broker0 = sum(_cpu_s(p) for p in backends), _cpu_s(broker.pid)
            parts = await workers.phase(phase)
            node_cpu = [n.cpu_s() - c for n, c in zip(nodes, cpu0)]
            node_wait = [_runqueue_wait_s(n.proc.pid) - w for n, w in zip(nodes, wait0)]
            stat1 = [q.stat() for q in quotas]
            pg, broker_cpu = sum(_cpu_s(p) for p in backends) - pg0, _cpu_s(broker.pid) - broker0
            elapsed = time.perf_counter() - t0
            msgs1 = await counter.fresh()  # (includes the ~1 s after the phase: idle)
            commits1 = [await _healthz(n.port) for n in nodes]
            commits = sum(h1["commits"] - h0["commits"] for h0, h1 in zip(commits0, commits1))
            ops = sum(h1["committed_ops"] - h0["committed_ops"]
                      for h0, h1 in zip(commits0, commits1))
            costs: dict[str, Any] = {
                "node_cpu_s": [round(c, 2) for c in node_cpu],
                "node_cpu_share": [round(c / elapsed, 3) for c in node_cpu],
                # time runnable but without a CPU, per second: the machine's other jobs (or
                # the quota) holding the node back
                "node_runqueue_wait_share": [round(w / elapsed, 3) for w in node_wait],
                "pg_backends_cpu_s": round(pg, 2),
                "broker_cpu_s": round(broker_cpu, 2),
                # PostgreSQL transactions of the nodes (group commits) and what they held
                "pg_commits_per_s": round(commits / elapsed),
                "pg_ops_per_commit": round(ops / max(1, commits), 1),
                "broker_msgs_in_per_s": round(
                    (msgs1.get("publish/messages/received", 0)
                     - msgs0.get("publish/messages/received", 0)) / elapsed),
                "broker_msgs_out_per_s": round(
                    (msgs1.get("publish/messages/sent", 0)
                     - msgs0.get("publish/messages/sent", 0)) / elapsed),
            }
            if quotas:
                costs["throttled_periods"] = [
                    s1["nr_throttled"] - s0["nr_throttled"] for s0, s1 in zip(stat0, stat1)
                ]
                costs["periods"] = [
                    s1["nr_periods"] - s0["nr_periods"] for s0, s1 in zip(stat0, stat1)
                ]
            return parts, costs

        if args.steady_seconds > 0:
            parts, costs = await measured("steady")
            lat = [x for part in parts for x in part]
            health = [await _healthz(n.port) for n in nodes]
            out["steady"] = {
                "guesses": len(lat),
                "per_s": round(len(lat) / args.steady_seconds),
                "p50_ms": round(_pct(lat, 0.50) * 1000, 2),
                "p99_ms": round(_pct(lat, 0.99) * 1000, 2),
                "max_ms": round(max(lat) * 1000, 2) if lat else None,
                "mean_ms": round(statistics.fmean(lat) * 1000, 2) if lat else None,
                # each node's own view over its last 5000 samples: frame in -> ack queued on
                # the owner; forwarded request -> ack back on the client's node
                "server_ack_ms": [h.get("ack_latency_ms") for h in health],
                "server_forward_ms": [h.get("bus_forward_ms") for h in health],
                "pg_commits_slow": [await _commit_tail(n.port) for n in nodes],
                **costs,
            }
        if args.seconds > 0:
            parts, costs = await measured("saturation")
            acked = sum(a for a, _ in parts)
            elapsed = max(e for _, e in parts)
            cpu = sum(costs["node_cpu_s"])
            out["saturation"] = {
                "guesses": acked,
                "guesses_per_s": round(acked / elapsed),
                "node_cpu_us_per_guess": round(cpu / max(1, acked) * 1e6, 1),
                "pg_cpu_us_per_guess": round(costs["pg_backends_cpu_s"] / max(1, acked) * 1e6, 1),
                "broker_cpu_us_per_guess": round(costs["broker_cpu_s"] / max(1, acked) * 1e6, 1),
                **costs,
            }
        out["loadavg_after"] = round(os.getloadavg()[0], 2)
        return out
    finally:
        if workers is not None:
            workers.close()
        if counting is not None:
            counting.cancel()
        for node in nodes:
            if node.proc.returncode is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in nodes:
            try:
                await asyncio.wait_for(node.proc.wait(), 20)
            except TimeoutError:
                node.proc.kill()
                await node.proc.wait()
        for quota in quotas:
            quota.remove()
        if group is not None:
            group.remove()
        if broker is not None and broker.returncode is None:
            broker.kill()
            await broker.wait()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
        tmp.cleanup()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    configs = args.compare or [f"{args.nodes}{'split' if args.split else ''}"]
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        for config in configs:
            print(f"run {rep + 1}/{args.repeat}: {config}", file=sys.stderr)
            result = await run_once(args, *_config(config))
            print(json.dumps(result), file=sys.stderr)
            runs.append(result)
    out: dict[str, Any] = {"configs": configs, "runs": runs}
    if len(configs) > 1:
        # against the first configuration, within each repetition (same machine conditions)
        ratios: dict[str, list[float]] = {}
        for rep in range(args.repeat):
            group = runs[rep * len(configs):(rep + 1) * len(configs)]
            for config, r in zip(configs[1:], group[1:]):
                key = f"{config}/{configs[0]}"
                if args.seconds > 0:
                    ratios.setdefault(f"saturation {key}", []).append(round(
                        r["saturation"]["guesses_per_s"]
                        / group[0]["saturation"]["guesses_per_s"], 2))
                if args.steady_seconds > 0:
                    ratios.setdefault(f"steady p99 {key}", []).append(round(
                        r["steady"]["p99_ms"] / group[0]["steady"]["p99_ms"], 2))
        out["ratios"] = ratios
    return out


def _config(text: str) -> tuple[int, bool]:
    """``"2"``: two nodes, each match on one; ``"2split"``: every match on two."""
    split = text.endswith("split")
    return int(text.removesuffix("split")), split


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--compare", nargs="+", metavar="N[split]",
                        help="configurations to run back to back, e.g. 1 2 or 2 2split;"
                        " overrides --nodes and --split")
    parser.add_argument("--repeat", type=int, default=1, help="repetitions of --compare")
    parser.add_argument("--matches", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2, help="load-generator processes")
    parser.add_argument("--split", action="store_true",
                        help="the two seats of every match on different nodes")
    parser.add_argument("--cpus", nargs="*", help="taskset CPU list per node, e.g. 0 1")
    parser.add_argument("--cpu-quota", type=float, metavar="FRACTION",
                        help="cgroup v1 CPU quota per node, in cores (e.g. 0.2); needs root")
    parser.add_argument("--cpu-shares", type=int, metavar="WEIGHT",
                        help="cgroup v1 cpu.shares of everything the benchmark runs (nodes,"
                        " broker, load workers, its database's backends, itself) against the"
                        " machine's other jobs (their weight: 1024); needs root")
    parser.add_argument("--broker-nodelay", action=argparse.BooleanOptionalAction,
                        default=True, help="mosquitto set_tcp_nodelay (default on)")
    parser.add_argument("--seconds", type=float, default=10.0, help="saturation (0: skip)")
    parser.add_argument("--steady-seconds", type=float, default=15.0, help="0: skip")
    parser.add_argument("--interval", type=float, default=2.0, help="steady: s between guesses")
    parser.add_argument("--subprotocol", default="moo.v1.msgpack",
                        choices=["moo.v1.msgpack", "moo.v1.json"])
    args = parser.parse_args()
    try:
        configs = [_config(c) for c in args.compare or []] or [(args.nodes, args.split)]
    except ValueError:
        parser.error("--compare: node counts, optionally with 'split', e.g. 1 2 2split")
    if not (all(1 <= n <= 8 for n, _ in configs) and 1 <= args.matches <= 5000
            and 1 <= args.workers <= 16 and 1 <= args.repeat <= 10):
        parser.error("bounded: 1-8 nodes, 1-5000 matches, 1-16 workers, 1-10 repetitions")
    if any(split and n < 2 for n, split in configs):
        parser.error("split needs at least 2 nodes")
    if args.cpu_shares is not None and not (
            2 <= args.cpu_shares <= 262144 and os.access(CGROUP_CPU, os.W_OK)):
        parser.error(f"--cpu-shares: 2-262144, and a writable {CGROUP_CPU} (cgroup v1, root)")
    if args.cpu_quota is not None:
        if not 0.01 <= args.cpu_quota <= os.cpu_count():  # type: ignore[operator]
            parser.error("--cpu-quota: a fraction of one core, 0.01 to the number of cores")
        if not os.access(CGROUP_CPU, os.W_OK):
            parser.error(f"--cpu-quota needs a writable {CGROUP_CPU} (cgroup v1, root)")
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
