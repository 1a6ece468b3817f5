"""Every built-in bot solves every secret; totals replayed independently with moo.rules.score.

Each fixed strategy's tree is built once per test session (decisions are memoised per process),
then every line is replayed here with :func:`moo.rules.score` alone, so a bug in the shared
table or the candidate filtering cannot hide behind itself. The documented totals are read from
docs/strategies.md, so the docs cannot drift from the code.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from bots.heuristic import CandidateStrategy
from bots.playout import play_all
from bots.registry import available, create
from bots.tree import DecisionTree
from moo.rules import DEFAULT_RULES, Response, Rules, score

DOCS = Path(__file__).resolve().parents[2] / "docs" / "strategies.md"
FIXED = ["entropy", "expected", "parts", "minimax", "larmouth", "first"]
Games = list[tuple[str, tuple[str, ...]]]


@cache
def games_of(name: str, seed: int = 0) -> Games:
    return play_all(create(name, relabel=False), DEFAULT_RULES, seed=seed)


def documented_totals() -> dict[str, int]:
    found = re.findall(r"^\| `(\w+)` \| (\d+) \|", DOCS.read_text(), flags=re.MULTILINE)
    return {name: int(total) for name, total in found}


def replay(games: Games, *, consistent_only: bool = False) -> Counter[int]:
    """Guess-count histogram, checking each game with moo.rules.score only."""
    dist: Counter[int] = Counter()
    assert [s for s, _ in games] == list(DEFAULT_RULES.secrets)
    for secret, guesses in games:
        seen: list[tuple[str, Response]] = []
        for i, guess in enumerate(guesses):
            DEFAULT_RULES.check_guess(guess)
            if consistent_only:
                assert all(score(guess, g) == r for g, r in seen), (secret, guess)
            r = score(secret, guess)
            assert (r == DEFAULT_RULES.solved) == (i == len(guesses) - 1), (secret, guesses)
            seen.append((guess, r))
        dist[len(guesses)] += 1
    return dist


def test_every_builtin_is_registered() -> None:
    assert set(FIXED) | {"random", "minimum", "strongest"} <= set(available())


@pytest.mark.parametrize("name", FIXED)
def test_fixed_bot_solves_every_secret_with_the_documented_total(name: str) -> None:
    games = games_of(name)
    dist = replay(games, consistent_only=name == "first")
    total = sum(k * n for k, n in dist.items())
    assert documented_totals()[name] == total
    # a fixed strategy is a tree: the same responses always lead to the same guess
    DecisionTree.from_dump(games, DEFAULT_RULES, name)


def test_published_totals_are_reproduced() -> None:
    """The tie rule (candidates first, then lowest code) reproduces the published totals."""
    totals = {n: sum(len(g) for _, g in games_of(n)) for n in ["expected", "parts", "minimax",
                                                                "first"]}
    assert totals == {"expected": 26551, "parts": 26751, "minimax": 27139, "first": 28024}
    # Larmouth reported an average of 5.24
    assert round(sum(len(g) for _, g in games_of("larmouth")) / 5040, 2) == 5.24


def test_random_bot_plays_consistent_codes_and_is_reproducible() -> None:
    games = games_of("random", 11)
    replay(games, consistent_only=True)
    some = DEFAULT_RULES.secrets[::17]
    again = play_all(create("random", relabel=False), DEFAULT_RULES, seed=11, secrets=some)
    assert again == games[::17]
    other = play_all(create("random", relabel=False), DEFAULT_RULES, seed=12, secrets=some)
    assert other != games[::17]


def brute_choice(name: str, candidates: list[str]) -> str:
    """The heuristic's choice computed from scratch with moo.rules.score."""
    best: tuple[float, int, int] | None = None
    choice = ""
    for index, guess in enumerate(DEFAULT_RULES.guesses):
        parts = list(Counter(score(c, guess) for c in candidates).values())
        is_cand = guess in candidates
        if name == "entropy":
            cost = sum(t * math.log(t) for t in parts)
        elif name == "larmouth":
            cost = sum(t * math.log(t) for t in parts) - (2 * math.log(2) if is_cand else 0)
        elif name == "expected":
            cost = sum(t * t for t in parts)
        elif name == "parts":
            cost = -len(parts)
        else:
            cost = max(parts)
        key = (round(cost, 9), 0 if is_cand else 1, index)
        if best is None or key < best:
            best, choice = key, guess
    return choice


@pytest.mark.parametrize("name", ["entropy", "expected", "parts", "minimax", "larmouth"])
@pytest.mark.parametrize("response", ["2B2C", "1B3C", "4C", "3B"])
def test_second_guess_matches_a_from_scratch_search(name: str, response: str) -> None:
    from moo.rules import parse_response

    r = parse_response(response)
    bot = create(name, relabel=False)
    bot.new_match(DEFAULT_RULES, random.Random(0))
    assert bot.next_guess() == "0123"
    bot.observe("0123", r)
    candidates = [s for s in DEFAULT_RULES.secrets if score(s, "0123") == r]
    assert bot.next_guess() == brute_choice(name, candidates)


def test_candidates_shrink_as_responses_arrive() -> None:
    bot = create("first", relabel=False)
    assert isinstance(bot, CandidateStrategy)
    bot.new_match(DEFAULT_RULES, random.Random(0))
    assert bot.choices_left == 5040
    bot.observe("0123", Response(0, 1))
    assert bot.choices_left == 1440
    assert bot.next_guess() == "1456"  # lowest code with exactly one of 0-3, misplaced
    bot.observe("1456", Response(0, 0))
    assert bot.choices_left == int(
        np.sum([score(s, "0123") == (0, 1) and score(s, "1456") == (0, 0)
                for s in DEFAULT_RULES.secrets])
    )


def test_contradictory_responses_are_an_error() -> None:
    bot = create("entropy", relabel=False)
    bot.new_match(DEFAULT_RULES, random.Random(0))
    bot.observe("0123", Response(0, 0))
    bot.observe("4567", Response(0, 0))  # only 8 and 9 left: no 4-digit secret
    with pytest.raises(RuntimeError, match="contradict"):
        bot.next_guess()


@pytest.mark.parametrize(
    "rules",
    [Rules(length=3), Rules(length=3, alphabet="012345"), Rules(length=3, repeats_in_guess=True)],
)
@pytest.mark.parametrize("name", ["entropy", "minimax", "larmouth", "first", "random"])
def test_bots_follow_the_rules_of_variants(rules: Rules, name: str) -> None:
    games = play_all(create(name, relabel=False), rules, secrets=rules.secrets[::5])
    for secret, guesses in games:
        assert guesses[-1] == secret and all(rules.check_guess(g) == g for g in guesses)
        assert len(guesses) <= 8
