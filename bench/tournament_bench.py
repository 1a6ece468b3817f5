"""Tournament throughput: matches/s through a real ``moo serve`` and in ``--local`` mode.

    python -m bench.tournament_bench [--rounds 500] [--concurrency 64] [--bots A B] [--wire json]

Starts ``moo serve`` on a free loopback port with its own temporary database (default
settings otherwise: durable FULL-sync SQLite, default rate limits), runs
``moo tournament A B --url ... --concurrency K`` against it, then the same tournament with
``--local``. Besides wall-clock matches/s it reports the CPU time per match of the tournament
client and of the server (from /proc), because on a shared machine the wall-clock rate says
more about the neighbours than about the code: with one core each, the rate is bounded by
``1 / max(client CPU, server CPU)`` per match, printed as "dedicated-core bound".
Everything is bounded (a fixed number of matches) and talks to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CLK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (and its reaped children) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / CLK


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("moo serve exited")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("moo serve did not become healthy")


def _tournament(args: list[str]) -> tuple[dict[str, object], float]:
    start = os.times()
    out = subprocess.run(
        [sys.executable, "-m", "cli", "tournament", *args, "--json", "--no-progress"],
        check=True, capture_output=True, text=True,
    )
    end = os.times()
    cpu = (end.children_user - start.children_user) + (end.children_system - start.children_system)
    return json.loads(out.stdout), cpu


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=500)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--bots", nargs=2, default=["minimum", "strongest"])
    p.add_argument("--wire", choices=("msgpack", "json"), default="msgpack")
    p.add_argument("--pacing", default="lockstep")
    ns = p.parse_args()
    common = [*ns.bots, "--rounds", str(ns.rounds), "--seed", "1", "--pacing", ns.pacing]
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [sys.executable, "-m", "cli", "serve", "--port", str(port),
             "--db", str(Path(tmp) / "bench.sqlite3"), "--log-level", "WARNING"],
        )
        try:
            _wait_healthy(port, server)
            before = _cpu_s(server.pid)
            remote, client_cpu = _tournament(
                [*common, "--url", f"ws://127.0.0.1:{port}/", "--concurrency",
                 str(ns.concurrency), "--wire", ns.wire]
            )
            server_cpu = _cpu_s(server.pid) - before
        finally:
            server.terminate()
            server.wait(30)
    local, local_cpu = _tournament([*common, "--local"])
    n = int(remote["played"])  # type: ignore[call-overload]
    per_client = client_cpu / n * 1000
    per_server = server_cpu / n * 1000
    load = os.getloadavg()
    print(f"bots {' vs '.join(ns.bots)}, {n} matches, pacing {ns.pacing}, "
          f"{ns.wire}, load average {load[0]:.1f} on "
          f"{os.cpu_count()} cores")
    print(f"through server, concurrency {ns.concurrency}: {remote['matches_per_s']} matches/s "
          f"(wall); CPU per match: client {per_client:.2f} ms, server {per_server:.2f} ms; "
          f"dedicated-core bound {1000 / max(per_client, per_server):.0f} matches/s")
    print(f"local (in-process): {local['matches_per_s']} matches/s (wall); "
          f"CPU per match {local_cpu / int(local['played']) * 1000:.2f} ms")  # type: ignore[call-overload]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
