"""Build or verify the judge's opening table (``bots/data/opening-4-10.txt.gz``).

    python -m bench.judge_table --build [--jobs 2] [--checkpoint DIR]   # about an hour of CPU
    python -m bench.judge_table --verify [--jobs 2]                     # solves every entry again

Both solve every position of :func:`bots.judge.opening.positions` with the exact solver
(:class:`bots.solver.core.Solver`, minimum objective): the 13 first-response cells and the
1231 positions after a canonical second guess with three or more secrets. ``--build`` writes
the table; ``--verify`` compares each solved value with the shipped one and checks that the
shipped guess achieves it (its parts solved exactly), and exits 1 on any difference. A cell's
positions are solved in one process so its transposition table is shared; ``--checkpoint``
keeps the solved lines per cell, so an interrupted build resumes where it stopped (every
``*.txt`` file of the directory is read, so a big cell can be split between processes by
hand and the build run again to assemble the table).
"""

from __future__ import annotations

import argparse
import array
import multiprocessing
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bots.judge.opening import TABLE, OpeningTable, load, positions


def _as_set(index: dict[str, int], codes: Sequence[str]) -> bytes:
    return array.array("H", sorted(index[c] for c in codes)).tobytes()


def solve_group(task: tuple[str, list[tuple[str, list[str], tuple[str, ...]]], str | None]
                ) -> list[tuple[str, int, str, float]]:
    """Solve one cell's positions in this process: (key, W, guess, seconds) per entry."""
    from bots.solver.core import Solver, minimum_objective
    from moo.rules import DEFAULT_RULES

    name, group, checkpoint = task
    done: dict[str, tuple[int, str, float]] = {}
    ck = Path(checkpoint) / f"{name}.txt" if checkpoint else None
    if ck is not None:  # any worker's lines count (a cell may have been split by hand)
        for old in ck.parent.glob("*.txt"):
            for line in old.read_text().splitlines():
                k1, k2, k3, v, g, t = line.split()
                done[f"{k1} {k2} {k3}"] = (int(v), g, float(t))
    solver = Solver(DEFAULT_RULES, minimum_objective(), tt_log2=23)
    out = []
    for key, history, secrets in group:
        if key in done:
            out.append((key, *done[key]))
            continue
        t0 = time.perf_counter()
        value, guess = solver.best_guess(_as_set(solver.index, secrets),
                                         [solver.index[h] for h in history])
        w = value - len(history) * len(secrets)
        row = (key, w, solver.codes[guess], time.perf_counter() - t0)
        out.append(row)
        if ck is not None:
            with ck.open("a") as f:
                f.write(f"{row[0]} {row[1]} {row[2]} {row[3]:.3f}\n")
        print(f"  {key}: {len(secrets)} secrets, W {w}, {row[3]:.1f}s", file=sys.stderr,
              flush=True)
    return out


def groups(checkpoint: str | None
           ) -> list[tuple[str, list[tuple[str, list[str], tuple[str, ...]]], str | None]]:
    """The entries by first response, largest cell first, largest position first within."""
    by_cell: dict[str, list[tuple[str, list[str], tuple[str, ...]]]] = {}
    for entry in positions():
        by_cell.setdefault(entry[0].split()[1], []).append(entry)
    out = []
    for r1, group in by_cell.items():
        group.sort(key=lambda e: (e[0].startswith("-") is False, -len(e[2])))
        out.append((f"cell-{r1}", group, checkpoint))
    out.sort(key=lambda t: -sum(len(e[2]) ** 2 for e in t[1]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--build", action="store_true", help="solve everything, write the table")
    mode.add_argument("--verify", action="store_true", help="solve everything, compare")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--checkpoint", default=None, help="directory for per-cell progress")
    parser.add_argument("--out", type=Path, default=TABLE)
    args = parser.parse_args(argv)
    if args.checkpoint:
        Path(args.checkpoint).mkdir(parents=True, exist_ok=True)
    tasks = groups(args.checkpoint)
    t0 = time.perf_counter()
    rows: list[tuple[str, int, str, float]] = []
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for i, result in enumerate(pool.imap_unordered(solve_group, tasks), 1):
            rows.extend(result)
            print(f"{i}/{len(tasks)} cells, {len(rows)} positions, "
                  f"{time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    solved = OpeningTable({k: (w, g) for k, w, g, _t in rows})
    if args.build:
        solved.dump(args.out)
        print(f"wrote {args.out}: {len(rows)} positions, "
              f"{time.perf_counter() - t0:.0f}s", flush=True)
        return 0
    shipped = load(args.out)
    bad = [k for k, (w, _g) in solved.entries.items() if shipped.entries.get(k, (None,))[0] != w]
    missing = set(shipped.entries) ^ set(solved.entries)
    print(f"{len(solved.entries)} positions solved again, {len(bad)} values differ, "
          f"{len(missing)} keys differ, {time.perf_counter() - t0:.0f}s")
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
