"""The strategy plug-in contract: what every guessing strategy implements.

A strategy is anything that can answer "what do you guess next?" given the responses so far.
The contract is deliberately tiny so that a new strategy is ten lines::

    class FirstConsistent(Strategy):
        name = "first"
        def new_match(self, rules, rng):
            self.rules, self.left = rules, list(rules.secrets)
        def next_guess(self):
            return self.left[0]
        def observe(self, guess, response):
            self.left = self.rules.consistent(self.left, guess, response)

The same object plays many matches in turn (``new_match`` resets it), so expensive tables are
built once per process, not once per match. Strategies never see the secret and never do I/O;
the server, the SDK's ``moo bot`` runner and the tournament runner all drive them the same way.
The registry that finds a strategy by name or spec is :mod:`bots.registry`: it imports the
strategies, which import this module, so the contract stays at the bottom and there is no cycle.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar

from moo.rules import Response, Rules

__all__ = ["Strategy", "StrategyFactory"]


class Strategy(ABC):
    """Base class of every guessing strategy (see the module docstring)."""

    name: ClassVar[str] = ""
    #: One-line description shown by ``moo strategy list`` and the lobby.
    summary: ClassVar[str] = ""
    #: True when the guesses are a function of the responses alone (a fixed strategy): then
    #: one game per secret gives its exact guess-count distribution and decisions can be cached.
    deterministic: ClassVar[bool] = False
    #: True when the guesses are a function of the own responses *and* the opponent's visible
    #: progress, with no randomness (an adaptive strategy): ``moo eval`` then enumerates the
    #: race exactly, branching copies of the strategy made by :meth:`fork`.
    adaptive: ClassVar[bool] = False
    #: Whether evaluation may play every secret as one tree, a :meth:`fork` of the strategy at
    #: each branch, instead of each secret from the start (bots/playout.py): a strategy that
    #: spends its time deciding (a few lines filtering candidates) is asked once per node
    #: instead of thousands of times. False where a fork would cost more than it saves (the
    #: shipped bots decide from large precomputed trees and tables) or cannot be made (an
    #: outside program's state).
    share_openings: ClassVar[bool] = True

    @abstractmethod
    def new_match(self, rules: Rules, rng: random.Random) -> None:
        """Forget the previous match; ``rng`` is the only source of randomness allowed."""

    @abstractmethod
    def next_guess(self) -> str:
        """The next guess, a legal code under the match's rules."""

    @abstractmethod
    def observe(self, guess: str, response: Response) -> None:
        """The response to our own last guess."""

    def observe_opponent(self, count: int, response: Response | None) -> None:  # noqa: B027
        """The opponent's visible progress: their guess count and last response, if shown.

        Fixed strategies ignore it. Adaptive strategies override
        :meth:`observe_opponent_move`, which also carries the opponent's guess.
        """

    def observe_opponent_move(
        self, count: int, guess: str | None, response: Response | None
    ) -> None:
        """The opponent's ``count``-th move as far as it is visible: its guess (None when the
        match hides guesses) and its response (None when not revealed yet).

        Runners call this one; the default passes the response on to
        :meth:`observe_opponent`, so strategies written before guesses were passed still work.
        """
        self.observe_opponent(count, response)

    def fork(self) -> Strategy:
        """An independent copy in the same state, for exact race enumeration.

        The default deep-copies; strategies with large shared tables override it.
        """
        import copy

        return copy.deepcopy(self)


StrategyFactory = Callable[[], Strategy]
