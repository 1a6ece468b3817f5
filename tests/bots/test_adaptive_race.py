"""Exact race enumeration (bots/race.py) and the opponent feed of every runner.

The enumeration is checked on a small game (3 of 5: 60 secrets, 3600 pairs) against plain
match-by-match simulation of every pair of secrets, with an adaptive toy strategy whose
guesses depend on the opponent's visible guesses and responses; the full game's figures are
in docs/strategies.md (minutes of CPU, bench/adaptive_races.py).
"""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

from bots.base import Strategy
from bots.evaluate import match_probabilities
from bots.expected import ExpectedSize
from bots.minimax import Minimax
from bots.playout import play_all
from bots.race import TreeAgent, agent_for, race
from bots.registry import create
from bots.relabel import relabelled
from bots.table import table_for
from bots.tree import DecisionTree
from clients.tournament.runner import Job, play_local
from moo.match import MatchConfig
from moo.rules import Response, Rules, score

SMALL = Rules(length=3, alphabet="01234")


class Nervous(ExpectedSize):
    """Expected-size play, but a candidate guess whenever the opponent looks close.

    Close means: its last response had two bulls, or its last visible guess shared the
    first symbol with our last guess. Deterministic given what it saw, as ``adaptive`` asks.
    """

    name = "nervous"
    adaptive = True

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        super().new_match(rules, rng)
        self.close = False
        self.last_own = ""

    def observe(self, guess: str, response: Response) -> None:
        super().observe(guess, response)
        self.last_own = guess

    def observe_opponent_move(
        self, count: int, guess: str | None, response: Response | None
    ) -> None:
        near = response is not None and response.bulls >= 2
        echo = guess is not None and self.last_own[:1] == guess[:1]
        self.close = near or echo

    def next_guess(self) -> str:
        if self.close:
            table = self.table
            return table.secrets[int(self._candidates[-1])]
        return super().next_guess()

    def fork(self) -> Nervous:
        clone = Nervous()
        clone.__dict__.update(self.__dict__)
        return clone


def simulate(a: Strategy, b: Strategy, rules: Rules) -> tuple[int, int, int, Counter[int]]:
    """Every pair of secrets played as a lockstep match, one at a time (the slow truth)."""
    win = draw = loss = 0
    rounds: Counter[int] = Counter()
    for x in rules.secrets:  # A looks for x (B's secret)
        for y in rules.secrets:  # B looks for y (A's secret)
            a.new_match(rules, random.Random(0))
            b.new_match(rules, random.Random(0))
            n = 0
            while True:
                n += 1
                ga, gb = a.next_guess(), b.next_guess()
                ra, rb = score(x, ga), score(y, gb)
                sa, sb = ra == rules.solved, rb == rules.solved
                if sa or sb:
                    win += sa and not sb
                    draw += sa and sb
                    loss += sb and not sa
                    rounds[n] += 1
                    break
                a.observe(ga, ra)
                b.observe(gb, rb)
                a.observe_opponent_move(n, gb, rb)
                b.observe_opponent_move(n, ga, ra)
    return win, draw, loss, rounds


def test_race_enumeration_equals_simulating_every_pair_of_secrets() -> None:
    a, b = Nervous(), Minimax()
    truth = simulate(a, b, SMALL)
    pa, exact_a = agent_for(Nervous(), SMALL)
    pb, exact_b = agent_for(Minimax(), SMALL)
    got = race(pa, pb, SMALL)
    assert exact_a and exact_b and isinstance(pb, TreeAgent)
    assert (got.win, got.draw, got.loss, got.rounds) == truth
    assert got.pairs == len(SMALL.secrets) ** 2


def test_an_adaptive_strategy_against_itself_scores_exactly_one_half() -> None:
    got = race(agent_for(Nervous(), SMALL)[0], agent_for(Nervous(), SMALL)[0], SMALL)
    assert got.win == got.loss and got.score == Fraction(1, 2)
    # and it does adapt: against a fixed player its race differs from plain ExpectedSize's
    fixed = race(agent_for(ExpectedSize(), SMALL)[0], agent_for(Minimax(), SMALL)[0], SMALL)
    adapt = race(agent_for(Nervous(), SMALL)[0], agent_for(Minimax(), SMALL)[0], SMALL)
    assert (fixed.win, fixed.draw) != (adapt.win, adapt.draw)


def test_fixed_against_fixed_the_race_agrees_with_the_distributions() -> None:
    dists = []
    agents = []
    for strategy in (ExpectedSize(), Minimax()):
        games = play_all(strategy, SMALL)
        dists.append(Counter(len(g) for _, g in games))
        tree = DecisionTree.from_dump(games, SMALL, strategy.name)
        agents.append(TreeAgent(tree.moves, table_for(SMALL)))
    got = race(agents[0], agents[1], SMALL)
    assert got.fractions() == match_probabilities(dists[0], dists[1])


class Recorder(Strategy):
    """Plays the first consistent code and records what it is told about the opponent."""

    name = "recorder"

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self.rules, self.left = rules, list(rules.secrets)
        self.seen: list[tuple[int, str | None, Response | None]] = []

    def next_guess(self) -> str:
        return self.left[0]

    def observe(self, guess: str, response: Response) -> None:
        self.left = self.rules.consistent(self.left, guess, response)

    def observe_opponent_move(
        self, count: int, guess: str | None, response: Response | None
    ) -> None:
        self.seen.append((count, guess, response))


def _local(show_guesses: bool) -> tuple[Recorder, Recorder, list[list[str]]]:
    a, b = Recorder(), Recorder()
    job = Job("k", 1, 0, 0, (0, 1), ("a", "b"), ("a", "b"), ("0123", "4567"))
    record = play_local(job, (a, b), MatchConfig(show_guesses=show_guesses))
    return a, b, record.guesses


def test_the_local_runner_shows_the_opponents_guesses_only_when_the_match_does() -> None:
    a, b, guesses = _local(True)
    assert [g for _, g, _ in a.seen] == guesses[1][: len(a.seen)]
    assert [n for n, _, _ in a.seen] == list(range(1, len(a.seen) + 1))
    assert all(r is not None for _, _, r in b.seen) and len(b.seen) >= 1
    a, _, _ = _local(False)
    assert a.seen and all(g is None for _, g, _ in a.seen)


class OldStyle(Recorder):
    """A strategy written before guesses were passed: overrides observe_opponent only."""

    def observe_opponent_move(  # the base default forwards to observe_opponent
        self, count: int, guess: str | None, response: Response | None
    ) -> None:
        Strategy.observe_opponent_move(self, count, guess, response)

    def observe_opponent(self, count: int, response: Response | None) -> None:
        self.seen.append((count, None, response))


def test_old_strategies_still_get_the_responses_and_relabelling_passes_guesses_through() -> None:
    old = OldStyle()
    old.new_match(SMALL, random.Random(1))
    old.observe_opponent_move(1, "012", Response(1, 1))
    assert old.seen == [(1, None, Response(1, 1))]
    inner = Recorder()
    wrapped = relabelled(inner)
    wrapped.new_match(Rules(), random.Random(5))
    wrapped.observe_opponent_move(1, "0123", Response(0, 2))
    assert inner.seen == [(1, "0123", Response(0, 2))]  # the opponent's frame, not ours
    assert create("adaptive").adaptive is False  # the wrapper is not enumerable itself
    assert create("adaptive", relabel=False).adaptive is True


def test_a_hosted_bot_sees_what_a_client_in_its_seat_would_see() -> None:
    from moo.match import Match
    from server.hosted import HostedBot, think, visible_to

    for pacing, shown in (("lockstep", True), ("lockstep", False), ("free", True)):
        config = MatchConfig(pacing=pacing, show_guesses=shown)
        match, _ = Match.create("m", ("p", "bot"), config, 0)
        match.set_secret(0, "0123", "s0", 0)
        match.set_secret(1, "4567", "s1", 0)
        match.guess(0, "0145", 1)  # 0B2C against 4567
        seen = ("0145" if shown else None, 0, 2)
        # lockstep: round 1 is not over, so the bot (seat 1) has seen nothing of it yet
        assert visible_to(match, 1) == ([] if pacing == "lockstep" else [seen])
        match.guess(1, "8901", 2)  # 0B1C against 0123: nobody solves
        assert visible_to(match, 1) == [seen]
        bot = HostedBot("recorder", random.Random(0), strategy=Recorder())
        think(bot, config.rules, list(match.seats[1].guesses), visible_to(match, 1))
        assert isinstance(bot.strategy, Recorder)
        assert bot.strategy.seen == [(1, seen[0], Response(0, 2))]
        think(bot, config.rules, list(match.seats[1].guesses), visible_to(match, 1))
        assert len(bot.strategy.seen) == 1  # told once, not again on the next move


def test_a_report_takes_an_adaptive_strategys_cells_from_the_race(tmp_path: object) -> None:
    from pathlib import Path

    from bots.report import write_report

    spec = "tests.bots.test_adaptive_race:Nervous"
    data = write_report([spec, "minimax"], Path(str(tmp_path)), rules=SMALL, baseline=None)
    label = {d["spec"]: d["name"] for d in data["strategies"]}
    row = data["matrix"][label[spec]]
    other = label["minimax"]
    got = race(agent_for(Nervous(), SMALL)[0], agent_for(Minimax(), SMALL)[0], SMALL)
    w, d, lo = got.fractions()
    assert row[other] == {"win": str(w), "draw": str(d), "loss": str(lo),
                          "score": float(w + d / 2)}
