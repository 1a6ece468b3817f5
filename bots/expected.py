"""Minimum expected size: the guess after which, on average, the fewest candidates remain.

With a uniformly random secret the part of size |t| is reached with probability |t|/n, so the
expected remaining size is Σ |t|² / n; n is the same for every guess, so Σ |t|² is compared in
exact integers.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from bots.heuristic import CountArray, Heuristic


class ExpectedSize(Heuristic):
    name = "expected"
    summary = "minimum expected number of candidates left after the guess"

    def cost(
        self, counts: CountArray, size: int, is_candidate: npt.NDArray[np.bool_]
    ) -> CountArray:
        return np.asarray((counts * counts).sum(axis=1), dtype=np.int64)
