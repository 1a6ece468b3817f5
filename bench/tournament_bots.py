"""Cheap deterministic strategies for measuring tournament throughput, not strength.

``MemoFirst`` guesses the first code consistent with every response, memoising the candidate
set per history, so after a warm-up every move is a dictionary lookup: the benchmark then
measures the tournament and the server, not the Python cost of a heuristic.
"""

from __future__ import annotations

import random

from bots.base import Strategy
from moo.rules import Response, Rules

_MEMO: dict[tuple[tuple[str, int, int], ...], tuple[str, ...]] = {}


class MemoFirst(Strategy):
    name = "memo-first"
    summary = "first consistent code, memoised per history (benchmarks)"

    def __init__(self) -> None:
        self.rules = Rules()
        self.history: tuple[tuple[str, int, int], ...] = ()
        self.left: tuple[str, ...] = ()

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self.rules, self.history, self.left = rules, (), rules.secrets

    def next_guess(self) -> str:
        return self.left[0]

    def observe(self, guess: str, response: Response) -> None:
        self.history = (*self.history, (guess, response.bulls, response.cows))
        left = _MEMO.get(self.history)
        if left is None:
            left = _MEMO[self.history] = tuple(self.rules.consistent(self.left, guess, response))
        self.left = left
