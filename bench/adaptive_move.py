"""Time per move of the ``adaptive`` bot in real matches (issue 14: p99 <= 50 ms).

    .venv/bin/python -m bench.adaptive_move [--matches 300] [--vs strongest minimum entropy]

Plays seeded lockstep matches on the in-process match (``clients.tournament.runner``'s
``play_local``, the same calls a server's hosted bot or ``moo bot`` makes: relabelled bot,
``next_guess`` after ``observe`` and ``observe_opponent_move``) and times every call of the
adaptive side: ``next_guess`` plus the observations that precede it, wall clock
(``time.perf_counter``; the machine is shared, so figures are upper bounds). The one-off
process start (trees, decision tables: about a second) is timed apart, as a server pays it once.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from bots.base import Strategy
from bots.registry import create
from clients.tournament.runner import Job, play_local
from moo.match import MatchConfig
from moo.rules import DEFAULT_RULES, Response


class Timed(Strategy):
    """Wraps a strategy and records the wall time of each move's calls."""

    name = "timed"

    def __init__(self, inner: Strategy) -> None:
        self.inner = inner
        self.pending = 0.0
        self.moves: list[float] = []

    def new_match(self, rules: object, rng: random.Random) -> None:
        t0 = time.perf_counter()
        self.inner.new_match(DEFAULT_RULES, rng)
        self.pending = time.perf_counter() - t0

    def next_guess(self) -> str:
        t0 = time.perf_counter()
        guess = self.inner.next_guess()
        self.moves.append(self.pending + time.perf_counter() - t0)
        self.pending = 0.0
        return guess

    def observe(self, guess: str, response: Response) -> None:
        t0 = time.perf_counter()
        self.inner.observe(guess, response)
        self.pending += time.perf_counter() - t0

    def observe_opponent_move(
        self, count: int, guess: str | None, response: Response | None
    ) -> None:
        t0 = time.perf_counter()
        self.inner.observe_opponent_move(count, guess, response)
        self.pending += time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=300)
    parser.add_argument("--vs", nargs="+", default=["strongest", "minimum", "entropy"])
    args = parser.parse_args()
    t0 = time.perf_counter()
    bot = Timed(create("adaptive"))
    warm = create("adaptive", relabel=False)
    warm.new_match(DEFAULT_RULES, random.Random(0))
    warm.next_guess()
    from bots.adaptive import decision_table

    for name in ("strongest", "minimum"):
        decision_table(name)
    print(f"process start (trees + tables): {time.perf_counter() - t0:.2f} s")
    for vs in args.vs:
        opponent = create(vs)
        bot.moves.clear()
        for i in range(args.matches):
            job = Job(f"b{i}", i, i, 0, (0, 1), ("adaptive", vs), ("adaptive", vs), None)
            play_local(job, (bot, opponent), MatchConfig())
        ms = sorted(1000 * x for x in bot.moves)
        p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
        print(
            f"vs {vs}: {len(ms)} moves in {args.matches} matches; per move p50 "
            f"{statistics.median(ms):.2f} ms, p99 {p99:.2f} ms, max {ms[-1]:.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
