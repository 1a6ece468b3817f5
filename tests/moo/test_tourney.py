"""Hosted tournaments' pure part (moo/tourney.py): schedules, pairings and standings."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import pytest

from moo.stats import elo_from_score, elo_interval_pentanomial, elo_interval_trinomial
from moo.tourney import (
    Game,
    Tournament,
    arena_pairs,
    round_robin_schedule,
    standings,
    swiss_first_round,
    swiss_pairs,
)


@pytest.mark.parametrize("n", range(2, 11))
@pytest.mark.parametrize("meetings", [1, 2, 3])
def test_round_robin_every_two_players_meet_once_per_meeting_one_game_pair_a_round(
        n: int, meetings: int) -> None:
    players = [f"p{i}" for i in range(n)]
    rounds = round_robin_schedule(players, meetings)
    assert len(rounds) == meetings * (n - 1 if n % 2 == 0 else n)
    met = Counter(frozenset(pair) for pairs in rounds for pair in pairs)
    assert set(met) == {frozenset(p) for p in itertools.combinations(players, 2)}
    assert set(met.values()) == {meetings}
    for pairs in rounds:  # nobody twice in a round; at most one bye
        seated = [p for pair in pairs for p in pair]
        assert len(seated) == len(set(seated))
        assert len(seated) == n - (n % 2)


def test_round_robin_with_server_secrets_plays_each_pair_of_secrets_both_ways() -> None:
    t = _tournament("round-robin")
    for name in ("a", "b", "c", "d"):
        t.join(name)
    for number, pairs in enumerate(round_robin_schedule(t.players, 1), start=1):
        t.round = number
        for i, (x, y) in enumerate(pairs):
            t.add_pairing(x, y, (f"{number}{i}01", f"{number}{i}23"))
    by_pair: dict[int, list[Game]] = {}
    for g in t.games:
        by_pair.setdefault(g.pair, []).append(g)
    assert len(by_pair) == 6 and len(t.games) == 12
    for first, second in by_pair.values():
        assert second.players == (first.players[1], first.players[0])
        pair = first.secrets
        assert pair is not None and second.secrets == pair
        # each player guesses each code once: the secret of the other seat in each game
        a = first.players[0]
        assert second.players[1] == a
        guessed_by_a = {pair[1], pair[0]}  # seat 0 of the first, seat 1 of the second game
        assert guessed_by_a == set(pair) and len(pair) == 2


def _repeat_free(players: list[str], met: set[frozenset[str]]) -> bool:
    """Brute force: can ``players`` (even) be paired without a repeat?"""
    if not players:
        return True
    first = players[0]
    return any(frozenset((first, o)) not in met
               and _repeat_free([p for p in players[1:] if p != o], met)
               for o in players[1:])


@pytest.mark.parametrize("seed", range(4))
def test_swiss_never_repeats_a_pairing_while_one_without_repeats_exists(seed: int) -> None:
    rng = random.Random(seed)
    for n in range(2, 11):
        players = [f"p{i}" for i in range(n)]
        met: set[frozenset[str]] = set()
        byes: list[str] = []
        scores = dict.fromkeys(players, 0.0)
        pairs, bye = swiss_first_round(players)
        for _ in range(n - 1):
            for a, b in pairs:
                met.add(frozenset((a, b)))
                result = rng.choice((1.0, 0.5, 0.0))
                scores[a] += result
                scores[b] += 1 - result
            if bye is not None:
                byes.append(bye)
            ranked = sorted(players, key=lambda p: (-scores[p], players.index(p)))
            pairs, bye = swiss_pairs(ranked, scores, met, byes)
            seated = [p for pair in pairs for p in pair]
            assert sorted(seated + ([bye] if bye else [])) == sorted(players)
            feasible = any(_repeat_free([p for p in players if p != b], met)
                           for b in (players if n % 2 else [None]))
            repeats = [pair for pair in pairs if frozenset(pair) in met]
            assert not repeats or not feasible, (n, repeats)
            if bye is not None and bye in byes:  # a second bye only when it had to be
                assert not any(_repeat_free([p for p in players if p != b], met)
                               for b in players if b not in byes)


def test_swiss_pairs_nearest_scores_first() -> None:
    scores = {"a": 3.0, "b": 3.0, "c": 1.0, "d": 1.0}
    pairs, bye = swiss_pairs(["a", "b", "c", "d"], scores, set(), [])
    assert pairs == [("a", "b"), ("c", "d")] and bye is None
    # a and b met already: a takes the nearest other, the rest pair among themselves
    pairs, _ = swiss_pairs(["a", "b", "c", "d"], scores, {frozenset("ab")}, [])
    assert {frozenset(p) for p in pairs} == {frozenset("ac"), frozenset("bd")}


def test_arena_pairs_free_players_avoiding_the_last_opponent() -> None:
    assert arena_pairs(["a"], {}) == []
    assert arena_pairs(["a", "b", "c"], {}) == [("a", "b")]
    assert arena_pairs(["a", "b", "c"], {"a": "b", "b": "a"}) == [("a", "c")]
    # the last opponent when nobody else is free
    assert arena_pairs(["a", "b"], {"a": "b", "b": "a"}) == [("a", "b")]


def _tournament(fmt: str) -> Tournament:
    return Tournament(
        tournament_id="t1", name="x", creator="c", format=fmt, rules={}, pool="any",
        rounds=1, duration_s=None, rated=True, secrets="server", pacing="lockstep",
        starts_at=0,
    )


def _random_games(rng: random.Random, players: list[str], pairs: int) -> list[Game]:
    games: list[Game] = []
    for pair in range(1, pairs + 1):
        a, b = rng.sample(players, 2)
        for seats in ((a, b), (b, a)):
            result = rng.choice(("1-0", "0-1", "1/2-1/2", None))
            games.append(Game(1, seats, pair, None, f"m{len(games)}", result))
    return games


@pytest.mark.parametrize("seed", range(30))
def test_standings_add_up(seed: int) -> None:
    rng = random.Random(seed)
    players = [f"p{i}" for i in range(rng.randint(2, 7))]
    games = _random_games(rng, players, rng.randint(0, 15))
    rows = standings(players, games, "sonneborn-berger")
    finished = [g for g in games if g.result is not None]
    assert sorted(r["name"] for r in rows) == sorted(players)
    for r in rows:
        assert r["games"] == r["wins"] + r["draws"] + r["losses"]
        assert r["score"] == r["wins"] + r["draws"] / 2
        mine = [g for g in finished if r["name"] in g.players]
        assert r["games"] == len(mine)
    # each finished game counted once per side
    assert sum(r["games"] for r in rows) == 2 * len(finished)
    assert sum(r["wins"] for r in rows) == sum(r["losses"] for r in rows)
    assert sum(r["score"] for r in rows) == len(finished)
    # ranked by score, then tie-break
    keys = [(-r["score"], -r["tiebreak"]) for r in rows]
    assert keys == sorted(keys)
    assert rows[0]["rank"] == 1


def test_tiebreaks_and_elo_by_hand() -> None:
    # a beats b twice (one pairing), b and c draw twice, a and c: a wins one, draws one
    games = [
        Game(1, ("a", "b"), 1, None, "m1", "1-0"), Game(1, ("b", "a"), 1, None, "m2", "0-1"),
        Game(2, ("b", "c"), 2, None, "m3", "1/2-1/2"),
        Game(2, ("c", "b"), 2, None, "m4", "1/2-1/2"),
        Game(3, ("a", "c"), 3, None, "m5", "1-0"), Game(3, ("c", "a"), 3, None, "m6", "1/2-1/2"),
    ]
    rows = {r["name"]: r for r in standings(["a", "b", "c"], games, "sonneborn-berger")}
    assert (rows["a"]["score"], rows["b"]["score"], rows["c"]["score"]) == (3.5, 1.0, 1.5)
    # SB: a: 2 wins over b (1.0 each) + a win and a draw with c (1.5 + 0.75)
    assert rows["a"]["tiebreak"] == 2 * 1.0 + 1.5 + 0.75
    assert rows["b"]["tiebreak"] == 2 * 0.5 * 1.5
    assert rows["a"]["elo"] == round(elo_from_score(3.5 / 4))
    buch = {r["name"]: r for r in standings(["a", "b", "c"], games, "buchholz")}
    assert buch["a"]["tiebreak"] == 2 * 1.0 + 2 * 1.5
    # Elo: c's share 1.5/4, pentanomial over its two complete pairings (1.0 and 0.5 points)
    c = rows["c"]
    interval = elo_interval_pentanomial([0, 1, 1, 0, 0])
    assert c["elo"] == round(elo_from_score(1.5 / 4))
    assert (c["elo_low"], c["elo_high"]) == (round(interval.elo_low), round(interval.elo_high))
    assert [r["rank"] for r in standings(["a", "b", "c"], games, "buchholz")] == [1, 2, 3]


def test_elo_interval_per_game_with_one_pairing_and_none_without_games() -> None:
    games = [Game(1, ("a", "b"), 1, None, "m1", "1-0"),
             Game(1, ("b", "a"), 1, None, "m2", "1/2-1/2")]
    rows = {r["name"]: r for r in standings(["a", "b", "z"], games, "sonneborn-berger")}
    trin = elo_interval_trinomial(1, 1, 0)
    assert rows["a"]["elo"] == round(elo_from_score(0.75))
    assert rows["a"]["elo_low"] == round(trin.elo_low)
    assert rows["a"]["elo_high"] is None and math.isinf(trin.elo_high)
    assert rows["z"]["games"] == 0 and rows["z"]["elo"] is None and rows["z"]["elo_low"] is None


def test_a_result_counts_once_and_the_state_survives_a_round_trip() -> None:
    t = _tournament("arena")
    t.join("a")
    t.join("b")
    first, second = t.add_pairing("a", "b", ("0123", "4567"))
    first.match_id, second.match_id = "m1", "m2"
    assert t.record("m1", 0) is first and first.result == "1-0"
    assert t.record("m1", 1) is None and first.result == "1-0"
    assert t.record("mX", 0) is None
    again = Tournament.from_dict(t.to_dict())
    assert again == t
    assert again.public() == t.public()
    assert [g["result"] for g in t.public()["games"]] == ["1-0", None]
