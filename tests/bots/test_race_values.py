"""bots.solver._race enumerates the race value of every next guess; checked against a brute force.

The round-4 ceiling (bench/adaptive_bound_round4.py) rests on these numbers: h_j(S), the best
doubled race score of a candidate set with j guesses left up to the opponent's, and the vector
of every guess. The brute force below tries every guess at every level with no bound and no
symmetry; the module prunes by capacity and skips guesses that differ only in symbols absent
from the set, so agreeing on sets of real play (parts after 0123 and a second guess) and on
random ones checks both shortcuts.
"""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest

from bench.adaptive_bound_round4 import CODES, SOLVED, response_table
from bots.solver import race

TABLE = response_table()


@pytest.fixture(autouse=True, scope="module")
def loaded() -> None:
    digits = bytes(int(ch) for code in CODES for ch in code)
    race.init(TABLE.tobytes(), len(CODES), SOLVED, 25, 20, digits, 4)


def raw(codes: tuple[int, ...]) -> bytes:
    return np.array(sorted(codes), dtype=np.uint16).tobytes()


def split(s: tuple[int, ...], g: int) -> tuple[int, list[tuple[int, ...]]]:
    row = TABLE[g]
    by: dict[int, list[int]] = {}
    for c in s:
        by.setdefault(int(row[c]), []).append(c)
    hit = 1 if SOLVED in by else 0
    return hit, [tuple(p) for r, p in by.items() if r != SOLVED]


@functools.cache
def brute(s: tuple[int, ...], j: int) -> int:
    """h_j by its definition: every one of the 5040 guesses, every level."""
    if not s:
        return 0
    if j == 1:
        return 1
    best = 0
    for g in range(len(CODES)):
        hit, rest = split(s, g)
        best = max(best, 2 * hit + sum(brute(p, j - 1) for p in rest))
    return best


def brute_vector(s: tuple[int, ...], g: int, horizons: int) -> list[int]:
    hit, rest = split(s, g)
    return [hit] + [2 * hit + sum(brute(p, j - 1) for p in rest) for j in range(2, horizons + 1)]


def real_sets(count: int, seed: int) -> list[tuple[int, ...]]:
    """Parts after 0123 and a random second and third guess, small enough for the brute force."""
    rng = random.Random(seed)
    out: list[tuple[int, ...]] = []
    every = tuple(range(len(CODES)))
    while len(out) < count:
        s = every
        for g in (0, rng.randrange(len(CODES)), rng.randrange(len(CODES))):
            _hit, rest = split(s, g)
            s = rng.choice(rest)
        if 3 <= len(s) <= 6:
            out.append(s)
    return out


@pytest.mark.parametrize("s", [*real_sets(6, 7), tuple(random.Random(3).sample(range(5040), 4))])
def test_h_agrees_with_the_brute_force(s: tuple[int, ...]) -> None:
    for j in (1, 2, 3):
        assert race.value(raw(s), j) == brute(s, j), (s, j)


def test_every_guess_vector_agrees_and_the_front_is_the_undominated_distinct_vectors() -> None:
    s = real_sets(1, 11)[0]
    got = np.frombuffer(race.vectors(raw(s), 4), dtype=np.int32).reshape(len(CODES), 4)
    for g in random.Random(5).sample(range(len(CODES)), 40) + list(s):
        assert got[g].tolist() == brute_vector(s, g, 4)
        assert np.frombuffer(race.vector(raw(s), g, 4), dtype=np.int32).tolist() == got[g].tolist()
    rows = {tuple(r) for r in got.tolist()}
    front = {r for r in rows if not any(o != r and all(a >= b for a, b in zip(o, r, strict=True))
                                         for o in rows)}
    pareto = np.frombuffer(race.pareto(raw(s), 4), dtype=np.int32).reshape(-1, 4)
    assert sorted(map(tuple, pareto.tolist())) == sorted(front)
    # the best of every column is h_j of the whole set (the guess after it is free)
    assert [int(x) for x in got.max(axis=0)] == [race.value(raw(s), j) for j in (1, 2, 3, 4)]


def test_skipping_absent_symbols_changes_no_value() -> None:
    sets = real_sets(4, 23)
    with_symbols = [[race.value(raw(s), j) for j in (2, 3, 4)] for s in sets]
    fronts = [sorted(map(tuple, np.frombuffer(race.pareto(raw(s), 4), np.int32)
                         .reshape(-1, 4).tolist())) for s in sets]
    race.init(TABLE.tobytes(), len(CODES), SOLVED, 25, 20)  # no symbols: every guess tried
    try:
        assert [[race.value(raw(s), j) for j in (2, 3, 4)] for s in sets] == with_symbols
        assert [sorted(map(tuple, np.frombuffer(race.pareto(raw(s), 4), np.int32)
                           .reshape(-1, 4).tolist())) for s in sets] == fronts
    finally:
        digits = bytes(int(ch) for code in CODES for ch in code)
        race.init(TABLE.tobytes(), len(CODES), SOLVED, 25, 20, digits, 4)


def test_bad_sets_and_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="sorted distinct"):
        race.value(np.array([5, 3], dtype=np.uint16).tobytes(), 2)
    with pytest.raises(ValueError, match="uint16"):
        race.value(b"\x01", 2)
    with pytest.raises(ValueError, match="out of range"):
        race.value(raw((1, 2)), 0)
    with pytest.raises(ValueError, match="bad table"):
        race.init(b"\x00" * 10, 5040, SOLVED, 25)
