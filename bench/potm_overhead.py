"""What the POTM sandbox costs per guess: a trivial entry run three ways in the same process.

* **direct**: ``subprocess.run`` of the program with the guess on stdin (what a referee
  without any confinement does);
* **unconfined**: the referee's run without bubblewrap (``moo potm --unconfined``): the
  reaper, its CPU accounting and its kill, and the output checks;
* **sandbox**: the referee's run as ``moo potm`` does it: a fresh ``bwrap`` (user, PID, mount,
  network, IPC, UTS and cgroup namespaces, about 30 mounts) around the reaper.

The entry is ``tests/potm_entries/same.sh`` (``#!/bin/sh``, ``echo AAAAA``). The three are
interleaved guess by guess, so they share the machine's load; per guess the wall-clock time and
the CPU time of everything started for it (``RUSAGE_CHILDREN``: bwrap, the reaper, the
program) are recorded. Printed: mean and median milliseconds per guess and the ratios to
direct.

    python -m bench.potm_overhead [--guesses 200]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from clients.potm.referee import Limits, Referee
from clients.potm.rounds import Entry

ENTRY = Path(__file__).resolve().parent.parent / "tests" / "potm_entries" / "same.sh"


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _measure(run: Callable[[], object]) -> tuple[float, float]:
    c0, t0 = _children_cpu(), time.perf_counter()
    run()
    return (time.perf_counter() - t0) * 1000, (_children_cpu() - c0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--guesses", type=int, default=200, help="guesses of each kind")
    args = ap.parse_args()
    entry = [Entry("same.sh", ENTRY)]
    with Referee(entry, Limits()) as boxed, Referee(entry, Limits(), confined=False) as bare:
        works = {ref: ref._fresh_workdir(0) for ref in (boxed, bare)}

        def direct() -> None:
            out = subprocess.run([str(ENTRY)], input=b"5\n", capture_output=True, check=True)
            assert out.stdout == b"AAAAA\n"

        def referee(ref: Referee) -> Callable[[], None]:
            def run() -> None:
                assert ref.run_once(0, works[ref], "5\n", 5).output == "AAAAA"
            return run

        kinds: dict[str, Callable[[], None]] = {
            "direct": direct, "unconfined": referee(bare), "sandbox": referee(boxed)}
        wall: dict[str, list[float]] = {k: [] for k in kinds}
        cpu: dict[str, list[float]] = {k: [] for k in kinds}
        for run in kinds.values():  # warm the caches once
            run()
        for _ in range(args.guesses):
            for name, run in kinds.items():
                w, c = _measure(run)
                wall[name].append(w)
                cpu[name].append(c)
    base_w = statistics.mean(wall["direct"])
    base_c = statistics.mean(cpu["direct"])
    print(f"{args.guesses} guesses of each kind, interleaved; ms per guess")
    print(f"{'kind':<11} {'wall mean':>9} {'median':>7} {'x direct':>8}   "
          f"{'CPU mean':>8} {'median':>7} {'x direct':>8}")
    for name in kinds:
        mw, mc = statistics.mean(wall[name]), statistics.mean(cpu[name])
        print(f"{name:<11} {mw:>9.1f} {statistics.median(wall[name]):>7.1f} "
              f"{mw / base_w:>8.1f}   {mc:>8.1f} {statistics.median(cpu[name]):>7.1f} "
              f"{mc / base_c:>8.1f}")


if __name__ == "__main__":
    main()
