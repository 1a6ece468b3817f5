"""Exact race values when a player adapts to the other's progress (``moo eval``, issue 14).

Two fixed strategies' race follows from their guess-count distributions alone
(:func:`bots.evaluate.match_probabilities`). An adaptive player's guesses also depend on what
it sees of the opponent, so the race is enumerated instead, over every pair of secrets at once:

* Each player's candidate set is the set of codes its own responses still allow, and the other
  side's secret is uniform on it; the two sets evolve independently *given* what each player
  sees (its own responses and the opponent's visible moves). So a state is a pair of players
  with their candidate sets (A's set ``SA``, B's set ``SB``), and the ``|SA| · |SB|`` pairs of
  secrets that reach it are counted together: each round splits ``SA`` by A's guess and
  ``SB`` by B's guess, and the race rule decides the pairs where someone is solved (one
  solver wins, two draw). Counts are integers, so win/draw/loss are exact fractions of
  ``5040²``.
* A fixed side (``deterministic``) is replaced by its decision tree first (one game per
  secret), so that side costs a dict lookup per state and its states are shared; an adaptive
  side is branched with :meth:`bots.base.Strategy.fork`.
* A random strategy is branched with its rng state, which samples one line of play per
  branch: the result is then exact over secrets but sampled over its choices, and says so.

The enumeration costs one step per reachable pair of (A state, B state); against ``strongest``
that is a few million, see ``docs/benchmarks.md`` for the run time.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

from bots.base import Strategy
from bots.playout import play_all
from bots.table import ResponseTable, table_for
from bots.tree import DecisionTree
from moo.rules import DEFAULT_RULES, Response, Rules

__all__ = ["RaceResult", "race"]

#: A race longer than this means a strategy that does not converge.
MAX_ROUNDS = 40


@dataclass
class RaceResult:
    """Pair counts of one race enumeration (A's point of view)."""

    win: int = 0
    draw: int = 0
    loss: int = 0
    #: rounds played -> pairs of secrets whose race lasted that long
    rounds: Counter[int] = field(default_factory=Counter)
    #: states enumerated
    states: int = 0
    seconds: float = 0.0

    @property
    def pairs(self) -> int:
        return self.win + self.draw + self.loss

    def fractions(self) -> tuple[Fraction, Fraction, Fraction]:
        n = self.pairs
        return Fraction(self.win, n), Fraction(self.draw, n), Fraction(self.loss, n)

    @property
    def score(self) -> Fraction:
        w, d, _ = self.fractions()
        return w + d / 2


class Agent(Protocol):
    """One side's decision state: its next guess, and the state after a round."""

    def guess(self) -> int: ...
    def advance(self, own: int, r: int, opp: int, opp_r: int, n: int) -> Agent: ...


class TreeAgent:
    """A fixed strategy as its tree; states are shared per node (they ignore the opponent)."""

    __slots__ = ("_guess", "_kids", "key", "moves", "table")

    def __init__(
        self, moves: dict[tuple[Response, ...], str], table: ResponseTable,
        key: tuple[Response, ...] = (),
    ) -> None:
        self.moves, self.table, self.key = moves, table, key
        self._guess = table.guess_index[moves[key]]
        self._kids: dict[int, TreeAgent] = {}

    def guess(self) -> int:
        return self._guess

    def advance(self, own: int, r: int, opp: int, opp_r: int, n: int) -> Agent:
        kid = self._kids.get(r)
        if kid is None:
            kid = TreeAgent(self.moves, self.table, (*self.key, self.table.responses[r]))
            self._kids[r] = kid
        return kid


class StrategyAgent:
    """A strategy object in some state; each branch of the race gets its own fork."""

    __slots__ = ("_guess", "show_guesses", "strategy", "table")

    def __init__(self, strategy: Strategy, table: ResponseTable, show_guesses: bool) -> None:
        self.strategy, self.table, self.show_guesses = strategy, table, show_guesses
        self._guess: int | None = None

    def guess(self) -> int:
        if self._guess is None:
            code = self.table.rules.check_guess(self.strategy.next_guess())
            self._guess = self.table.guess_index[code]
        return self._guess

    def advance(self, own: int, r: int, opp: int, opp_r: int, n: int) -> Agent:
        s = self.strategy.fork()
        responses = self.table.responses
        s.observe(self.table.guesses[own], responses[r])
        shown = self.table.guesses[opp] if self.show_guesses else None
        s.observe_opponent_move(n, shown, responses[opp_r])
        return StrategyAgent(s, self.table, self.show_guesses)


def agent_for(
    strategy: Strategy, rules: Rules, *, show_guesses: bool = True, seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> tuple[Agent, bool]:
    """(the side's starting agent, exact?) for a bare (not relabelled) strategy.

    ``progress`` follows the games a fixed side plays to make its tree (``play_all``): for a
    heuristic strategy that is many seconds before the race starts."""
    table = table_for(rules)
    if strategy.deterministic and not strategy.adaptive:
        games = play_all(strategy, rules, seed=seed, progress=progress)
        tree = DecisionTree.from_dump(games, rules, strategy.name or type(strategy).__name__)
        return TreeAgent(tree.moves, table), True
    strategy.new_match(rules, random.Random(seed))
    return StrategyAgent(strategy, table, show_guesses), strategy.adaptive


def race(
    a: Agent, b: Agent, rules: Rules = DEFAULT_RULES,
    *, progress: Callable[[int], None] | None = None,
) -> RaceResult:
    """Enumerate the lockstep race of ``a`` against ``b`` over all pairs of secrets.

    ``progress`` is called now and then with the number of pairs of secrets whose race is
    decided so far, and last with all of them (``len(secrets)²``): the depth-first walk
    settles whole subtrees in turn, so that count grows about evenly with the time spent,
    where the number of states has no known end (a race against ``strongest`` runs for
    minutes: issue 32).
    """
    table = table_for(rules)
    if rules.repeats_in_guess:
        raise ValueError("race enumeration supports distinct-symbol guesses only")
    # One bytes row per guess: indexing bytes is the fastest per-element read in Python, and
    # nearly all states hold a handful of codes. (The matrix is symmetric without repeats.)
    rows = [bytes(row) for row in table.rows(table.all_secrets())]
    solved = table.solved_id
    out = RaceResult()
    started = time.perf_counter()
    Codes = tuple[int, ...]

    def split(g: int, cands: Codes) -> tuple[int, list[tuple[int, Codes]]]:
        row = rows[g]
        groups: dict[int, list[int]] = {}
        for c in cands:
            r = row[c]
            got = groups.get(r)
            if got is None:
                groups[r] = [c]
            else:
                got.append(c)
        hit = len(groups.pop(solved, ()))
        return hit, [(r, tuple(v)) for r, v in groups.items()]

    def step(pa: Agent, sa: Codes, pb: Agent, sb: Codes, played: int) -> None:
        out.states += 1
        if progress is not None and out.states % 1024 == 0:
            progress(out.win + out.draw + out.loss)
        ga, gb = pa.guess(), pb.guess()
        hit_a, parts_a = split(ga, sa)
        hit_b, parts_b = split(gb, sb)
        na, nb = len(sa), len(sb)
        out.win += hit_a * (nb - hit_b)
        out.draw += hit_a * hit_b
        out.loss += (na - hit_a) * hit_b
        ended = na * nb - (na - hit_a) * (nb - hit_b)
        if ended:
            out.rounds[played + 1] += ended
        if not parts_a or not parts_b:
            return
        if played + 1 >= MAX_ROUNDS:
            raise RuntimeError(f"the race did not end in {MAX_ROUNDS} rounds")
        n = played + 1
        for rb, part_b in parts_b:
            kid_b = pb.advance(gb, rb, ga, -1, n) if isinstance(pb, TreeAgent) else None
            for ra, part_a in parts_a:
                step(
                    pa.advance(ga, ra, gb, rb, n), part_a,
                    kid_b if kid_b is not None else pb.advance(gb, rb, ga, ra, n), part_b, n,
                )

    every = tuple(range(len(table.secrets)))
    step(a, every, b, every, 0)
    if progress is not None:
        progress(len(every) ** 2)
    out.seconds = time.perf_counter() - started
    return out
