"""Word MOO's answer lists: the rule that picks the secrets, common words that hurt nobody.

Why a second list: the dictionary (:mod:`bots.dictionary`, Debian's ``wamerican``) is every
lower-case word of the list, slurs, vulgar words and words nobody has heard of included. A
secret drawn from it may be a slur, and one nobody knows is no fun to find. As Wordle does,
the game draws its secrets from a short list of **answers** and accepts far more as guesses.

Nothing is typed by hand and nothing outside the project is copied into it: each answer list is
derived, deterministically, from three installed sources when it is first needed:

1. the **dictionary**'s lower-case entries (:func:`moo.words.dictionary_words`): a word that
   wamerican has only capitalised (``Flynn``, ``AC``) is a proper name or an abbreviation;
2. **common**: its English frequency in the ``wordfreq`` package (its data ships inside the
   package) is at least :data:`FLOOR` on the Zipf scale (log10 of occurrences per billion
   words: 3.0 is once per million words), the same floor for every length;
3. **nobody is hurt**: neither the word nor what it is inflected from (``-s``, ``-ed``,
   ``-ing``...: :func:`stems`) is on any of three maintained lists: ``better-profanity``'s
   (the word itself is also checked with that package's own ``contains_profanity``, so its
   spelling variants count too), ``wordfilter``'s (a list of slurs made for text generators:
   ``gypsy``, ``squaw``, ``spic``, ``dago``, which better-profanity lacks) and
   ``badwords-py``'s English list (``bugger``, ``honky``, ``darkie``): :data:`WORD_LISTS`.
   One list is never complete, and what one misses another often has; their union is taken
   whole, with no word of it typed or taken out here;
4. and it is a word to find, not an abbreviation or a number: it has a vowel (a, e, i, o, u
   or y; the few lower-case abbreviations of the list, ``tbsp``, ``blvd``, have none) and is
   not a Roman numeral (:data:`ROMAN`: the list has ``viii`` and ``xiii`` in lower case).

Deriving them takes a few seconds (the profanity check of some 20,000 words), so the result is
cached in a file (:func:`build_answers`) whose first line (:func:`header`) names the dictionary
file, the four packages' versions, the floor and the rule: a change of any of them, or a newer
dictionary file, derives it again. Which files, and reading them once per process, is
:mod:`bots.dictionary`'s part (``answers_path``, ``answers_of_length``), which also gives the
lists to the rules (``install``).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

from moo.words import dictionary_words

__all__ = [
    "DOUBLING",
    "E_SUFFIXES",
    "FLOOR",
    "ROMAN",
    "SUFFIXES",
    "VOWELS",
    "WORD_LISTS",
    "Y_SUFFIXES",
    "all_listed",
    "answer_words",
    "build_answers",
    "cached_answers",
    "header",
    "is_offensive",
    "listed_words",
    "offensive_words",
    "stems",
    "tools",
    "zipf",
]

#: The frequency floor (wordfreq's Zipf scale, for every length): once per million words.
#: Measured with wamerican 2020.12.07 it keeps 1,600 to 3,500 words per length (docs/variants.md).
FLOOR = 3.0
#: A word without one of these is an abbreviation (``tbsp``), not a word to find.
VOWELS = frozenset("aeiouy")
#: A Roman numeral (1-4999), written out: no word of the dictionary of 4 letters or more is one.
ROMAN = re.compile(r"m{0,4}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})")
#: Endings an inflected or derived form adds to the word it comes from (:func:`stems`).
SUFFIXES = ("s", "es", "ed", "d", "ing", "er", "ers", "r", "rs", "est", "st", "y", "ier", "iest",
            "ish", "ly", "ies", "ied")
#: Of them, the endings that may double a last consonant (``hum`` -> ``humming``), and those
#: that take the place of a final ``e`` (``rape`` -> ``raping``; ``-ed`` keeps it: ``rape-d``,
#: as ``-er`` and ``-est`` do: ``-r``, ``-st``)
DOUBLING = frozenset({"ed", "ing", "er", "ers", "est", "y", "ier", "iest", "ish"})
E_SUFFIXES = frozenset({"ing", "y", "ier", "iest", "ish"})
#: and those that take the place of a final ``y`` (``gypsy`` -> ``gypsies``, ``bully`` ->
#: ``bullied``, ``dirty`` -> ``dirtiest``)
Y_SUFFIXES = frozenset({"ies", "ied", "ier", "iest"})
#: First line of the cache file, completed by :func:`header`; its number goes up whenever the
#: rule changes in a way its parameters (:func:`header`'s ``rule=``) do not show.
_HEADER = "# moo-arena answers 2:"
#: The maintained word lists besides better-profanity's: each package's list, as the file it
#: ships in (read as data, without importing the package: ``badwords-py`` would load its
#: native extension, and ``wordfilter``'s own check matches substrings, ``abo`` in ``about``,
#: where a secret needs the word itself). ``wordfilter`` (Darius Kazemi's, MIT) lists slurs,
#: ethnic, ableist and others, for bots that generate text; ``badwords-py``'s English list
#: (MIT, with the LDNOOBW list, CC BY 4.0) profanity and slurs. docs/variants.md says what
#: each took out of the answers.
WORD_LISTS: dict[str, str] = {
    "wordfilter": "wordfilter/badwords.json",
    "badwords-py": "badwords/resource/words/en.txt",
}


def tools() -> dict[str, str]:
    """The packages the lists come from, with their installed versions (docs, ``--json``)."""
    from importlib.metadata import version  # 20 ms of imports every server would pay

    return {"wordfreq": version("wordfreq"), "better-profanity": version("better-profanity"),
            **{package: version(package) for package in WORD_LISTS}}


def zipf(word: str) -> float:
    """The word's English frequency on the Zipf scale (``wordfreq``; 0 for an unknown word)."""
    from wordfreq import zipf_frequency  # imported only when a list is built (0.2 s of data)

    return float(zipf_frequency(word, "en"))


@cache
def offensive_words() -> frozenset[str]:
    """``better-profanity``'s word list as installed, lower case (read once per process)."""
    from better_profanity.utils import get_complete_path_of_file, read_wordlist

    return frozenset(w.strip().lower()
                     for w in read_wordlist(get_complete_path_of_file("profanity_wordlist.txt")))


@cache
def listed_words(package: str) -> frozenset[str]:
    """The word list of ``package`` (one of :data:`WORD_LISTS`) as installed, lower case.

    A JSON file is a list of strings, any other one word (or phrase) a line; a phrase never
    equals a single word, so it is harmless here. Read once per process.
    """
    from importlib.metadata import distribution

    path = Path(str(distribution(package).locate_file(WORD_LISTS[package])))
    text = path.read_text(encoding="utf-8")
    entries: list[str] = json.loads(text) if path.suffix == ".json" else text.splitlines()
    return frozenset(w.strip().lower() for w in entries if w.strip())


@cache
def all_listed() -> frozenset[str]:
    """Every word of every list: better-profanity's and those of :data:`WORD_LISTS`."""
    return offensive_words().union(*(listed_words(p) for p in WORD_LISTS))


def stems(word: str) -> list[str]:
    """What ``word`` may be inflected or derived from, by its ending (``sluts`` -> ``slut``).

    Each ending of :data:`SUFFIXES` it has is taken off (leaving 3 letters or more); after an
    ending that swallows a final ``e`` (:data:`E_SUFFIXES`: ``raping`` -> ``rape``) the rest is
    also tried with the ``e``, after one that takes the place of a final ``y``
    (:data:`Y_SUFFIXES`: ``gypsies`` -> ``gypsy``) with the ``y``, and after one of
    :data:`DOUBLING` a doubled last letter is undone (``humming`` -> ``hum``).
    Over-eager on purpose: a harmless word caught this way (``gods``, from ``god`` on the list)
    only leaves the answers; it is still a word of the dictionary, and so a guess.
    """
    found: list[str] = []
    for suffix in SUFFIXES:
        if not word.endswith(suffix) or len(word) - len(suffix) < 3:
            continue
        stem = word[: -len(suffix)]
        found.append(stem)
        if suffix in E_SUFFIXES:
            found.append(stem + "e")
        if suffix in Y_SUFFIXES:
            found.append(stem + "y")
        if suffix in DOUBLING and len(stem) >= 4 and stem[-1] == stem[-2]:
            found.append(stem[:-1])
    return found


def is_offensive(word: str) -> bool:
    """``word`` (lower case) is on one of the lists (:func:`all_listed`), or is a form of a
    word that is.

    The word itself also goes through better-profanity's own check (``contains_profanity``,
    which knows its list's spelling variants); the word and its stems are looked up in the
    lists themselves.
    """
    from better_profanity import profanity

    listed = all_listed()
    return profanity.contains_profanity(word) or any(w in listed for w in (word, *stems(word)))


def answer_words(lines: Iterable[str], frequency: Callable[[str], float],
                 offensive: Callable[[str], bool], floor: float = FLOOR) -> list[str]:
    """The answers among a dictionary file's ``lines``: upper case, sorted, every length.

    Pure apart from the two functions given (the tests pass their own): the lower-case entries
    of letters (:func:`moo.words.dictionary_words`) that have a vowel, are no Roman numeral,
    are at least ``floor`` frequent, and are not ``offensive``.
    """
    kept: list[str] = []
    for word in dictionary_words(list(lines)):
        low = word.lower()
        if (VOWELS & set(low) and not ROMAN.fullmatch(low) and frequency(low) >= floor
                and not offensive(low)):
            kept.append(word)
    return kept


def header(source: Path) -> str:
    """The cache file's first line: the dictionary file, the tools' versions, the floor and
    a fingerprint of the rule's parameters; a cache with another first line is derived again."""
    import hashlib

    named = " ".join(f"{k}={v}" for k, v in tools().items())
    rule = repr((SUFFIXES, sorted(DOUBLING), sorted(E_SUFFIXES), sorted(Y_SUFFIXES),
                 sorted(VOWELS), ROMAN.pattern, sorted(WORD_LISTS.items())))
    digest = hashlib.sha256(rule.encode()).hexdigest()[:12]
    return f"{_HEADER} {source} {named} floor={FLOOR} rule={digest}"


def build_answers(source: Path, dest: Path) -> tuple[str, ...]:
    """Derive the answers of every length from the dictionary file ``source``, write them to
    ``dest`` (atomically: a reader never sees half a file) and return them. Where ``dest``
    cannot be written (a locked-down server, a read-only disk) they are only returned."""
    lines = source.read_text(encoding="utf-8", errors="replace").splitlines()
    words = tuple(answer_words(lines, zipf, is_offensive))
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".answers-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(header(source) + "\n" + "".join(w + "\n" for w in words))
        os.replace(tmp, dest)
    except OSError:  # derived again by the next process; this one has them
        pass
    return words


def cached_answers(dest: Path, source: Path) -> tuple[str, ...] | None:
    """The answers cached in ``dest`` if it was built from ``source`` as it is now (not
    older than it) by these tools, floor and rule, else None."""
    try:
        if dest.stat().st_mtime < source.stat().st_mtime:
            return None
        lines = dest.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    if not lines or lines[0] != header(source):
        return None
    return tuple(w for w in lines[1:] if w)
