"""Appleyard's random-consistent guesser: guess any code still consistent with every response.

It is the baseline of the J essay ("choices left") and the cheapest strategy that always
finishes; the server hosts it as the default built-in opponent.
"""

from __future__ import annotations

import random

from bots.base import Strategy
from moo.rules import Response, Rules


class RandomConsistent(Strategy):
    name = "random"
    summary = "a random code consistent with all responses so far (Appleyard)"

    def __init__(self) -> None:
        self._rng = random.Random()
        self._rules = Rules()
        self._left: list[str] = []

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self._rules, self._rng = rules, rng
        self._left = list(rules.secrets)

    def next_guess(self) -> str:
        if not self._left:
            raise RuntimeError("no consistent code left: the responses contradict each other")
        return self._rng.choice(self._left)

    def observe(self, guess: str, response: Response) -> None:
        self._left = self._rules.consistent(self._left, guess, response)

    @property
    def choices_left(self) -> int:
        return len(self._left)
