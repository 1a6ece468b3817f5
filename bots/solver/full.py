"""Whole-game solving: the first-response cells across worker processes, then one checked tree.

After the fixed first guess the cells share nothing (each secret's cost depends only on its
own cell's subtree and absolute depth), so they can be solved independently. Cell sizes are
very uneven, though (the two biggest hold most of the work), so with several processes every
cell is a root of :mod:`bots.solver.split`: a small cell is one task, a big one is split once
more at its second guess, the way the engine itself proceeds there (its first candidate's parts
first, which gives the value to beat, then the other candidates' parts with cutoffs that
tighten as results come in). A node's answer is the smallest exact value, ties to the earlier
candidate, which is the guess the one-process search picks, so ``--jobs`` never changes the
tree.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from moo.mastermind import MastermindRules
from moo.rules import Response, Rules, score

from . import _native, split
from .core import CellResult, Objective, Solver, distribution, score_vs

__all__ = ["FullResult", "solve_cells", "verify_paths"]

#: Cells at least this big are split at their second guess when there are several workers.
SPLIT_MIN = 600


@dataclass
class FullResult:
    """Every solved cell plus the combined strategy."""

    rules: Rules
    objective: Objective
    cells: list[CellResult]
    seconds: float
    paths: dict[str, list[str]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(len(p) for p in self.paths.values())

    @property
    def distribution(self) -> list[int]:
        return distribution(len(p) for p in self.paths.values())

    def score(self) -> tuple[int, float] | None:
        if not self.objective.opponent:
            return None
        return score_vs(self.distribution, self.objective.opponent)


def verify_paths(
    rules: Rules | MastermindRules,
    paths: dict[str, list[str]],
    score: Callable[[str, str], Response] = score,
) -> None:
    """Replay a strategy with a Python scoring (``moo.rules.score`` by default, the game's own
    for Mastermind), independently of the native engines.

    Checks that every secret is present, ends on itself, and that the strategy is a real
    decision tree: two secrets that got the same responses so far must get the same guess.
    """
    if sorted(paths) != sorted(rules.secrets):
        raise AssertionError("strategy does not cover exactly the secrets")
    next_guess: dict[tuple[tuple[str, Response], ...], str] = {}
    for secret, guesses in paths.items():
        if not guesses or guesses[-1] != secret:
            raise AssertionError(f"{secret}: path does not end on the secret")
        history: tuple[tuple[str, Response], ...] = ()
        for guess in guesses:
            if next_guess.setdefault(history, guess) != guess:
                raise AssertionError(f"{secret}: not a decision tree at {history}")
            response = score(secret, guess)
            if response == rules.solved and guess != secret:
                raise AssertionError(f"{secret}: solved early by {guess}")
            history = (*history, (guess, response))


def solve_cells(
    rules: Rules,
    objective: Objective,
    jobs: int = 1,
    cells: Sequence[Response] | None = None,
    progress: Callable[[int, int, CellResult | None, float], None] | None = None,
    heartbeat: float = 5.0,
) -> FullResult:
    """Solve the given cells (default: all) with ``jobs`` processes; verify the union."""
    t0 = time.perf_counter()
    local = Solver(rules, objective) if jobs <= 1 else None
    probe = local or Solver(rules, objective)  # the workers inherit its tables
    sets = probe.cells()
    todo = list(cells) if cells is not None else list(sets)
    todo.sort(key=lambda r: -len(sets[r]))  # longest first balances the processes
    results: list[CellResult] = []

    def done(res: CellResult) -> None:
        results.append(res)
        if progress:
            progress(len(results), len(todo), res, time.perf_counter() - t0)

    # Heartbeat: a big cell runs for a while without finishing anything; the native engine
    # releases the GIL, so a thread can keep the progress line alive meanwhile.
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(heartbeat):
            if progress:
                progress(len(results), len(todo), None, time.perf_counter() - t0)

    ticker = threading.Thread(target=beat, daemon=True)
    try:
        if local is not None:
            if progress:
                progress(0, len(todo), None, 0.0)
                ticker.start()
            for response in todo:
                done(local.solve_cell(response))
        else:
            if progress:
                progress(0, len(todo), None, 0.0)
                ticker.start()
            _run_split(probe, sets, todo, jobs, done)
    finally:
        stop.set()
    order = {r: i for i, r in enumerate(rules.responses)}
    results.sort(key=lambda c: order.get(c.response, 99))
    paths: dict[str, list[str]] = {}
    for res in results:
        paths.update(res.paths)
    out = FullResult(rules, objective, results, time.perf_counter() - t0, paths)
    if cells is None:
        verify_paths(rules, paths)
    return out


def _run_split(parent: Solver, sets: dict[Response, bytes], todo: list[Response], jobs: int,
               done: Callable[[CellResult], None]) -> None:
    """Every cell as a root of :func:`bots.solver.split.run` (big ones split)."""
    first = parent.index[parent.codes[0]]
    fcode = parent.codes[first]
    costs = parent.objective.costs
    roots: list[split.Root] = []
    started = time.perf_counter()

    def finisher(response: Response, size: int) -> Callable[[int, int, dict[str, list[str]]],
                                                               None]:
        def on_done(value: int, _guess: int, tail: dict[str, list[str]]) -> None:
            paths = {s: [fcode, *p] for s, p in tail.items()}
            tree_cost = sum(costs[len(p)] for p in paths.values())
            if tree_cost != value:
                raise RuntimeError(f"cell {response}: tree costs {tree_cost}, "
                                   f"search said {value}")
            second = next(iter(paths.values()))[1]
            root = by_response[response]
            done(CellResult(response, size, second, value, paths,
                            time.perf_counter() - started, root.nodes))
        return on_done

    by_response: dict[Response, split.Root] = {}
    for response in todo:
        cand = sets[response]
        if response == parent.rules.solved:  # the first guess itself: nothing to search
            done(CellResult(response, 1, None, costs[1], {fcode: [fcode]}, 0.0, 0))
            continue
        size = len(cand) // 2
        root = split.Root(cand, [first], finisher(response, size), split=size >= SPLIT_MIN)
        by_response[response] = root
        roots.append(root)
    if roots:
        split.run(_native, parent.codes, parent.solved_id, costs, roots, jobs,
                  split_min=SPLIT_MIN, split_depth=2)
