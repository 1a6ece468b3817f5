"""The practice assistant: codes still possible and a suggested guess (the APL helper).

Offered only in practice matches that opted in (``MatchConfig.assist``, never rated) and in
offline play. Free of I/O; the web page mirrors it in ``clients/web/rules.js`` (``assist``),
so both show the same figures and the same suggestion.

The suggestion is a code still possible: with at most :data:`MINIMAX_LIMIT` of them left, the
one whose worst answer leaves the fewest (ties: the first in code order), else the first.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from moo.variants import GameRules

__all__ = ["MINIMAX_LIMIT", "Assist", "assist"]

#: above this many possible codes the suggestion is simply the first of them (the minimax
#: choice costs N x N scores)
MINIMAX_LIMIT = 300


@dataclass(frozen=True)
class Assist:
    left: int
    suggestion: str | None

    def text(self) -> str:
        """``12 CODES STILL POSSIBLE; TRY 0123`` as the terminal prints it."""
        if not self.left or self.suggestion is None:
            return "NO CODE IS POSSIBLE (the answers contradict each other)"
        if self.left == 1:
            return f"ONE CODE IS POSSIBLE: {self.suggestion}"
        return f"{self.left} CODES STILL POSSIBLE; TRY {self.suggestion}"


def assist(rules: GameRules, turns: list[tuple[str, int, int]]) -> Assist:
    """What the assistant says after ``turns`` (guess, bulls, cows) of one player."""
    left = list(rules.secrets)
    for guess, bulls, cows in turns:
        left = rules.consistent(left, guess, (bulls, cows))
    if not left:
        return Assist(0, None)
    if len(left) > MINIMAX_LIMIT or len(left) <= 2:
        return Assist(len(left), left[0])
    best, best_worst = left[0], len(left) + 1
    for guess in left:
        worst = max(Counter(rules.score(code, guess) for code in left).values())
        if worst < best_worst:
            best, best_worst = guess, worst
    return Assist(len(left), best)
