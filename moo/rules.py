"""The rules of MOO, free of I/O.

Everything that decides what a legal code is and how a guess is scored lives here, so the
server, the bots, the solver's Python side and the clients can never disagree about the game.
The rules are a value (:class:`Rules`) rather than module constants: variants (3-6 positions,
other alphabets, the 1971 rule that lets a *guess* repeat symbols) are a different value, not a
different code path.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from moo.errors import RepeatedSymbol, UnknownSymbol, WrongLength

__all__ = [
    "DEFAULT_RULES",
    "Response",
    "Rules",
    "format_response",
    "parse_response",
    "score",
]

_RESPONSE_RE = re.compile(r"^\s*(?:(\d)\s*B)?\s*(?:(\d)\s*C)?\s*$", re.IGNORECASE)


class Response(NamedTuple):
    """Bulls (right symbol, right place) and cows (right symbol, wrong place)."""

    bulls: int
    cows: int

    def __str__(self) -> str:
        return format_response(self)

    @property
    def teletype(self) -> str:
        """The 1971 teletype's ``B,CC`` form (``BB,C`` for two bulls and a cow)."""
        return "B" * self.bulls + "," + "C" * self.cows


def format_response(response: Response | tuple[int, int]) -> str:
    """Tanaka's notation: ``4B``, ``2B1C``, ``3C``; nothing at all is ``0C``."""
    bulls, cows = response
    if bulls and cows:
        return f"{bulls}B{cows}C"
    if bulls:
        return f"{bulls}B"
    return f"{cows}C"


def parse_response(text: str) -> Response:
    """Inverse of :func:`format_response`; also accepts ``0B0C``-style spellings."""
    match = _RESPONSE_RE.match(text)
    if not match or (match.group(1) is None and match.group(2) is None):
        raise ValueError(f"not a response: {text!r} (expected e.g. 2B1C, 3B, 1C, 0C)")
    return Response(int(match.group(1) or 0), int(match.group(2) or 0))


@dataclass(frozen=True)
class Rules:
    """One MOO variant.

    ``length`` positions drawn from ``alphabet``; secrets always use distinct symbols. With
    ``repeats_in_guess`` a guess may repeat symbols and is scored per position as the 1971
    BASIC program does (each guessed symbol individually wins a bull, a cow, or nothing).
    """

    length: int = 4
    alphabet: str = "0123456789"
    repeats_in_guess: bool = False

    def __post_init__(self) -> None:
        if not 3 <= self.length <= 6:
            raise ValueError(f"length must be 3-6, got {self.length}")
        if not self.length <= len(self.alphabet) <= 16:
            raise ValueError(
                f"alphabet must have {self.length}-16 symbols, got {len(self.alphabet)}"
            )
        if len(set(self.alphabet)) != len(self.alphabet):
            raise ValueError("alphabet symbols must be distinct")
        if any(not ch.isprintable() or ch.isspace() or ch == "," for ch in self.alphabet):
            raise ValueError("alphabet symbols must be printable, no spaces or commas")

    # -- describing -----------------------------------------------------------------------
    @property
    def symbols_text(self) -> str:
        """How error messages name the alphabet: ``digits 0-9`` or ``letters A-F``."""
        a = self.alphabet
        if a == "0123456789ABCDEF":
            return "hex digits 0-F"
        contiguous = all(ord(b) - ord(x) == 1 for x, b in itertools.pairwise(a))
        kind = "digits" if a.isdigit() else "letters" if a.isalpha() else "symbols"
        return f"{kind} {a[0]}-{a[-1]}" if contiguous else f"symbols {', '.join(a)}"

    def to_dict(self) -> dict[str, object]:
        return {
            "game": "moo",
            "length": self.length,
            "alphabet": self.alphabet,
            "repeats_in_guess": self.repeats_in_guess,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Rules:
        return cls(
            length=int(data.get("length", 4)),  # type: ignore[call-overload]
            alphabet=str(data.get("alphabet", "0123456789")),
            repeats_in_guess=bool(data.get("repeats_in_guess", False)),
        )

    # -- the code space -------------------------------------------------------------------
    @cached_property
    def secrets(self) -> tuple[str, ...]:
        """Every legal secret in ascending order (5040 for the standard game)."""
        return tuple("".join(p) for p in itertools.permutations(self.alphabet, self.length))

    @cached_property
    def guesses(self) -> tuple[str, ...]:
        """Every legal guess; the secrets unless the variant allows repeats in a guess."""
        if not self.repeats_in_guess:
            return self.secrets
        return tuple("".join(p) for p in itertools.product(self.alphabet, repeat=self.length))

    @cached_property
    def responses(self) -> tuple[Response, ...]:
        """Every response a guess can get against a distinct-symbol secret.

        For distinct guesses that is bulls + cows <= length, less (length-1 bulls, 1 cow),
        which is impossible: 14 responses for 4 of 10, ordered as in Tanaka's tables.
        """
        out = [
            Response(b, c)
            for b in range(self.length, -1, -1)
            for c in range(self.length - b, -1, -1)
            if not (b == self.length - 1 and c == 1)
        ]
        if len(self.alphabet) - self.length < self.length:
            # With few spare symbols some totals are forced: b + c >= 2*length - |alphabet|.
            floor = 2 * self.length - len(self.alphabet)
            out = [r for r in out if r.bulls + r.cows >= floor]
        return tuple(out)

    @property
    def solved(self) -> Response:
        return Response(self.length, 0)

    # -- validation -------------------------------------------------------------------------
    def check_secret(self, text: object) -> str:
        """Return ``text`` as a canonical secret or raise an :class:`InvalidCode` subclass."""
        return self._check(text, distinct=True)

    def check_guess(self, text: object) -> str:
        """Return ``text`` as a canonical guess or raise an :class:`InvalidCode` subclass."""
        return self._check(text, distinct=not self.repeats_in_guess)

    @cached_property
    def _known(self) -> tuple[dict[str, str], dict[str, str]]:
        """Every legal secret and guess, each mapped to one shared string object.

        A valid code is then accepted with one dictionary lookup, and every match stores the
        same few thousand string objects instead of a fresh copy per guess. Variants with more
        than 100 000 legal guesses (repeats allowed, 5-6 positions) skip the table and go
        through the full check below.
        """
        secrets = {code: code for code in self.secrets}
        if not self.repeats_in_guess:
            return secrets, secrets
        if len(self.alphabet) ** self.length > 100_000:
            return secrets, {}
        return secrets, {code: code for code in self.guesses}

    def _check(self, text: object, *, distinct: bool) -> str:
        if type(text) is str:
            known = self._known[0 if distinct else 1].get(text)
            if known is not None:
                return known
        if not isinstance(text, str):
            raise UnknownSymbol(
                f"a code is a string of {self.length} {self.symbols_text}, "
                f"got {type(text).__name__}"
            )
        # Nothing is stripped: a space, tab or no-break space is a symbol outside the alphabet,
        # so the code is refused and the message counts the characters actually sent.
        code = text
        if self.alphabet.isupper():
            code = code.upper()
        elif self.alphabet.islower():
            code = code.lower()
        bad = sorted({ch for ch in code if ch not in self.alphabet})
        if bad:
            shown = ", ".join(repr(ch) for ch in bad[:5])
            raise UnknownSymbol(f"only {self.symbols_text} (not {shown})")
        if len(code) != self.length:
            unit = self.symbols_text.split()[0]
            raise WrongLength(f"expected {self.length} {unit}, got {len(code)}")
        if distinct and len(set(code)) != len(code):
            unit = self.symbols_text.split()[0]
            repeated = sorted({ch for ch in code if code.count(ch) > 1})
            raise RepeatedSymbol(
                f"{unit} must be distinct ({', '.join(repeated)} repeated)"
            )
        return self._known[0 if distinct else 1].get(code, code)

    def is_secret(self, text: str) -> bool:
        try:
            self.check_secret(text)
        except ValueError:
            return False
        return True

    # -- scoring ----------------------------------------------------------------------------
    def score(self, secret: str, guess: str) -> Response:
        """Score ``guess`` against ``secret``; see :func:`score`."""
        return score(secret, guess)

    def consistent(
        self, candidates: Iterator[str] | tuple[str, ...] | list[str], guess: str,
        response: tuple[int, int],
    ) -> list[str]:
        """The candidates that would have answered ``guess`` with ``response``."""
        want = Response(*response)
        return [c for c in candidates if score(c, guess) == want]


def score(secret: str, guess: str) -> Response:
    """Bulls and cows of ``guess`` against a distinct-symbol ``secret``.

    Scored per guessed position as the 1971 program does: a symbol in the right place is a bull,
    a symbol elsewhere in the secret is a cow. For a guess of distinct symbols this equals the
    usual multiset rule; for a guess with repeats it is the 1971 rule (each copy is awarded).
    """
    bulls = cows = 0
    for i, ch in enumerate(guess):
        if secret[i] == ch:
            bulls += 1
        elif ch in secret:
            cows += 1
    return Response(bulls, cows)


DEFAULT_RULES = Rules()
