"""The ladder's whole-history Bradley-Terry fit (moo/bradley_terry.py)."""

from __future__ import annotations

import math
import random
from itertools import combinations

import pytest

from moo.bradley_terry import ANCHOR, BTRating, fit
from moo.stats import elo_from_score, score_from_elo

Game = tuple[str, str, float]


def _simulate(truth: dict[str, float], n_games: int, seed: int) -> list[Game]:
    """Random pairings; each game's expected score is the Elo one of the true ratings.

    Draws happen too (more often between close bots), with the expected score kept: a draw is
    worth half, so P(win) = p - d/2 and P(loss) = 1 - p - d/2.
    """
    rng = random.Random(seed)
    names = sorted(truth)
    games: list[Game] = []
    for _ in range(n_games):
        a, b = rng.sample(names, 2)
        p = score_from_elo(truth[a] - truth[b])
        d = 0.8 * p * (1.0 - p)
        u = rng.random()
        games.append((a, b, 1.0 if u < p - d / 2 else 0.5 if u < p + d / 2 else 0.0))
    return games


def _centred(truth: dict[str, float]) -> dict[str, float]:
    mean = sum(truth.values()) / len(truth)
    return {name: ANCHOR + value - mean for name, value in truth.items()}


def test_recovers_known_strengths_from_simulated_games() -> None:
    truth = _centred({"a": 1100, "b": 1300, "c": 1450, "d": 1500, "e": 1600, "f": 1900})
    ratings = fit(_simulate(truth, 12_000, seed=1))
    assert set(ratings) == set(truth)
    for name, value in truth.items():
        assert abs(ratings[name].rating - value) < 40, (name, ratings[name], value)
    # the order is the true order
    assert sorted(ratings, key=lambda n: ratings[n].rating) == sorted(truth, key=lambda n: truth[n])
    assert sum(r.rating for r in ratings.values()) / len(ratings) == pytest.approx(ANCHOR)
    assert sum(r.games for r in ratings.values()) == 2 * 12_000


def test_two_players_match_the_textbook_logistic_difference_and_its_error() -> None:
    """Many games between two bots: the difference is elo(score), the interval the delta one."""
    wins, draws, losses = 1500, 1000, 500
    games: list[Game] = [("a", "b", 1.0)] * wins + [("b", "a", 0.5)] * draws
    games += [("b", "a", 1.0)] * losses
    ratings = fit(games)
    n = wins + draws + losses
    s = (wins + draws / 2) / n
    assert ratings["a"].rating - ratings["b"].rating == pytest.approx(elo_from_score(s), abs=0.5)
    # var(r_a - r_b) = 1 / (n p (1 - p)) in natural units; each rating is half the difference
    half_width = 1.959963984540054 * 400 / math.log(10) * 0.5 / math.sqrt(n * s * (1 - s))
    width = ratings["a"].high - ratings["a"].rating
    assert width == pytest.approx(half_width, rel=0.01)
    assert ratings["a"].rating - ratings["a"].low == pytest.approx(width)


def test_the_order_of_games_and_of_the_seats_does_not_change_the_ratings() -> None:
    truth = _centred({"a": 1200, "b": 1400, "c": 1500, "d": 1650, "e": 1800})
    games = _simulate(truth, 3000, seed=2)
    reference = fit(games)
    rng = random.Random(3)
    for _ in range(3):
        shuffled = games[:]
        rng.shuffle(shuffled)
        # and half the games written from the other seat
        shuffled = [(b, a, 1.0 - s) if rng.random() < 0.5 else (a, b, s) for a, b, s in shuffled]
        assert fit(shuffled) == reference


def test_symmetry_equal_records_equal_ratings_and_mirrored_results_mirror_the_ratings() -> None:
    even = fit([("a", "b", 1.0), ("b", "a", 1.0), ("a", "b", 0.5)] * 5)
    assert even["a"].rating == pytest.approx(ANCHOR)
    assert even["b"].rating == pytest.approx(ANCHOR)
    assert even["a"].high - even["a"].low == pytest.approx(even["b"].high - even["b"].low)

    truth = _centred({"a": 1300, "b": 1500, "c": 1750})
    games = _simulate(truth, 600, seed=4)
    forward = fit(games)
    mirrored = fit([(a, b, 1.0 - s) for a, b, s in games])
    for name in truth:
        assert mirrored[name].rating - ANCHOR == pytest.approx(ANCHOR - forward[name].rating)
        assert mirrored[name].high - mirrored[name].low == pytest.approx(
            forward[name].high - forward[name].low)
    # renaming the bots renames the ratings and changes nothing else
    rename = {"a": "z", "b": "y", "c": "x"}
    renamed = fit([(rename[a], rename[b], s) for a, b, s in games])
    for name, other in rename.items():
        assert renamed[other].rating == pytest.approx(forward[name].rating)


def _width(rating: BTRating) -> float:
    return rating.high - rating.low


def test_the_interval_shrinks_with_more_games() -> None:
    truth = _centred({"a": 1350, "b": 1500, "c": 1650, "d": 1500})
    games = _simulate(truth, 16_000, seed=5)
    widths = [_width(fit(games[:count])["a"]) for count in (100, 1000, 16_000)]
    assert widths[0] > widths[1] > widths[2]
    # about 1 / sqrt(games): 16 times the games, a quarter of the width
    assert widths[2] == pytest.approx(widths[1] / 4, rel=0.15)


def test_the_interval_covers_the_truth_in_most_seeded_trials() -> None:
    truth = _centred({"a": 1250, "b": 1450, "c": 1550, "d": 1750})
    covered = total = 0
    for seed in range(40):
        ratings = fit(_simulate(truth, 400, seed=100 + seed))
        for name, value in truth.items():
            total += 1
            covered += ratings[name].low <= value <= ratings[name].high
    # nominally 95 %; the weak prior and the normal approximation may cost a little
    assert covered / total >= 0.88, covered / total


def test_no_games_no_ratings() -> None:
    assert fit([]) == {}


def test_one_game_is_finite_and_symmetric() -> None:
    ratings = fit([("w", "l", 1.0)])
    w, loser = ratings["w"], ratings["l"]
    assert w.rating > ANCHOR > loser.rating
    assert w.rating - ANCHOR == pytest.approx(ANCHOR - loser.rating)
    assert w.games == loser.games == 1
    for rating in (w, loser):
        assert all(math.isfinite(x) for x in (rating.rating, rating.low, rating.high))
        assert rating.low < ANCHOR < rating.high  # one game proves nothing


def test_a_bot_that_won_or_lost_everything_is_finite_and_first_or_last() -> None:
    games: list[Game] = []
    for other in ("b", "c", "d"):
        games += [("top", other, 1.0)] * 20 + [(other, "bottom", 1.0)] * 20
    games += [("b", "c", 0.5), ("c", "d", 0.5), ("d", "b", 0.5)] * 10
    ratings = fit(games)
    order = sorted(ratings, key=lambda n: ratings[n].rating)
    assert order[0] == "bottom" and order[-1] == "top"
    for rating in ratings.values():
        assert all(math.isfinite(x) for x in (rating.rating, rating.low, rating.high))
        assert rating.low < rating.rating < rating.high
    assert ratings["top"].rating - ratings["b"].rating > 300
    assert ratings["top"].rating - ANCHOR == pytest.approx(ANCHOR - ratings["bottom"].rating)


def test_two_disconnected_groups_are_each_centred_and_finite() -> None:
    group1 = [("a", "b", 1.0)] * 8 + [("b", "a", 1.0)] * 2
    group2 = [("c", "d", 1.0)] * 8 + [("d", "c", 1.0)] * 2
    ratings = fit(group1 + group2)
    assert ratings["a"].rating == pytest.approx(ratings["c"].rating)
    assert ratings["b"].rating == pytest.approx(ratings["d"].rating)
    assert ratings["a"].rating > ANCHOR > ratings["b"].rating
    for rating in ratings.values():
        assert all(math.isfinite(x) for x in (rating.rating, rating.low, rating.high))
    # within a group the games pin the difference; the groups' levels only the prior does, so
    # the intervals are wider than from the same games in one connected field
    joined = fit(group1 + group2 + [("a", "c", 0.5), ("b", "d", 0.5)] * 20)
    assert _width(ratings["a"]) > _width(joined["a"])


def test_a_player_with_no_decisive_result_and_an_isolated_pair_stay_at_the_mean() -> None:
    ratings = fit([("a", "b", 0.5)])
    assert ratings["a"].rating == pytest.approx(ANCHOR)
    assert ratings["b"].rating == pytest.approx(ANCHOR)


@pytest.mark.parametrize(
    ("game", "message"),
    [(("a", "a", 1.0), "cannot play itself"), (("a", "b", 0.3), "a score is 1, 0.5 or 0")],
)
def test_bad_games_are_refused(game: Game, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit([("a", "b", 1.0), game])


def test_many_bots_every_pair_the_fit_is_consistent_with_pairwise_records() -> None:
    """In a full round robin the rating order follows the total points (a property of BT)."""
    truth = _centred({f"bot{i}": 1200 + 40 * i for i in range(15)})
    rng = random.Random(6)
    games: list[Game] = []
    for a, b in combinations(sorted(truth), 2):
        for _ in range(10):
            p = score_from_elo(truth[a] - truth[b])
            games.append((a, b, 1.0 if rng.random() < p else 0.0))
    ratings = fit(games)
    points = dict.fromkeys(truth, 0.0)
    for a, b, s in games:
        points[a] += s
        points[b] += 1.0 - s
    by_rating = sorted(truth, key=lambda n: ratings[n].rating)
    by_points = sorted(truth, key=lambda n: points[n])
    assert [points[n] for n in by_rating] == [points[n] for n in by_points]
