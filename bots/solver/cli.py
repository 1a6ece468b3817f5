"""``moo solve``: compute the minimum or the strongest fixed strategy by exhaustive search.

Examples::

    moo solve minimum --jobs 2 --out bots/data/minimum.txt.gz
    moo solve minimum --cell 2B1C                # last stdout line: the cell's sub-total (240)
    moo solve strongest --jobs 2 --out bots/data/strongest.txt.gz
    moo solve strongest --vs bots/data/strongest.txt.gz   # best response to strongest itself
    moo solve minimum --length 3 --alphabet 0123456789
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from moo.rules import Rules, format_response, parse_response

from .core import (
    CellResult,
    Objective,
    distribution,
    dump_tree,
    load_tree,
    minimum_objective,
    strongest_objective,
)
from .full import FullResult, solve_cells

DATA = Path(__file__).resolve().parent.parent / "data"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("objective", choices=["minimum", "strongest"],
                        help="fewest total guesses, or best win rate against --vs")
    parser.add_argument("--cell", metavar="RESPONSE",
                        help="solve only the cell after this first response (e.g. 2B1C)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--out", type=Path, help="write the strategy (SECRET: GUESSES...; .gz ok)")
    parser.add_argument("--vs", metavar="DISTRIBUTION",
                        help="opponent for strongest: counts solved by guess 1,2,... "
                        "('1,7,63,...') or a strategy dump file; default: the minimum strategy")
    parser.add_argument("--length", type=int, default=4, help="code length (default 4)")
    parser.add_argument("--alphabet", default="0123456789", help="symbols (default 0-9)")
    parser.add_argument("--tiebreak", action="store_true",
                        help="minimum: among optimal trees prefer few secrets at deep levels "
                        "(slower); default: the first optimal guess in bound order")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _opponent(args: argparse.Namespace, rules: Rules) -> list[int]:
    """The opponent distribution for ``strongest``, computed rather than typed in."""
    if args.vs:
        path = Path(args.vs)
        if path.exists():
            paths = load_tree(path)
            return _dist(len(p) for p in paths.values())
        return [int(x) for x in args.vs.replace(" ", "").split(",") if x]
    shipped = DATA / "minimum.txt.gz"
    if rules == Rules() and shipped.exists():
        return _dist(len(p) for p in load_tree(shipped).values())
    # Small games: solve the minimum strategy first, it takes seconds.
    res = solve_cells(rules, minimum_objective(tiebreak=False), jobs=args.jobs)
    return res.distribution


def _dist(depths: Iterable[int]) -> list[int]:
    return distribution(depths)


def _progress(quiet: bool) -> Callable[[int, int, CellResult | None, float], None]:
    """Plain-text progress on stderr: one line per finished cell (no terminal tricks)."""

    def report(done: int, total: int, cell: CellResult | None, elapsed: float) -> None:
        if quiet:
            return
        bar = "#" * done + "." * (total - done)
        what = ""
        if cell is not None:
            what = f" {format_response(cell.response)} ({cell.size}) in {cell.seconds:.1f}s"
        print(f"[{bar}] {done}/{total} cells {elapsed:7.1f}s{what}", file=sys.stderr, flush=True)

    return report


def _cell_row(c: CellResult) -> dict[str, object]:
    return {
        "response": format_response(c.response),
        "second_guess": c.second_guess,
        "size": c.size,
        "subtotal": c.subtotal,
        "seconds": round(c.seconds, 3),
        "nodes": c.nodes,
    }


def main(args: argparse.Namespace) -> int:
    rules = Rules(length=args.length, alphabet=args.alphabet)
    objective: Objective
    if args.objective == "minimum":
        objective = minimum_objective(tiebreak=args.tiebreak)
    else:
        objective = strongest_objective(_opponent(args, rules))
    cells = None
    if args.cell:
        response = parse_response(args.cell)
        if response not in rules.responses:
            print(f"moo solve: no such first response {args.cell!r}", file=sys.stderr)
            return 2
        cells = [response]
    res = solve_cells(rules, objective, jobs=max(1, args.jobs), cells=cells,
                      progress=_progress(args.quiet or args.cell is not None))
    if args.out:
        dump_tree(res.paths, args.out)
    if args.json:
        print(json.dumps(_summary(res, full=cells is None), indent=2))
    else:
        _print(res, full=cells is None)
    if cells is not None:
        print(res.cells[0].subtotal)
    return 0


def _summary(res: FullResult, full: bool) -> dict[str, object]:
    out: dict[str, object] = {
        "objective": res.objective.name,
        "rules": res.rules.to_dict(),
        "cells": [_cell_row(c) for c in res.cells],
        "seconds": round(res.seconds, 3),
    }
    if full:
        out["total"] = res.total
        out["distribution"] = res.distribution
    scored = res.score()
    if full and scored is not None:
        out["opponent"] = list(res.objective.opponent)
        out["gamma_sum"], out["win_rate"] = scored
    return out


def _print(res: FullResult, full: bool) -> None:
    print(f"{'response':>8} {'2nd guess':>9} {'size':>5} {'total':>6} {'time':>9}")
    for c in res.cells:
        print(f"{format_response(c.response):>8} {c.second_guess or '':>9} {c.size:>5} "
              f"{c.subtotal:>6} {c.seconds:>8.2f}s")
    if not full:
        return
    n = len(res.paths)
    print(f"total {res.total} over {n} secrets (mean {res.total / n:.4f}), "
          f"{res.seconds:.1f}s")
    print("distribution " + ",".join(str(c) for c in res.distribution))
    scored = res.score()
    if scored is not None:
        gsum, rate = scored
        print("opponent " + ",".join(str(c) for c in res.objective.opponent))
        print(f"gamma sum {gsum}, win rate {100 * rate:.5f} %")
