"""Relabelling makes a fixed tree unexploitable: every secret faces the same distribution.

Without relabelling the tree's worst secret always costs the worst count, so an opponent who
knows the tree would always pick it. With it, that secret's guess counts over many seeded
matches must follow the tree's overall distribution (chi-square, fixed seeds: deterministic).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from bots.entropy import Entropy
from bots.playout import play_all, play_one
from bots.registry import create
from bots.relabel import Relabelled
from moo.rules import DEFAULT_RULES, Rules, score

GAMES = 2000
#: chi-square critical value, 3 degrees of freedom, p = 1e-4
CHI2_CRIT_3DF = 21.11


def bins(dist: Counter[int]) -> list[int]:
    """<=4, 5, 6, >=7 guesses: every expected count is well above 5."""
    return [
        sum(n for k, n in dist.items() if k <= 4), dist[5], dist[6],
        sum(n for k, n in dist.items() if k >= 7),
    ]


def chi2(observed: list[int], probabilities: list[float]) -> float:
    total = sum(observed)
    return sum((o - total * p) ** 2 / (total * p) for o, p in zip(observed, probabilities,
                                                                    strict=True))


@pytest.fixture(scope="module")
def tree() -> tuple[Counter[int], str, int]:
    games = play_all(create("entropy", relabel=False), DEFAULT_RULES)
    dist = Counter(len(g) for _, g in games)
    worst = max(dist)
    secret = next(s for s, g in games if len(g) == worst)
    return dist, secret, worst


def test_create_relabels_by_default() -> None:
    bot = create("entropy")
    assert isinstance(bot, Relabelled) and isinstance(bot.inner, Entropy)
    assert bot.name == "entropy" and bot.summary == Entropy.summary
    assert not bot.deterministic
    assert isinstance(create("entropy", relabel=False), Entropy)


def test_relabelling_is_a_bijection_that_preserves_scores() -> None:
    bot = create("first")
    assert isinstance(bot, Relabelled)
    rng = random.Random(5)
    bot.new_match(DEFAULT_RULES, rng)
    outer = [bot.to_outer(c) for c in DEFAULT_RULES.secrets]
    assert sorted(outer) == list(DEFAULT_RULES.secrets)
    assert all(bot.to_inner(bot.to_outer(c)) == c for c in DEFAULT_RULES.secrets[::7])
    for a, b in itertools.islice(itertools.combinations(DEFAULT_RULES.secrets[::37], 2), 2000):
        assert score(a, b) == score(bot.to_outer(a), bot.to_outer(b))


def test_every_relabelling_makes_every_secret_equally_likely() -> None:
    """Exact: over all symbol x position permutations, T⁻¹(secret) hits each code equally."""
    rules = Rules(length=3, alphabet="01234")
    bot = create("first")
    assert isinstance(bot, Relabelled)
    hits: Counter[str] = Counter()
    for symbols in itertools.permutations(rules.alphabet):
        for positions in itertools.permutations(range(rules.length)):
            bot._symbols = dict(zip(rules.alphabet, symbols, strict=True))
            bot._inverse = {v: k for k, v in bot._symbols.items()}
            bot._positions = list(positions)
            hits[bot.to_inner("340")] += 1
    assert set(hits) == set(rules.secrets)
    assert set(hits.values()) == {120 * 6 // len(rules.secrets)}


def test_without_relabelling_the_worst_secret_always_costs_the_worst(
    tree: tuple[Counter[int], str, int],
) -> None:
    dist, secret, worst = tree
    bare = create("entropy", relabel=False)
    counts = {len(play_one(bare, DEFAULT_RULES, secret, random.Random(i))) for i in range(50)}
    assert counts == {worst}
    # ... which the chi-square test below would flag at once
    probabilities = [n / 5040 for n in bins(dist)]
    assert chi2(bins(Counter({worst: GAMES})), probabilities) > 1000


def test_with_relabelling_the_worst_secret_gets_the_overall_distribution(
    tree: tuple[Counter[int], str, int],
) -> None:
    dist, secret, worst = tree
    bot = create("entropy")
    played = Counter(
        len(play_one(bot, DEFAULT_RULES, secret, random.Random(1000 + i))) for i in range(GAMES)
    )
    probabilities = [n / 5040 for n in bins(dist)]
    assert chi2(bins(played), probabilities) < CHI2_CRIT_3DF
    mean = sum(k * n for k, n in played.items()) / GAMES
    assert abs(mean - sum(k * n for k, n in dist.items()) / 5040) < 0.1  # sd of mean ~0.015
    assert played[worst] < GAMES // 50


def test_a_seeded_relabelled_match_replays_identically() -> None:
    bot = create("expected")
    first = play_one(bot, DEFAULT_RULES, "5271", random.Random(42))
    assert play_one(bot, DEFAULT_RULES, "5271", random.Random(42)) == first
    assert first[-1] == "5271"
    assert first[0] != "0123" or play_one(bot, DEFAULT_RULES, "5271", random.Random(43))[0] != (
        "0123"
    )
