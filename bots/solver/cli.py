"""``moo solve``: compute the minimum or the strongest fixed strategy by exhaustive search.

Examples::

    moo solve minimum --jobs 2 --out bots/data/minimum.txt.gz
    moo solve minimum --cell 2B1C                # last stdout line: the cell's sub-total (240)
    moo solve strongest --jobs 2 --out bots/data/strongest.txt.gz
    moo solve strongest --vs bots/data/strongest.txt.gz   # best response to strongest itself
    moo solve minimum --length 3 --alphabet 0123456789
    moo solve minimum --game mastermind --length 4 --alphabet 123456   # total 5625
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from moo.errors import UsageError
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
    parser.add_argument("--alphabet", default=None,
                        help="symbols (default 0-9 for moo, 123456 for mastermind)")
    parser.add_argument("--game", choices=["moo", "mastermind"], default="moo",
                        help="moo (distinct symbols, bulls and cows; default) or mastermind "
                        "(repeats allowed, black and white pegs; searched from the empty "
                        "history by the generic engine, one process)")
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
        try:
            counts = [int(x) for x in args.vs.replace(" ", "").split(",") if x]
        except ValueError:
            raise UsageError(
                f"--vs {args.vs!r}: expected counts solved by guess 1, 2, ... "
                "(e.g. 1,7,63,697,2424,1774,74) or an existing strategy dump file"
            ) from None
        if not counts or any(c < 0 for c in counts) or not sum(counts):
            raise UsageError(f"--vs {args.vs!r}: counts must be >= 0 and not all zero")
        return counts
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
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.game == "mastermind":
        return _main_mastermind(args)
    try:
        rules = Rules(length=args.length, alphabet=args.alphabet or "0123456789")
    except ValueError as exc:
        raise UsageError(f"--length/--alphabet: {exc}") from None
    objective: Objective
    if args.objective == "minimum":
        objective = minimum_objective(tiebreak=args.tiebreak)
    else:
        objective = strongest_objective(_opponent(args, rules))
    cells = None
    if args.cell:
        try:
            response = parse_response(args.cell)
        except ValueError as exc:
            raise UsageError(f"--cell: {exc}") from None
        if response not in rules.responses:
            raise UsageError(f"--cell: no such first response {args.cell!r}")
        cells = [response]
    res = solve_cells(rules, objective, jobs=max(1, args.jobs), cells=cells,
                      progress=_progress(args.quiet or args.cell is not None))
    if args.out:
        try:
            dump_tree(res.paths, args.out)
        except OSError as exc:
            raise UsageError(f"cannot write --out {args.out}: {exc.strerror or exc}") from None
    if args.json:
        # one JSON document and nothing else, so the output parses as it is
        print(json.dumps(_summary(res, full=cells is None), indent=2))
        return 0
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


def _main_mastermind(args: argparse.Namespace) -> int:
    """``--game mastermind``: the whole game on the generic table engine (bots/solver/table.py)."""
    from moo.mastermind import MastermindRules

    from .table import describe, mastermind_solver

    if args.cell:
        print("moo solve: --cell is for --game moo only", file=sys.stderr)
        return 2
    try:
        rules = MastermindRules(length=args.length, alphabet=args.alphabet or "123456")
    except ValueError as exc:
        print(f"moo solve: {exc}", file=sys.stderr)
        return 2
    if len(rules.alphabet) ** rules.length > 10_000:
        # The engine keeps an N x N response table: 10 000 codes is already 100 MB.
        print("moo solve: mastermind game too large for the exact solver (at most 10000 codes)",
              file=sys.stderr)
        return 2
    objective: Objective
    if args.objective == "minimum":
        objective = minimum_objective(tiebreak=args.tiebreak)
    else:
        if args.vs:
            path = Path(args.vs)
            if path.exists():
                opponent = _dist(len(p) for p in load_tree(path).values())
            else:
                opponent = [int(x) for x in args.vs.replace(" ", "").split(",") if x]
        else:  # against this game's own minimum strategy, solved first (seconds)
            opponent = mastermind_solver(rules, minimum_objective()).solve().distribution
        objective = strongest_objective(opponent)

    def note(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    res = mastermind_solver(rules, objective).solve(progress=note)
    if args.out:
        dump_tree(res.paths, args.out)
    if args.json:
        out: dict[str, object] = {
            "objective": objective.name,
            "rules": rules.to_dict(),
            "first_guess": res.first_guess,
            "cells": [{"response": format_response(c.response), "second_guess": c.second_guess,
                       "size": c.size, "subtotal": c.subtotal} for c in res.cells],
            "seconds": round(res.seconds, 3),
            "total": res.total,
            "distribution": res.distribution,
        }
        scored = res.score()
        if scored is not None:
            out["opponent"] = list(objective.opponent)
            out["gamma_sum"], out["win_rate"] = scored
        print(json.dumps(out, indent=2))
    else:
        print("\n".join(describe(res)))
    return 0
