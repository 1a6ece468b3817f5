"""First consistent: the lowest code still consistent with every response.

The deterministic cousin of Appleyard's random-consistent guesser, and the baseline every
look-ahead heuristic should beat.
"""

from __future__ import annotations

from bots.heuristic import CandidateStrategy
from bots.table import IntArray, ResponseTable


class FirstConsistent(CandidateStrategy):
    name = "first"
    summary = "the lowest code consistent with all responses so far"

    def choose(self, table: ResponseTable, candidates: IntArray) -> int:
        return int(table.secret_as_guess[candidates[0]])
