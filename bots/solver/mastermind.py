"""Exact Mastermind on the solver's native engine (``_mastermind``), across processes.

``_mastermind`` is the MOO engine (``_native.c``) built a second time and started with
``repeats=True``: the same bounds, transposition table, symmetry reduction and probe kernels,
with Mastermind's scoring. This module drives it the way :mod:`bots.solver.full` drives the MOO
solve, one level higher, because in Mastermind the first guess matters:

1. The first guesses worth trying (one per symmetry class, five for four pegs) come in bound
   order from the engine (``candidates``).
2. The first one is played: each of its response cells is a task (a big cell is split again at
   its second guess, as ``full.py`` splits MOO's cells), which gives the value to beat.
3. Every other first guess whose bound is below that value is a refutation task (probe its
   cells, then search them with the slack left, as the engine itself does).

The answer is the smallest exact total, ties to the earlier guess in bound order, which is what
the one-process search picks; so ``jobs`` never changes the tree. The tree is read back node by
node and replayed with the game's Python scoring (``moo.mastermind.mastermind_score``).
"""

from __future__ import annotations

import array
import multiprocessing
import multiprocessing.pool
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from moo.mastermind import MastermindRules, mastermind_score
from moo.rules import Response

from . import _mastermind
from .core import Objective
from .full import verify_paths
from .table import TableCell, TableResult

__all__ = ["MAX_CODES", "MastermindSolver", "Progress"]

#: Code indices are 16-bit in the engine.
MAX_CODES = 65535
#: A first-guess cell at least this big is split at its second guess when there are workers.
SPLIT_MIN = 300

#: ``progress(done, total, note)``: tasks finished so far, tasks known so far, what finished.
Progress = Callable[[int, int, str], None]


def _as_set(indices: Sequence[int]) -> bytes:
    return array.array("H", sorted(indices)).tobytes()


class MastermindSolver:
    """One Mastermind game and objective bound to the (process-wide) ``_mastermind`` engine.

    Same interface as :class:`bots.solver.table.TableSolver` (``best``, ``value``, ``paths``,
    ``partition``, ``solve``), on the faster engine; one live instance per process.
    """

    def __init__(self, rules: MastermindRules, objective: Objective, tt_log2: int = 23) -> None:
        n = len(rules.alphabet) ** rules.length
        if n > MAX_CODES:
            raise ValueError(f"{n} codes: the exact solver handles at most {MAX_CODES}")
        self.rules = rules
        self.objective = objective
        self.score: Callable[[str, str], Response] = mastermind_score
        self.codes = rules.secrets
        self.index = {c: i for i, c in enumerate(self.codes)}
        self.width = rules.length + 1
        self.responses = list(rules.responses)
        self.solved_id = rules.length * self.width
        self.caps: list[int] = _mastermind.init(
            rules.length, len(rules.alphabet), list(objective.costs), tt_log2, True
        )

    def response_id(self, response: tuple[int, int]) -> int:
        return response[0] * self.width + response[1]

    def response_of(self, rid: int) -> Response:
        return Response(rid // self.width, rid % self.width)

    def partition(self, cand: Sequence[int], guess: int) -> dict[int, list[int]]:
        """The members of ``cand`` by their response id to ``guess``."""
        parts = _mastermind.partition(_as_set(cand), guess)
        out: dict[int, list[int]] = {}
        for rid, data in parts.items():
            a = array.array("H")
            a.frombytes(data)
            out[rid] = list(a)
        return out

    def best(self, cand: Sequence[int], history: Sequence[int]) -> tuple[int, int]:
        """(optimal value, best guess) of candidate set ``cand`` after ``history``."""
        return self._best(_as_set(cand), history)

    def _best(self, cand: bytes, history: Sequence[int]) -> tuple[int, int]:
        value, guess, exact = _mastermind.solve(cand, list(history))
        if not exact or guess < 0:
            raise RuntimeError("engine returned no exact answer")
        return int(value), int(guess)

    def value(self, cand: Sequence[int], history: Sequence[int]) -> int:
        return self.best(cand, history)[0] if cand else 0

    def paths(self, cand: Sequence[int], history: Sequence[int]) -> dict[str, list[str]]:
        """The optimal tree's guess sequence (after ``history``) for each secret of ``cand``."""
        return self._paths(_as_set(cand), history)

    def _paths(self, cand: bytes, history: Sequence[int]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        stack: list[tuple[bytes, list[int]]] = [(cand, list(history))]
        depth0 = len(history)
        while stack:
            s, hist = stack.pop()
            if not s:
                continue
            _v, g = self._best(s, hist)
            for rid, part in _mastermind.partition(s, g).items():
                nxt = [*hist, g]
                if rid == self.solved_id:
                    out[self.codes[g]] = [self.codes[i] for i in nxt[depth0:]]
                else:
                    stack.append((part, nxt))
        return out

    def solve(self, progress: Callable[[str], None] | None = None, jobs: int = 1,
              tasks: Progress | None = None) -> TableResult:
        """Solve the whole game, read the tree back, check it, split it into first cells.

        ``progress`` gets a line of text at milestones; ``tasks`` gets task counts (for a
        progress bar) while the search runs.
        """
        t0 = time.perf_counter()
        before = int(_mastermind.stats()["nodes"])
        everything = _as_set(range(len(self.codes)))
        if jobs <= 1:
            value, first = self._best(everything, [])
            if progress:
                progress(f"value {value}, first guess {self.codes[first]} "
                         f"({time.perf_counter() - t0:.1f}s)")
            paths = self._paths(everything, [])
            nodes = int(_mastermind.stats()["nodes"]) - before
        else:
            value, first, paths, nodes = _solve_parallel(self, jobs, tasks)
            if progress:
                progress(f"value {value}, first guess {self.codes[first]} "
                         f"({time.perf_counter() - t0:.1f}s)")
        tree_cost = sum(self.objective.costs[len(p)] for p in paths.values())
        if tree_cost != value:
            raise RuntimeError(f"tree costs {tree_cost}, search said {value}")
        verify_paths(self.rules, paths, self.score)
        return TableResult(self.rules, self.objective, self.codes[first], value,
                           time.perf_counter() - t0, paths, self.cells(first, paths), nodes)

    def cells(self, first: int, paths: dict[str, list[str]]) -> list[TableCell]:
        """The tree's first-response cells (secrets, second guess, guesses after the first)."""
        out: list[TableCell] = []
        for response in self.responses:
            members = [s for s in paths if self.score(s, self.codes[first]) == response]
            if not members:
                continue
            second = None if response == self.rules.solved else paths[members[0]][1]
            out.append(TableCell(response, len(members), second,
                                 sum(len(paths[s]) - 1 for s in members)))
        return out


# --------------------------------------------------------------------------------------------
# Worker side: one engine per process, inherited through fork from the parent's.
# --------------------------------------------------------------------------------------------
_worker: MastermindSolver | None = None
_inherited: MastermindSolver | None = None


def _init_worker(rules: MastermindRules, objective: Objective) -> None:
    global _worker
    inherited = _inherited
    if inherited is not None and inherited.rules == rules and inherited.objective == objective:
        _worker = inherited
    else:
        _worker = MastermindSolver(rules, objective)


def _nodes() -> int:
    return int(_mastermind.stats()["nodes"])


def _solve_part(history: list[int], part: bytes) -> tuple[int, dict[str, list[str]], int]:
    """Exact value and subtree of one part (paths hold the guesses after ``history``)."""
    assert _worker is not None
    before = _nodes()
    value, _g = _worker._best(part, history)
    return value, _worker._paths(part, history), _nodes() - before


def _refute(
    history: list[int], cand: bytes, guess: int, cutoff: int
) -> tuple[int, bool, dict[str, list[str]] | None, int]:
    """Value of asking ``guess`` next on ``cand``, or a lower bound >= ``cutoff``.

    One iteration of the engine's own guess loop: the guess's one-ply bound, probes of every
    part (largest first), then each part's value searched with the slack left.
    """
    assert _worker is not None
    solver = _worker
    before = _nodes()
    depth = len(history) + 1
    nxt = [*history, guess]
    parts = _mastermind.partition(cand, guess)
    total = solver.objective.costs[depth] if solver.solved_id in parts else 0
    others = sorted(
        (p for rid, p in parts.items() if rid != solver.solved_id), key=lambda p: -len(p)
    )
    bounds = [_mastermind.lower_bound(len(p) // 2, depth) for p in others]
    total += sum(bounds)
    for i, part in enumerate(others):  # pass 1: one-ply bounds
        if total >= cutoff:
            break
        if len(part) // 2 > 3:
            v, _g, _exact = _mastermind.solve(part, nxt, cutoff - (total - bounds[i]), True)
            total += v - bounds[i]
            bounds[i] = v
    for i, part in enumerate(others):  # pass 2: values
        if total >= cutoff:
            break
        v, _g, _exact = _mastermind.solve(part, nxt, cutoff - (total - bounds[i]))
        total += v - bounds[i]
    if total >= cutoff:
        return total, False, None, _nodes() - before
    paths: dict[str, list[str]] = {}
    if solver.solved_id in parts:
        paths[solver.codes[guess]] = [solver.codes[guess]]
    for part in others:
        tail = solver._paths(part, nxt)
        paths.update({s: [solver.codes[guess], *p] for s, p in tail.items()})
    return total, True, paths, _nodes() - before


# --------------------------------------------------------------------------------------------
# Parent side: a node split into tasks (first guess at the root, second guess in big cells).
# --------------------------------------------------------------------------------------------
@dataclass
class _Node:
    """A node solved as several tasks: its first candidate's parts, then refutations.

    ``paths`` of a finished node hold the guesses from this node on (its own guess first).
    """

    history: list[int]
    cand: bytes
    candidates: list[tuple[int, int]]
    parent: _Node | None = None
    pending: int = 0
    first_value: int = 0
    first_paths: dict[str, list[str]] = field(default_factory=dict)
    exact: dict[int, tuple[int, dict[str, list[str]]]] = field(default_factory=dict)
    result: tuple[int, int, dict[str, list[str]]] | None = None


def _solve_parallel(
    solver: MastermindSolver, jobs: int, tasks: Progress | None
) -> tuple[int, int, dict[str, list[str]], int]:
    """Root value, first guess, every secret's path and the engines' node count, with ``jobs``
    worker processes (see the module docstring)."""
    global _inherited
    results: queue.Queue[tuple[tuple[object, ...], object]] = queue.Queue()
    counts = {"outstanding": 0, "done": 0, "total": 0, "nodes": 0}
    stop = threading.Event()
    costs = solver.objective.costs
    solved_id = solver.solved_id

    def report(note: str) -> None:
        if tasks:
            tasks(counts["done"], counts["total"], note)

    def beat() -> None:
        while not stop.wait(5.0):
            report("")

    _inherited = solver
    ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    ticker = threading.Thread(target=beat, daemon=True)
    try:
        with ctx.Pool(jobs, initializer=_init_worker,
                      initargs=(solver.rules, solver.objective)) as pool:

            def submit(tag: tuple[object, ...], fn: Callable[..., object],
                       args: tuple[object, ...]) -> None:
                counts["outstanding"] += 1
                counts["total"] += 1
                pool.apply_async(
                    fn, args,
                    callback=lambda r: results.put((tag, r)),
                    error_callback=lambda e: results.put((("error",), e)),
                )

            def open_node(history: list[int], cand: bytes, parent: _Node | None) -> _Node:
                """Play the node's first candidate: its parts become tasks or nodes."""
                node = _Node(history, cand, _mastermind.candidates(cand, history), parent)
                guess = node.candidates[0][1]
                parts = _mastermind.partition(cand, guess)
                if solved_id in parts:
                    node.first_value = costs[len(history) + 1]
                    node.first_paths[solver.codes[guess]] = [solver.codes[guess]]
                nxt = [*history, guess]
                others = [p for rid, p in parts.items() if rid != solved_id]
                for part in sorted(others, key=lambda p: -len(p)):
                    node.pending += 1
                    if not history and len(part) // 2 >= SPLIT_MIN:
                        open_node(nxt, part, node)
                    else:
                        submit(("part", node), _solve_part, (nxt, part))
                return node

            def part_done(node: _Node, value: int, tail: dict[str, list[str]]) -> None:
                guess = node.candidates[0][1]
                node.first_value += value
                node.first_paths.update(
                    {s: [solver.codes[guess], *p] for s, p in tail.items()}
                )
                task_done(node)

            def task_done(node: _Node) -> None:
                node.pending -= 1
                if node.pending:
                    return
                if 0 not in node.exact:  # the first candidate is known: refute the others
                    node.exact[0] = (node.first_value, node.first_paths)
                    cutoff = node.first_value
                    for i, (bound, guess) in enumerate(node.candidates[1:], 1):
                        if bound >= cutoff:
                            break
                        submit(("refute", node, i), _refute,
                               (node.history, node.cand, guess, cutoff))
                        node.pending += 1
                    if node.pending:
                        return
                index = min(node.exact, key=lambda i: (node.exact[i][0], i))
                value, paths = node.exact[index]
                node.result = (value, node.candidates[index][1], paths)
                if node.parent is not None:
                    part_done(node.parent, value, paths)

            root = open_node([], _as_set(range(len(solver.codes))), None)
            report("")
            ticker.start()
            while root.result is None:
                tag, res = results.get()
                counts["outstanding"] -= 1
                counts["done"] += 1
                if tag[0] == "error":
                    assert isinstance(res, BaseException)
                    raise res
                node = cast(_Node, tag[1])
                if tag[0] == "part":
                    value, tail, nodes = cast(tuple[int, dict[str, list[str]], int], res)
                    counts["nodes"] += nodes
                    report("part")
                    part_done(node, value, tail)
                else:
                    total, exact, tail, nodes = cast(
                        tuple[int, bool, dict[str, list[str]] | None, int], res
                    )
                    counts["nodes"] += nodes
                    report("refutation")
                    if exact and tail is not None:
                        node.exact[cast(int, tag[2])] = (total, tail)
                    task_done(node)
    finally:
        _inherited = None
        stop.set()
    value, first, paths = root.result
    return value, first, paths, counts["nodes"]
