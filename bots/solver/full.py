"""Whole-game solving: the first-response cells in parallel processes, then one checked tree.

After the fixed first guess the cells share nothing (each secret's cost depends only on its
own cell's subtree and absolute depth), so they are solved by independent worker processes,
largest first so that the long cells start at once. The native engine keeps its tables in
module state, which is one more reason to use processes rather than threads.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from moo.rules import Response, Rules, score

from .core import CellResult, Objective, Solver, distribution, score_vs

__all__ = ["FullResult", "solve_cells", "verify_paths"]

_worker: Solver | None = None


def _init_worker(rules: Rules, objective: Objective) -> None:
    global _worker
    _worker = Solver(rules, objective)


def _solve_one(response: Response) -> CellResult:
    assert _worker is not None
    return _worker.solve_cell(response)


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


def verify_paths(rules: Rules, paths: dict[str, list[str]]) -> None:
    """Replay a strategy with :func:`moo.rules.score`, independently of the native engine.

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
    heartbeat: float = 30.0,
) -> FullResult:
    """Solve the given cells (default: all) with ``jobs`` processes; verify the union."""
    t0 = time.perf_counter()
    local = Solver(rules, objective) if jobs <= 1 else None
    probe = local or Solver(rules, objective, tt_log2=10)
    sets = probe.cells()
    todo = list(cells) if cells is not None else list(sets)
    todo.sort(key=lambda r: -len(sets[r]))  # longest first balances the processes
    results: list[CellResult] = []

    def done(res: CellResult) -> None:
        results.append(res)
        if progress:
            progress(len(results), len(todo), res, time.perf_counter() - t0)

    # Heartbeat: the big cells run for minutes without finishing anything; the native engine
    # releases the GIL, so a thread can keep the progress line alive meanwhile.
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(heartbeat):
            if progress:
                progress(len(results), len(todo), None, time.perf_counter() - t0)

    ticker = threading.Thread(target=beat, daemon=True)
    if progress:
        progress(0, len(todo), None, 0.0)
        ticker.start()
    try:
        if local is not None:
            for response in todo:
                done(local.solve_cell(response))
        else:
            ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
            with ctx.Pool(jobs, initializer=_init_worker, initargs=(rules, objective)) as pool:
                for res in pool.imap_unordered(_solve_one, todo):
                    done(res)
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
