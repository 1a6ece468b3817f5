"""The shared response table against moo.rules.score, and its partition counts."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

import bots.table as table_mod
from bots.table import ResponseTable, table_for
from moo.rules import DEFAULT_RULES, Rules, format_response, score


def check_rows(table: ResponseTable, rules: Rules, secrets: list[int]) -> None:
    rows = table.rows(np.array(secrets, dtype=np.intp))
    for i, s in enumerate(secrets):
        for g, guess in enumerate(rules.guesses):
            assert table.responses[rows[i, g]] == score(rules.secrets[s], guess), (s, guess)


def test_every_pair_of_the_3_of_10_game() -> None:
    rules = Rules(length=3)
    table = ResponseTable(rules)
    check_rows(table, rules, list(range(len(rules.secrets))))


def test_standard_table_on_sampled_secrets_against_every_guess() -> None:
    rules = DEFAULT_RULES
    table = table_for(rules)
    rng = random.Random(7)
    check_rows(table, rules, [0, 5039, *rng.sample(range(5040), 30)])
    assert table.responses == rules.responses


def test_repeated_symbol_guesses_use_the_1971_rule() -> None:
    rules = Rules(length=3, repeats_in_guess=True)
    table = ResponseTable(rules)
    assert len(table.guesses) == 1000
    check_rows(table, rules, list(range(0, 720, 7)))
    assert table.responses[table.rows(np.array([rules.secrets.index("012")]))[
        0, table.guess_index["002"]]] == score("012", "002")


def test_rows_computed_on_demand_match_the_stored_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    rules = Rules(length=3, alphabet="0123456")
    full = ResponseTable(rules)
    monkeypatch.setattr(table_mod, "FULL_MATRIX_LIMIT", 0)
    lazy = ResponseTable(rules)
    assert lazy._by_secret is None
    cand = np.arange(0, len(rules.secrets), 3, dtype=np.intp)
    assert (lazy.rows(cand) == full.rows(cand)).all()
    assert (lazy.partition_counts(cand) == full.partition_counts(cand)).all()
    assert (lazy.filter(cand, 5, 2) == full.filter(cand, 5, 2)).all()


def test_partition_of_all_secrets_by_0123_is_tanaka_table_3() -> None:
    table = table_for(DEFAULT_RULES)
    counts = table.partition_counts(table.all_secrets())
    row = counts[table.guess_index["0123"]]
    sizes = {format_response(r): int(n) for r, n in zip(table.responses, row, strict=True)}
    assert sizes == {
        "4B": 1, "2B2C": 6, "1B3C": 8, "4C": 9, "3B": 24, "2B1C": 72, "2B": 180,
        "1B2C": 216, "3C": 264, "0C": 360, "1B": 480, "1B1C": 720, "2C": 1260, "1C": 1440,
    }
    # every guess splits the 5040 secrets the same way (they are all equivalent at the start)
    assert (np.sort(counts, axis=1) == np.sort(row)).all()


def test_partition_counts_of_a_subset_against_brute_force() -> None:
    rules = DEFAULT_RULES
    table = table_for(rules)
    rng = random.Random(3)
    cand = np.array(sorted(rng.sample(range(5040), 40)), dtype=np.intp)
    counts = table.partition_counts(cand)
    for guess in rng.sample(rules.guesses, 25):
        want = Counter(score(rules.secrets[c], guess) for c in cand)
        got = counts[table.guess_index[guess]]
        assert {r: int(n) for r, n in zip(table.responses, got, strict=True) if n} == want
    mask = table.candidate_mask(cand)
    assert mask.sum() == 40 and all(mask[table.secret_as_guess[c]] for c in cand)


def test_table_is_built_once_per_rules() -> None:
    assert table_for(DEFAULT_RULES) is table_for(Rules())
    assert table_for(Rules(length=3)) is not table_for(DEFAULT_RULES)


def test_without_repeats_the_matrix_is_symmetric() -> None:
    """``against`` reads rows as guesses: valid only because score(a, b) == score(b, a)."""
    table = table_for(DEFAULT_RULES)
    m = table.rows(table.all_secrets())
    assert (m == m.T).all()
    rules = Rules(length=3, repeats_in_guess=True)
    rep = ResponseTable(rules)
    cand = rep.all_secrets()
    g = rep.guess_index["002"]
    assert (rep.against(g, cand) == rep.rows(cand)[:, g]).all()
