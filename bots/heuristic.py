"""Shared machinery of the fixed (deterministic) table-driven bots.

A fixed strategy's next guess depends only on the responses so far, so the decision for each
history is computed once per process and remembered (:data:`_MEMO`): evaluating a bot over all
5040 secrets then costs one heuristic decision per node of its decision tree (a few thousand)
instead of one per move (~27 000), and a bot playing many matches gets faster as it goes.

Tie-breaking (all heuristics): among the guesses with the best score, prefer one that is still
a possible secret (it may win at once), then the lowest code in ``Rules.guesses`` order (the
ascending order for a sorted alphabet). Floating-point scores count as tied within a relative
1e-12, so the rule does not depend on summation order.
"""

from __future__ import annotations

import random
from abc import abstractmethod
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from bots.base import Strategy
from bots.table import IntArray, ResponseTable, table_for
from moo.rules import DEFAULT_RULES, Response, Rules

__all__ = ["CandidateStrategy", "Heuristic", "History"]

History = tuple[tuple[int, int], ...]
"""(guess index, response id) pairs so far: the key of a memoised decision."""

FloatArray = npt.NDArray[np.float64]
CountArray = npt.NDArray[np.int64]

_MEMO: dict[tuple[type, Rules], dict[History, int]] = {}


class CandidateStrategy(Strategy):
    """Keeps the still-possible secrets as indexes into the shared table; memoises decisions."""
    share_openings = False  # see bots.base.Strategy: its tables would be copied at each fork


    deterministic: ClassVar[bool] = True

    def __init__(self) -> None:
        self._table: ResponseTable | None = None
        self._candidates: IntArray = np.arange(0, dtype=np.intp)
        self._history: History = ()
        self._memo: dict[History, int] = {}

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self._table = table_for(rules)
        self._candidates = self._table.all_secrets()
        self._history = ()
        self._memo = _MEMO.setdefault((type(self), rules), {})

    @property
    def table(self) -> ResponseTable:
        if self._table is None:
            self.new_match(DEFAULT_RULES, random.Random(0))
        assert self._table is not None
        return self._table

    def next_guess(self) -> str:
        table = self.table
        choice = self._memo.get(self._history)
        if choice is None:
            if len(self._candidates) == 0:
                raise RuntimeError("no consistent code left: the responses contradict each other")
            choice = self.choose(table, self._candidates)
            self._memo[self._history] = choice
        return table.guesses[choice]

    def observe(self, guess: str, response: Response) -> None:
        table = self.table
        g, r = table.guess_index[guess], table.response_id(response)
        self._candidates = table.filter(self._candidates, g, r)
        self._history = (*self._history, (g, r))

    @property
    def choices_left(self) -> int:
        return len(self._candidates)

    @abstractmethod
    def choose(self, table: ResponseTable, candidates: IntArray) -> int:
        """Index (into ``table.guesses``) of the guess to make; ``candidates`` is non-empty."""


class Heuristic(CandidateStrategy):
    """One-step look-ahead: score every legal guess by how it splits the candidates."""

    #: True when :meth:`cost` is a float (ties are then taken within a relative tolerance).
    float_cost: ClassVar[bool] = False

    @abstractmethod
    def cost(self, counts: CountArray, size: int, is_candidate: npt.NDArray[np.bool_]) -> (
        FloatArray | CountArray
    ):
        """Per-guess cost, lower is better; ``counts[g, r]`` is the part of response ``r``."""

    def choose(self, table: ResponseTable, candidates: IntArray) -> int:
        if len(candidates) <= 2:
            # Any candidate is optimal for every heuristic here (it may win now, and the other
            # part has one element), and it is what the general rule below would pick anyway.
            return int(table.secret_as_guess[candidates[0]])
        if len(candidates) == len(table.secrets) and not table.rules.repeats_in_guess:
            # Before any response every code is equivalent up to relabelling, so all tie
            # and the rule picks the lowest; skipping the search saves a full-table pass.
            return int(table.secret_as_guess[0])
        if table.rules != DEFAULT_RULES:
            return self._choose_generic(table, candidates)
        counts = table.partition_counts(candidates)
        is_candidate = table.candidate_mask(candidates)
        return int(self._pick(counts, len(candidates), is_candidate))

    def _pick(self, counts: CountArray, size: int, is_candidate: npt.NDArray[np.bool_]) -> int:
        """Position (in the rows of ``counts``) of the best guess under the tie-break rule."""
        cost = self.cost(counts, size, is_candidate)
        best = cost.min()
        if self.float_cost:
            tied = cost <= best + 1e-12 * max(1.0, abs(float(best)))
        else:
            tied = cost == best
        preferred = tied & is_candidate
        return int(np.argmax(preferred) if preferred.any() else np.argmax(tied))

    def _choose_generic(self, table: ResponseTable, candidates: IntArray) -> int:
        """Any MOO rules but 4 of 10 (which keeps its full-table path above, unchanged).

        The guesses scored are one per class of guesses that no history can tell apart
        (:meth:`ResponseTable.canonical_guesses`: symbols never guessed are interchangeable),
        which loses nothing: the pick is the one the full search would make. When that is still
        more than :data:`EXACT_PAIRS` (guess, candidate) pairs (:data:`FIRST_ROUND_PAIRS` when
        over :data:`WIDE_GUESSES` guesses are scored: the first answers of 6 of 10 or 4 of
        hex), the scoring is estimated in two rounds: every class on a fixed-seed sample of
        the candidates, then the :data:`SHORTLIST` best on a sample as large as the budget
        allows (all candidates when they fit); when even the classes are too many for the
        first round (6 of 10 after two answers), it looks at a sample of them, half of it
        candidates. That bounds a move to a few such passes, well under a second on this
        machine whatever the rules (docs/benchmarks.md, "Bots on MOO variants").
        """
        used = table.symbols_used([g for g, _r in self._history])
        guesses = table.canonical_guesses(used)
        mask = table.candidate_mask(candidates)
        size = len(candidates)
        budget = EXACT_PAIRS if len(guesses) <= WIDE_GUESSES else FIRST_ROUND_PAIRS
        if len(guesses) * size <= budget:
            counts = table.counts_for(candidates, guesses)
            return int(guesses[self._pick(counts, size, mask[guesses])])
        rng = np.random.default_rng(size)  # fixed per position: a deterministic bot
        cap = FIRST_ROUND_PAIRS // MIN_SAMPLE
        if len(guesses) > cap:  # too many classes even for a small sample: sample them too,
            # half of them among the candidates (which may win at once)
            is_cand = mask[guesses]
            keep = _sample(guesses[is_cand], cap // 2, rng)
            rest = _sample(guesses[~is_cand], cap - len(keep), rng)
            guesses = np.sort(np.concatenate([keep, rest]))
        first = max(MIN_SAMPLE, FIRST_ROUND_PAIRS // len(guesses))
        sample = _sample(candidates, first, rng)
        counts = table.counts_for(sample, guesses)
        cost = self.cost(counts, len(sample), mask[guesses])
        order = np.argsort(cost, kind="stable")[:SHORTLIST]
        short = guesses[np.sort(order)]  # ascending, so the tie-break still prefers low codes
        sample = _sample(candidates, max(MIN_SAMPLE, EXACT_PAIRS // len(short)), rng)
        counts = table.counts_for(sample, short)
        return int(short[self._pick(counts, len(sample), mask[short])])


#: (guess, candidate) pairs a generic decision scores exactly; above it, it samples.
EXACT_PAIRS = 4_000_000
#: pairs of the first, sampled round: fewer than EXACT_PAIRS, because scoring thousands of
#: guesses against a few hundred candidates costs several times more per pair
FIRST_ROUND_PAIRS = 1_500_000
#: above this many guesses scored at once, a pass costs more per pair (see FIRST_ROUND_PAIRS)
WIDE_GUESSES = 4096
#: guesses kept from the first (sampled) round for the second one
SHORTLIST = 64
#: fewest candidates a sampled round looks at
MIN_SAMPLE = 128


def _sample(candidates: IntArray, k: int, rng: np.random.Generator) -> IntArray:
    """At most ``k`` of the candidates, drawn without replacement, in ascending order."""
    if len(candidates) <= k:
        return candidates
    return np.sort(rng.choice(candidates, size=k, replace=False))


_T_LOG_T: FloatArray = np.zeros(1, dtype=np.float64)


def sum_t_log_t(counts: CountArray) -> FloatArray:
    """Σ |t| ln |t| over the parts (empty parts contribute 0).

    Looked up in a table of t ln t, so equal part sizes always give bit-identical terms.
    """
    global _T_LOG_T
    top = int(counts.max(initial=0))
    if top >= len(_T_LOG_T):
        t = np.arange(max(top + 1, 2 * len(_T_LOG_T)), dtype=np.float64)
        _T_LOG_T = t * np.log(np.maximum(t, 1.0))
    return np.asarray(_T_LOG_T[counts].sum(axis=1), dtype=np.float64)
