"""Word MOO: both scorings (checked against the 1999 POTM's own examples), the dictionary
built from wamerican, and the dictionary bot."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from bots.dictionary import (
    DEFAULT_SOURCE,
    build_word_list,
    dictionary_file,
    load_words,
    word_list_path,
)
from bots.words import WordBot
from moo.errors import UnknownSymbol, WrongLength
from moo.words import (
    WordRules,
    dictionary_words,
    filter_words,
    score_bulls_cows,
    score_hits_misses,
)


@pytest.fixture(autouse=True)
def _installed_dictionary() -> None:
    """Word MOO's rules get the real list the way the programs do it (no import does it)."""
    from bots.dictionary import install

    install()

# The POTM rules' table for the word SKUNK: guess, hits, misses.
POTM_SKUNK = [
    ("SSSSS", 1, 0), ("AAAAA", 0, 5), ("ABCDE", 0, 5), ("KKKKK", 2, 0), ("SKIPS", 2, 2),
    ("SHARK", 2, 3), ("GUPPY", 0, 4), ("KUSSN", 0, 0), ("SPUNK", 4, 1), ("SKUNS", 4, 0),
    ("SKUNK", 5, 0),
]


@pytest.mark.parametrize(("guess", "hits", "misses"), POTM_SKUNK)
def test_hits_misses_match_the_potm_examples(guess: str, hits: int, misses: int) -> None:
    assert score_hits_misses("SKUNK", guess) == (hits, misses)


def test_bulls_cows_with_repeated_letters() -> None:
    # Each letter counts at most as often as it occurs in both words.
    assert score_bulls_cows("SKUNK", "KKKKK") == (2, 0)
    assert score_bulls_cows("SKUNK", "KUSSN") == (0, 4)  # K, U, S, N; the 2nd S has no partner
    assert score_bulls_cows("SKUNK", "SPUNK") == (4, 0)
    assert score_bulls_cows("SKUNK", "NKSKU") == (1, 4)


def test_bulls_cows_against_independent_rule() -> None:
    rng = random.Random(5)
    for _ in range(3000):
        s = "".join(rng.choice("ABCDE") for _ in range(6))
        g = "".join(rng.choice("ABCDE") for _ in range(6))
        bulls = sum(a == b for a, b in zip(s, g, strict=True))
        common = sum(min(s.count(c), g.count(c)) for c in "ABCDE")
        assert score_bulls_cows(s, g) == (bulls, common - bulls)
        # hits are bulls; misses are the guess letters absent from the secret
        assert score_hits_misses(s, g) == (bulls, sum(c not in s for c in g))


def test_filter_words() -> None:
    raw = ["apple", "Apple's", "naïve", "Zebra", "ZEBRA", "x-ray", " moose ", ""]
    assert filter_words(raw) == ["APPLE", "MOOSE", "ZEBRA"]


def test_build_and_load_from_a_given_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src.txt"
    src.write_text("skunk\nSkunks\nFlynn\nmoose\ncan't\nrésumé\nmoose\nAC\n", encoding="utf-8")
    dest = build_word_list(src, tmp_path / "cache" / "w.txt")
    # a dictionary: only its lower-case entries are words (no names, no abbreviations)
    assert dest.read_text().splitlines()[1:] == ["MOOSE", "SKUNK"]
    # a plain list given on purpose (moo potm --words): every entry of letters counts
    assert load_words(5, source=src) == ("FLYNN", "MOOSE", "SKUNK")
    monkeypatch.setenv("MOO_WORDS_CACHE", str(tmp_path / "x.txt"))
    assert word_list_path() == tmp_path / "x.txt"


def test_dictionary_words_are_the_lower_case_entries() -> None:
    raw = ["bill", "Bill", "Flynn", "AC", "Dr", "naïve", "x-ray", "moose", " skunk "]
    assert dictionary_words(raw) == ["BILL", "MOOSE", "SKUNK"]


def test_cache_of_another_format_or_source_is_rebuilt(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "dict.txt"
    src.write_text("skunk\nFlynn\nmoose\n", encoding="utf-8")
    cache = tmp_path / "words.txt"
    cache.write_text("FLYNN\nMOOSE\nSKUNK\n")  # an older cache: every entry, no header
    monkeypatch.setenv("MOO_WORDS_CACHE", str(cache))
    monkeypatch.setenv("MOO_WORDS_SOURCE", str(src))
    assert dictionary_file() == src
    assert load_words(5) == ("MOOSE", "SKUNK")
    assert str(src) in cache.read_text().splitlines()[0]


def test_importing_the_dictionary_installs_nothing() -> None:
    """The word list is loaded explicitly (bots.dictionary.install), never by an import."""
    code = ("import moo.words, bots.dictionary, bots.words; "
            "assert not moo.words.dictionary_installed(); "
            "bots.dictionary.install(); assert moo.words.dictionary_installed(); print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_missing_source_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="wamerican"):
        build_word_list(tmp_path / "nope", tmp_path / "out.txt")


def test_wamerican_is_built_on_first_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ./dev test installs wamerican; without it this fails rather than skipping.
    assert DEFAULT_SOURCE.is_file(), "install Debian's wamerican (apt-get install wamerican)"
    cache = tmp_path / "words.txt"
    monkeypatch.setenv("MOO_WORDS_CACHE", str(cache))
    words9 = load_words(9)
    assert cache.exists()
    assert len(words9) > 1000
    assert all(len(w) == 9 and w.isascii() and w.isalpha() and w.isupper() for w in words9)
    assert "SKUNK" in load_words(5)
    assert "FLYNN" not in load_words(5)  # wamerican's "Flynn" is a name, not a word
    assert {len(w) for w in load_words()} >= set(range(4, 10))


def test_word_rules_validation() -> None:
    with pytest.raises(ValueError):
        WordRules(3)
    with pytest.raises(ValueError):
        WordRules(10)
    with pytest.raises(ValueError):
        WordRules(5, "points")  # type: ignore[arg-type]
    rules = WordRules(5, "hits_misses", ("SKUNK", "MOOSE"))
    assert rules.check_guess("skunk") == "SKUNK"
    with pytest.raises(UnknownSymbol):  # nothing is trimmed, as for every code of the protocol
        rules.check_guess(" skunk ")
    with pytest.raises(WrongLength):
        rules.check_guess("SKUNKS")
    with pytest.raises(UnknownSymbol):
        rules.check_guess("SK8NK")
    assert rules.score("SKUNK", "GUPPY") == (0, 4)
    assert rules.consistent(["SKUNK", "MOOSE"], "SHARK", (2, 3)) == ["SKUNK"]


@pytest.mark.parametrize("scoring", ["bulls_cows", "hits_misses"])
def test_bot_solves_every_word_of_a_small_list(scoring: str) -> None:
    words = ("SKUNK", "SKUNS", "SPUNK", "STUNK", "TRUNK", "DRUNK", "CHUNK", "FLUNK", "PLUNK",
             "SHARK", "SNARK", "STARK", "SPARK", "KNUTS")
    rules = WordRules(5, scoring, words)  # type: ignore[arg-type]
    bot = WordBot()
    for secret in words:
        bot.new_match(rules, random.Random(1))
        for _ in range(len(words)):
            guess = bot.next_guess()
            answer = rules.score(secret, guess)
            if guess == secret:
                break
            assert guess in words  # the bot only guesses dictionary words
            bot.observe(guess, answer)
        else:
            pytest.fail(f"{secret} not found")


def test_bot_on_nine_letter_dictionary() -> None:
    words = load_words(9)
    rules = WordRules(9, "hits_misses", words)
    bot = WordBot()
    rng = random.Random(3)
    for secret in rng.sample(words, 3):
        bot.new_match(rules, random.Random(4))
        for _ in range(30):
            guess = bot.next_guess()
            if guess == secret:
                break
            bot.observe(guess, rules.score(secret, guess))
        else:
            pytest.fail(f"{secret} not found in 30 guesses")


def test_bot_reports_secret_outside_list() -> None:
    rules = WordRules(5, "bulls_cows", ("SKUNK", "MOOSE", "HOUSE"))
    bot = WordBot()
    bot.new_match(rules, random.Random(0))
    bot.observe("SKUNK", rules.score("ZZZZZ", "SKUNK"))
    with pytest.raises(RuntimeError, match="no dictionary word"):
        bot.next_guess()


@pytest.mark.parametrize("scoring", ["bulls_cows", "hits_misses"])
def test_bot_searches_the_answers_and_widens_to_the_dictionary(scoring: str) -> None:
    """With the system's lists the bot guesses only answers while one fits (so never a word
    the answer list leaves out); a secret outside them (another machine's list) makes it
    carry on with the whole dictionary rather than give up."""
    from bots.dictionary import answers_of_length

    rules = WordRules(5, scoring)  # type: ignore[arg-type]
    answers, words = set(answers_of_length(5)), set(load_words(5))
    outside = sorted(words - answers)
    rng = random.Random(7)
    for secret in [*rng.sample(sorted(answers), 3), *rng.sample(outside, 3)]:
        bot = WordBot()
        bot.new_match(rules, random.Random(2))
        guesses: list[str] = []
        for _ in range(40):
            guesses.append(bot.next_guess())
            if guesses[-1] == secret:
                break
            bot.observe(guesses[-1], rules.score(secret, guesses[-1]))
        else:
            pytest.fail(f"{secret} not found in 40 guesses")
        assert all(g in words for g in guesses)
        if secret in answers:
            assert all(g in answers for g in guesses), guesses
