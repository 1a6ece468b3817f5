"""Play a strategy against every secret: the common ground of evaluation, dumps and tests.

The strategy is driven exactly as the server drives it (``new_match``, then ``next_guess`` /
``observe`` until 4 bulls) but without relabelling, so the result is the strategy's own
decision tree. Every game gets its own rng seeded from (seed, sample, secret), so a random
strategy's line for a secret does not depend on which other secrets were played.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from bots.base import Strategy
from moo.rules import DEFAULT_RULES, Rules

__all__ = ["MAX_GUESSES", "Progress", "play_all", "play_one"]

#: A game longer than this is a broken strategy (the worst sensible one needs ~10 for 4 of 10).
MAX_GUESSES = 50

Game = tuple[str, tuple[str, ...]]


def play_one(strategy: Strategy, rules: Rules, secret: str, rng: random.Random) -> tuple[str, ...]:
    """The guesses ``strategy`` makes against ``secret``; the last one is the secret."""
    strategy.new_match(rules, rng)
    guesses: list[str] = []
    while len(guesses) < MAX_GUESSES:
        guess = rules.check_guess(strategy.next_guess())
        guesses.append(guess)
        response = rules.score(secret, guess)
        if response == rules.solved:
            return tuple(guesses)
        strategy.observe(guess, response)
    raise RuntimeError(
        f"{type(strategy).__name__} did not find {secret} in {MAX_GUESSES} guesses"
    )


def game_rng(seed: int, sample: int, secret: str) -> random.Random:
    return random.Random(f"{seed}:{sample}:{secret}")


def play_all(
    strategy: Strategy,
    rules: Rules = DEFAULT_RULES,
    *,
    seed: int = 0,
    sample: int = 0,
    progress: Callable[[int], None] | None = None,
    secrets: Sequence[str] | None = None,
) -> list[Game]:
    """One game per secret (all of ``rules.secrets`` unless given), in order.

    The full set of games of a built-in fixed heuristic is remembered per process: it is a pure
    function of (class, rules), and evaluation, dumps and benchmarks all ask for it.
    """
    from bots.heuristic import CandidateStrategy

    key = (type(strategy), rules)
    cacheable = secrets is None and isinstance(strategy, CandidateStrategy)
    if cacheable and key in _GAMES:
        if progress is not None:
            progress(len(rules.secrets))
        return list(_GAMES[key])
    out: list[Game] = []
    for i, secret in enumerate(rules.secrets if secrets is None else secrets):
        out.append((secret, play_one(strategy, rules, secret, game_rng(seed, sample, secret))))
        if progress is not None and i % 64 == 63:
            progress(i + 1)
    if cacheable:
        _GAMES[key] = tuple(out)
    return out


_GAMES: dict[tuple[type[Strategy], Rules], tuple[Game, ...]] = {}


class Progress:
    """A stderr progress bar that stays silent for quick jobs.

    Nothing is drawn before ``delay`` seconds have passed, so fast evaluations (and tests) print
    nothing, while a first-time heuristic evaluation or a sampled random strategy shows that it
    is working. Carriage-return redraws only make sense on a terminal, so by default nothing
    is drawn when the stream is redirected to a file or pipe.
    """

    def __init__(
        self,
        total: int,
        label: str,
        *,
        stream: TextIO | None = None,
        delay: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        only_tty: bool = True,
    ) -> None:
        self.total, self.label, self.delay, self.clock = total, label, delay, clock
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = not only_tty or bool(callable(isatty) and isatty())
        self.start = clock()
        self.last = -1.0
        self.drawn = False
        self.offset = 0

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now - self.start < self.delay or now - self.last < 0.1:
            return
        self.last = now
        done += self.offset
        width = 30
        filled = width * done // max(1, self.total)
        self.stream.write(
            f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{self.total}"
        )
        self.stream.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.drawn:
            self.stream.write(f"\r{self.label} [{'#' * 30}] {self.total}/{self.total}\n")
            self.stream.flush()
