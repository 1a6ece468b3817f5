"""Mastermind rules, free of I/O: codes may repeat symbols, answers are black and white pegs.

A sibling of :mod:`moo.rules` rather than a flag on :class:`moo.rules.Rules`: MOO's scoring
assumes a distinct-symbol secret (the 1971 per-position rule), while Mastermind counts each
symbol at most as often as it occurs in *both* codes. Keeping them apart means no MOO code path
changes behaviour, and everything that only needs "a code space and a score" (the exact solver,
the analysis) takes either.

Answers reuse :class:`moo.rules.Response` (``bulls`` = black pegs, ``cows`` = white pegs).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from moo.errors import UnknownSymbol, WrongLength
from moo.rules import Response

__all__ = ["MASTERMIND", "MastermindRules", "mastermind_score"]


def mastermind_score(secret: str, guess: str) -> Response:
    """Black pegs (right symbol, right place) and white pegs (right symbol, wrong place).

    Each symbol is counted at most as often as it occurs in both codes: the total of black and
    white is sum over symbols of min(count in secret, count in guess), and the whites are that
    total less the blacks. (``ABBA`` against ``AAAA`` is 2 black, 0 white.)
    """
    blacks = sum(1 for s, g in zip(secret, guess, strict=True) if s == g)
    common = 0
    counts: dict[str, int] = {}
    for ch in secret:
        counts[ch] = counts.get(ch, 0) + 1
    for ch in guess:
        left = counts.get(ch, 0)
        if left:
            counts[ch] = left - 1
            common += 1
    return Response(blacks, common - blacks)


@dataclass(frozen=True)
class MastermindRules:
    """One Mastermind variant: ``length`` positions over ``alphabet``, repeats allowed."""

    length: int = 4
    alphabet: str = "123456"

    def __post_init__(self) -> None:
        if not 2 <= self.length <= 6:
            raise ValueError(f"length must be 2-6, got {self.length}")
        if not 2 <= len(self.alphabet) <= 10:
            raise ValueError(f"alphabet must have 2-10 symbols, got {len(self.alphabet)}")
        if len(set(self.alphabet)) != len(self.alphabet):
            raise ValueError("alphabet symbols must be distinct")
        if any(not ch.isprintable() or ch.isspace() or ch == "," for ch in self.alphabet):
            raise ValueError("alphabet symbols must be printable, no spaces or commas")

    game = "mastermind"
    #: guesses (and secrets) may always repeat symbols; named as on :class:`moo.rules.Rules`
    repeats_in_guess: ClassVar[bool] = True

    @property
    def symbols_text(self) -> str:
        """How messages name the symbols: ``colours 1-6`` for the classic six."""
        a = self.alphabet
        kind = "colours" if a == "123456" else "symbols"
        contiguous = all(ord(b) - ord(x) == 1 for x, b in itertools.pairwise(a))
        return f"{kind} {a[0]}-{a[-1]}" if contiguous else f"{kind} {', '.join(a)}"

    def is_secret(self, text: str) -> bool:
        try:
            self.check_code(text)
        except ValueError:
            return False
        return True

    def to_dict(self) -> dict[str, object]:
        return {"game": "mastermind", "length": self.length, "alphabet": self.alphabet,
                "repeats_in_guess": True}

    @cached_property
    def secrets(self) -> tuple[str, ...]:
        """Every code in ascending alphabet order (1296 for 4 of 6)."""
        return tuple("".join(p) for p in itertools.product(self.alphabet, repeat=self.length))

    @property
    def guesses(self) -> tuple[str, ...]:
        return self.secrets

    @cached_property
    def responses(self) -> tuple[Response, ...]:
        """Every possible answer: black + white <= length, except (length-1) black 1 white.

        Ordered like :attr:`moo.rules.Rules.responses` (most blacks first); 14 for 4 pegs.
        """
        return tuple(
            Response(b, w)
            for b in range(self.length, -1, -1)
            for w in range(self.length - b, -1, -1)
            if not (b == self.length - 1 and w == 1)
        )

    @property
    def solved(self) -> Response:
        return Response(self.length, 0)

    def check_code(self, text: object) -> str:
        """Return ``text`` as a canonical code or raise an :class:`moo.errors.InvalidCode`."""
        if not isinstance(text, str):
            raise UnknownSymbol(f"a code is a string of {self.length} symbols of {self.alphabet}")
        code = text  # nothing is trimmed, as for MOO codes (docs/protocol.md)
        if self.alphabet.isupper():
            code = code.upper()
        bad = sorted(set(code) - set(self.alphabet))
        if bad:
            raise UnknownSymbol(
                f"only symbols {self.alphabet} (not {', '.join(repr(c) for c in bad[:5])})"
            )
        if len(code) != self.length:
            raise WrongLength(f"expected {self.length} symbols, got {len(code)}")
        return code

    check_secret = check_code
    check_guess = check_code

    def score(self, secret: str, guess: str) -> Response:
        return mastermind_score(secret, guess)

    def consistent(self, candidates: list[str] | tuple[str, ...], guess: str,
                   response: tuple[int, int]) -> list[str]:
        """The candidates that would have answered ``guess`` with ``response``."""
        want = Response(*response)
        return [c for c in candidates if mastermind_score(c, guess) == want]


#: The classic game: 4 pegs, 6 colours (the APL note's ``⎕A[?4⍴6]``).
MASTERMIND = MastermindRules()
