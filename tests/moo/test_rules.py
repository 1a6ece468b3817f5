"""Exhaustive checks of the rules: every (secret, guess) pair of the standard game.

The independent formulation is the multiset one (cows = common symbols - bulls), vectorised
with numpy, which shares no code with ``moo.rules.score``'s per-position loop.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import numpy as np
import pytest

from moo.errors import InvalidCode, RepeatedSymbol, UnknownSymbol, WrongLength
from moo.rules import DEFAULT_RULES, Response, Rules, format_response, parse_response, score


def test_code_space_sizes() -> None:
    assert len(DEFAULT_RULES.secrets) == 5040
    assert DEFAULT_RULES.secrets[0] == "0123" and DEFAULT_RULES.secrets[-1] == "9876"
    assert list(DEFAULT_RULES.secrets) == sorted(DEFAULT_RULES.secrets)
    assert len(Rules(length=3).secrets) == 720
    assert len(Rules(alphabet="012345").secrets) == 360
    assert len(Rules(alphabet="0123456").secrets) == 840


def numpy_reference(rules: Rules, guesses: list[str]) -> np.ndarray:
    """Bulls*10 + cows for every (guess, secret), vectorised: shares no code with ``score``."""
    idx = {ch: i for i, ch in enumerate(rules.alphabet)}
    sec = np.array([[idx[c] for c in s] for s in rules.secrets], dtype=np.int8)
    gue = np.array([[idx[c] for c in g] for g in guesses], dtype=np.int8)
    bulls = (gue[:, None, :] == sec[None, :, :]).sum(-1)
    common = (gue[:, None, :, None] == sec[None, :, None, :]).any(-1).sum(-1)
    return np.asarray(bulls * 10 + (common - bulls))


def check_against_reference(rules: Rules, guesses: list[str]) -> Counter[Response]:
    ref = numpy_reference(rules, guesses)
    seen: Counter[Response] = Counter()
    for gi, g in enumerate(guesses):
        row = ref[gi]
        for si, s in enumerate(rules.secrets):
            got = score(s, g)
            assert got.bulls * 10 + got.cows == row[si], (s, g)
            seen[got] += 1
    return seen


def test_every_pair_of_the_3_digit_game_matches_reference() -> None:
    rules = Rules(length=3)
    seen = check_against_reference(rules, list(rules.secrets))  # all 720 x 720
    assert set(seen) == set(rules.responses)


def test_4_digit_game_against_reference_on_a_large_sample() -> None:
    """All 5040 secrets against 400 guesses (2 016 000 pairs): every guess shape is covered.

    The full 5040 x 5040 product costs minutes in pure Python; the sample always includes the
    first and last codes and a fixed-seed random draw, and every response must occur.
    """
    rules = DEFAULT_RULES
    rng = random.Random(1996)
    guesses = [rules.secrets[0], rules.secrets[-1], *rng.sample(rules.secrets, 398)]
    seen = check_against_reference(rules, guesses)
    assert set(seen) == set(rules.responses)
    assert len(rules.responses) == 14
    assert seen[Response(4, 0)] == len(guesses)  # each guess solves exactly one secret


def test_partition_after_0123_matches_tanaka_table_3() -> None:
    sizes = Counter(format_response(score(s, "0123")) for s in DEFAULT_RULES.secrets)
    assert sizes == {
        "4B": 1, "2B2C": 6, "1B3C": 8, "4C": 9, "3B": 24, "2B1C": 72, "2B": 180,
        "1B2C": 216, "3C": 264, "0C": 360, "1B": 480, "1B1C": 720, "2C": 1260, "1C": 1440,
    }


@pytest.mark.parametrize(
    "rules",
    [Rules(length=3), Rules(alphabet="012345"), Rules(length=5, alphabet="0123456789")],
)
def test_responses_are_exactly_the_reachable_ones(rules: Rules) -> None:
    reached = {score(s, g) for s, g in itertools.product(rules.secrets[:20], rules.secrets)}
    assert reached == set(rules.responses)


def test_1971_repeated_digit_rule() -> None:
    rules = Rules(repeats_in_guess=True)
    assert len(rules.guesses) == 10_000
    # The DECUS write-up: each copy of a guessed digit is awarded individually.
    assert score("1234", "5544") == Response(1, 1)
    assert score("4321", "4400") == Response(1, 1)
    assert score("0123", "0012") == Response(1, 3)
    assert rules.check_guess("5544") == "5544"
    with pytest.raises(RepeatedSymbol):
        rules.check_secret("5544")


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("01234", WrongLength, "expected 4 digits, got 5"),
        ("012", WrongLength, "expected 4 digits, got 3"),
        ("0012", RepeatedSymbol, "digits must be distinct"),
        ("01a3", UnknownSymbol, "only digits 0-9"),
        ("-123", UnknownSymbol, "only digits 0-9"),
        ("", WrongLength, "expected 4 digits, got 0"),
        (1234, UnknownSymbol, "got int"),
        (None, UnknownSymbol, "got NoneType"),
    ],
)
def test_validation_says_exactly_what_is_wrong(text: object, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        DEFAULT_RULES.check_guess(text)
    assert message in str(info.value)
    assert isinstance(info.value, InvalidCode)


@pytest.mark.parametrize("text", [" 123", "0123 ", "\t0123", "0123\n", "\u00a0123", "12\u20033"])
def test_whitespace_is_refused_never_stripped(text: str) -> None:
    """A code with whitespace is refused (never counted), naming the character that was sent."""
    with pytest.raises(UnknownSymbol) as info:
        DEFAULT_RULES.check_guess(text)
    bad = next(ch for ch in text if ch not in "0123456789")
    assert repr(bad) in str(info.value)


def test_wrong_length_counts_the_characters_sent() -> None:
    with pytest.raises(WrongLength, match="expected 4 digits, got 5"):
        DEFAULT_RULES.check_guess("01234")


def test_validation_accepts_and_normalises() -> None:
    letters = Rules(alphabet="ABCDEF")
    assert letters.check_secret("abcd") == "ABCD"
    with pytest.raises(UnknownSymbol, match="only letters A-F"):
        letters.check_secret("ABCG")


def test_the_fast_path_accepts_exactly_the_legal_codes_and_shares_them() -> None:
    """Valid codes are looked up, not re-checked: the table must agree with the full check."""
    codes = {f"{i:04d}" for i in range(10_000)}
    legal = {c for c in codes if len(set(c)) == 4}
    for code in codes:
        fresh = "".join(list(code))  # a new string object, as a decoder would make it
        if code in legal:
            assert DEFAULT_RULES.check_guess(fresh) is DEFAULT_RULES.check_secret(code)
        else:
            with pytest.raises(RepeatedSymbol):
                DEFAULT_RULES.check_guess(fresh)
    repeats = Rules(repeats_in_guess=True)
    assert repeats.check_guess("5544") == "5544"
    with pytest.raises(RepeatedSymbol):
        repeats.check_secret("5544")
    big = Rules(length=6, repeats_in_guess=True)  # 10^6 guesses: checked, not tabled
    assert big.check_guess("555444") == "555444"
    with pytest.raises(RepeatedSymbol):
        big.check_secret("555444")


def test_response_notation_round_trips() -> None:
    for r in DEFAULT_RULES.responses:
        assert parse_response(format_response(r)) == r
    assert format_response((0, 0)) == "0C"
    assert format_response((2, 1)) == "2B1C"
    assert Response(2, 1).teletype == "BB,C"
    assert Response(0, 0).teletype == ","
    with pytest.raises(ValueError):
        parse_response("xyz")


def test_bad_rules_are_refused() -> None:
    with pytest.raises(ValueError):
        Rules(length=7)
    with pytest.raises(ValueError):
        Rules(alphabet="0012")
    with pytest.raises(ValueError):
        Rules(length=5, alphabet="0123")
