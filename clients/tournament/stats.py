"""Tournament statistics, now in the core (:mod:`moo.stats`) so that the server's hosted
tournaments (moo/tourney.py) compute the same Elo and intervals as ``moo tournament``; this
module keeps the old import path for the local runner and its tests."""

from moo.stats import (
    Z95,
    Interval,
    SprtResult,
    SprtSpec,
    elo_from_score,
    elo_interval_pentanomial,
    elo_interval_trinomial,
    los,
    pentanomial,
    score_from_elo,
    sprt,
    sprt_llr,
)

__all__ = [
    "Z95",
    "Interval",
    "SprtResult",
    "SprtSpec",
    "elo_from_score",
    "elo_interval_pentanomial",
    "elo_interval_trinomial",
    "los",
    "pentanomial",
    "score_from_elo",
    "sprt",
    "sprt_llr",
]
