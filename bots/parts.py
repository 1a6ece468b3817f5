"""Most parts: the guess whose responses split the candidates into the most non-empty sets.

It ignores how large the parts are; it does well because near the end each extra part is a
candidate that will be pinned down one guess sooner.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from bots.heuristic import CountArray, Heuristic


class MostParts(Heuristic):
    name = "parts"
    summary = "maximum number of distinct responses (non-empty parts)"

    def cost(
        self, counts: CountArray, size: int, is_candidate: npt.NDArray[np.bool_]
    ) -> CountArray:
        return np.asarray(-(counts > 0).sum(axis=1), dtype=np.int64)
