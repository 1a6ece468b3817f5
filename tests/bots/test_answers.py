"""Word MOO's answer lists (bots/answers.py, bots/dictionary.py): every answer of every length
checked against the tools themselves, read here independently of the code under test:
wamerican's own file, wordfreq's frequency, better-profanity's list and check, wordfilter's list
as its own class loads it and badwords-py's own dictionary lookup; then the rule on a small
made-up dictionary, the stems, the cache and ``moo words``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from badwords import ProfanityFilter
from better_profanity import profanity
from better_profanity.utils import get_complete_path_of_file, read_wordlist
from wordfilter import Wordfilter
from wordfreq import zipf_frequency

from bots.answers import (
    FLOOR,
    WORD_LISTS,
    answer_words,
    build_answers,
    cached_answers,
    header,
    is_offensive,
    listed_words,
    stems,
    tools,
)
from bots.dictionary import DEFAULT_SOURCE, load_answers, load_words
from moo.words import MAX_LENGTH, MIN_LENGTH

LENGTHS = range(MIN_LENGTH, MAX_LENGTH + 1)


@cache
def _entries() -> tuple[frozenset[str], frozenset[str]]:
    """wamerican's entries of letters a-z: (the lower-case ones, those that exist only with a
    capital: proper names and abbreviations such as Flynn or AC), upper-cased."""
    assert DEFAULT_SOURCE.is_file(), "install Debian's wamerican (apt-get install wamerican)"
    lines = [x.strip() for x in DEFAULT_SOURCE.read_text(encoding="utf-8").splitlines()]
    plain = [w for w in lines if w.isascii() and w.isalpha()]
    lower = frozenset(w.upper() for w in plain if w.islower())
    return lower, frozenset(w.upper() for w in plain if not w.islower()) - lower


@cache
def _listed() -> frozenset[str]:
    """better-profanity's own word list, as the package ships it."""
    return frozenset(w.strip().lower()
                     for w in read_wordlist(get_complete_path_of_file("profanity_wordlist.txt")))


@cache
def _wordfilter() -> frozenset[str]:
    """wordfilter's list, as the package's own class loads it."""
    return frozenset(w.lower() for w in Wordfilter().blacklist)


@cache
def _badwords() -> ProfanityFilter:
    """badwords-py's English dictionary, compiled into its extension, asked word by word."""
    found = ProfanityFilter()
    found.init(languages=["en"])
    return found


def _on_a_list(low: str) -> list[str]:
    """The sources that list ``low`` or a word it is a form of (checked by each package's own
    means where it has one), e.g. ``["wordfilter"]``; empty for a word that hurts nobody."""
    forms = (low, *stems(low))
    on = []
    if profanity.contains_profanity(low) or any(f in _listed() for f in forms):
        on.append("better-profanity")
    if any(f in _wordfilter() for f in forms):
        on.append("wordfilter")
    if any(_badwords().contains_word(f) for f in forms):
        on.append("badwords-py")
    return on


@pytest.mark.parametrize("n", LENGTHS)
def test_every_answer_is_common_known_and_hurts_nobody(n: int) -> None:
    """The issue's test: no answer is offensive (on no source's list: better-profanity's,
    wordfilter's, badwords-py's, nor a form of a word on one), each is above the frequency
    floor, a lower-case word of the dictionary (no name, no abbreviation), letters only; and
    the list is a real subset of the guesses."""
    answers = load_answers(n)
    lower, capital_only = _entries()
    assert len(answers) >= 1000, f"only {len(answers)} answers of {n} letters"
    assert list(answers) == sorted(set(answers))
    guesses = set(load_words(n))
    assert set(answers) < guesses
    for word in answers:
        low = word.lower()
        assert len(word) == n and re.fullmatch("[A-Z]+", word), word
        assert word in lower and word not in capital_only, word
        assert _on_a_list(low) == [], word
        assert zipf_frequency(low, "en") >= FLOOR, word
        assert set(low) & set("aeiouy"), word  # an abbreviation (tbsp) has no vowel
    # what was left out is exactly what the rule leaves out: nothing else went missing
    kept = set(answers)
    for word in guesses - kept:
        low = word.lower()
        assert (zipf_frequency(low, "en") < FLOOR or is_offensive(low)
                or not set(low) & set("aeiouy")
                or re.fullmatch("[ivxlcdm]+", low)), word


def test_the_offensive_words_of_the_dictionary_are_guesses_never_answers() -> None:
    """Words of wamerican that better-profanity lists, at every frequency: still in the
    dictionary (so a guess), never an answer; the common ones are what the issue found."""
    listed = _listed()
    for n in LENGTHS:
        words = {w for w in load_words(n) if w.lower() in listed}
        assert words, n  # wamerican has such words at every length: the test checks some
        assert not words & set(load_answers(n)), n
    common = [w for w in load_words(5) if w.lower() in listed
              and zipf_frequency(w.lower(), "en") >= FLOOR]
    assert len(common) >= 20  # frequent enough to be drawn before this list existed


def test_each_source_is_read_as_its_package_has_it() -> None:
    """The lists the rule reads from the packages' files are the packages' own: wordfilter's
    as its class loads it, and every entry of badwords-py's file is in its compiled
    dictionary; each names the package it comes from in the cache header (``tools``)."""
    assert listed_words("wordfilter") == _wordfilter()
    entries = listed_words("badwords-py")
    assert len(entries) >= 500
    assert all(_badwords().contains_word(w) for w in entries)
    assert set(WORD_LISTS) <= set(tools())


@pytest.mark.parametrize("package", sorted(WORD_LISTS))
def test_each_further_source_keeps_out_words_better_profanity_lets_through(package: str) -> None:
    """Each list added beside better-profanity's matters: it names common words of the
    dictionary that better-profanity does not know, and none of them is an answer."""
    listed = listed_words(package)
    caught = [w for n in LENGTHS for w in load_words(n)
              if w.lower() in listed and zipf_frequency(w.lower(), "en") >= FLOOR
              and "better-profanity" not in _on_a_list(w.lower())]
    assert caught, package
    for word in caught:
        assert word not in load_answers(len(word)), word


#: Slurs and vulgar words named in docs/variants.md, the first six unknown to better-profanity.
NAMED = ["gypsy", "gypsies", "bugger", "squaw", "dago", "darkie", "spic", "wop", "coon", "honky",
         "wetback"]


@pytest.mark.parametrize("word", NAMED)
def test_named_slurs_are_never_answers(word: str) -> None:
    """Each is offensive to the rule and no answer (``gypsy``, ``gypsies`` and ``bugger`` were
    answers with better-profanity alone; ``gypsies`` is caught as the plural of ``gypsy``)."""
    assert is_offensive(word)
    assert word.upper() not in load_answers(len(word))


def test_better_profanity_alone_lacks_some_named_slurs() -> None:
    """Why the further lists: better-profanity 0.7.0 knows none of these six."""
    for word in NAMED[:6]:
        assert not profanity.contains_profanity(word) and word not in _listed(), word
        assert _on_a_list(word) != [], word


def test_the_slurs_found_in_the_answers_are_common_dictionary_words() -> None:
    """Why the test above has teeth: ``gypsy`` and ``bugger`` are lower-case words of the
    dictionary above the frequency floor, so only a list keeps them out."""
    for word in ("gypsy", "gypsies", "bugger"):
        assert word.upper() in load_words(len(word))
        assert zipf_frequency(word, "en") >= FLOOR


def test_the_rule_on_a_made_up_dictionary() -> None:
    """Each filter alone leaves a word out; the order of the lines does not matter."""
    lines = ["house", "House", "Flynn", "tbsp", "xiii", "rare", "bad", "bads", "moose", "can't",
             "zebra", "AC", "naïve"]
    freq = {"house": 6.0, "flynn": 5.0, "tbsp": 4.0, "xiii": 4.0, "rare": 1.0, "bad": 5.0,
            "bads": 5.0, "moose": 3.5, "zebra": 3.0, "ac": 5.0, "naïve": 5.0}

    def offensive(w: str) -> bool:
        return w == "bad" or "bad" in stems(w)

    got = answer_words(lines, lambda w: freq.get(w, 0.0), offensive)
    assert got == ["HOUSE", "MOOSE", "ZEBRA"]
    assert answer_words(reversed(lines), lambda w: freq.get(w, 0.0), offensive) == got
    assert answer_words(lines, lambda w: freq.get(w, 0.0), offensive, floor=3.01) == [
        "HOUSE", "MOOSE"]


@pytest.mark.parametrize(("word", "stem"), [
    ("cats", "cat"), ("boxes", "box"), ("hoping", "hope"), ("humming", "hum"),
    ("baked", "bake"), ("tamer", "tame"), ("dirtiest", "dirt"), ("sweetly", "sweet"),
    ("gypsies", "gypsy"), ("bullied", "bully"), ("dirtiest", "dirty"),
])
def test_stems(word: str, stem: str) -> None:
    assert stem in stems(word)


def test_stems_keep_three_letters() -> None:
    assert stems("bus") == [] and "ca" not in stems("cats")


def test_offensive_words_and_their_forms() -> None:
    """Any word on the package's list (taken from it, not typed here) is offensive, and so
    is its plural; a common harmless word is not."""
    word = min(w for w in _listed() if w.isalpha() and len(w) >= 4)
    assert is_offensive(word) and is_offensive(word + "s") and is_offensive(word + "ed")
    assert not is_offensive("house") and not is_offensive("garden")


def test_the_cache_is_keyed_by_source_tools_and_floor(tmp_path: Path) -> None:
    src = tmp_path / "dict.txt"
    src.write_text("house\nHouse\nFlynn\ngarden\nxysti\n", encoding="utf-8")
    dest = tmp_path / "cache" / "answers.txt"
    words = build_answers(src, dest)
    assert words == ("GARDEN", "HOUSE")  # xysti: too rare
    assert dest.read_text(encoding="utf-8").splitlines()[0] == header(src)
    assert all(f"{k}={v}" in header(src) for k, v in tools().items())
    assert f"floor={FLOOR}" in header(src)
    assert cached_answers(dest, src) == words
    lines = dest.read_text(encoding="utf-8").splitlines()
    dest.write_text("\n".join([lines[0].replace("floor=", "floor=9"), *lines[1:]]) + "\n",
                    encoding="utf-8")
    assert cached_answers(dest, src) is None  # another floor or tool version: derived again
    assert cached_answers(tmp_path / "missing.txt", src) is None


def test_answers_follow_the_dictionary_in_use(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``$MOO_WORDS_SOURCE`` and the caches in a temporary folder: the answers are derived
    from that file, cached, and read back the same."""
    import bots.dictionary

    src = tmp_path / "dict.txt"
    src.write_text("house\ngarden\nmoose\nxysti\nFlynn\n", encoding="utf-8")
    monkeypatch.setenv("MOO_WORDS_SOURCE", str(src))
    monkeypatch.setenv("MOO_WORDS_CACHE", str(tmp_path / "words.txt"))
    assert bots.dictionary.answers_path() == tmp_path / "answers.txt"
    monkeypatch.setenv("MOO_ANSWERS_CACHE", str(tmp_path / "a.txt"))
    assert load_answers(5) == ("HOUSE", "MOOSE")
    assert load_answers() == ("GARDEN", "HOUSE", "MOOSE")
    assert (tmp_path / "a.txt").read_text(encoding="utf-8").startswith(header(src))


def _moo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", "words", *args], capture_output=True,
                          text=True, env=env)


def test_moo_words_prints_either_list() -> None:
    answers = _moo("--length", "6", "--answers")
    assert answers.returncode == 0 and answers.stderr == ""
    assert answers.stdout.splitlines() == list(load_answers(6))
    guesses = _moo("--length", "6")
    assert guesses.returncode == 0 and guesses.stdout.splitlines() == list(load_words(6))
    assert _moo().stdout.splitlines() == list(load_words(5))  # length 5 by default


def test_moo_words_json() -> None:
    done = _moo("--length", "4", "--answers", "--json")
    assert done.returncode == 0
    data = json.loads(done.stdout)
    assert data == {"length": 4, "list": "answers", "count": len(load_answers(4)),
                    "dictionary": str(DEFAULT_SOURCE), "floor": FLOOR, "tools": tools(),
                    "words": list(load_answers(4))}
    data = json.loads(_moo("--length", "4", "--json").stdout)
    assert data["list"] == "guesses" and data["words"] == list(load_words(4))
    assert data["floor"] is None and data["tools"] is None


@pytest.mark.parametrize(("args", "line"), [
    (["--length", "3"], "moo words: --length takes 4-9 letters, got 3\n"),
    (["--length", "10", "--answers"], "moo words: --length takes 4-9 letters, got 10\n"),
    (["--length", "five"], "moo words: argument --length: invalid int value: 'five' "
                           "(see 'moo words --help')\n"),
    (["--colour"], "moo words: unrecognized arguments: --colour (see 'moo words --help')\n"),
])
def test_moo_words_mistakes_are_one_line(args: list[str], line: str) -> None:
    done = _moo(*args)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", line)


def test_moo_words_of_a_length_the_list_lacks_is_one_line(tmp_path: Path) -> None:
    """A dictionary without words of that length (``$MOO_WORDS_SOURCE``): one line, status 1."""
    short = tmp_path / "short.txt"
    short.write_text("house\nmoose\nxysti\n", encoding="utf-8")
    env = {**os.environ, "MOO_WORDS_SOURCE": str(short), "MOO_WORDS_CACHE": str(tmp_path / "w")}
    done = _moo("--length", "9", "--answers", env=env)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"moo words: the dictionary ({short}) has no 9-letter answers\n"
    done = _moo("--length", "9", env=env)
    assert done.stderr == f"moo words: the dictionary ({short}) has no 9-letter words\n"
    assert _moo("--length", "5", env=env).stdout == "HOUSE\nMOOSE\nXYSTI\n"
    assert _moo("--length", "5", "--answers", env=env).stdout == "HOUSE\nMOOSE\n"


def test_an_unwritable_cache_still_gives_the_answers(tmp_path: Path) -> None:
    """Where the cache cannot be written (here its folder is a file: root ignores file
    modes), the answers are derived and returned all the same."""
    src = tmp_path / "dict.txt"
    src.write_text("house\ngarden\n", encoding="utf-8")
    (tmp_path / "blocked").write_text("", encoding="utf-8")
    dest = tmp_path / "blocked" / "answers.txt"
    assert build_answers(src, dest) == ("GARDEN", "HOUSE")
    assert not dest.exists() and cached_answers(dest, src) is None
