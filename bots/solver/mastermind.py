"""Exact Mastermind on the solver's native engine (``_mastermind``), in one or more processes.

``_mastermind`` is the MOO engine (``_native.c``) built a second time and started with
``repeats=True``: the same bounds, transposition table, symmetry reduction and probe kernels,
with Mastermind's scoring. Unlike MOO, the first guess matters (one per symmetry class: five
for four pegs), so the whole game is one search from the empty history. With ``jobs`` > 1 the
first guess and, in big cells, the second guess are played by this process and the subtrees
below are solved by workers (:mod:`bots.solver.split`); the tree does not depend on ``jobs``.
The tree is read back node by node and replayed with the game's Python scoring
(``moo.mastermind.mastermind_score``), independently of the engine.
"""

from __future__ import annotations

import array
import time
from collections.abc import Callable, Sequence

from moo.mastermind import MastermindRules, mastermind_score
from moo.rules import Response

from . import _mastermind, split
from .core import Objective
from .full import verify_paths
from .results import TableCell, TableResult

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

    def __init__(self, rules: MastermindRules, objective: Objective, tt_log2: int = 22) -> None:
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
            value, first, paths, nodes = self._solve_split(everything, jobs, tasks)
            if progress:
                progress(f"value {value}, first guess {self.codes[first]} "
                         f"({time.perf_counter() - t0:.1f}s)")
        tree_cost = sum(self.objective.costs[len(p)] for p in paths.values())
        if tree_cost != value:
            raise RuntimeError(f"tree costs {tree_cost}, search said {value}")
        verify_paths(self.rules, paths, self.score)
        return TableResult(self.rules, self.objective, self.codes[first], value,
                           time.perf_counter() - t0, paths, self.cells(first, paths), nodes)

    def _solve_split(self, everything: bytes, jobs: int, tasks: Progress | None
                     ) -> tuple[int, int, dict[str, list[str]], int]:
        """The whole game with ``jobs`` workers (:mod:`bots.solver.split`): the first guess and
        the second guess in big cells are played here, the subtrees below in the workers."""
        answer: list[tuple[int, int, dict[str, list[str]]]] = []

        def done(value: int, guess: int, paths: dict[str, list[str]]) -> None:
            answer.append((value, guess, paths))

        def counts(done: int, total: int) -> None:
            if tasks:
                tasks(done, total, "")

        nodes = split.run(_mastermind, self.codes, self.solved_id, self.objective.costs,
                          [split.Root(everything, [], done)], jobs, progress=counts,
                          split_min=SPLIT_MIN, split_depth=1)
        value, first, paths = answer[0]
        return value, first, paths, nodes

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
