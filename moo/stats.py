"""Tournament statistics: score, Elo difference with a 95 % interval, LOS and SPRT.

Pure functions over counts, so the standings printed by ``moo tournament`` can be checked by
hand and the tests compare them with the textbook formulas.

Model and conventions (the ones cutechess-cli and fastchess use):

* A win scores 1, a draw 1/2, a loss 0; the score ``s`` is the mean over games.
* Elo difference is the logistic one: ``elo(s) = -400 log10(1/s - 1)``.
* The interval is a normal approximation on the score, mapped through ``elo``. With paired games
  (the same two secrets played both ways) the games of a pair are not independent, so the
  variance is estimated over *pairs* (the pentanomial model: a pair scores 0, 1/2, 1, 3/2 or 2);
  without pairs it is the per-game (trinomial) variance.
* LOS, the likelihood of superiority, is ``Phi((W - L) / sqrt(W + L))``: draws carry no
  information about which side is stronger.
* SPRT is the generalised SPRT over pentanomial pair scores (maximum-likelihood distributions
  under each hypothesis, as fastchess does), bounds ``ln(beta/(1-alpha))`` and
  ``ln((1-beta)/alpha)``; see :func:`sprt_llr`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
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

Z95 = 1.959963984540054  # two-sided 95 % quantile of the standard normal
_EPS = 1e-12


def elo_from_score(s: float) -> float:
    """Logistic Elo difference of a score share; +-inf at 1 and 0."""
    if s >= 1.0:
        return math.inf
    if s <= 0.0:
        return -math.inf
    return -400.0 * math.log10(1.0 / s - 1.0)


def score_from_elo(elo: float) -> float:
    """Expected score share of an Elo difference (inverse of :func:`elo_from_score`)."""
    return 1.0 / (1.0 + math.pow(10.0, -elo / 400.0))


def los(wins: int, losses: int) -> float:
    """Likelihood of superiority in [0, 1]; 0.5 when there is no decisive game."""
    if wins + losses == 0:
        return 0.5
    return 0.5 * (1.0 + math.erf((wins - losses) / math.sqrt(2.0 * (wins + losses))))


@dataclass(frozen=True)
class Interval:
    """A score with its standard error and the Elo point estimate and 95 % bounds."""

    score: float
    stderr: float
    elo: float
    elo_low: float
    elo_high: float

    @property
    def elo_error(self) -> float:
        """Half-width of the interval in Elo (the "+-" figure cutechess prints)."""
        return (self.elo_high - self.elo_low) / 2.0


def _interval(mean: float, var: float, n: int, z: float) -> Interval:
    stderr = math.sqrt(var / n) if n > 0 else math.inf
    low = max(0.0, mean - z * stderr)
    high = min(1.0, mean + z * stderr)
    return Interval(mean, stderr, elo_from_score(mean), elo_from_score(low), elo_from_score(high))


def elo_interval_trinomial(wins: int, draws: int, losses: int, z: float = Z95) -> Interval:
    """Elo and interval treating every game as an independent trial (W/D/L)."""
    n = wins + draws + losses
    if n == 0:
        return Interval(0.5, math.inf, 0.0, -math.inf, math.inf)
    s = (wins + 0.5 * draws) / n
    var = (wins * (1 - s) ** 2 + draws * (0.5 - s) ** 2 + losses * s**2) / n
    return _interval(s, var, n, z)


def pentanomial(pair_scores: Iterable[float]) -> list[int]:
    """Counts of pairs scoring 0, 1/2, 1, 3/2, 2 points (the two games of a pair summed)."""
    counts = [0, 0, 0, 0, 0]
    for points in pair_scores:
        index = round(points * 2)
        if not 0 <= index <= 4 or abs(points * 2 - index) > 1e-9:
            raise ValueError(f"a pair scores 0, 0.5, 1, 1.5 or 2 points, not {points}")
        counts[index] += 1
    return counts


def _penta_moments(penta: Sequence[int]) -> tuple[int, float, float]:
    """(pairs, mean, variance) of the per-pair score share (pair points / 2)."""
    n = sum(penta)
    if n == 0:
        return 0, 0.5, 0.0
    values = (0.0, 0.25, 0.5, 0.75, 1.0)
    mean = sum(c * v for c, v in zip(penta, values)) / n
    var = sum(c * (v - mean) ** 2 for c, v in zip(penta, values)) / n
    return n, mean, var


def elo_interval_pentanomial(penta: Sequence[int], z: float = Z95) -> Interval:
    """Elo and interval over game pairs; ``penta[i]`` pairs scored ``i/2`` points."""
    if len(penta) != 5:
        raise ValueError("a pentanomial has 5 counts")
    n, mean, var = _penta_moments(penta)
    if n == 0:
        return Interval(0.5, math.inf, 0.0, -math.inf, math.inf)
    return _interval(mean, var, n, z)


@dataclass(frozen=True)
class SprtSpec:
    """H0: Elo = elo0 against H1: Elo = elo1, with error rates alpha and beta."""

    elo0: float
    elo1: float
    alpha: float = 0.05
    beta: float = 0.05

    @classmethod
    def parse(cls, text: str) -> SprtSpec:
        parts = [p.strip() for p in text.split(",")]
        if len(parts) not in (2, 4):
            raise ValueError("--sprt wants elo0,elo1[,alpha,beta], e.g. 0,50,0.05,0.05")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise ValueError(f"--sprt values must be numbers, got {text!r}") from None
        spec = cls(*values)
        if not spec.elo0 < spec.elo1:
            raise ValueError("--sprt needs elo0 < elo1")
        if not (0 < spec.alpha < 0.5 and 0 < spec.beta < 0.5):
            raise ValueError("--sprt alpha and beta must be in (0, 0.5)")
        return spec

    @property
    def lower(self) -> float:
        return math.log(self.beta / (1.0 - self.alpha))

    @property
    def upper(self) -> float:
        return math.log((1.0 - self.beta) / self.alpha)


@dataclass(frozen=True)
class SprtResult:
    llr: float
    lower: float
    upper: float
    #: "H0" (accept elo0), "H1" (accept elo1) or None (continue)
    decision: str | None


#: pseudo-count added to each pentanomial bin so that the constrained maximum-likelihood
#: distribution exists before every outcome has been seen (the value fastchess uses)
SPRT_REGULARIZATION = 1e-3
_PENTA_VALUES = (0.0, 0.25, 0.5, 0.75, 1.0)


def _mle_with_mean(p: Sequence[float], values: Sequence[float], s: float) -> list[float]:
    """The distribution closest to ``p`` (max likelihood) whose mean is ``s``.

    It has the form ``q_i = p_i / (1 + lam (v_i - s))``; ``lam`` solves
    ``sum p_i (v_i - s) / (1 + lam (v_i - s)) = 0``, found by bisection on the interval where
    every denominator stays positive (the left side decreases in ``lam``).
    """
    d = [v - s for v in values]
    hi = min((-1.0 / x for x in d if x < 0), default=1e9)
    lo = max((-1.0 / x for x in d if x > 0), default=-1e9)

    def f(lam: float) -> float:
        return sum(pi * di / (1.0 + lam * di) for pi, di in zip(p, d))

    lo, hi = lo + 1e-12 * abs(lo) + 1e-15, hi - 1e-12 * abs(hi) - 1e-15
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    lam = (lo + hi) / 2.0
    q = [pi / (1.0 + lam * di) for pi, di in zip(p, d)]
    total = sum(q)
    return [qi / total for qi in q]


def sprt_llr(penta: Sequence[int], elo0: float, elo1: float) -> float:
    """Generalised log-likelihood ratio of H1 over H0 from pentanomial pair counts.

    GSPRT over the pentanomial (multinomial) distribution of pair scores: for each hypothesis
    the maximum-likelihood distribution with the hypothesised mean score share ``s0``/``s1``
    is found, and ``LLR = N sum_i p_i log(q1_i / q0_i)`` with ``p`` the observed frequencies
    (regularised by :data:`SPRT_REGULARIZATION` per bin) and ``N`` the number of pairs. For
    many pairs and close hypotheses it approaches the normal approximation
    ``N (s1 - s0)(2m - s0 - s1) / (2 v)``; unlike that, it stays sane after a handful of pairs
    (one won pair adds at most ``log(s1/s0)``).
    """
    n = sum(penta)
    if n == 0:
        return 0.0
    counts = [c + SPRT_REGULARIZATION for c in penta]
    total = sum(counts)
    p = [c / total for c in counts]
    s0, s1 = score_from_elo(elo0), score_from_elo(elo1)
    q0 = _mle_with_mean(p, _PENTA_VALUES, s0)
    q1 = _mle_with_mean(p, _PENTA_VALUES, s1)
    return n * sum(pi * math.log(a / b) for pi, a, b in zip(p, q1, q0))


def sprt(penta: Sequence[int], spec: SprtSpec) -> SprtResult:
    llr = sprt_llr(penta, spec.elo0, spec.elo1)
    decision = "H1" if llr >= spec.upper else "H0" if llr <= spec.lower else None
    return SprtResult(llr, spec.lower, spec.upper, decision)
