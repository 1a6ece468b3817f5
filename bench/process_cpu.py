"""Which programs the machine's CPU went to while something ran, by command line.

    python -m bench.process_cpu [--top 30] [--json] -- ./dev test
    python -m bench.process_cpu --seconds 60

``bench/suite_cpu.py`` charges each test with its own process's CPU and its reaped children's;
what no test reaps is missing there: a daemon that outlives its parent (PostgreSQL under
``pg_ctl``), the browser's processes until the module's browser closes, the servers a session
fixture keeps. This samples every process in ``/proc`` twice a second while the command runs
(or for ``--seconds``) and keeps each one's last CPU time (user + system), then sums them by
command line (its first words, so that the nodes of a cluster add up as one line). A process
that lives less than half a second may be missed, and a process already running at the start
counts from then on; compare the total with the machine's own over the same time (from
``/proc/stat``), which it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from clients.hosted.proctree import CLOCK_TICKS, proc_stat


def _busy() -> float:
    """The machine's CPU seconds so far, all cores (user, nice, system)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return (int(fields[0]) + int(fields[1]) + int(fields[2])) / CLOCK_TICKS


def _key(pid: str, words: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return " ".join(a.decode(errors="replace") for a in argv[:words] if a)[:100] or "?"


@dataclass
class Sampled:
    """What :func:`sample` saw: the machine's CPU over the time and each command line's."""

    seconds: float
    machine_cpu_s: float
    sampled_cpu_s: float
    by_command: list[tuple[str, float]] = field(default_factory=list)


def sample(done: Callable[[], bool], words: int = 4, every: float = 0.5,
           started: threading.Event | None = None) -> Sampled:
    """Sample until ``done()`` is true (then once more); ``started`` is set after the first
    pass, from which on a process's CPU counts."""
    seen: dict[str, tuple[str, float]] = {}
    before: dict[str, float] = {}  # what the processes running at the start had used by then
    busy0, t0 = _busy(), time.monotonic()
    passes = 0
    while True:
        last = done()
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            fields = proc_stat(int(pid))
            if fields is None:
                continue
            cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
            key = seen[pid][0] if pid in seen else _key(pid, words)
            seen[pid] = (key, cpu)
            if passes == 0:
                before[pid] = cpu
        passes += 1
        if passes == 1 and started is not None:
            started.set()
        if last:
            break
        time.sleep(every)
    by: dict[str, float] = defaultdict(float)
    for pid, (key, cpu) in seen.items():
        by[key] += cpu - before.get(pid, 0.0)
    rows = sorted(by.items(), key=lambda kv: -kv[1])
    return Sampled(round(time.monotonic() - t0, 1), round(_busy() - busy0, 1),
                   round(sum(by.values()), 1), [(k, round(v, 1)) for k, v in rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, help="watch this long (instead of a command)")
    parser.add_argument("--top", type=int, default=30, help="lines to print")
    parser.add_argument("--words", type=int, default=4, help="command-line words to group by")
    parser.add_argument("--json", action="store_true", help="the whole result as JSON")
    parser.add_argument("command", nargs="*", help="the command to run and watch (after --)")
    args = parser.parse_args()
    if (args.seconds is None) == (not args.command):
        parser.error("give either a command (after --) or --seconds")
    if args.seconds is not None and args.seconds <= 0:
        parser.error("--seconds must be positive")
    status = 0
    if args.command:
        try:
            proc = subprocess.Popen(args.command)
        except OSError as exc:
            parser.error(f"cannot run {args.command[0]}: {exc.strerror}")
        result = sample(lambda: proc.poll() is not None, args.words)
        status = proc.returncode
    else:
        end = time.monotonic() + args.seconds
        result = sample(lambda: time.monotonic() >= end, args.words)
    if args.json:
        json.dump(asdict(result), sys.stdout, indent=1)
        print()
        return status
    print(f"machine CPU {result.machine_cpu_s} s over {result.seconds:g} s;"
          f" sampled processes {result.sampled_cpu_s} s", file=sys.stderr)
    for key, cpu in result.by_command[: args.top]:
        print(f"{cpu:9.1f}  {key}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
