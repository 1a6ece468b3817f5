"""Play a strategy against every secret: the common ground of evaluation, dumps and tests.

The strategy is driven exactly as the server drives it (``new_match``, then ``next_guess`` /
``observe`` until 4 bulls) but without relabelling, so the result is the strategy's own
decision tree. Every game gets its own rng seeded from (seed, sample, secret), so a random
strategy's line for a secret does not depend on which other secrets were played.

Why the games are first played as one tree: a strategy that draws no random number makes the
same first guess against every secret, the same second guess against every secret that gave
the same first response, and so on. Playing the 5040 games one by one repeats that shared
opening work thousands of times (a ten-line Python strategy that filters its candidates took
over a minute); walking the tree once, with a :meth:`~bots.base.Strategy.fork` of the strategy
at each branch, asks it once per node instead, and gives every secret exactly the line it
would have got alone. The walk hands the strategy an rng that refuses to be used: a strategy
that draws from it (or cannot be forked) is played secret by secret as before.
"""

from __future__ import annotations

import copy
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
    todo = rules.secrets if secrets is None else secrets
    shared = _play_shared(strategy, rules, todo, progress) if strategy.share_openings else None
    if shared is not None:
        if cacheable:
            _GAMES[key] = tuple(shared)
        return shared
    out: list[Game] = []
    for i, secret in enumerate(todo):
        out.append((secret, play_one(strategy, rules, secret, game_rng(seed, sample, secret))))
        if progress is not None and i % 64 == 63:
            progress(i + 1)
    if cacheable:
        _GAMES[key] = tuple(out)
    return out


_GAMES: dict[tuple[type[Strategy], Rules], tuple[Game, ...]] = {}


class _Drawn(Exception):
    """The strategy drew a random number: its games cannot be shared."""


class _Untouchable(random.Random):
    """An rng that refuses every draw (every method of :class:`random.Random` that draws
    goes through one of these two)."""

    def random(self) -> float:
        raise _Drawn

    def getrandbits(self, k: int) -> int:
        raise _Drawn


def _fork(player: Strategy, shared: dict[int, object]) -> Strategy:
    """A copy of ``player`` for one branch. The default :meth:`~bots.base.Strategy.fork`
    deep-copies everything, the match's rules and their tables included (thousands of codes
    per node of the walk); the rules and the rng are immutable here, so they are shared."""
    if type(player).fork is not Strategy.fork:
        return player.fork()  # the strategy knows what it may share
    return copy.deepcopy(player, dict(shared))


def _play_shared(
    strategy: Strategy, rules: Rules, secrets: Sequence[str],
    progress: Callable[[int], None] | None,
) -> list[Game] | None:
    """Every secret's game, played as one tree (see the module docstring); None when the
    strategy draws random numbers."""
    lines: dict[str, tuple[str, ...]] = {}
    try:
        rng = _Untouchable()
        shared: dict[int, object] = {id(rules): rules, id(rng): rng}
        root = _fork(strategy, shared)
        root.new_match(rules, rng)
        stack: list[tuple[Strategy, list[str], tuple[str, ...]]] = [(root, list(secrets), ())]
        while stack:
            player, group, line = stack.pop()
            if len(line) >= MAX_GUESSES:
                raise RuntimeError(f"{type(strategy).__name__} did not find {min(group)} "
                                   f"in {MAX_GUESSES} guesses")
            guess = rules.check_guess(player.next_guess())
            line = (*line, guess)
            parts: dict[object, list[str]] = {}
            for secret in group:
                parts.setdefault(rules.score(secret, guess), []).append(secret)
            for secret in parts.pop(rules.solved, ()):
                lines[secret] = line
            branches = list(parts.items())
            for i, (response, part) in enumerate(branches):
                # the last branch may take the node's own copy: nobody needs it after
                child = player if i == len(branches) - 1 else _fork(player, shared)
                child.observe(guess, response)  # type: ignore[arg-type]
                stack.append((child, part, line))
            if progress is not None:
                progress(len(lines))
    except _Drawn:
        return None
    return [(secret, lines[secret]) for secret in secrets]


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
