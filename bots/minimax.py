"""Minimax (Knuth 1976, and Landy's f = max |t|): make the worst-case part as small as possible.

It guards the worst case rather than the average, so its total is the highest of the
look-ahead heuristics while its longest game stays short.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from bots.heuristic import CountArray, Heuristic


class Minimax(Heuristic):
    name = "minimax"
    summary = "smallest largest part (Knuth-style worst case)"

    def cost(
        self, counts: CountArray, size: int, is_candidate: npt.NDArray[np.bool_]
    ) -> CountArray:
        return np.asarray(counts.max(axis=1), dtype=np.int64)
