"""The practice assistant: how many codes are still possible, and a guess the review rates best.

The APL note's helper, for practice matches that opted in (``MatchConfig.assist``, never rated)
and offline play. It counts the codes consistent with the player's answers (before the first
guess too: "At first 1296 possible codes") and, where the judge gives exact values
(:func:`bots.judge.values.exact_feasible`: 4 of 10, the small MOO variants, Mastermind), it
suggests the judge's optimal guess, so following it never costs anything in the post-match
review (loss 0: both ask :mod:`bots.judge.values`). Elsewhere (5 and 6 of 10, 4 of hex, the
1971 repeats rule) it counts but suggests nothing, since no guess there can be proven best.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from moo.mastermind import MastermindRules
from moo.rules import Response, Rules

from .values import exact_feasible, judge_for

__all__ = ["Assist", "assist"]


@dataclass(frozen=True)
class Assist:
    """What the assistant says: the codes still possible and, if it can, a guess to try."""

    left: int
    suggestion: str | None
    #: before the first guess (the APL helper's "At first ... possible codes")
    first: bool = False

    def text(self) -> str:
        """``12 CODES STILL POSSIBLE; TRY 0123`` as the terminal prints it."""
        if not self.left:
            return "NO CODE IS POSSIBLE (the answers contradict each other)"
        if self.left == 1:
            return f"ONE CODE IS POSSIBLE: {self.suggestion}"
        count = (f"AT FIRST {self.left} POSSIBLE CODES" if self.first
                 else f"{self.left} CODES STILL POSSIBLE")
        return f"{count}; TRY {self.suggestion}" if self.suggestion else f"{count}."


def assist(rules: Rules | MastermindRules,
           turns: Sequence[tuple[str, int, int] | tuple[str, Response]]) -> Assist:
    """What the assistant says after ``turns`` of one player: (guess, bulls, cows) or
    (guess, response), oldest first; no turns is the count before the first guess."""
    history = [(t[0], Response(*t[1]) if len(t) == 2 else Response(t[1], t[2]))  # type: ignore[misc]
               for t in turns]
    codes = rules.secrets
    cand = [i for i, c in enumerate(codes)
            if all(rules.score(c, g) == r for g, r in history)]
    if not cand:
        return Assist(0, None)
    if len(cand) == 1:
        return Assist(1, codes[cand[0]], first=not history)
    suggestion = None
    if exact_feasible(rules) is None:
        suggestion = judge_for(rules).best(history, cand)[1]
    return Assist(len(cand), suggestion, first=not history)
