"""A whole game solved from the empty history: its first guess, cells and every secret's path.

Shared by the two engines that solve games with a searched first guess (``table.py`` over
``_table.c``, ``mastermind.py`` over ``_mastermind``), and the text layout ``moo solve`` prints
for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from moo.mastermind import MastermindRules
from moo.rules import Response, format_response

from .core import Objective, distribution, score_vs

__all__ = ["TableCell", "TableResult", "describe"]


@dataclass
class TableCell:
    """The secrets that answered the first guess with one response, and their subtree."""

    response: Response
    size: int
    second_guess: str | None
    subtotal: int
    seconds: float = 0.0


@dataclass
class TableResult:
    """A solved game: first guess, cells after it, every secret's guess path."""

    rules: MastermindRules
    objective: Objective
    first_guess: str
    value: int
    seconds: float
    paths: dict[str, list[str]] = field(default_factory=dict)
    cells: list[TableCell] = field(default_factory=list)
    nodes: int = 0

    @property
    def total(self) -> int:
        return sum(len(p) for p in self.paths.values())

    @property
    def distribution(self) -> list[int]:
        return distribution(len(p) for p in self.paths.values())

    def score(self) -> tuple[int, float] | None:
        if not self.objective.opponent:
            return None
        return score_vs(self.distribution, self.objective.opponent)


def describe(res: TableResult) -> list[str]:
    """The same text layout as ``moo solve`` for MOO (cells, then total and distribution)."""
    lines = [f"first guess {res.first_guess}",
             f"{'response':>8} {'2nd guess':>9} {'size':>5} {'total':>6}"]
    for c in res.cells:
        lines.append(f"{format_response(c.response):>8} {c.second_guess or '':>9} "
                     f"{c.size:>5} {c.subtotal:>6}")
    n = len(res.paths)
    lines.append(f"total {res.total} over {n} secrets (mean {res.total / n:.4f}), "
                 f"{res.seconds:.1f}s")
    lines.append("distribution " + ",".join(str(c) for c in res.distribution))
    scored = res.score()
    if scored is not None:
        gsum, rate = scored
        lines.append("opponent " + ",".join(str(c) for c in res.objective.opponent))
        lines.append(f"gamma sum {gsum}, win rate {100 * rate:.5f} %")
    return lines
