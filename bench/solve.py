"""Time full solver runs from scratch: ``python bench/solve.py [minimum|strongest ...]``.

Each run is a fresh ``moo solve OBJECTIVE --jobs N`` process (no warm tables), so the figure
includes building the response table, the search, reading the tree back and replaying it.
Wall time alone is misleading on a shared machine, so the child processes' CPU time and the
load average around the run are reported too; ``--repeat`` runs each one several times.

    python bench/solve.py minimum --jobs 2 --repeat 3                   # classic MOO
    python bench/solve.py minimum --jobs 1 --game "--rules mastermind:4:1234567"
    python bench/solve.py minimum --jobs 1 --game "--rules mastermind:4:12345678"
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(objective: str, jobs: int, extra: list[str]) -> dict[str, object]:
    moo = shutil.which("moo") or str(Path(sys.executable).with_name("moo"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{objective}.txt.gz"
        cmd = [moo, "solve", objective, "--jobs", str(jobs), "--out", str(out), *extra]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "command": " ".join(
            ["moo", "solve", objective, "--jobs", str(jobs), "--out", out.name, *extra]
        ),
        "wall": wall,
        "cpu": cpu,
        "load": (load0, os.getloadavg()[0]),
        "stdout": proc.stdout,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("objectives", nargs="*", default=["minimum", "strongest"])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--nice", action="store_true", help="run the solver under nice")
    parser.add_argument("--game", default="",
                        help="extra moo solve options, e.g. '--rules mastermind:4:1234567'")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (default 1)")
    args = parser.parse_args()
    if args.nice:
        os.nice(10)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
          f"Python {platform.python_version()}")
    print("| objective | jobs | wall s | CPU s (all processes) | load 1-min before/after |")
    print("| --- | --- | --- | --- | --- |")
    results = []
    for objective in args.objectives:
        # strongest plays against the shipped minimum tree unless --game changes the game.
        extra = args.game.split()
        for _ in range(max(1, args.repeat)):
            r = run(objective, args.jobs, extra)
            results.append(r)
            load = r["load"]
            assert isinstance(load, tuple)
            print(f"| {objective} {args.game} | {args.jobs} | {r['wall']:.1f} | {r['cpu']:.1f} "
                  f"| {load[0]:.1f} / {load[1]:.1f} |", flush=True)
    for r in results[:: max(1, args.repeat)]:
        print(f"\n$ {r['command']}\n{r['stdout']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
