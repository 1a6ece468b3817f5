"""Bots for every MOO variant (issue #13): the heuristics' generic path, the tree bots solved on
first use and cached, the fallback that says so, and bots_for / create_for."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bots import variant_trees
from bots.heuristic import Heuristic
from bots.registry import create
from bots.table import table_for
from bots.variant_trees import VariantTree, cache_file, exact_feasible, fallback_note, tree_for
from bots.variants import VARIANT_HEURISTICS, bot_note, bots_for, create_for
from moo.rules import DEFAULT_RULES, Response, Rules, score
from moo.variants import parse_rules_spec
from tests.patience import patience

ROOT = Path(__file__).resolve().parents[2]
THREE = Rules(length=3, alphabet="0123456789")


@pytest.fixture(autouse=True)
def _tree_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test solves into its own cache and forgets the trees other tests loaded."""
    monkeypatch.setenv("MOO_TREE_CACHE", str(tmp_path / "trees"))
    monkeypatch.setattr(variant_trees, "_TREES", {})


def _play(strategy: object, rules: Rules, secret: str, seed: int = 0) -> list[str]:
    strategy.new_match(rules, random.Random(seed))  # type: ignore[attr-defined]
    guesses: list[str] = []
    while len(guesses) < 20:
        guess = strategy.next_guess()  # type: ignore[attr-defined]
        guesses.append(guess)
        response = score(secret, guess)
        strategy.observe(guess, response)  # type: ignore[attr-defined]
        if response == rules.solved:
            return guesses
    raise AssertionError(f"not solved in 20 guesses: {guesses}")


def _solver_total(rules: Rules, objective: str, *extra: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "cli", "solve", objective, "--length", str(rules.length),
         "--alphabet", rules.alphabet, "--quiet", "--json", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=patience(300), check=True,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_three_of_ten_tree_is_the_solvers_optimum_for_every_secret() -> None:
    """The cached tree costs the solver's own total, and the hosted (relabelled) bot solves
    every one of the 720 secrets within the tree's depth, with that same total."""
    tree = tree_for(THREE, "minimum")
    assert tree is not None and cache_file(THREE, "minimum").exists()
    solved = _solver_total(THREE, "minimum")
    assert sum(tree.counts.values()) == solved["total"]
    assert sorted(tree.counts) == sorted(THREE.secrets)
    depth = max(tree.counts.values())
    hosted = create_for("minimum", THREE)
    total = 0
    for secret in THREE.secrets:  # exhaustive, under one random relabelling
        played = _play(hosted, THREE, secret, seed=7)
        assert len(played) <= depth, (secret, played)
        total += len(played)
    assert total == solved["total"]


def test_strongest_tree_beats_the_minimum_tree() -> None:
    minimum = tree_for(THREE, "minimum")
    strongest = tree_for(THREE, "strongest")
    assert minimum is not None and strongest is not None
    dist_min = [0] * 10
    dist_str = [0] * 10
    for n in minimum.counts.values():
        dist_min[n] += 1
    for n in strongest.counts.values():
        dist_str[n] += 1
    wins = sum(a * b for i, a in enumerate(dist_str) for j, b in enumerate(dist_min) if i < j)
    losses = sum(a * b for i, a in enumerate(dist_str) for j, b in enumerate(dist_min) if i > j)
    assert wins > losses
    solved = _solver_total(THREE, "strongest", "--vs", str(cache_file(THREE, "minimum")))
    assert sum(strongest.counts.values()) == solved["total"]
    hosted = create_for("strongest", THREE)
    depth = max(strongest.counts.values())
    for secret in THREE.secrets:
        assert len(_play(hosted, THREE, secret, seed=3)) <= depth


def test_tree_is_cached_and_a_damaged_file_is_solved_again() -> None:
    rules = Rules(length=3, alphabet="01234567")
    first = tree_for(rules, "minimum")
    path = cache_file(rules, "minimum")
    assert first is not None and path.name == "moo-3-01234567-minimum.txt.gz"
    variant_trees._TREES.clear()
    path.write_bytes(gzip.compress(b"012: 012\n"))  # not a tree of these rules
    again = tree_for(rules, "minimum")
    assert again is not None and again.counts == first.counts


def test_tree_bot_plays_the_heuristic_until_the_tree_exists(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """A solve that is not ready in time: that match plays entropy and says so."""
    monkeypatch.setattr(variant_trees, "_solve", lambda rules, objective: None)  # never lands
    bot = VariantTree("minimum")
    bot.wait = 0.0
    played = _play(bot, THREE, "987")
    assert "entropy" in bot.note and "still being computed" in bot.note
    assert played[-1] == "987"


@pytest.mark.parametrize("spec", ["moo:5", "moo:6", "moo:4:hex", "moo:3:digits:repeats"])
def test_too_large_falls_back_to_entropy_and_says_so(spec: str) -> None:
    rules = parse_rules_spec(spec)
    assert isinstance(rules, Rules) and not exact_feasible(rules)
    for name in ("minimum", "strongest"):
        note = bot_note(name, rules)
        assert note == fallback_note(name, rules) and "entropy" in note and "too large" in note
        bot = create_for(name, rules)
        secret = random.Random(5).choice(rules.secrets)
        assert _play(bot, rules, secret)[-1] == secret
        assert bot.note == note  # the bot object says it too
    assert bot_note("entropy", rules) == "" and bot_note("minimum", THREE) == ""
    assert bot_note("minimum", DEFAULT_RULES) == ""


def test_bots_for_offers_heuristics_and_trees_on_moo_variants() -> None:
    every = ["adaptive", "entropy", "expected", "first", "larmouth", "minimax", "minimum",
             "parts", "random", "strongest"]
    five = bots_for(parse_rules_spec("moo:5"), every)
    assert "adaptive" not in five and {"minimum", "strongest", "random"} <= set(five)
    assert set(VARIANT_HEURISTICS) <= set(five)
    assert bots_for(DEFAULT_RULES, every) == every
    assert bots_for(parse_rules_spec("mastermind"), every) == ["minimum", "random", "strongest"]


@pytest.mark.parametrize("name", VARIANT_HEURISTICS)
@pytest.mark.parametrize("spec", ["moo:3", "moo:3:digits:repeats", "moo:3:0123456789ABCDEF"])
def test_heuristics_solve_every_secret_of_small_variants(name: str, spec: str) -> None:
    rules = parse_rules_spec(spec)
    assert isinstance(rules, Rules)
    bot = create_for(name, rules)
    worst = 0
    for secret in rules.secrets[:: max(1, len(rules.secrets) // 400)]:
        played = _play(bot, rules, secret, seed=11)
        assert played[-1] == secret
        worst = max(worst, len(played))
    if name != "first":  # the one bot without look-ahead: 15 guesses on 3 of hex happen
        assert worst <= 9


@pytest.mark.parametrize("spec", ["moo:3", "moo:4:01234567", "moo:3:01234567:repeats"])
def test_symmetry_reduction_picks_what_the_full_scan_picks(spec: str) -> None:
    """Scoring one guess per class of untold-apart guesses is exact: along random games, the
    generic path chooses the very guess the full-table scan would."""
    rules = parse_rules_spec(spec)
    assert isinstance(rules, Rules)
    table = table_for(rules)
    rng = random.Random(4)
    for name in ("entropy", "minimax", "parts"):
        bot = create(name, relabel=False)
        assert isinstance(bot, Heuristic)
        for _ in range(15):
            secret = rng.choice(rules.secrets)
            bot.new_match(rules, random.Random(0))
            bot._memo = {}
            while True:
                cand = bot._candidates
                if len(cand) > 2:
                    full = bot._pick(table.partition_counts(cand), len(cand),
                                     table.candidate_mask(cand))
                    assert bot.choose(table, cand) == full
                guess = rng.choice([table.secrets[int(c)] for c in cand])
                response = score(secret, guess)
                bot.observe(guess, response)
                if response == rules.solved:
                    break


def test_canonical_guesses_one_per_class() -> None:
    table = table_for(THREE)
    used = np.zeros(10, dtype=bool)
    first = table.canonical_guesses(used)
    assert [table.guesses[i] for i in first] == ["012"]
    used[[0, 1, 2]] = True
    after = [table.guesses[i] for i in table.canonical_guesses(used)]
    assert "013" in after and "014" not in after and "345" in after and "346" not in after
    assert "210" in after and len(set(after)) == len(after)


def test_response_table_one_column_matches_scores() -> None:
    rules = Rules(length=5, alphabet="0123456789")
    table = table_for(rules)
    cand = np.arange(0, len(table.secrets), 997, dtype=np.intp)
    g = table.guess_index["13579"]
    got = table.against(g, cand)
    want = [table.response_id(score(table.secrets[int(s)], "13579")) for s in cand]
    assert list(got) == want
    counts = table.counts_for(cand, np.array([g], dtype=np.intp))
    assert counts.sum() == len(cand) and counts[0, table.response_id(Response(5, 0))] == 0


def test_moo_bot_prints_the_note_and_prepares_the_tree(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from clients.botrunner import _make_player
    from clients.sdk.messages import parse

    five = argparse.Namespace(rules=parse_rules_spec("moo:5"), cmd=None, strategy="minimum")
    _make_player(five)
    _make_player(five)  # a second connection: the note is printed once
    err = capsys.readouterr().err.splitlines()
    assert err == [f"moo bot: note: {bot_note('minimum', parse_rules_spec('moo:5'))}"]
    three = argparse.Namespace(rules=THREE, cmd=None, strategy="strongest")
    _make_player(three)
    assert capsys.readouterr().err == ""
    assert cache_file(THREE, "strongest").exists() and cache_file(THREE, "minimum").exists()
    announced = parse({"type": "match", "match_id": "m1", "seat": 0, "opponent": "minimum-bot",
                       "config": {}, "bot_note": "minimum plays the entropy heuristic"})
    assert getattr(announced, "bot_note", "") == "minimum plays the entropy heuristic"
