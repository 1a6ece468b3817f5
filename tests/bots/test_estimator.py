"""bots/estimator.py: the score against minimum of an observed player, with its interval."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from bots.estimator import estimate, guess_distribution, score_against, tally, weights
from bots.evaluate import match_probabilities
from bots.tree import shipped_distribution

MINIMUM = shipped_distribution("minimum")
STRONGEST = shipped_distribution("strongest")


def test_shipped_distributions_are_the_trees() -> None:
    assert MINIMUM == {1: 1, 2: 7, 3: 60, 4: 665, 5: 2492, 6: 1746, 7: 69}
    assert sum(STRONGEST.values()) == 5040


def test_score_of_an_exact_distribution_is_the_exact_win_rate() -> None:
    win, draw, _ = match_probabilities(STRONGEST, MINIMUM)
    exact = float(win + draw / 2)
    assert score_against({k: n / 5040 for k, n in STRONGEST.items()}, MINIMUM) == pytest.approx(
        exact, abs=1e-12
    )
    assert round(exact, 7) == 0.5019145
    # w(k) by hand for k = 1: minimum needs more than 1 guess for 5039 secrets, 1 for one
    assert weights(MINIMUM)[1] == pytest.approx(float(Fraction(5039, 5040) + Fraction(1, 10080)))


def test_without_censoring_kaplan_meier_is_the_plain_histogram() -> None:
    t = tally([(4, True), (5, True), (5, True), (6, True)])
    dist, unassigned = guess_distribution(t)
    assert dist == {4: 0.25, 5: 0.5, 6: 0.25} and unassigned == 0.0


def test_kaplan_meier_by_hand() -> None:
    # solved at 4; censored after 4 (unsolved, 4 guesses made); solved at 5; solved at 6
    t = tally([(4, True), (4, False), (5, True), (6, True)])
    dist, unassigned = guess_distribution(t)
    # t=4: 4 at risk, 1 solves -> 1/4; t=5: 2 at risk, 1 solves -> 3/4 * 1/2; t=6: 1 -> rest
    assert dist == pytest.approx({4: 0.25, 5: 0.375, 6: 0.375})
    assert unassigned == pytest.approx(0.0)
    # the longest observation unsolved leaves mass the data cannot place
    dist, unassigned = guess_distribution(tally([(4, True), (6, False)]))
    assert dist == {4: 0.5} and unassigned == 0.5


def test_nothing_solved_means_no_estimate() -> None:
    assert estimate(tally([(3, False), (0, False)]), MINIMUM) is None
    with pytest.raises(ValueError):
        tally([(0, True)])


def test_interval_covers_the_truth_about_95_percent_of_the_time() -> None:
    """Simulated lockstep matches of strongest against minimum, censored as the server's are:
    the player's count is seen only when it solved no later than the opponent."""
    rng = random.Random(12)
    truth = score_against({k: n / 5040 for k, n in STRONGEST.items()}, MINIMUM)
    s_keys, s_w = list(STRONGEST), list(STRONGEST.values())
    m_keys, m_w = list(MINIMUM), list(MINIMUM.values())
    covered, scores, widths = 0, [], []
    trials = 200
    for _ in range(trials):
        mine = rng.choices(s_keys, s_w, k=300)
        theirs = rng.choices(m_keys, m_w, k=300)
        obs = [(k, True) if k <= j else (j, False) for k, j in zip(mine, theirs)]
        est = estimate(tally(obs), MINIMUM)
        assert est is not None and est.n == 300
        covered += est.low <= truth <= est.high
        scores.append(est.score)
        widths.append(est.high - est.low)
    assert 0.90 * trials <= covered <= 0.99 * trials
    assert sum(scores) / trials == pytest.approx(truth, abs=0.01)  # nearly unbiased
    assert 0.05 < sum(widths) / trials < 0.2
