"""Whole-game solving: the first-response cells across worker processes, then one checked tree.

After the fixed first guess the cells share nothing (each secret's cost depends only on its
own cell's subtree and absolute depth), so they can be solved independently. Cell sizes are
very uneven, though (the two biggest hold most of the work), so with several processes a big
cell is split once more at its second guess, the way the search itself would proceed there:

1. The cell's candidate second guesses are generated in bound order, exactly as the native
   search would (``_native.candidates``).
2. The first candidate's parts are solved exactly, each part a task of its own: that sets the
   cell's cutoff, the value to beat.
3. Every other candidate whose bound is below the cutoff is a refutation task: its parts are
   probed and then searched with the remaining slack, as the native search does, and it either
   fails (value >= cutoff) or comes back exact with its subtree.

The cell's answer is the smallest exact value, ties going to the earlier candidate, which is the
guess the one-process search picks, so ``--jobs`` never changes the tree. The native engine
keeps its tables in module state, which is why this uses processes rather than threads; with
``fork`` the workers inherit the parent's tables instead of rebuilding them.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from moo.mastermind import MastermindRules
from moo.rules import Response, Rules, score

from . import _native
from .core import CellResult, Objective, Solver, distribution, score_vs

__all__ = ["FullResult", "solve_cells", "verify_paths"]

#: Cells at least this big are split at their second guess when there are several workers.
SPLIT_MIN = 600

_worker: Solver | None = None
#: Set in the parent just before forking, so that fork-started workers reuse its tables.
_inherited: Solver | None = None


def _init_worker(rules: Rules, objective: Objective) -> None:
    global _worker
    inherited = _inherited
    if inherited is not None and inherited.rules == rules and inherited.objective == objective:
        _worker = inherited
    else:
        _worker = Solver(rules, objective)


def _solve_one(response: Response) -> CellResult:
    assert _worker is not None
    return _worker.solve_cell(response)


def _solve_part(history: list[int], part: bytes) -> tuple[int, dict[str, list[str]], int]:
    """Exact value and subtree of one part (paths hold the guesses after ``history``)."""
    assert _worker is not None
    before = _native.stats()["nodes"]
    value = _worker.value(part, history)
    paths = _worker.paths(part, history)
    return value, paths, _native.stats()["nodes"] - before


def _refute(
    history: list[int], cand: bytes, guess: int, cutoff: int
) -> tuple[int, bool, dict[str, list[str]] | None, int]:
    """Value of asking ``guess`` next on ``cand``, or a lower bound >= ``cutoff``.

    Mirrors one iteration of the native search's guess loop: start from the guess's one-ply
    bound, probe every part (largest first), then replace each part's bound by its value
    searched with the slack left, stopping as soon as the total reaches the cutoff.
    """
    assert _worker is not None
    solver = _worker
    before = _native.stats()["nodes"]
    depth = len(history) + 1
    nxt = [*history, guess]
    parts = _native.partition(cand, guess)
    total = solver.objective.costs[depth] if solver.solved_id in parts else 0
    others = sorted(
        (p for rid, p in parts.items() if rid != solver.solved_id), key=lambda p: -len(p)
    )
    bounds = [_native.lower_bound(len(p) // 2, depth) for p in others]
    total += sum(bounds)
    for i, part in enumerate(others):  # pass 1: one-ply bounds
        if total >= cutoff:
            break
        if len(part) // 2 > 3:
            v, _g, _exact = _native.solve(part, nxt, cutoff - (total - bounds[i]), True)
            total += v - bounds[i]
            bounds[i] = v
    for i, part in enumerate(others):  # pass 2: values
        if total >= cutoff:
            break
        v, _g, _exact = _native.solve(part, nxt, cutoff - (total - bounds[i]))
        total += v - bounds[i]
    nodes = _native.stats()["nodes"] - before
    if total >= cutoff:
        return total, False, None, nodes
    paths: dict[str, list[str]] = {}
    if solver.solved_id in parts:
        paths[solver.codes[guess]] = []
    for part in others:
        paths.update(solver.paths(part, nxt))
    return total, True, paths, nodes


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
    global _inherited
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
            _inherited = probe
            ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
            with ctx.Pool(jobs, initializer=_init_worker, initargs=(rules, objective)) as pool:
                if progress:  # after the fork: the workers need no ticker
                    progress(0, len(todo), None, 0.0)
                    ticker.start()
                _run_pool(pool, probe, sets, todo, done)
    finally:
        _inherited = None
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


@dataclass
class _Split:
    """A big cell being solved as several tasks (see the module docstring)."""

    response: Response
    cand: bytes
    candidates: list[tuple[int, int]]
    started: float
    pending: int = 0
    first_value: int = 0
    first_paths: dict[str, list[str]] = field(default_factory=dict)
    exact: dict[int, tuple[int, dict[str, list[str]]]] = field(default_factory=dict)
    nodes: int = 0


def _run_pool(
    pool: multiprocessing.pool.Pool,
    parent: Solver,
    sets: dict[Response, bytes],
    todo: list[Response],
    done: Callable[[CellResult], None],
) -> None:
    """Feed the pool: whole small cells, big cells split at their second guess."""
    results: queue.Queue[tuple[tuple[object, ...], object]] = queue.Queue()
    outstanding = 0
    first = parent.index[parent.codes[0]]
    costs = parent.objective.costs

    def submit(
        tag: tuple[object, ...], fn: Callable[..., object], args: tuple[object, ...]
    ) -> None:
        nonlocal outstanding
        outstanding += 1
        pool.apply_async(
            fn, args,
            callback=lambda r: results.put((tag, r)),
            error_callback=lambda e: results.put((("error",), e)),
        )

    splits: dict[Response, _Split] = {}
    for response in todo:
        cand = sets[response]
        if response == parent.rules.solved or len(cand) // 2 < SPLIT_MIN:
            submit(("cell", response), _solve_one, (response,))
            continue
        sp = _Split(response, cand, _native.candidates(cand, [first]), time.perf_counter())
        splits[response] = sp
        second = sp.candidates[0][1]
        parts = _native.partition(cand, second)
        if parent.solved_id in parts:
            sp.first_value = costs[2]
            sp.first_paths[parent.codes[second]] = []
        others = [p for rid, p in parts.items() if rid != parent.solved_id]
        for part in sorted(others, key=lambda p: -len(p)):
            submit(("part", response), _solve_part, ([first, second], part))
            sp.pending += 1

    def finish(sp: _Split) -> None:
        index = min(sp.exact, key=lambda i: (sp.exact[i][0], i))
        value, tail = sp.exact[index]
        second = parent.codes[sp.candidates[index][1]]
        paths = {s: [parent.codes[first], second, *p] for s, p in tail.items()}
        tree_cost = sum(costs[len(p)] for p in paths.values())
        if tree_cost != value:
            raise RuntimeError(f"cell {sp.response}: tree costs {tree_cost}, search said {value}")
        done(CellResult(sp.response, len(sp.cand) // 2, second, value, paths,
                        time.perf_counter() - sp.started, sp.nodes))

    while outstanding:
        tag, res = results.get()
        outstanding -= 1
        if tag[0] == "error":
            assert isinstance(res, BaseException)
            raise res
        if tag[0] == "cell":
            assert isinstance(res, CellResult)
            done(res)
            continue
        sp = splits[cast(Response, tag[1])]
        sp.pending -= 1
        if tag[0] == "part":
            value, paths, nodes = cast(tuple[int, dict[str, list[str]], int], res)
            sp.first_value += value
            sp.first_paths.update(paths)
            sp.nodes += nodes
            if sp.pending == 0:  # the first candidate is known: refute the others
                sp.exact[0] = (sp.first_value, sp.first_paths)
                cutoff = sp.first_value
                for i, (bound, guess) in enumerate(sp.candidates[1:], 1):
                    if bound >= cutoff:
                        break
                    submit(("refute", sp.response, i), _refute, ([first], sp.cand, guess, cutoff))
                    sp.pending += 1
        else:
            total, exact, tail, nodes = cast(
                tuple[int, bool, dict[str, list[str]] | None, int], res
            )
            sp.nodes += nodes
            if exact and tail is not None:
                sp.exact[cast(int, tag[2])] = (total, tail)
        if sp.pending == 0:
            finish(sp)
