"""A word-MOO bot that uses the answer list: consistent candidates, sampled one-step look-ahead.

Its candidates are the answers (:func:`bots.dictionary.answers_of_length`), the words every
word-MOO secret is drawn from and must be, so it only ever guesses common words that hurt
nobody, and finds the secret sooner than among the whole dictionary. Should no answer fit
(a secret from elsewhere: another machine's older answer list), it widens to the whole
dictionary, filtered by every answer so far, rather than give up.

Exact look-ahead over thousands of words (3,500 answers of 7 letters; 10,500 dictionary
words of 8 once widened), every candidate as a guess against every other, is 10^7 to 10^8
scores, far beyond a 1 s answer in Python. The bot instead keeps the words
consistent with every answer so far and, for each guess, compares a sample of candidate words
by the expected number of candidates left after them, estimated on a sample of possible
secrets (sum of squared part sizes over the sample size), within a wall-clock budget. Guessing
a consistent word keeps the chance of finishing early; the sample keeps the time bounded
whatever the length. The budget is checked between guesses evaluated, so one answer takes the
budget plus the scoring of one guess against the sample (milliseconds).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from functools import lru_cache

from bots import dictionary
from moo.words import WordRules

__all__ = ["WordBot"]


@lru_cache(maxsize=1 << 16)
def _counts(word: str) -> dict[str, int]:
    """Letter counts of a dictionary word, computed once per process."""
    return dict(Counter(word))


@lru_cache(maxsize=1 << 16)
def _letters(word: str) -> frozenset[str]:
    return frozenset(word)


#: Words compared per answer, and secrets they are compared on.
POOL, SAMPLE = 48, 1500
#: Wall-clock time one answer may spend filtering and comparing guesses (seconds).
BUDGET = 0.4
#: First guesses already chosen in this process, per word list.
_OPENERS: dict[tuple[int, str, int, str, str], str] = {}


class WordBot:
    """Guesses English words for :class:`moo.words.WordRules` (either scoring)."""

    name = "words"

    def __init__(self, budget: float = BUDGET) -> None:
        self.budget = budget
        self.rules = WordRules()
        self.left: list[str] = []
        self.rng = random.Random(0)
        self.pending: list[tuple[str, tuple[int, int]]] = []
        #: every answer of this match, to widen to the dictionary (see the module's docstring)
        self.history: list[tuple[str, tuple[int, int]]] = []
        self.widened = False
        self.first = True

    def new_match(self, rules: WordRules, rng: random.Random) -> None:
        self.rules = rules
        # the rules' own list if a caller gave one, else the system's answers (read once)
        self.left = list(rules.words or dictionary.answers_of_length(rules.length))
        self.rng = rng
        self.pending = []
        self.history = []
        self.widened = bool(rules.words)
        self.first = True

    def observe(self, guess: str, answer: tuple[int, int]) -> None:
        """Remember the answer; the candidates are filtered in :meth:`next_guess`.

        Filtering there keeps the whole cost of an answer under one wall-clock budget.
        """
        self.pending.append((guess, (answer[0], answer[1])))
        self.history.append(self.pending[-1])

    def observe_opponent(self, count: int, response: tuple[int, int] | None) -> None:
        """The opponent's progress does not change which word is best (Strategy's hook)."""

    def observe_opponent_move(
        self, count: int, guess: str | None, response: tuple[int, int] | None
    ) -> None:
        """The runners' hook (bots.base.Strategy): this bot plays its own game."""

    def _scorer(self, guess: str) -> Callable[[str], tuple[int, int]]:
        """A scorer of one guess against many words, with the guess's letters counted once."""
        if self.rules.scoring == "hits_misses":
            def hits_misses(w: str) -> tuple[int, int]:
                letters = _letters(w)
                return (sum(a == b for a, b in zip(w, guess, strict=True)),
                        sum(1 for g in guess if g not in letters))
            return hits_misses
        gc = tuple(Counter(guess).items())

        def bulls_cows(w: str) -> tuple[int, int]:
            wc = _counts(w)
            bulls = sum(a == b for a, b in zip(w, guess, strict=True))
            return bulls, sum(min(k, wc.get(ch, 0)) for ch, k in gc) - bulls
        return bulls_cows

    def next_guess(self) -> str:
        deadline = time.perf_counter() + self.budget
        for guess, want in self.pending:
            score = self._scorer(guess)
            self.left = [w for w in self.left if score(w) == want]
        self.pending.clear()
        if not self.left and not self.widened:  # no answer fits: the whole dictionary then
            self.widened = True
            self.left = list(dictionary.words_of_length(self.rules.length))
            for guess, want in self.history:
                score = self._scorer(guess)
                self.left = [w for w in self.left if score(w) == want]
        left = self.left
        if not left:
            raise RuntimeError("no dictionary word fits the answers (secret not in the list?)")
        if len(left) <= 2:
            return left[0]
        key = (self.rules.length, self.rules.scoring, len(left), left[0], left[-1])
        if self.first and key in _OPENERS:  # the same list always gets the same opener
            self.first = False
            return _OPENERS[key]
        guess = self._choose(left, deadline)
        if self.first:
            _OPENERS[key] = guess
            self.first = False
        return guess

    def _choose(self, left: list[str], deadline: float) -> str:
        pool = left if len(left) <= POOL else self.rng.sample(left, POOL)
        sample = left if len(left) <= SAMPLE else self.rng.sample(left, SAMPLE)
        best, best_key = pool[0], (float("inf"), "")
        for g in pool:
            score = self._scorer(g)
            parts = Counter(score(s) for s in sample)
            key = (sum(v * v for v in parts.values()) / len(sample), g)
            if key < best_key:
                best, best_key = g, key
            if time.perf_counter() > deadline:
                break
        return best
