"""Score against the minimum strategy, estimated from a player's finished matches.

The arena rates bots exactly (one game per secret, :mod:`bots.evaluate`); people and remote
programs can only be *observed*, so their score against ``minimum`` is estimated from the
matches they played, with a 95 % confidence interval. This module is pure (no I/O): the server
(``player``, ``leaderboard``) and ``moo report --games`` call the same functions, so a page and
a report can never disagree about the method. docs/export.md explains it for readers.

Why not just average the solved matches: a match ends as soon as its outcome is fixed, so a
player's guess count is only seen when they solved no later than their opponent. In lockstep,
a player who would need 7 guesses against an opponent who solves in 5 stops after 5 unsolved:
all we learn is "more than 5". Averaging only the solved matches keeps the short games and
drops the long ones, and overstates the player (for ``strongest`` against ``minimum``, by
about 0.1 in score). These are right-censored observations, and the Kaplan-Meier estimator is
the standard unbiased answer: at each guess count ``t`` the hazard is (matches solved at ``t``)
/ (matches still unsolved after ``t - 1`` guesses that reached ``t``). It is consistent when the
censoring (when the opponent ends the match) is independent of the player's own count, which
holds because the two secrets are drawn independently.

The score is linear in the distribution: ``score = Σ_k p(k) w(k)`` with
``w(k) = P_min(> k) + ½ P_min(= k)``. Probability the estimate leaves unassigned (a player
never seen to solve beyond some count) counts as a loss (``w = 0``): a conservative choice.

The interval uses the delta method on the multinomial of observation categories ("solved at
``k``", "unsolved after ``c``"): with proportions ``q`` and the gradient ``g`` of the score as a
function of ``q``, ``Var ≈ (Σ q_i g_i² − (Σ q_i g_i)²) / n``, and the interval is the estimate
± 1.96 standard errors, clipped to [0, 1]. It is deterministic (no resampling, no seed) and
cheap enough to compute for every leaderboard row.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "Estimate",
    "Tally",
    "estimate",
    "guess_distribution",
    "score_against",
    "tally",
    "weights",
]

#: two-sided 95 % normal quantile
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Tally:
    """A player's observed matches, reduced to what the estimate needs.

    ``solved[k]``: matches the player solved in ``k`` guesses. ``unsolved[c]``: matches that
    ended (opponent solved, resignation, timeout, cap) after the player made ``c`` guesses
    without solving, i.e. all we know is that they needed more than ``c``.
    """

    solved: Mapping[int, int]
    unsolved: Mapping[int, int]

    @property
    def n(self) -> int:
        return sum(self.solved.values()) + sum(self.unsolved.values())

    @property
    def n_solved(self) -> int:
        return sum(self.solved.values())


def tally(outcomes: Iterable[tuple[int, bool]]) -> Tally:
    """``(guesses made, solved?)`` per finished match -> :class:`Tally`."""
    solved: Counter[int] = Counter()
    unsolved: Counter[int] = Counter()
    for count, ok in outcomes:
        if count < 0:
            raise ValueError(f"a guess count cannot be negative ({count})")
        if ok:
            if count < 1:
                raise ValueError("a solved match needs at least one guess")
            solved[count] += 1
        else:
            unsolved[count] += 1
    return Tally(dict(solved), dict(unsolved))


def guess_distribution(t: Tally) -> tuple[dict[int, float], float]:
    """Kaplan-Meier estimate of P(solve in exactly k guesses); also the unassigned mass.

    The unassigned mass is the probability the data cannot place: the chance of needing more
    guesses than any match showed (0 when the longest observation is a solve).
    """
    return _km(t.solved, t.unsolved)


def _km(
    solved: Mapping[int, float], unsolved: Mapping[int, float]
) -> tuple[dict[int, float], float]:
    at_risk = float(sum(solved.values()) + sum(unsolved.values()))
    survival = 1.0
    dist: dict[int, float] = {}
    last = max([*solved, *unsolved], default=0)
    for k in range(0, last + 1):
        if at_risk <= 0:
            break
        d = float(solved.get(k, 0))
        if d:
            hazard = d / at_risk
            dist[k] = survival * hazard
            survival *= 1.0 - hazard
        at_risk -= d + float(unsolved.get(k, 0))
    return dist, max(0.0, survival)


def weights(baseline: Mapping[int, int]) -> dict[int, float]:
    """``w(k) = P_B(> k) + ½ P_B(= k)``: the score of solving in ``k`` guesses against B."""
    total = sum(baseline.values())
    if total <= 0:
        raise ValueError("the baseline distribution is empty")
    top = max(baseline)
    out: dict[int, float] = {}
    above = total
    for k in range(0, top + 1):
        here = baseline.get(k, 0)
        above -= here
        out[k] = (above + 0.5 * here) / total
    return out


def score_against(dist: Mapping[int, float], baseline: Mapping[int, int]) -> float:
    """Score (win + ½ draw) of a guess-count distribution against B's; mass past B's longest
    game (and unassigned mass, left out of ``dist``) scores 0."""
    w = weights(baseline)
    return sum(p * w.get(k, 0.0) for k, p in dist.items())


@dataclass(frozen=True)
class Estimate:
    """Score against the baseline with its 95 % interval, from ``n`` matches."""

    score: float
    low: float
    high: float
    n: int
    n_solved: int
    distribution: dict[int, float]
    unassigned: float

    def to_dict(self) -> dict[str, float | int]:
        """The protocol's ``vs_minimum`` object (docs/protocol.md)."""
        return {
            "score": round(self.score, 4),
            "low": round(self.low, 4),
            "high": round(self.high, 4),
            "n": self.n,
        }


def estimate(t: Tally, baseline: Mapping[int, int]) -> Estimate | None:
    """Score of the observed player against ``baseline`` with a 95 % delta-method interval.

    None when no match was solved (nothing is known about the distribution).
    """
    if t.n_solved == 0:
        return None
    w = weights(baseline)
    keys = [("s", k) for k in sorted(t.solved) if t.solved[k]] + [
        ("u", c) for c in sorted(t.unsolved) if t.unsolved[c]
    ]
    n = t.n
    q = {key: (t.solved if key[0] == "s" else t.unsolved)[key[1]] / n for key in keys}

    def f(props: Mapping[tuple[str, int], float]) -> float:
        s = {k: v for (kind, k), v in props.items() if kind == "s"}
        u = {k: v for (kind, k), v in props.items() if kind == "u"}
        dist, _ = _km(s, u)
        return sum(p * w.get(k, 0.0) for k, p in dist.items())

    value = f(q)
    grads: dict[tuple[str, int], float] = {}
    for key in keys:
        h = 1e-6
        up, down = dict(q), dict(q)
        up[key] += h
        down[key] -= h
        grads[key] = (f(up) - f(down)) / (2 * h)
    mean_g = sum(q[k] * grads[k] for k in keys)
    var = max(0.0, sum(q[k] * grads[k] ** 2 for k in keys) - mean_g**2) / n
    half = Z95 * math.sqrt(var)
    dist, unassigned = guess_distribution(t)
    return Estimate(
        score=value,
        low=max(0.0, value - half),
        high=min(1.0, value + half),
        n=n,
        n_solved=t.n_solved,
        distribution=dist,
        unassigned=unassigned,
    )
