"""Larmouth's function (Tanaka 1996, §2): Σ |t| log |t|, less 2 log 2 if the guess may win.

A part of size |t| is taken to need about log |t| more guesses, so Σ |t| log |t| estimates the
guesses still to come; a guess that is itself a candidate saves the final guess for one secret,
which Larmouth valued at 2 log 2. The bonus is base-independent (it scales with the sum).
Larmouth reported an average of 5.24 guesses.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from bots.heuristic import CountArray, FloatArray, Heuristic, sum_t_log_t


class Larmouth(Heuristic):
    name = "larmouth"
    summary = "Larmouth's Σ|t|log|t| - 2log2 if the guess is a candidate (1971)"
    float_cost = True

    def cost(
        self, counts: CountArray, size: int, is_candidate: npt.NDArray[np.bool_]
    ) -> FloatArray:
        return sum_t_log_t(counts) - 2 * math.log(2) * is_candidate
