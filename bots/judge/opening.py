"""The opening table: exact values of every 4-of-10 position after one or two guesses.

A position is the set S of secrets consistent with the guesses and responses so far. Its
value W(S) (the least total number of guesses, this one included, summed over the secrets of
S) does not change when the digits and the positions are relabelled, because responses do
not. Every first guess is ``0123`` after relabelling, and given it the second guess falls in
one of 20 classes (the relabellings that keep ``0123`` in place permute its digits and
positions together and the other six digits freely). So the positions after two guesses are
finitely many up to relabelling: 1413 non-empty (second guess class, first response, second
response) triples, of which the table keeps the ones with three or more secrets (one secret
is worth 1, two are worth 3). Each line holds W(S) and an optimal guess in the canonical
labels; the positions after one guess (the 13 first-response cells) are in the table too.

The table is data, computed once by the exact solver (``python -m bench.judge_table
--build``) and shipped (``bots/data/opening-4-10.txt.gz``); ``--verify`` solves every entry
again and compares, and the test suite re-solves a sample. The canonical form of a pair of
guesses is found by trying the 24 position orders and numbering the digits in order of first
appearance; the smallest second guess wins (:func:`canonical_pair`).
"""

from __future__ import annotations

import gzip
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from moo.rules import DEFAULT_RULES, Response, Rules, score

__all__ = [
    "FIRST",
    "RULES",
    "TABLE",
    "OpeningTable",
    "Relabelling",
    "canonical_pair",
    "load",
    "positions",
    "second_classes",
]

#: The game the table is for, and the canonical first guess.
RULES = DEFAULT_RULES
FIRST = "0123"
TABLE = Path(__file__).resolve().parent.parent / "data" / "opening-4-10.txt.gz"


@dataclass(frozen=True)
class Relabelling:
    """A relabelling of codes: ``apply(x)[i] = symbols[x[order[i]]]``.

    Responses are invariant under it (the same permutation of positions and of symbols applied
    to secret and guess), so it maps positions to positions of equal value.
    """

    order: tuple[int, ...]
    symbols: dict[str, str]

    def apply(self, code: str) -> str:
        return "".join(self.symbols[code[j]] for j in self.order)

    def undo(self, code: str) -> str:
        inverse = {v: k for k, v in self.symbols.items()}
        out = [""] * len(code)
        for i, j in enumerate(self.order):
            out[j] = inverse[code[i]]
        return "".join(out)


@lru_cache(maxsize=4096)
def canonical_pair(first: str, second: str, alphabet: str = RULES.alphabet
                   ) -> tuple[str, Relabelling]:
    """The canonical second guess of the pair and a relabelling that maps ``first`` to ``0123``
    and ``second`` to it.

    Symbols are numbered in order of first appearance in the reordered pair (so ``first``
    always becomes ``0123``); symbols of neither guess are paired with the unused canonical
    symbols in order (any pairing gives the same position, since no guess tells them apart).

    Remembered (callers never modify the result): the review asks for the same pair once per
    part of every guess it values, and trying the 24 orders in Python is the costliest step of
    a table lookup.
    """
    best: tuple[str, tuple[int, ...], dict[str, str]] | None = None
    for order in itertools.permutations(range(len(first))):
        names: dict[str, str] = {}
        out = []
        for code in (first, second):
            for j in order:
                ch = code[j]
                if ch not in names:
                    names[ch] = alphabet[len(names)]
                out.append(names[ch])
        canon = "".join(out[len(first):])
        if best is None or canon < best[0]:
            best = (canon, order, names)
    assert best is not None
    canon, order, names = best
    spare = iter(c for c in alphabet if c not in set(names.values()))
    symbols = dict(names)
    for ch in alphabet:
        if ch not in symbols:
            symbols[ch] = next(spare)
    return canon, Relabelling(order, symbols)


def second_classes(rules: Rules = RULES) -> list[str]:
    """The canonical second guesses after ``0123`` (20 for 4 of 10), ascending."""
    return sorted({canonical_pair(FIRST, g, rules.alphabet)[0] for g in rules.secrets})


def _key(second: str, r1: Response | tuple[int, int], r2: Response | tuple[int, int]) -> str:
    return f"{second} {r1[0]}{r1[1]} {r2[0]}{r2[1]}"


def _cell_key(r1: Response | tuple[int, int]) -> str:
    return f"- {r1[0]}{r1[1]} -"


def positions(rules: Rules = RULES) -> Iterator[tuple[str, list[str], tuple[str, ...]]]:
    """Every table entry to compute: (key, history in canonical labels, secrets of S).

    First the 13 cells after ``0123`` (history ``[0123]``), then every position after
    ``0123`` and a canonical second guess with three or more secrets (history ``[0123, g]``).
    """
    cells: dict[Response, list[str]] = {}
    for s in rules.secrets:
        cells.setdefault(score(s, FIRST), []).append(s)
    for r1, cell in cells.items():
        if r1 != rules.solved and len(cell) >= 3:
            yield _cell_key(r1), [FIRST], tuple(cell)
    for second in second_classes(rules):
        for r1, cell in cells.items():
            if r1 == rules.solved:
                continue
            parts: dict[Response, list[str]] = {}
            for s in cell:
                parts.setdefault(score(s, second), []).append(s)
            for r2, part in parts.items():
                if len(part) >= 3:
                    yield _key(second, r1, r2), [FIRST, second], tuple(part)


class OpeningTable:
    """W(S) and an optimal guess for the positions of :func:`positions`, by key."""

    def __init__(self, entries: dict[str, tuple[int, str]]) -> None:
        self.entries = entries

    def cell(self, r1: Response | tuple[int, int]) -> tuple[int, str] | None:
        """(W, optimal guess) after ``0123`` answered ``r1``, canonical labels."""
        return self.entries.get(_cell_key(r1))

    def pair(self, second: str, r1: Response | tuple[int, int],
             r2: Response | tuple[int, int]) -> tuple[int, str] | None:
        """(W, optimal guess) after ``0123`` answered ``r1`` and canonical ``second``
        answered ``r2`` (None for a position of fewer than three secrets)."""
        return self.entries.get(_key(second, r1, r2))

    def dump(self, path: Path) -> None:
        """One ``KEY VALUE GUESS`` line per entry, sorted, gzip with a fixed header."""
        text = "".join(f"{k} {v} {g}\n" for k, (v, g) in sorted(self.entries.items()))
        with (
            open(path, "wb") as raw,
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as f,
        ):
            f.write(text.encode())

    @classmethod
    def parse(cls, lines: Sequence[str]) -> OpeningTable:
        entries: dict[str, tuple[int, str]] = {}
        for line in lines:
            parts = line.split()
            if len(parts) == 5:
                entries[" ".join(parts[:3])] = (int(parts[3]), parts[4])
        return cls(entries)


@cache
def load(path: Path = TABLE) -> OpeningTable:
    """The shipped table (read once per process: about 1400 lines)."""
    return OpeningTable.parse(gzip.decompress(path.read_bytes()).decode().splitlines())
