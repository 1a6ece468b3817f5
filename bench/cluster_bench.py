"""Cluster benchmark: the server benchmark's harness against N cluster nodes (docs/cluster.md).

Starts a fresh PostgreSQL database, a Mosquitto broker on a free port and N ``moo serve
--cluster`` nodes (each optionally pinned with ``taskset`` to one CPU list, so every node gets
the same CPU share), then runs ``bench/server_bench.py``'s players: match i's seat 0 connects to
node ``i % N``; its seat 1 to the same node, or with ``--split`` to the next one (every action
of that seat then crosses the bus). Phases as in the server benchmark: steady (every player
guesses every ``--interval`` s: acknowledgement latency) then saturation (acknowledged
guesses/s). Node CPU is summed over the node processes (PostgreSQL and the broker not
included). Everything is torn down at the end, the database dropped.

    python -m bench.cluster_bench --nodes 1 --matches 300 --cpus 0          # (b) one node
    python -m bench.cluster_bench --nodes 2 --matches 300 --cpus 0 1        # (b) two nodes
    python -m bench.cluster_bench --nodes 2 --matches 500 --split --seconds 0 \\
        --steady-seconds 30 --interval 1                                      # (c) split
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
from pathlib import Path
from typing import Any

import asyncpg

from bench.server_bench import LISTENING, ROOT, _healthz, _pct, saturate, setup, steady

PG = os.environ.get("MOO_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")


class Node:
    def __init__(self, proc: asyncio.subprocess.Process, port: int) -> None:
        self.proc = proc
        self.port = port
        self.kind = "moo"

    def cpu_s(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


async def _start_node(db: str, bus: str, name: str, cpus: str | None) -> Node:
    cmd = [
        sys.executable, "-m", "moo", "serve", "--port", "0", "--db", db, "--cluster", bus,
        "--node", name, "--rate-per-s", "10000", "--rate-burst", "10000",
        "--max-connections", "20000",
    ]
    if cpus is not None:
        cmd = ["taskset", "-c", cpus, *cmd]
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MOO_GUESS_CAP": "10000", "MOO_SECRET_MS": "0"},
    )
    assert proc.stderr is not None
    try:
        async with asyncio.timeout(30):
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

    async def drain() -> None:
        assert proc.stderr is not None
        while await proc.stderr.readline():
            pass

    asyncio.get_running_loop().create_task(drain())
    return Node(proc, int(found.group(1)))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    name = f"moo_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(PG + "/postgres")
    await admin.execute(f'CREATE DATABASE "{name}"')
    db = f"{PG}/{name}"
    tmp = tempfile.TemporaryDirectory(prefix="moo-cluster-bench-")
    broker: asyncio.subprocess.Process | None = None
    nodes: list[Node] = []
    try:
        port = _free_port()
        conf = Path(tmp.name) / "mosquitto.conf"
        conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
        mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        broker = await asyncio.create_subprocess_exec(
            mosquitto, "-c", str(conf),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )
        cpus = args.cpus or [None] * args.nodes
        for i in range(args.nodes):
            nodes.append(await _start_node(db, f"mqtt://127.0.0.1:{port}", f"n{i}",
                                           cpus[i % len(cpus)]))
        for node in nodes:  # every node on the bus before the first hello
            async with asyncio.timeout(30):
                while (await _healthz(node.port)).get("bus") != "ok":
                    await asyncio.sleep(0.1)
        ports = [n.port for n in nodes]
        players = await setup(nodes[0], args.matches, args.subprotocol, "c",  # type: ignore[arg-type]
                              ports=ports, split=args.split)
        out: dict[str, Any] = {
            "nodes": args.nodes, "matches": args.matches, "split": args.split,
            "cpus": args.cpus, "loadavg_before": os.getloadavg()[0],
        }
        if args.steady_seconds > 0:
            cpu0 = sum(n.cpu_s() for n in nodes)
            await steady(players, args.steady_seconds, args.interval)
            lat = [x for p in players for x in p.latencies]
            out["steady"] = {
                "guesses": len(lat),
                "per_s": round(len(lat) / args.steady_seconds),
                "p50_ms": round(_pct(lat, 0.50) * 1000, 2),
                "p99_ms": round(_pct(lat, 0.99) * 1000, 2),
                "max_ms": round(max(lat) * 1000, 2) if lat else None,
                "mean_ms": round(statistics.fmean(lat) * 1000, 2) if lat else None,
                "node_cpu_s": round(sum(n.cpu_s() for n in nodes) - cpu0, 2),
            }
        if args.seconds > 0:
            cpu0 = sum(n.cpu_s() for n in nodes)
            acked, elapsed = await saturate(players, args.seconds)
            cpu = sum(n.cpu_s() for n in nodes) - cpu0
            out["saturation"] = {
                "guesses": acked,
                "guesses_per_s": round(acked / elapsed),
                "node_cpu_s": round(cpu, 2),
                "node_cpu_us_per_guess": round(cpu / max(1, acked) * 1e6, 1),
            }
        for p in players:
            await p.ws.close()
        out["loadavg_after"] = os.getloadavg()[0]
        return out
    finally:
        for node in nodes:
            if node.proc.returncode is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in nodes:
            try:
                await asyncio.wait_for(node.proc.wait(), 20)
            except TimeoutError:
                node.proc.kill()
                await node.proc.wait()
        if broker is not None and broker.returncode is None:
            broker.kill()
            await broker.wait()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
        tmp.cleanup()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--matches", type=int, default=200)
    parser.add_argument("--split", action="store_true",
                        help="the two seats of every match on different nodes")
    parser.add_argument("--cpus", nargs="*", help="taskset CPU list per node, e.g. 0 1")
    parser.add_argument("--seconds", type=float, default=10.0, help="saturation (0: skip)")
    parser.add_argument("--steady-seconds", type=float, default=15.0, help="0: skip")
    parser.add_argument("--interval", type=float, default=2.0, help="steady: s between guesses")
    parser.add_argument("--subprotocol", default="moo.v1.msgpack",
                        choices=["moo.v1.msgpack", "moo.v1.json"])
    args = parser.parse_args()
    if not (1 <= args.nodes <= 8 and 1 <= args.matches <= 5000):
        parser.error("bounded: 1-8 nodes, 1-5000 matches")
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
