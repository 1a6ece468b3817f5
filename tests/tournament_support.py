"""Small deterministic strategies for the tournament, report and MQTT tests.

``FirstConsistent`` is a real (if plain) strategy; ``Lexicographic`` ignores every response and
walks the code list in order, so it loses nearly every match: a known-strong/known-weak pair
for SPRT and standings checks that does not depend on the bots developer's roster.
"""

from __future__ import annotations

import random

from bots.base import Strategy
from moo.rules import Response, Rules


class FirstConsistent(Strategy):
    name = "test-first"
    summary = "first code consistent with every response"

    def __init__(self) -> None:
        self.rules = Rules()
        self.left: list[str] = []

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self.rules, self.left = rules, list(rules.secrets)

    def next_guess(self) -> str:
        return self.left[0]

    def observe(self, guess: str, response: Response) -> None:
        self.left = self.rules.consistent(self.left, guess, response)


class Lexicographic(Strategy):
    name = "test-lexi"
    summary = "every code in order, ignoring responses"

    def __init__(self) -> None:
        self.rules = Rules()
        self.i = 0

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self.rules, self.i = rules, 0

    def next_guess(self) -> str:
        guess = self.rules.secrets[self.i % len(self.rules.secrets)]
        self.i += 1
        return guess

    def observe(self, guess: str, response: Response) -> None:
        pass


FIRST = "tests.tournament_support:FirstConsistent"
LEXI = "tests.tournament_support:Lexicographic"


class LastConsistent(FirstConsistent):
    name = "test-last"
    summary = "last code consistent with every response"

    def next_guess(self) -> str:
        return self.left[-1]


LAST = "tests.tournament_support:LastConsistent"
