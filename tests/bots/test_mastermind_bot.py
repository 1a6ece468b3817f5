"""Mastermind bots (bots/mastermind.py): the cached optimal tree, relabelling, fallback."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bots import mastermind as mm
from bots.solver.core import load_tree
from moo.mastermind import MASTERMIND, MastermindRules, mastermind_score


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOO_TREE_CACHE", str(tmp_path / "trees"))
    mm._TREES.clear()


def _play(bot: mm.MastermindTree | mm.RandomConsistent, rules: MastermindRules, secret: str,
          seed: int) -> list[str]:
    bot.new_match(rules, random.Random(seed))
    guesses: list[str] = []
    for _ in range(60):
        g = bot.next_guess()
        guesses.append(g)
        r = mastermind_score(secret, g)
        if r == rules.solved:
            return guesses
        bot.observe(g, r)
    raise AssertionError(f"{secret} not solved")


def test_tree_is_solved_once_cached_and_reread(tmp_path: Path) -> None:
    rules = MastermindRules(3, "1234")
    tree = mm.tree_for(rules)
    files = list((tmp_path / "trees").iterdir())
    assert [f.name for f in files] == ["mastermind-3-1234-minimum.txt.gz"]
    paths = load_tree(files[0])
    assert sorted(paths) == sorted(rules.secrets)
    mm._TREES.clear()
    assert mm.tree_for(rules) == tree  # read back from disk, same strategy
    files[0].write_bytes(b"garbage")  # a damaged file is recomputed
    mm._TREES.clear()
    assert mm.tree_for(rules) == tree


@pytest.mark.parametrize("seed", [7, 8])
def test_minimum_bot_total_is_the_optimum_under_any_relabelling(seed: int) -> None:
    # One relabelling (one seed) for every secret: a bijection of the codes, so the total over
    # all secrets is the tree's own optimum whichever relabelling the seed picks.
    bot = mm.MastermindTree()
    total = sum(len(_play(bot, MASTERMIND, s, seed=seed)) for s in MASTERMIND.secrets)
    assert total == 5625
    assert bot.note == ""


def test_relabelling_varies_the_opening() -> None:
    bot = mm.MastermindTree()
    openings = {_play(bot, MASTERMIND, "1234", seed)[0] for seed in range(8)}
    assert len(openings) > 1
    # every opening is a relabelled 1123: two equal symbols and two others
    assert all(sorted(sorted(o).count(c) for c in set(o)) == [1, 1, 2] for o in openings)


def test_strongest_tree_beats_minimum_distribution() -> None:
    rules = MastermindRules(3, "123")
    minimum = mm.tree_distribution(rules, mm.tree_for(rules, "minimum"))
    strongest = mm.tree_distribution(rules, mm.tree_for(rules, "strongest"))
    from bots.solver.core import score_vs

    assert score_vs(strongest, minimum)[0] >= 0
    assert sum(strongest) == sum(minimum) == 27


def test_too_large_falls_back_and_says_so() -> None:
    rules = MastermindRules(6, "12345678")  # 262144 codes
    bot = mm.MastermindTree()
    bot.new_match(rules, random.Random(1))
    assert "too large" in bot.note and "random consistent" in bot.note
    small = MastermindRules(3, "123")
    bot.new_match(small, random.Random(1))
    assert bot.note == ""


def test_random_consistent_solves() -> None:
    rules = MastermindRules(3, "123")
    bot = mm.RandomConsistent()
    for s in rules.secrets:
        guesses = _play(bot, rules, s, seed=3)
        assert guesses[-1] == s


def test_unknown_objective() -> None:
    with pytest.raises(ValueError, match="minimum or strongest"):
        mm.tree_for(MastermindRules(3, "12"), "fastest")
