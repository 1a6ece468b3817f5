"""Exact solving of games given by a response table, on ``_table.c``.

The MOO engine (:mod:`bots.solver.core` over ``_native.c``) knows MOO's and Mastermind's
scoring and is the one :func:`mastermind_solver` uses (:mod:`bots.solver.mastermind`); this is
its generic, slower sibling, kept as an independent second implementation (tests compare the
two) and for games that only come as a response table. A game here is just a list of codes, a
scoring function and a cost per guess number; the C module searches the whole game from the
empty history (no first guess is fixed: for Mastermind the first guess matters), and this
module reads the optimal tree back node by node and replays it with the game's own Python
scoring, so a bug in the table or the search cannot produce a wrong tree silently.
"""

from __future__ import annotations

import array
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from moo.mastermind import MastermindRules, mastermind_score
from moo.rules import Response

from . import _table
from .core import Objective
from .full import verify_paths
from .results import TableCell, TableResult, describe

if TYPE_CHECKING:
    from .mastermind import MastermindSolver

__all__ = ["TableCell", "TableResult", "TableSolver", "describe", "mastermind_solver"]


def _as_set(indices: Sequence[int]) -> bytes:
    return array.array("H", sorted(indices)).tobytes()


class TableSolver:
    """One game bound to the (process-wide) ``_table`` engine.

    ``symmetry`` must only be set when the scores are invariant under every relabelling of
    positions and symbols (true for Mastermind); the engine then skips guesses that a
    relabelling fixing the history maps to a smaller code.
    """

    def __init__(self, rules: MastermindRules, objective: Objective,
                 score: Callable[[str, str], Response] = mastermind_score,
                 symmetry: bool = True, tt_log2: int = 22) -> None:
        self.rules = rules
        self.objective = objective
        self.score = score
        self.codes = rules.secrets
        self.index = {c: i for i, c in enumerate(self.codes)}
        self.width = rules.length + 1
        self.responses = list(rules.responses)
        sym = {ch: i for i, ch in enumerate(rules.alphabet)}
        packed = bytes(sym[ch] for code in self.codes for ch in code)
        self.table = _table.mastermind_table(packed, rules.length, len(rules.alphabet))
        self.solved_id = rules.length * self.width
        self.caps = _table.init(
            packed, rules.length, len(rules.alphabet), self.table,
            self.width * self.width, self.solved_id, list(objective.costs),
            symmetry=symmetry, tt_log2=tt_log2,
        )

    def response_id(self, response: tuple[int, int]) -> int:
        return response[0] * self.width + response[1]

    def response_of(self, rid: int) -> Response:
        return Response(rid // self.width, rid % self.width)

    def partition(self, cand: Sequence[int], guess: int) -> dict[int, list[int]]:
        n = len(self.codes)
        out: dict[int, list[int]] = {}
        for s in cand:
            out.setdefault(self.table[guess * n + s], []).append(s)
        return out

    def best(self, cand: Sequence[int], history: Sequence[int]) -> tuple[int, int]:
        """(optimal value, best guess) of candidate set ``cand`` after ``history``."""
        value, guess, exact = _table.solve(_as_set(cand), list(history))
        if not exact or guess < 0:
            raise RuntimeError("engine returned no exact answer")
        return int(value), int(guess)

    def value(self, cand: Sequence[int], history: Sequence[int]) -> int:
        return self.best(cand, history)[0] if cand else 0

    def paths(self, cand: Sequence[int], history: Sequence[int]) -> dict[str, list[str]]:
        """The optimal tree's guess sequence (after ``history``) for each secret of ``cand``."""
        out: dict[str, list[str]] = {}
        stack: list[tuple[list[int], list[int]]] = [(list(cand), list(history))]
        depth0 = len(history)
        while stack:
            s, hist = stack.pop()
            if not s:
                continue
            _v, g = self.best(s, hist)
            for rid, part in self.partition(s, g).items():
                nxt = [*hist, g]
                if rid == self.solved_id:
                    out[self.codes[g]] = [self.codes[i] for i in nxt[depth0:]]
                else:
                    stack.append((part, nxt))
        return out

    def solve(self, progress: Callable[[str], None] | None = None) -> TableResult:
        """Solve the whole game, read the tree back, check it, split it into first cells."""
        t0 = time.perf_counter()
        everything = list(range(len(self.codes)))
        value, first = self.best(everything, [])
        if progress:
            progress(f"value {value}, first guess {self.codes[first]} "
                     f"({time.perf_counter() - t0:.1f}s)")
        paths = self.paths(everything, [])
        tree_cost = sum(self.objective.costs[len(p)] for p in paths.values())
        if tree_cost != value:
            raise RuntimeError(f"tree costs {tree_cost}, search said {value}")
        verify_paths(self.rules, paths, self.score)
        cells: list[TableCell] = []
        for response in self.responses:
            members = [s for s in paths if self.score(s, self.codes[first]) == response]
            if not members:
                continue
            second = None if response == self.rules.solved else paths[members[0]][1]
            cells.append(TableCell(response, len(members), second,
                                   sum(len(paths[s]) - 1 for s in members)))
        return TableResult(self.rules, self.objective, self.codes[first], value,
                           time.perf_counter() - t0, paths, cells,
                           int(_table.stats()["nodes"]))


def mastermind_solver(rules: MastermindRules, objective: Objective) -> MastermindSolver:
    """The fastest exact solver for a Mastermind game: the MOO engine built for repeated
    symbols (:mod:`bots.solver.mastermind`); same methods as :class:`TableSolver`."""
    from .mastermind import MastermindSolver

    return MastermindSolver(rules, objective)
