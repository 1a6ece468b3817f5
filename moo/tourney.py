"""Hosted tournaments without I/O: the state, the pairings and the standings.

The server (server/tournaments.py) owns the clock, the matches and the store; everything that
decides *who plays whom* and *who stands where* is here, as plain functions over plain data, so
it can be tested exhaustively and replayed from the stored state (docs/protocol.md,
"Tournaments").

A **pairing** is always two games with the seats swapped. With server secrets the pair of
secrets ``(x, y)`` is played both ways: in the first game seat 0 holds ``x`` and seat 1 ``y``,
in the second the players change seats and the secrets stay with the seats, so each player
guesses both codes once and the luck of the codes cancels within the pairing (as
``moo tournament`` does from one machine, docs/tournaments.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from moo.stats import elo_from_score, elo_interval_pentanomial, elo_interval_trinomial, pentanomial

__all__ = [
    "FORMATS",
    "RESULTS",
    "SECRETS",
    "STATUSES",
    "Game",
    "Tournament",
    "arena_pairs",
    "round_robin_schedule",
    "standings",
    "swiss_pairs",
]

FORMATS = ("round-robin", "swiss", "arena")
SECRETS = ("server", "players")
STATUSES = ("upcoming", "running", "finished")
#: seat 0's score first
RESULTS = ("1-0", "0-1", "1/2-1/2")
_POINTS = {"1-0": (1.0, 0.0), "0-1": (0.0, 1.0), "1/2-1/2": (0.5, 0.5)}
#: the ``tournament`` object lists the most recent games up to this many: it is sent whole to
#: every participant after changes, and a long arena has thousands; ``game_count`` counts all
MAX_GAMES_SHOWN = 200
#: how each format breaks ties
TIEBREAKS = {"round-robin": "sonneborn-berger", "swiss": "buchholz", "arena": "sonneborn-berger"}


@dataclass
class Game:
    """One game of a tournament: planned (``match_id`` None), started, or finished."""

    round: int
    players: tuple[str, str]
    #: the pairing it belongs to (its two games share it)
    pair: int
    #: the secrets of seat 0 and seat 1 when the server sets them
    secrets: tuple[str, str] | None = None
    match_id: str | None = None
    result: str | None = None

    def public(self) -> dict[str, Any]:
        return {"match_id": self.match_id, "round": self.round, "players": list(self.players),
                "result": self.result}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["players"] = list(self.players)
        data["secrets"] = None if self.secrets is None else list(self.secrets)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Game:
        secrets = data.get("secrets")
        return cls(
            round=int(data["round"]), players=(data["players"][0], data["players"][1]),
            pair=int(data["pair"]), secrets=None if secrets is None else (secrets[0], secrets[1]),
            match_id=data.get("match_id"), result=data.get("result"),
        )


@dataclass
class Tournament:
    """Everything a tournament is; :meth:`to_dict` / :meth:`from_dict` are what is stored."""

    tournament_id: str
    name: str
    creator: str
    format: str
    rules: dict[str, Any]
    pool: str
    rounds: int | None
    duration_s: int | None
    rated: bool
    secrets: str
    pacing: str
    starts_at: int
    status: str = "upcoming"
    ends_at: int | None = None
    round: int = 0
    #: the participants now, in join order
    players: list[str] = field(default_factory=list)
    #: everyone who ever took part (the standings keep players who left a running arena)
    everyone: list[str] = field(default_factory=list)
    #: every game started or planned, in the order planned
    games: list[Game] = field(default_factory=list)
    #: players who sat out a round (swiss: at most once each while it can be avoided)
    byes: list[str] = field(default_factory=list)
    pairs: int = 0
    #: arena: each player's last opponent (avoided when another is free)
    last_opponent: dict[str, str] = field(default_factory=dict)
    #: when the tournament finished (ms), for the listing of recently finished ones
    finished_at: int | None = None
    #: how many times it was written (the store refuses a write over another version)
    version: int = 0
    #: the requests with a ``request_id`` that made or joined it: "player\nrequest id"
    #: (the player case-folded) -> the request's content, so that one sent again is answered
    #: as the first was, and the same id with other content is refused (server/requests.py)
    requests: dict[str, str] = field(default_factory=dict)

    # -- membership -------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self.players

    def join(self, name: str) -> bool:
        """Add ``name``; False when already in. The caller checked status and pool."""
        if name in self.players:
            return False
        self.players.append(name)
        if name not in self.everyone:
            self.everyone.append(name)
        return True

    def leave(self, name: str) -> bool:
        if name not in self.players:
            return False
        self.players.remove(name)
        if self.status == "upcoming":
            self.everyone.remove(name)
        return True

    # -- games -------------------------------------------------------------------------------
    def started_games(self) -> list[Game]:
        return [g for g in self.games if g.match_id is not None]

    def unfinished(self) -> list[Game]:
        return [g for g in self.games if g.result is None]

    def busy_players(self) -> set[str]:
        """Players with a game of this tournament planned or under way."""
        return {p for g in self.games if g.result is None for p in g.players}

    def add_pairing(self, a: str, b: str, secrets: tuple[str, str] | None) -> list[Game]:
        """The two games of one pairing (seats swapped, the secrets staying with the seats)."""
        self.pairs += 1
        games = [Game(self.round, (a, b), self.pairs, secrets),
                 Game(self.round, (b, a), self.pairs, secrets)]
        self.games.extend(games)
        return games

    def record(self, match_id: str, winner: int | None) -> Game | None:
        """The result of a finished match of this tournament; None if it is not one of its
        games or already counted (a result is counted once, however often it is told)."""
        for game in self.games:
            if game.match_id == match_id:
                if game.result is not None:
                    return None
                game.result = "1/2-1/2" if winner is None else ("1-0" if winner == 0 else "0-1")
                return game
        return None

    def round_done(self) -> bool:
        return all(g.result is not None for g in self.games if g.round == self.round)

    def tiebreak(self) -> str:
        return TIEBREAKS[self.format]

    # -- views -------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        return {
            "tournament_id": self.tournament_id, "name": self.name, "creator": self.creator,
            "format": self.format, "rules": self.rules, "pool": self.pool,
            "rounds": self.rounds, "duration_s": self.duration_s, "rated": self.rated,
            "secrets": self.secrets, "pacing": self.pacing, "status": self.status,
            "starts_at": self.starts_at, "ends_at": self.ends_at, "round": self.round,
            "player_count": len(self.players),
        }

    def public(self) -> dict[str, Any]:
        """The protocol's ``tournament`` object."""
        out = self.summary()
        del out["player_count"]
        out["players"] = list(self.players)
        out["standings"] = standings(self.everyone, self.games, self.tiebreak())
        out["tiebreak"] = self.tiebreak()
        started = self.started_games()
        out["games"] = [g.public() for g in started[-MAX_GAMES_SHOWN:]]
        out["game_count"] = len(started)
        return out

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["games"] = [g.to_dict() for g in self.games]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Tournament:
        fields = dict(data)
        fields["games"] = [Game.from_dict(g) for g in data.get("games", [])]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in fields.items() if k in known})


# -- pairings --------------------------------------------------------------------------------
def round_robin_schedule(players: Sequence[str], meetings: int) -> list[list[tuple[str, str]]]:
    """Rounds of the circle method: every two players meet ``meetings`` times, once a round.

    With an odd count a bye (a player without a game that round) rotates like a player. The
    first-named of a pair takes seat 0 of the pairing's first game; it alternates from one
    meeting to the next (the pairing itself plays both seats anyway).
    """
    names: list[str | None] = list(players)
    if len(names) < 2:
        return []
    if len(names) % 2:
        names.append(None)
    n = len(names)
    single: list[list[tuple[str, str]]] = []
    ring = names[1:]
    for r in range(n - 1):
        order = [names[0], *ring]
        pairs: list[tuple[str, str]] = []
        for i in range(n // 2):
            a, b = order[i], order[n - 1 - i]
            if a is None or b is None:
                continue
            pairs.append((a, b) if (r + i) % 2 == 0 else (b, a))
        single.append(pairs)
        ring = [ring[-1], *ring[:-1]]
    out: list[list[tuple[str, str]]] = []
    for m in range(meetings):
        for pairs in single:
            out.append(pairs if m % 2 == 0 else [(b, a) for a, b in pairs])
    return out


def swiss_pairs(
    ranked: Sequence[str], scores: dict[str, float], met: set[frozenset[str]], byes: Iterable[str]
) -> tuple[list[tuple[str, str]], str | None]:
    """One Swiss round: ``ranked`` best first; returns (pairs, the player with the bye).

    The best remaining player is paired with the nearest in score (then in rank) they have
    not met, backtracking when a choice leaves the rest unpairable. With an odd count the bye
    goes to the lowest ranked player without one so far for whom the rest pair without a
    repeat (then to those who had one). Only if no pairing without a repeat exists at all are
    repeats allowed (the fewest possible is not sought).
    """
    players = list(ranked)

    def solve(rest: list[str], allow_repeat: bool) -> list[tuple[str, str]] | None:
        if not rest:
            return []
        first, others = rest[0], rest[1:]
        order = sorted(range(len(others)),
                       key=lambda i: (abs(scores.get(first, 0) - scores.get(others[i], 0)), i))
        for i in order:
            other = others[i]
            if not allow_repeat and frozenset((first, other)) in met:
                continue
            tail = solve(others[:i] + others[i + 1:], allow_repeat)
            if tail is not None:
                return [(first, other), *tail]
        return None

    if len(players) % 2 == 0:
        pairs = solve(players, False) or solve(players, True)
        assert pairs is not None  # with repeats allowed any even list pairs
        return pairs, None
    had = set(byes)
    # the lowest ranked without a bye first, then those who had one
    candidates = [p for p in reversed(players) if p not in had] + [
        p for p in reversed(players) if p in had]
    for bye in candidates:
        pairs = solve([p for p in players if p != bye], False)
        if pairs is not None:
            return pairs, bye
    bye = candidates[0]
    pairs = solve([p for p in players if p != bye], True)
    assert pairs is not None
    return pairs, bye


def swiss_first_round(players: Sequence[str]) -> tuple[list[tuple[str, str]], str | None]:
    """Round 1: the first half (join order) against the second half; the last one sits out
    when the count is odd."""
    names = list(players)
    bye = names.pop() if len(names) % 2 else None
    half = len(names) // 2
    return [(names[i], names[half + i]) for i in range(half)], bye


def arena_pairs(free: Sequence[str], last_opponent: dict[str, str]) -> list[tuple[str, str]]:
    """Pair the free players (longest waiting first), avoiding each one's last opponent when
    another free player is there; one may be left over."""
    waiting = list(free)
    out: list[tuple[str, str]] = []
    while len(waiting) >= 2:
        first = waiting.pop(0)
        choice = next((p for p in waiting if last_opponent.get(first) != p), waiting[0])
        waiting.remove(choice)
        out.append((first, choice))
    return out


# -- standings -------------------------------------------------------------------------------
def _finite(value: float) -> int | None:
    return None if math.isinf(value) or math.isnan(value) else round(value)


def standings(players: Sequence[str], games: Iterable[Game], tiebreak: str) -> list[dict[str, Any]]:
    """One row per player, best first, from the finished games (docs/protocol.md)."""
    finished = [g for g in games if g.result is not None]
    rows: dict[str, dict[str, Any]] = {
        p: {"name": p, "games": 0, "wins": 0, "draws": 0, "losses": 0, "score": 0.0}
        for p in players
    }
    #: (player, pairing) -> points so far and games counted
    pair_points: dict[tuple[str, int], list[float]] = {}
    opponents: dict[str, list[tuple[str, float]]] = {p: [] for p in players}
    for g in finished:
        assert g.result is not None
        points = _POINTS[g.result]
        for seat, name in enumerate(g.players):
            row = rows.get(name)
            if row is None:
                continue
            mine = points[seat]
            row["games"] += 1
            row["score"] += mine
            row["wins" if mine == 1.0 else "losses" if mine == 0.0 else "draws"] += 1
            slot = pair_points.setdefault((name, g.pair), [0.0, 0.0])
            slot[0] += mine
            slot[1] += 1
            opponents[name].append((g.players[1 - seat], mine))
    final = {p: rows[p]["score"] for p in rows}
    for name, row in rows.items():
        if tiebreak == "buchholz":
            tb = sum(final.get(o, 0.0) for o, _ in opponents[name])
        else:  # Sonneborn-Berger
            tb = sum(final.get(o, 0.0) * mine for o, mine in opponents[name])
        row["tiebreak"] = tb
        n = row["games"]
        complete = [pts for (who, _), (pts, count) in pair_points.items()
                    if who == name and count == 2]
        if n == 0:
            row["elo"] = row["elo_low"] = row["elo_high"] = None
            continue
        row["elo"] = _finite(elo_from_score(row["score"] / n))
        if len(complete) >= 2:
            interval = elo_interval_pentanomial(pentanomial(complete))
        elif n >= 2:
            interval = elo_interval_trinomial(row["wins"], row["draws"], row["losses"])
        else:
            row["elo_low"] = row["elo_high"] = None
            continue
        row["elo_low"] = _finite(interval.elo_low)
        row["elo_high"] = _finite(interval.elo_high)
    ordered = sorted(rows.values(), key=lambda r: (-r["score"], -r["tiebreak"], r["games"],
                                                   r["name"].casefold(), r["name"]))
    out: list[dict[str, Any]] = []
    for i, row in enumerate(ordered):
        prev = out[-1] if out else None
        same = prev is not None and (prev["score"], prev["tiebreak"], prev["games"]) == (
            row["score"], row["tiebreak"], row["games"])
        rank = prev["rank"] if same and prev is not None else i + 1
        out.append({"rank": rank, "name": row["name"], "games": row["games"],
                    "wins": row["wins"], "draws": row["draws"], "losses": row["losses"],
                    "score": row["score"], "elo": row["elo"], "elo_low": row["elo_low"],
                    "elo_high": row["elo_high"], "tiebreak": row["tiebreak"]})
    return out
