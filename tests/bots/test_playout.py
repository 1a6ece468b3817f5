"""Playing a strategy against every secret as one tree (bots/playout.py) gives every secret the
very line it gets when played alone, and falls back to playing alone for a strategy that draws
random numbers."""

from __future__ import annotations

import random

from bots.base import Strategy
from bots.playout import game_rng, play_all, play_one
from moo.rules import Response, Rules


class Filtering(Strategy):
    """The README's ten-line strategy: the first code still possible; counts its decisions."""

    asked = 0

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self.rules, self.left = rules, list(rules.secrets)

    def next_guess(self) -> str:
        type(self).asked += 1
        return self.left[len(self.left) // 2]

    def observe(self, guess: str, response: Response) -> None:
        self.left = self.rules.consistent(self.left, guess, response)


class FilteringAlone(Filtering):
    share_openings = False
    asked = 0


class Drawing(Filtering):
    """Random among the codes still possible: its games cannot be shared."""

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        super().new_match(rules, rng)
        self.rng = rng

    def next_guess(self) -> str:
        type(self).asked += 1
        return self.rng.choice(self.left)


SMALL = Rules(length=4, alphabet="0123456")  # 840 secrets: every game alone takes a while


def test_the_shared_walk_gives_each_secret_its_own_line() -> None:
    shared = play_all(Filtering(), SMALL)
    alone = play_all(FilteringAlone(), SMALL)
    assert shared == alone
    assert [s for s, _ in shared] == list(SMALL.secrets)
    assert sum(len(line) for _, line in alone) == FilteringAlone.asked
    # asked once per node of its tree (a code still possible solves one secret at each node),
    # not once per guess of every game
    assert Filtering.asked == len(SMALL.secrets) < FilteringAlone.asked


def test_a_strategy_that_draws_is_played_secret_by_secret() -> None:
    rules = Rules(length=3, alphabet="012345")
    games = play_all(Drawing(), rules, seed=4)
    assert games == [(s, play_one(Drawing(), rules, s, game_rng(4, 0, s))) for s in rules.secrets]
