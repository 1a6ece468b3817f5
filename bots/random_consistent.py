"""Appleyard's random-consistent guesser: guess any code still consistent with every response.

It is the baseline of the J essay ("choices left") and the cheapest strategy that always
finishes; the server hosts it as the default built-in opponent. The candidates are filtered
with the shared response table (:mod:`bots.table`), so sampling thousands of games for
``moo eval`` takes seconds; the choice is still ``rng.choice`` over the candidates in
ascending order, as with a plain list.
"""

from __future__ import annotations

import copy
import random

import numpy as np

from bots.base import Strategy
from bots.table import IntArray, ResponseTable, table_for
from moo.rules import DEFAULT_RULES, Response, Rules


class RandomConsistent(Strategy):
    name = "random"
    summary = "a random code consistent with all responses so far (Appleyard)"

    def __init__(self) -> None:
        self._rng = random.Random()
        self._table: ResponseTable | None = None
        self._left: IntArray = np.arange(0, dtype=np.intp)

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self._rng = rng
        self._table = table_for(rules)
        self._left = self._table.all_secrets()

    @property
    def table(self) -> ResponseTable:
        if self._table is None:
            self.new_match(DEFAULT_RULES, self._rng)
        assert self._table is not None
        return self._table

    def next_guess(self) -> str:
        table = self.table
        if len(self._left) == 0:
            raise RuntimeError("no consistent code left: the responses contradict each other")
        return table.secrets[int(self._rng.choice(self._left))]

    def observe(self, guess: str, response: Response) -> None:
        table = self.table
        self._left = table.filter(
            self._left, table.guess_index[guess], table.response_id(response)
        )

    def fork(self) -> RandomConsistent:
        """Same state and an rng in the same state (the candidate array is never mutated)."""
        clone = copy.copy(self)
        clone._rng = random.Random()
        clone._rng.setstate(self._rng.getstate())
        return clone

    @property
    def choices_left(self) -> int:
        return len(self._left)
