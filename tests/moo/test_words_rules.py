"""Word MOO as a variant (moo/variants.py, moo/words.py, moo/match.py): the spec and the
protocol object, their refusals, the injected dictionary, and a match played to the end in
both scorings, replayed from its log."""

from __future__ import annotations

import pytest

from bots.dictionary import DEFAULT_SOURCE, answers_of_length, words_of_length
from moo.errors import BadRules, UnknownSymbol, WrongLength
from moo.match import Match, MatchConfig
from moo.variants import (
    is_words,
    parse_rules,
    parse_rules_spec,
    rules_from_dict,
    rules_label,
    rules_spec,
)
from moo.words import LETTERS, NoDictionary, NotAWord, WordRules, set_dictionary


@pytest.fixture(autouse=True)
def _installed_dictionary() -> None:
    """Word MOO's rules get the real list the way the programs do it (no import does it)."""
    from bots.dictionary import install

    install()

SMALL = ("MOOSE", "SKUNK", "SPUNK", "TRUNK")


@pytest.mark.parametrize(
    ("spec", "expected", "canonical"),
    [
        ("words", WordRules(5), "words:5:bulls_cows"),
        ("words:5", WordRules(5), "words:5:bulls_cows"),
        ("WORDS:7:hits_misses", WordRules(7, "hits_misses"), "words:7:hits_misses"),
        ("words:4:Bulls_Cows", WordRules(4), "words:4:bulls_cows"),
        ("words::hits_misses", WordRules(5, "hits_misses"), "words:5:hits_misses"),
        ("words:9", WordRules(9), "words:9:bulls_cows"),
    ],
)
def test_word_specs(spec: str, expected: WordRules, canonical: str) -> None:
    rules = parse_rules_spec(spec)
    assert rules == expected and is_words(rules)
    assert rules_spec(rules) == canonical
    assert parse_rules_spec(canonical) == rules
    assert rules_from_dict(rules.to_dict()) == rules
    assert parse_rules(rules.to_dict()) == rules  # the canonical object is accepted back


def test_canonical_object_and_labels() -> None:
    assert WordRules(6, "hits_misses").to_dict() == {
        "game": "words", "length": 6, "scoring": "hits_misses", "alphabet": LETTERS,
        "repeats_in_guess": True,
    }
    assert rules_label(WordRules(5)) == "Word MOO 5 letters"
    assert rules_label(WordRules(7, "hits_misses")) == "Word MOO 7 letters (hits and misses)"
    assert parse_rules({"game": "words"}) == WordRules(5)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("words:3", "word length must be 4-9 letters, got 3"),
        ("words:10", "word length must be 4-9 letters, got 10"),
        ("words:five", "length must be a number"),
        ("words:5:points", "scoring must be 'bulls_cows' or 'hits_misses', got 'points'"),
        ("words:5:hits_misses:x", "too many ':' parts"),
    ],
)
def test_bad_word_specs(spec: str, message: str) -> None:
    with pytest.raises(BadRules, match=message):
        parse_rules_spec(spec)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"game": "words", "length": 12}, "word length must be 4-9 letters, got 12"),
        ({"game": "words", "length": "5"}, "length must be an integer"),
        ({"game": "words", "scoring": 3}, "scoring must be 'bulls_cows' or 'hits_misses'"),
        ({"game": "words", "alphabet": "ABC"}, "alphabet is always the letters A-Z"),
        ({"game": "words", "repeats_in_guess": False}, "leave repeats_in_guess out"),
        ({"game": "words", "colour": 1}, "unknown rules field 'colour' for word MOO"),
        ({"game": "moo", "scoring": "hits_misses"}, "scoring is word MOO's"),
    ],
)
def test_bad_word_objects(data: dict[str, object], message: str) -> None:
    with pytest.raises(BadRules, match=message):
        parse_rules(data)


def test_secret_must_be_a_word_guess_any_letters() -> None:
    rules = WordRules(5, words=SMALL)
    assert rules.check_secret("skunk") == "SKUNK"
    with pytest.raises(NotAWord, match="ZZZZZ is not a 5-letter word of the dictionary") as err:
        rules.check_secret("zzzzz")
    assert err.value.code == "not_a_word"
    assert rules.check_guess("zzzzz") == "ZZZZZ"  # a guess need not be a word
    with pytest.raises(WrongLength):
        rules.check_secret("SKUNKS")
    with pytest.raises(UnknownSymbol):
        rules.check_guess("SK NK")
    assert rules.solved == (5, 0)


def test_the_dictionary_is_injected_not_read_by_the_rules() -> None:
    assert DEFAULT_SOURCE.is_file(), "install Debian's wamerican (apt-get install wamerican)"
    try:
        set_dictionary(None)
        with pytest.raises(NoDictionary):
            WordRules(5).check_secret("SKUNK")
        assert WordRules(5, words=SMALL).check_secret("MOOSE") == "MOOSE"
        set_dictionary(lambda n: SMALL if n == 5 else ())
        assert WordRules(5).secrets == SMALL
        with pytest.raises(NotAWord):
            WordRules(5).check_secret("QUICK")
    finally:
        set_dictionary(words_of_length, answers=answers_of_length)
    assert WordRules(5).check_secret("QUICK") == "QUICK"
    assert len(WordRules(5).guesses) > 3000


def test_secrets_are_the_answers_guesses_the_whole_dictionary() -> None:
    """As in Wordle: a secret must be one of the injected answers; every dictionary word (and
    any letters) is still a guess; a caller's own ``words`` serve as both lists."""
    every = ("MOOSE", "SKUNK", "SPUNK", "TRUNK", "XYSTI")
    try:
        set_dictionary(lambda n: every if n == 5 else (),
                       answers=lambda n: SMALL if n == 5 else ())
        rules = WordRules(5)
        assert rules.secrets == SMALL and rules.guesses == every == rules.dictionary
        assert rules.is_word("XYSTI") and not rules.is_answer("XYSTI")
        with pytest.raises(NotAWord, match="XYSTI is not one of the 5-letter answer words "
                           r"\(common words; moo words --length 5 --answers lists them\)"):
            rules.check_secret("xysti")
        with pytest.raises(NotAWord, match="ZZZZZ is not a 5-letter word of the dictionary"):
            rules.check_secret("zzzzz")
        assert rules.check_guess("xysti") == "XYSTI"
        assert rules.check_secret("trunk") == "TRUNK"
        assert WordRules(5, words=every).check_secret("XYSTI") == "XYSTI"  # a contest's list
    finally:
        set_dictionary(words_of_length, answers=answers_of_length)
    real = WordRules(5)
    assert set(real.secrets) < set(real.guesses)


@pytest.mark.parametrize("scoring", ["bulls_cows", "hits_misses"])
def test_match_plays_words_and_replays(scoring: str) -> None:
    rules = WordRules(5, scoring)  # type: ignore[arg-type]
    config = MatchConfig(rules=rules, secret_ms=None)
    assert MatchConfig.from_dict(config.to_dict()) == config
    match, _ = Match.create("w1", ("a", "b"), config, 0)
    with pytest.raises(NotAWord):
        match.set_secret(0, "XQZZY", "s", 0)
    assert match.seats[0].secret is None  # refused: nothing changed
    match.set_secret(0, "skunk", "s", 0)
    match.set_secret(1, "MOOSE", "s", 0)
    events = match.guess(0, "GUPPY", 1)  # not a word: still a guess
    expected = (0, 0) if scoring == "bulls_cows" else (0, 5)  # MOOSE has none of G, U, P, Y
    events += match.guess(1, "shark", 1)
    assert events[0]["guess"] == "GUPPY"
    assert (events[0]["bulls"], events[0]["cows"]) == expected
    round_ = next(e for e in events if e["kind"] == "round")
    skunk_shark = (2, 0) if scoring == "bulls_cows" else (2, 3)  # the POTM's own table
    assert round_["results"][1] == ["SHARK", *skunk_shark]
    match.guess(0, "MOOSE", 2)
    events = match.guess(1, "SPUNK", 2)
    assert events[-1]["kind"] == "finished" and events[-1]["winner"] == 0
    replayed = Match.replay(match.events)
    assert replayed.result == match.result
    assert replayed.config.rules == rules
