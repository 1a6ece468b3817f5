"""Which hosted bot plays which rules: the server's ``play_bot`` with a ``rules`` object.

Classic 4-of-10 MOO keeps every registered strategy (the tree bots, the heuristics...). The
other rules get only bots that are correct for them:

* Mastermind: ``minimum`` and ``strongest`` play the exact solver's tree for the rules
  (:class:`bots.mastermind.MastermindTree`, solved on first use and cached on disk), ``random``
  a random code consistent with every answer.
* any other MOO variant (3/5/6 of 10, 4 of hex, the 1971 repeats rule): ``random`` (a random
  secret still consistent with every answer, over a plain list of codes), the one-step
  heuristics of :data:`VARIANT_HEURISTICS` (their generic path, :mod:`bots.heuristic`), and
  ``minimum``/``strongest`` (:class:`bots.variant_trees.VariantTree`: the exact solver's tree
  where the rules are small enough, computed on first use and cached on disk; elsewhere the
  best heuristic, which :func:`bot_note` tells the players). ``adaptive`` stays 4 of 10 only
  (its race tables are built for it).
* word MOO: ``words`` only (:class:`bots.words.WordBot`, answer words compared by a
  sampled look-ahead). It plays nothing else, so it is listed in :data:`VARIANT_BOTS` rather
  than registered with the classic strategies (``bots.base``).

Anything else is refused with :class:`moo.errors.BotUnsupported`, naming the bots that can.
"""

from __future__ import annotations

import random
from typing import Any

from bots.mastermind import MastermindTree
from bots.mastermind import RandomConsistent as MastermindRandom
from bots.registry import create
from moo.errors import BotUnsupported
from moo.mastermind import MastermindRules
from moo.rules import Response, Rules
from moo.variants import GameRules, is_classic, rules_label, rules_spec
from moo.words import WordRules

__all__ = ["VARIANT_BOTS", "VARIANT_HEURISTICS", "VariantConsistent", "bot_note", "bots_for",
           "create_for", "prepare"]

#: Hosted bots that play only some variants, offered beside the registered strategies.
VARIANT_BOTS = ("words",)
#: The table heuristics that play any MOO rules (bots/heuristic.py's generic path).
VARIANT_HEURISTICS = ("entropy", "expected", "minimax", "parts", "larmouth", "first")
#: The exact solver's trees (bots/variant_trees.py), with the best heuristic as fallback.
TREE_BOTS = ("minimum", "strongest")


class VariantConsistent:
    """A random secret consistent with every answer so far, for any MOO rules.

    A list filtered by the rules' own score: 151200 codes for 6 of 10 cost about a tenth of a
    second for the first answer, less after (each answer keeps a small fraction).
    """

    name = "random"

    def __init__(self) -> None:
        self.rules = Rules()
        self.rng = random.Random()
        self.left: list[str] = []

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self.rules, self.rng = rules, rng
        self.left = list(rules.secrets)

    def next_guess(self) -> str:
        if not self.left:
            raise RuntimeError("no consistent code left: the answers contradict each other")
        return self.rng.choice(self.left)

    def observe(self, guess: str, response: Response) -> None:
        self.left = self.rules.consistent(self.left, guess, response)

    def observe_opponent(self, count: int, response: Response | None) -> None:
        """The opponent's progress does not change a consistent guess (Strategy's hook)."""

    def observe_opponent_move(
        self, count: int, guess: str | None, response: Response | None
    ) -> None:
        """The runners' hook (bots.base.Strategy): this bot ignores the guess."""
        self.observe_opponent(count, response)


def bots_for(rules: GameRules, allowed: list[str]) -> list[str]:
    """The hosted strategies (of ``allowed``) that can play ``rules``."""
    if is_classic(rules):
        return [name for name in allowed if name not in VARIANT_BOTS]
    if isinstance(rules, WordRules):
        return [name for name in allowed if name == "words"]
    wanted = ("minimum", "strongest", "random") if isinstance(rules, MastermindRules) else (
        "random", *TREE_BOTS, *VARIANT_HEURISTICS)
    return [name for name in allowed if name in wanted]


def bot_note(strategy: str, rules: GameRules) -> str:
    """What players should know about ``strategy`` under ``rules`` ("" when nothing): a tree
    bot that plays a heuristic because the rules are too large for the exact solver."""
    if isinstance(rules, Rules) and not is_classic(rules):
        from bots.variant_trees import fallback_note

        return fallback_note(strategy, rules)
    if isinstance(rules, MastermindRules) and strategy in TREE_BOTS:
        from bots.mastermind import MAX_EXACT_CODES

        if len(rules.alphabet) ** rules.length > MAX_EXACT_CODES:
            return (f"{strategy} plays a random consistent code for {rules_label(rules)}: "
                    "too large for the exact solver")
    return ""


def check_bot(strategy: str, rules: GameRules, allowed: list[str]) -> None:
    """Raise :class:`BotUnsupported` unless ``strategy`` can play ``rules``."""
    able = bots_for(rules, allowed)
    if strategy not in able:
        raise BotUnsupported(
            f"bot {strategy!r} cannot play {rules_label(rules)} ({rules_spec(rules)}); "
            + (f"bots that can: {', '.join(able)}" if able else "no hosted bot can")
        )


def prepare(strategy: str, rules: GameRules) -> None:
    """Compute (or read) the tree ``strategy`` needs for ``rules`` now, however long it takes.

    For the command-line runners (``moo bot``, ``moo tournament``), which would rather wait
    seconds before their first match than play it with the fallback; the server does not call
    it (its bots wait at most :data:`bots.variant_trees.TREE_WAIT_S`). A no-op for every other
    bot and rules.
    """
    if strategy in TREE_BOTS and isinstance(rules, Rules) and not is_classic(rules):
        from bots.variant_trees import exact_feasible, tree_for

        if exact_feasible(rules):
            tree_for(rules, strategy)


def create_for(strategy: str, rules: GameRules) -> Any:
    """A fresh strategy object for ``rules`` (call :func:`check_bot` first)."""
    if isinstance(rules, WordRules):
        from bots.words import WordBot  # imported on the first word match only

        return WordBot()
    if is_classic(rules):
        return create(strategy)
    if isinstance(rules, MastermindRules):
        if strategy == "random":
            return MastermindRandom()
        return MastermindTree(strategy)
    if strategy in TREE_BOTS:
        from bots.relabel import relabelled
        from bots.variant_trees import VariantTree

        return relabelled(VariantTree(strategy))
    if strategy in VARIANT_HEURISTICS:
        return create(strategy)
    return VariantConsistent()
