"""Maximum entropy: the guess whose response tells the most, in bits, about the secret.

Entropy of the partition is ln n - (1/n) Σ |t| ln |t|, so maximising it is minimising
Σ |t| ln |t| over the parts (the 4B part of a candidate guess counts as a part of size 1).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from bots.heuristic import CountArray, FloatArray, Heuristic, sum_t_log_t


class Entropy(Heuristic):
    name = "entropy"
    summary = "maximum entropy of the response partition (one-step look-ahead)"
    float_cost = True

    def cost(
        self, counts: CountArray, size: int, is_candidate: npt.NDArray[np.bool_]
    ) -> FloatArray:
        return sum_t_log_t(counts)
