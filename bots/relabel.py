"""Unexploitable play: every match is played through a random relabelling of the code space.

A fixed strategy is a decision tree, so its opponent could learn which secrets it needs the
most guesses for (a handful need 7) and always pick one. Renaming the symbols with a random
permutation σ of the alphabet and reordering the positions with a random permutation π before
the tree sees anything removes that edge: responses are invariant when guess and secret are
relabelled alike, so the tree effectively plays against the secret T⁻¹(secret) for T = σ∘π
drawn uniformly. Symbol permutations alone act transitively on the secrets, hence T⁻¹(secret)
is uniform over all secrets whatever the opponent chose: every secret faces exactly the tree's
overall guess-count distribution.

The permutation is drawn from the match rng (the only randomness a strategy may use), so a
seeded match replays identically.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from bots.base import Strategy
from moo.rules import Response, Rules

__all__ = ["Relabelled", "relabelled"]


class Relabelled(Strategy):
    """Plays ``inner`` in a private frame; guesses are mapped out through σ∘π each match."""
    share_openings = False  # a wrapper: its inner strategy decides (and is evaluated unwrapped)


    inner_class: ClassVar[type[Strategy] | None] = None

    def __init__(self, inner: Strategy) -> None:
        self.inner = inner
        self._symbols: dict[str, str] = {}
        self._positions: list[int] = []
        self._inverse: dict[str, str] = {}

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        shuffled = list(rules.alphabet)
        rng.shuffle(shuffled)
        self._positions = list(range(rules.length))
        rng.shuffle(self._positions)
        self._symbols = dict(zip(rules.alphabet, shuffled, strict=True))
        self._inverse = {v: k for k, v in self._symbols.items()}
        self.inner.new_match(rules, rng)

    def to_outer(self, code: str) -> str:
        """Inner-frame code -> the code actually played: position i shows inner[π(i)], renamed."""
        return "".join(self._symbols[code[p]] for p in self._positions)

    def to_inner(self, code: str) -> str:
        out = [""] * len(code)
        for i, p in enumerate(self._positions):
            out[p] = self._inverse[code[i]]
        return "".join(out)

    def next_guess(self) -> str:
        return self.to_outer(self.inner.next_guess())

    def observe(self, guess: str, response: Response) -> None:
        self.inner.observe(self.to_inner(guess), response)

    def observe_opponent(self, count: int, response: Response | None) -> None:
        self.inner.observe_opponent(count, response)

    def observe_opponent_move(
        self, count: int, guess: str | None, response: Response | None
    ) -> None:
        # The opponent's guesses are codes for *our* secret, chosen in its own frame: our
        # relabelling does not apply to them, so they pass through unchanged.
        self.inner.observe_opponent_move(count, guess, response)

    def __getattr__(self, attr: str) -> Any:
        # Extra read-outs of the inner bot (e.g. ``choices_left``) stay available.
        if attr == "inner":
            raise AttributeError(attr)
        return getattr(self.inner, attr)


_CLASSES: dict[type[Strategy], type[Relabelled]] = {}


def relabelled(inner: Strategy) -> Relabelled:
    """Wrap ``inner``; the wrapper class carries the inner ``name`` and ``summary``."""
    cls = type(inner)
    wrapper = _CLASSES.get(cls)
    if wrapper is None:
        wrapper = type(
            f"Relabelled{cls.__name__}",
            (Relabelled,),
            {
                "name": cls.name,
                "summary": cls.summary,
                "deterministic": False,
                "adaptive": False,
                "inner_class": cls,
            },
        )
        _CLASSES[cls] = wrapper
    return wrapper(inner)
