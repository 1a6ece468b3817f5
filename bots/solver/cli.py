"""``moo solve``: compute the minimum or the strongest fixed strategy by exhaustive search.

Examples::

    moo solve minimum --jobs 2 --out bots/data/minimum.txt.gz
    moo solve minimum --cell 2B1C                # last stdout line: the cell's sub-total (240)
    moo solve strongest --jobs 2 --out bots/data/strongest.txt.gz
    moo solve strongest --vs bots/data/strongest.txt.gz   # best response to strongest itself
    moo solve minimum --length 3 --alphabet 0123456789
    moo solve minimum --game mastermind --length 4 --alphabet 123456   # total 5625
    moo solve minimum --rules mastermind:4:1234567 --jobs 2            # total 11228
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from moo.errors import UsageError
from moo.mastermind import MastermindRules
from moo.rules import Rules, format_response, parse_response
from moo.variants import rules_arg

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
#: The engines keep an N x N response table (100 MB at this size) and 16-bit code indices.
MAX_CODES = 10_000
MAX_SYMBOLS = 10
MAX_JOBS = 64


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("objective", choices=["minimum", "strongest"],
                        help="fewest total guesses, or best win rate against --vs")
    parser.add_argument("--cell", metavar="RESPONSE",
                        help="solve only the cell after this first response (e.g. 2B1C)")
    parser.add_argument("--jobs", type=int, default=1,
                        help=f"worker processes, 1-{MAX_JOBS} (default 1)")
    parser.add_argument("--out", type=Path, help="write the strategy (SECRET: GUESSES...; .gz ok)")
    parser.add_argument("--vs", metavar="DISTRIBUTION",
                        help="opponent for strongest: counts solved by guess 1,2,... "
                        "('1,7,63,...') or a strategy dump file; default: the minimum strategy")
    parser.add_argument("--rules", type=rules_arg, default=None, metavar="SPEC",
                        help="the game, as every other command takes it: "
                        "GAME[:LENGTH[:ALPHABET]], e.g. moo:4, moo:3:0123456789, "
                        "mastermind:4:1234567 (docs/variants.md); the same as --game, --length "
                        "and --alphabet, which it replaces")
    parser.add_argument("--length", type=int, default=None, help="code length (default 4)")
    parser.add_argument("--alphabet", default=None,
                        help="symbols (default 0-9 for moo, 123456 for mastermind)")
    parser.add_argument("--game", choices=["moo", "mastermind"], default=None,
                        help="moo (distinct symbols, bulls and cows; default) or mastermind "
                        "(repeats allowed, black and white pegs; the first guess is searched "
                        "too)")
    parser.add_argument("--tiebreak", action="store_true",
                        help="minimum: among optimal trees prefer few secrets at deep levels "
                        "(slower); default: the first optimal guess in bound order")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _parse_vs(args: argparse.Namespace) -> list[int] | None:
    """``--vs``: a strategy dump file or counts solved by guess 1, 2, ...; None if not given."""
    if not args.vs:
        return None
    path = Path(args.vs)
    if path.exists():
        try:
            paths = load_tree(path)
        except (OSError, ValueError, EOFError) as exc:
            raise UsageError(f"--vs {args.vs!r}: not a readable strategy dump ({exc})") from None
        if not paths:
            raise UsageError(f"--vs {args.vs!r}: the strategy dump is empty")
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


def _opponent(args: argparse.Namespace, rules: Rules) -> list[int]:
    """The opponent distribution for ``strongest``, computed rather than typed in."""
    counts = _parse_vs(args)
    if counts is not None:
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


def _rules(args: argparse.Namespace) -> Rules | MastermindRules:
    """The game from ``--rules`` or from ``--game/--length/--alphabet``, checked for the solver:
    a mistake is one line (exit 2), never a traceback from the engine."""
    rules: object
    if args.rules is not None:
        given = [f"--{n}" for n in ("game", "length", "alphabet") if getattr(args, n) is not None]
        if given:
            raise UsageError(f"--rules replaces {'/'.join(given)}: give one or the other")
        rules = args.rules
    else:
        game = args.game or "moo"
        length = 4 if args.length is None else args.length
        try:
            if game == "mastermind":
                rules = MastermindRules(length=length, alphabet=args.alphabet or "123456")
            else:
                rules = Rules(length=length, alphabet=args.alphabet or "0123456789")
        except ValueError as exc:
            raise UsageError(f"--length/--alphabet: {exc}") from None
    if isinstance(rules, MastermindRules):
        count = len(rules.alphabet) ** rules.length
    elif isinstance(rules, Rules):
        if rules.repeats_in_guess:
            raise UsageError("the solver plays MOO with distinct-symbol guesses only "
                             "(no ':repeats'); for repeated symbols use mastermind")
        count = 1
        for i in range(rules.length):
            count *= len(rules.alphabet) - i
    else:
        raise UsageError("the solver handles moo and mastermind games, not word MOO")
    if len(rules.alphabet) > MAX_SYMBOLS:
        raise UsageError(f"the solver handles at most {MAX_SYMBOLS} symbols, "
                         f"got {len(rules.alphabet)}")
    if count > MAX_CODES:
        raise UsageError(f"{count} codes: too large for the exact solver "
                         f"(at most {MAX_CODES}, its response table has N x N entries)")
    return rules


def main(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    if args.jobs > MAX_JOBS:
        raise UsageError(f"--jobs must be at most {MAX_JOBS}, got {args.jobs}")
    game = _rules(args)
    if isinstance(game, MastermindRules):
        return _main_mastermind(args, game)
    rules = game
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
        _write(res.paths, args.out)
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


def _write(paths: dict[str, list[str]], out: Path) -> None:
    try:
        dump_tree(paths, out)
    except OSError as exc:
        raise UsageError(f"cannot write --out {out}: {exc.strerror or exc}") from None


@contextmanager
def _ticker(quiet: bool, what: str) -> Iterator[Callable[[int, int, str], None]]:
    """A progress line on stderr every few seconds while a long search runs (its C loop holds
    no GIL); ``update(done, total, note)`` adds task counts when there are workers."""
    state = {"done": 0, "total": 0}
    stop = threading.Event()
    t0 = time.perf_counter()

    def line() -> None:
        elapsed = time.perf_counter() - t0
        done, total = state["done"], state["total"]
        if total:
            width = 30
            filled = width * done // total
            bar = "#" * filled + "." * (width - filled)
            print(f"[{bar}] {done}/{total} tasks {elapsed:7.1f}s {what}",
                  file=sys.stderr, flush=True)
        else:
            print(f"searching {what} {elapsed:7.1f}s", file=sys.stderr, flush=True)

    def beat() -> None:
        while not stop.wait(5.0):
            line()

    def update(done: int, total: int, note: str) -> None:
        state["done"], state["total"] = done, total

    thread = threading.Thread(target=beat, daemon=True)
    if not quiet:
        thread.start()
    try:
        yield update
    finally:
        stop.set()


def _main_mastermind(args: argparse.Namespace, rules: MastermindRules) -> int:
    """Mastermind: the whole game from the empty history (the first guess is searched too) on
    the ``_mastermind`` engine (bots/solver/mastermind.py)."""
    from .mastermind import MastermindSolver
    from .table import describe

    if args.cell:
        raise UsageError("--cell is for --game moo only (Mastermind searches its first guess)")
    objective: Objective
    if args.objective == "minimum":
        objective = minimum_objective(tiebreak=args.tiebreak)
    else:
        opponent = _parse_vs(args)
        if opponent is None:  # against this game's own minimum strategy, solved first
            with _ticker(args.quiet, "the minimum strategy (the opponent)") as update:
                first = MastermindSolver(rules, minimum_objective())
                opponent = first.solve(jobs=args.jobs, tasks=update).distribution
        objective = strongest_objective(opponent)

    def note(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    label = f"mastermind {rules.length} of {len(rules.alphabet)}"
    with _ticker(args.quiet, label) as update:
        res = MastermindSolver(rules, objective).solve(progress=note, jobs=args.jobs,
                                                        tasks=update)
    if args.out:
        _write(res.paths, args.out)
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
