"""Word MOO: the rules of guessing an English word, free of I/O.

Two scorings, both on strings of ``length`` letters A-Z (letters may repeat, in the secret
and in the guess):

* ``bulls_cows`` (the UNIX game): bulls are letters in the right place; bulls + cows is, for
  each letter, the smaller of its counts in the secret and in the guess, summed (each letter
  counted at most as often as it occurs in both: the same rule as Mastermind's pegs).
* ``hits_misses`` (the May 1999 POTM): hits are letters in the right place; misses are the
  guessed positions whose letter does not occur in the word *at all*. Against ``SKUNK``:
  ``SKIPS`` is 2 hits 2 misses (I and P; the second S is in the word), ``GUPPY`` 0 hits 4 misses.

Two lists per length, as in Wordle: the **dictionary** (every word of N letters the game
knows: the bots' guesses; a person may guess any letters) and the **answers**, the common
words that hurt nobody that secrets are drawn from and must be (a subset of the dictionary).
Both are data read from the system (Debian's ``wamerican``, the ``wordfreq`` package and three
offensive-word lists: ``better-profanity``, ``wordfilter``, ``badwords-py``), so they live
outside the pure core: :mod:`bots.dictionary` reads, derives and caches them, and a program
that needs them installs them here with
:func:`set_dictionary` (``bots.dictionary.install()``), or a caller passes its own list as
``WordRules(words=...)`` (tests, the offline helper, the POTM referee's contest list), which
then serves as both. The rules only ever ask the injected providers for "the words of N
letters"; nothing here opens a file, so replaying a match or scoring a guess stays I/O-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Literal, NamedTuple

from moo.errors import InvalidCode, NotAvailable, UnknownSymbol, WrongLength
from moo.mastermind import mastermind_score
from moo.rules import Response

__all__ = [
    "LETTERS",
    "MAX_LENGTH",
    "MIN_LENGTH",
    "SCORINGS",
    "HitsMisses",
    "NoDictionary",
    "NotAWord",
    "Scoring",
    "WordRules",
    "dictionary_installed",
    "dictionary_words",
    "filter_words",
    "score_bulls_cows",
    "score_hits_misses",
    "set_dictionary",
]

MIN_LENGTH, MAX_LENGTH = 4, 9
Scoring = Literal["bulls_cows", "hits_misses"]
SCORINGS: tuple[Scoring, ...] = ("bulls_cows", "hits_misses")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LETTER_SET = frozenset(LETTERS)


class HitsMisses(NamedTuple):
    """The POTM's answer: letters in the right place, and guessed letters absent from the word."""

    hits: int
    misses: int

    def __str__(self) -> str:
        return f"{self.hits} {self.misses}"


class NotAWord(InvalidCode):
    """A word-MOO secret that is N letters but not one of the answers (not a word of the
    dictionary at all, or a word that is no answer: the message says which).

    Its own code (``not_a_word``) rather than ``unknown_symbol``: the letters are fine, and a
    client can say "not in the dictionary" instead of "bad characters".
    """

    code = "not_a_word"


class NoDictionary(NotAvailable):
    """No word list was injected (:func:`set_dictionary`) and none was given to the rules.

    A :class:`moo.errors.NotAvailable` (``not_available``): a server that lost its dictionary
    answers a word match's secret with one clear error rather than failing inside.
    """


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


def _hits_misses_response(secret: str, guess: str) -> Response:
    """Hits and misses in the protocol's two numbers (``bulls``, ``cows``) of a match event."""
    hits, misses = score_hits_misses(secret, guess)
    return Response(hits, misses)


def filter_words(lines: list[str]) -> list[str]:
    """Upper-cased words of ASCII letters only, de-duplicated, sorted (no ' or accents).

    Pure (a list in, a list out) so the dictionary loader and the tests share one definition
    of "a word" whatever file the lines came from.
    """
    return sorted({w.upper() for w in (x.strip() for x in lines) if w.isascii() and w.isalpha()})


def dictionary_words(lines: list[str]) -> list[str]:
    """The words of the game in a dictionary file: its lower-case entries of letters a-z,
    upper-cased, de-duplicated, sorted.

    A dictionary such as wamerican capitalises proper names and most abbreviations (``Flynn``,
    ``AC``, ``Dr``), which are no secret a player could be expected to find; a word that is
    also an ordinary word has its own lower-case entry (``bill`` beside ``Bill``).
    """
    return sorted({w.upper() for w in (x.strip() for x in lines)
                   if w.isascii() and w.isalpha() and w.islower()})


# -- the injected dictionary ------------------------------------------------------------------
Provider = Callable[[int], tuple[str, ...]]
#: ``length -> sorted words of that length``, installed by whoever may do I/O
_provider: Provider | None = None
#: ``length -> sorted answers of that length`` (None: the dictionary's words are the answers)
_answers: Provider | None = None
#: membership sets, built once per word tuple (keyed by the tuple's identity, kept alive here)
_SETS: dict[int, tuple[tuple[str, ...], frozenset[str]]] = {}


def set_dictionary(provider: Provider | None, answers: Provider | None = None) -> None:
    """Install the word lists every :class:`WordRules` without its own ``words`` uses.

    ``provider(length)`` returns the dictionary's words of that length, ``answers(length)``
    the answers (secrets) among them; upper case, sorted. Both should cache (they are asked on
    every secret check). Without ``answers`` every dictionary word is an answer (a test's small
    list). ``None`` uninstalls both.
    """
    global _provider, _answers
    _provider = provider
    _answers = answers if provider is not None else None
    _SETS.clear()


def dictionary_installed() -> bool:
    return _provider is not None


def _word_set(words: tuple[str, ...]) -> frozenset[str]:
    entry = _SETS.get(id(words))
    if entry is None or entry[0] is not words:
        entry = (words, frozenset(words))
        if len(_SETS) > 64:
            _SETS.clear()
        _SETS[id(words)] = entry
    return entry[1]


# -- the rules --------------------------------------------------------------------------------
@dataclass(frozen=True)
class WordRules:
    """One word-MOO game: secrets are answer words of ``length`` letters.

    A guess is any ``length`` letters A-Z, a word or not (the UNIX game and the POTM referee
    both accept any letters, and probes such as ``EEEEE`` are a real technique), so every
    dictionary word is a guess; a secret must be one of the answers (:class:`NotAWord`
    otherwise). ``words`` overrides the injected lists (a test's small list, the offline
    helper's remaining words, the POTM's contest list) as both dictionary and answers; it takes
    no part in equality, so two matches of ``words:5`` have equal rules whoever loaded the list.
    """

    length: int = 5
    scoring: Scoring = "bulls_cows"
    words: tuple[str, ...] = field(default=(), compare=False, repr=False)

    game: ClassVar[str] = "words"
    #: guesses and secrets are letters A-Z and may repeat them (named as on the other rules)
    alphabet: ClassVar[str] = LETTERS
    repeats_in_guess: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not MIN_LENGTH <= self.length <= MAX_LENGTH:
            raise ValueError(f"word length must be {MIN_LENGTH}-{MAX_LENGTH}, got {self.length}")
        if self.scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}")
        if self.words and any(len(w) != self.length for w in self.words):
            raise ValueError("every word must have the game's length")

    def to_dict(self) -> dict[str, object]:
        """The protocol's ``rules`` object; ``alphabet`` and ``repeats_in_guess`` are fixed but
        spelled out, so a generic client can check a guess's letters without knowing the game."""
        return {"game": "words", "length": self.length, "scoring": self.scoring,
                "alphabet": LETTERS, "repeats_in_guess": True}

    @property
    def dictionary(self) -> tuple[str, ...]:
        """Every word of this length the game knows (the given ``words``, else the injected
        dictionary): the bots' guess space."""
        if self.words:
            return self.words
        if _provider is None:
            raise NoDictionary("no word list: word MOO needs the dictionary "
                               "(bots.dictionary.install())")
        return _provider(self.length)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The answers of this length: what a secret is drawn from and must be (the given
        ``words``, else the injected answer list, else the dictionary)."""
        if self.words or _answers is None:
            return self.dictionary
        return _answers(self.length)

    @property
    def guesses(self) -> tuple[str, ...]:
        """The dictionary's words: the bots' guess space (a person may guess any letters)."""
        return self.dictionary

    @property
    def solved(self) -> Response:
        """The answer to the right word: all ``length`` letters placed, nothing else counted."""
        return Response(self.length, 0)

    @property
    def symbols_text(self) -> str:
        return "letters A-Z"

    def is_word(self, word: str) -> bool:
        """``word`` (upper case) is in the dictionary."""
        return word in _word_set(self.dictionary)

    def is_answer(self, word: str) -> bool:
        """``word`` (upper case) is one of the answers: a possible secret."""
        return word in _word_set(self.secrets)

    def check_guess(self, text: object) -> str:
        """``length`` letters A-Z, either case (echoed upper case); nothing is trimmed."""
        if not isinstance(text, str):
            raise UnknownSymbol(f"a guess is {self.length} letters A-Z")
        word = text.upper()
        bad = sorted({ch for ch in word if ch not in _LETTER_SET})
        if bad:
            raise UnknownSymbol(f"only letters A-Z (not {', '.join(repr(c) for c in bad[:5])})")
        if len(word) != self.length:
            raise WrongLength(f"expected {self.length} letters, got {len(word)}")
        return word

    check_code = check_guess

    def check_secret(self, text: object) -> str:
        """A guess's format, and one of the answers (:class:`NotAWord` otherwise, saying
        whether the word is not in the dictionary at all or only not an answer)."""
        word = self.check_guess(text)
        if not self.is_answer(word):
            if not self.is_word(word):
                raise NotAWord(f"{word} is not a {self.length}-letter word of the dictionary")
            raise NotAWord(f"{word} is not one of the {self.length}-letter answer words "
                           f"(common words; moo words --length {self.length} --answers "
                           "lists them)")
        return word

    def is_secret(self, text: str) -> bool:
        try:
            self.check_secret(text)
        except (InvalidCode, NoDictionary):
            return False
        return True

    @property
    def scorer(self) -> Callable[[str, str], Response]:
        """The scoring as a match records it: the two numbers in ``bulls`` and ``cows``."""
        return _hits_misses_response if self.scoring == "hits_misses" else score_bulls_cows

    def score(self, secret: str, guess: str) -> tuple[int, int]:
        """``Response`` (bulls, cows) or ``HitsMisses`` (hits, misses) by the scoring."""
        if self.scoring == "hits_misses":
            return score_hits_misses(secret, guess)
        return score_bulls_cows(secret, guess)

    def is_solved(self, answer: tuple[int, int]) -> bool:
        return answer[0] == self.length

    def consistent(self, candidates: tuple[str, ...] | list[str], guess: str,
                   answer: tuple[int, int]) -> list[str]:
        """The candidates that would have given ``answer`` to ``guess``."""
        want = tuple(answer)
        return [c for c in candidates if tuple(self.score(c, guess)) == want]
