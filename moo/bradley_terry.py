"""Bradley-Terry ratings fitted over all of a ladder's games at once, with 95 % intervals.

Why a whole fit and not incremental Elo: an incremental rating depends on the order in which
games happened (a bot that met strong opponents early and weak ones late ends elsewhere than one
that met them the other way round), the common complaint about Kaggle's simulation leaderboards.
The maximum-likelihood fit over every game sees the games as a set: the same games in any order
give bit-for-bit the same ratings (the games are first reduced to per-pair sums, and the scores
0, 1/2, 1 add up exactly in floating point).

The model. Bot ``i`` has a strength ``r_i`` (natural log-odds units); the expected score of
``i`` against ``j`` is ``p_ij = 1 / (1 + exp(r_j - r_i))``. A game scored ``s`` (1, 1/2 or 0 for
the first player) contributes ``s log p_ij + (1 - s) log(1 - p_ij)``: **a draw counts as half a
win and half a loss**. We chose this over Davidson's draw model because (a) a MOO ladder's draws
are frequent and depend on the pair (two strong bots draw often: both solve in the same number of
guesses), which a single global draw parameter describes badly; (b) with half-wins the fitted
``p_ij`` is the *expected score*, the quantity the tournaments' Elo (``moo.stats.elo_from_score``)
and the standings' points are about, so a ladder rating difference reads on the same scale; (c)
the log-likelihood stays strictly concave with no extra parameter, so Newton's method is safe.

The prior. Every bot gets **one virtual draw against a virtual anchor of strength 0** (1500 on
the reported scale), i.e. the term ``0.5 log p + 0.5 log(1 - p)`` with ``p`` the bot's
expected score against the anchor. It is weak (worth one game, against the tens or hundreds a
ladder bot plays) and it makes every case finite and sensible: a bot that won every game gets a
high but finite rating, one with no game sits at the field's mean with a wide interval, and two
groups that never met (disconnected components of the game graph) are each centred near the
mean instead of drifting apart without bound. Its influence fades as ``1 / games``.

The scale. Ratings are reported on the Elo scale, ``400 log10`` of the odds
(``rating = 1500 + 400 / ln 10 * (r_i - mean r)``), shifted so that **the mean of the field is
exactly 1500**. The 95 % interval is ``rating +- 1.96 sd`` with the variance of ``r_i - mean r``
from the observed information: ``C`` = the inverse of minus the Hessian of the penalised
log-likelihood at its maximum, projected onto the sum-to-mean constraint (``P C P`` with
``P = I - 11'/n``), because a rating is only meaningful relative to the field.

Speed: the games are summed per pair once (numpy ``add.at``), then the Newton steps work on
that ``n x n`` matrix (``O(n^2)`` per gradient, ``O(n^3)`` per solve, about eight steps), so 50
bots and 20 000 games take a few tens of milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ANCHOR", "ELO_PER_NATURAL", "PRIOR_DRAWS", "Z95", "BTRating", "fit"]

#: the reported rating of the field's mean (and of the prior's anchor)
ANCHOR = 1500.0
#: Elo points per natural log-odds unit (400 per factor of 10 in the odds)
ELO_PER_NATURAL = 400.0 / math.log(10.0)
#: virtual draws of each bot against the anchor (the weak prior)
PRIOR_DRAWS = 1.0
#: two-sided 95 % quantile of the standard normal
Z95 = 1.959963984540054

_MAX_ITERATIONS = 200
_TOLERANCE = 1e-10
_SCORES = (0.0, 0.5, 1.0)


@dataclass(frozen=True)
class BTRating:
    """A bot's fitted rating, its 95 % interval (``low`` .. ``high``) and its real games."""

    rating: float
    low: float
    high: float
    games: int


def _aggregate(
    games: Sequence[tuple[str, str, float]],
) -> tuple[list[str], np.ndarray, np.ndarray, list[int]]:
    """(sorted names, games per pair ``N``, points per pair ``S``, games per bot).

    ``N`` is symmetric; ``S[i, j]`` is what ``i`` scored against ``j`` (``S + S' = N``).
    """
    names = sorted({name for first, second, _ in games for name in (first, second)})
    index = {name: k for k, name in enumerate(names)}
    n = len(names)
    firsts: list[int] = []
    seconds: list[int] = []
    scores: list[float] = []
    for number, (first, second, score) in enumerate(games, start=1):
        if first == second:
            raise ValueError(f"game {number}: {first!r} cannot play itself")
        if score not in _SCORES:
            raise ValueError(f"game {number}: a score is 1, 0.5 or 0, not {score!r}")
        firsts.append(index[first])
        seconds.append(index[second])
        scores.append(float(score))
    i, j, s = np.array(firsts, dtype=np.intp), np.array(seconds, dtype=np.intp), np.array(scores)
    counts = np.zeros((n, n))
    points = np.zeros((n, n))
    # sums of 1, 1/2 and 0 are exact in floating point: the order of the games cannot matter
    np.add.at(counts, (i, j), 1.0)
    np.add.at(counts, (j, i), 1.0)
    np.add.at(points, (i, j), s)
    np.add.at(points, (j, i), 1.0 - s)
    played = np.bincount(np.concatenate([i, j]), minlength=n).tolist()
    return names, counts, points, played


def _objective(r: np.ndarray, points: np.ndarray) -> float:
    """The penalised log-likelihood: ``sum S_ij log p_ij`` over ordered pairs, plus the prior."""
    diff = r[:, None] - r[None, :]
    # log p_ij = -log(1 + exp(-(r_i - r_j))), computed stably
    log_p = -np.logaddexp(0.0, -diff)
    games_term = float(np.sum(points * log_p))
    prior_term = float(np.sum(-0.5 * PRIOR_DRAWS * (np.logaddexp(0.0, -r) + np.logaddexp(0.0, r))))
    return games_term + prior_term


def _gradient_hessian(
    r: np.ndarray, counts: np.ndarray, points: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    diff = r[:, None] - r[None, :]
    p = 1.0 / (1.0 + np.exp(-diff))
    weight = counts * p * (1.0 - p)
    anchor_p = 1.0 / (1.0 + np.exp(-r))
    gradient = np.sum(points - counts * p, axis=1) + PRIOR_DRAWS * (0.5 - anchor_p)
    hessian = weight.copy()  # its diagonal is 0: no bot plays itself
    hessian[np.diag_indices_from(hessian)] = -(
        np.sum(weight, axis=1) + PRIOR_DRAWS * anchor_p * (1.0 - anchor_p)
    )
    return gradient, hessian


def fit(games: Sequence[tuple[str, str, float]]) -> dict[str, BTRating]:
    """Fit Bradley-Terry ratings to ``games``: (first player, second player, first's score).

    Every player named in a game is rated; the score is 1, 0.5 or 0 (``ValueError`` otherwise,
    or for a player against itself). No games: an empty result. The order of ``games`` does not
    matter. See the module's docstring for the model, the prior and the interval.
    """
    names, counts, points, played = _aggregate(games)
    n = len(names)
    if n == 0:
        return {}
    r = np.zeros(n)
    value = _objective(r, points)
    for _ in range(_MAX_ITERATIONS):
        gradient, hessian = _gradient_hessian(r, counts, points)
        # minus the Hessian is positive definite (the prior adds to every diagonal entry)
        step = np.linalg.solve(-hessian, gradient)
        # damped Newton: halve the step until the (concave) objective does not decrease
        scale = 1.0
        while True:
            candidate = r + scale * step
            new_value = _objective(candidate, points)
            if new_value >= value - 1e-12 * abs(value) or scale < 1e-8:
                break
            scale /= 2.0
        r, value = candidate, new_value
        if float(np.max(np.abs(scale * step))) < _TOLERANCE:
            break
    _, hessian = _gradient_hessian(r, counts, points)
    covariance = np.linalg.inv(-hessian)
    projection = np.eye(n) - np.full((n, n), 1.0 / n)
    relative = projection @ covariance @ projection
    centred = r - float(np.mean(r))
    result: dict[str, BTRating] = {}
    for k, name in enumerate(names):
        rating = ANCHOR + ELO_PER_NATURAL * float(centred[k])
        half = Z95 * ELO_PER_NATURAL * math.sqrt(max(float(relative[k, k]), 0.0))
        result[name] = BTRating(rating, rating - half, rating + half, played[k])
    return result
