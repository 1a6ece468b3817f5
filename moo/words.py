"""Word MOO: the rules of guessing an English word, and the dictionary they draw from.

Two scorings, both on strings of ``length`` letters A-Z (letters may repeat, in the secret
and in the guess):

* ``bulls_cows`` (the UNIX game): bulls are letters in the right place; bulls + cows is, for
  each letter, the smaller of its counts in the secret and in the guess, summed (each letter
  counted at most as often as it occurs in both: the same rule as Mastermind's pegs).
* ``hits_misses`` (the May 1999 POTM): hits are letters in the right place; misses are the
  guessed positions whose letter does not occur in the word *at all*. Against ``SKUNK``:
  ``SKIPS`` is 2 hits 2 misses (I and P; the second S is in the word), ``GUPPY`` 0 hits 4 misses.

The dictionary is Debian's ``wamerican`` list (``/usr/share/dict/american-english``),
filtered to words of ASCII letters only and upper-cased. The project never ships the list: it
is built from the system file on first use into a cache file (see :func:`word_list_path`),
and rebuilt when the system file is newer.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal, NamedTuple

from moo.errors import UnknownSymbol, WrongLength
from moo.mastermind import mastermind_score
from moo.rules import Response

__all__ = [
    "DEFAULT_SOURCE",
    "HitsMisses",
    "Scoring",
    "WordRules",
    "build_word_list",
    "load_words",
    "score_bulls_cows",
    "score_hits_misses",
    "word_list_path",
]

#: Where Debian's ``wamerican`` package puts its list.
DEFAULT_SOURCE = Path("/usr/share/dict/american-english")
MIN_LENGTH, MAX_LENGTH = 4, 9
Scoring = Literal["bulls_cows", "hits_misses"]
SCORINGS: tuple[Scoring, ...] = ("bulls_cows", "hits_misses")


class HitsMisses(NamedTuple):
    """The POTM's answer: letters in the right place, and guessed letters absent from the word."""

    hits: int
    misses: int

    def __str__(self) -> str:
        return f"{self.hits} {self.misses}"


def score_bulls_cows(secret: str, guess: str) -> Response:
    """UNIX word MOO: bulls, and cows counted per letter at most as often as in both words."""
    return mastermind_score(secret, guess)


def score_hits_misses(secret: str, guess: str) -> HitsMisses:
    """POTM 1999: hits (right letter, right place) and misses (letter not in the word at all)."""
    if len(secret) != len(guess):
        raise ValueError("secret and guess differ in length")
    letters = set(secret)
    hits = sum(1 for s, g in zip(secret, guess, strict=True) if s == g)
    misses = sum(1 for g in guess if g not in letters)
    return HitsMisses(hits, misses)


# -- the dictionary ---------------------------------------------------------------------------
def word_list_path() -> Path:
    """The cache file of the filtered list.

    ``$MOO_WORDS_CACHE`` if set, else ``$XDG_CACHE_HOME/moo-arena/words.txt`` (default
    ``~/.cache/moo-arena/words.txt``).
    """
    env = os.environ.get("MOO_WORDS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "moo-arena" / "words.txt"


def filter_words(lines: list[str]) -> list[str]:
    """Upper-cased words of ASCII letters only, de-duplicated, sorted (no ' or accents)."""
    return sorted({w.upper() for w in (x.strip() for x in lines) if w.isascii() and w.isalpha()})


def build_word_list(source: Path = DEFAULT_SOURCE, dest: Path | None = None) -> Path:
    """Filter ``source`` into ``dest`` (atomically: a reader never sees half a file)."""
    dest = dest or word_list_path()
    if not source.is_file():
        raise FileNotFoundError(
            f"no word list at {source}: install Debian's wamerican package "
            "(apt-get install wamerican) or pass a list of words"
        )
    words = filter_words(source.read_text(encoding="utf-8", errors="replace").splitlines())
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".words-")
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write("".join(w + "\n" for w in words))
    os.replace(tmp, dest)
    return dest


@cache
def _load(path: str, mtime: float) -> tuple[str, ...]:
    del mtime  # part of the cache key only: a rebuilt file is read again
    return tuple(Path(path).read_text(encoding="ascii").split())


def load_words(length: int | None = None, source: Path | None = None) -> tuple[str, ...]:
    """The dictionary's words (of ``length`` letters if given), upper case, sorted.

    With ``source`` the file is read and filtered as is (any list of words, one per line);
    without it the cached wamerican list is used, built first if missing or older than the
    system file.
    """
    if source is not None:
        words = tuple(filter_words(source.read_text(encoding="utf-8",
                                                    errors="replace").splitlines()))
    else:
        path = word_list_path()
        if not path.exists() or (
            DEFAULT_SOURCE.exists() and DEFAULT_SOURCE.stat().st_mtime > path.stat().st_mtime
        ):
            build_word_list(DEFAULT_SOURCE, path)
        words = _load(str(path), path.stat().st_mtime)
    if length is None:
        return words
    return tuple(w for w in words if len(w) == length)


# -- the rules --------------------------------------------------------------------------------
@dataclass(frozen=True)
class WordRules:
    """One word-MOO game: secrets are dictionary words of ``length`` letters.

    A guess is any ``length`` letters A-Z (the POTM referee accepts any string; a person's
    typo costs a guess, as in the contest). ``words`` is the secret list, loaded lazily.
    """

    length: int = 5
    scoring: Scoring = "bulls_cows"
    words: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not MIN_LENGTH <= self.length <= MAX_LENGTH:
            raise ValueError(f"word length must be {MIN_LENGTH}-{MAX_LENGTH}, got {self.length}")
        if self.scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}")
        if self.words and any(len(w) != self.length for w in self.words):
            raise ValueError("every word must have the game's length")

    def to_dict(self) -> dict[str, object]:
        return {"game": "words", "length": self.length, "scoring": self.scoring}

    @property
    def secrets(self) -> tuple[str, ...]:
        return self.words or load_words(self.length)

    def check_guess(self, text: object) -> str:
        if not isinstance(text, str):
            raise UnknownSymbol(f"a guess is {self.length} letters A-Z")
        word = text.strip().upper()
        bad = sorted({ch for ch in word if not ("A" <= ch <= "Z")})
        if bad:
            raise UnknownSymbol(f"only letters A-Z (not {', '.join(repr(c) for c in bad[:5])})")
        if len(word) != self.length:
            raise WrongLength(f"expected {self.length} letters, got {len(word)}")
        return word

    def score(self, secret: str, guess: str) -> tuple[int, int]:
        """``Response`` (bulls, cows) or ``HitsMisses`` (hits, misses) by the scoring."""
        if self.scoring == "hits_misses":
            return score_hits_misses(secret, guess)
        return score_bulls_cows(secret, guess)

    def solved(self, answer: tuple[int, int]) -> bool:
        return answer[0] == self.length

    def consistent(self, candidates: tuple[str, ...] | list[str], guess: str,
                   answer: tuple[int, int]) -> list[str]:
        """The candidates that would have given ``answer`` to ``guess``."""
        want = tuple(answer)
        return [c for c in candidates if tuple(self.score(c, guess)) == want]
