"""Player ratings: OpenSkill (Plackett-Luce, 1 v 1 with draws), updated after every rated match.

Why OpenSkill rather than Elo: it tracks uncertainty (``sigma``) as well as skill (``mu``), so
a newcomer moves fast and a veteran slowly, and the conservative ``ordinal`` (mu - 3 sigma)
ranks a player with three lucky games below one with a long good record. A draw (both solve in
the same number of guesses, or nobody solves) is a tie in rank.

The ratings also keep the Cambridge 1971 figure the lobby shows beside them: the average number
of guesses a player needed when it solved. ``leaderboard("rating")`` ranks by ordinal,
``leaderboard("average")`` by that average.

On SQLite (one node), state lives in memory and is written to its own small SQLite file beside
the match database (``var/moo.ratings.sqlite3`` for ``var/moo.sqlite3``) by a background flush
once a second, off the event loop; a crash can lose at most the last second of rating updates,
never a match. Ratings can always be recomputed from the stored match results. On PostgreSQL
(a cluster) they are a table instead, rated in the finishing transaction: server/ratings_pg.py.
Both use the rating rule :func:`rate_pair`; the statements of both are in server/sql.py.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, astuple, dataclass
from pathlib import Path
from typing import Any

from openskill.models import PlackettLuce

from moo.match import Event, Match, MatchConfig
from moo.variants import is_classic, rules_spec
from server import sql

__all__ = ["PlayerRating", "RatingChange", "Ratings", "display_rating", "ratings_path"]

#: The shown rating is ``RATING_BASE + RATING_SCALE * (mu - 3 sigma)``: a newcomer (ordinal 0)
#: is 1500, the scale puts one OpenSkill unit near chess players' feel for rating points, and
#: nobody is shown a negative figure after one loss (the raw ordinal is about -1.8 then).
RATING_BASE = 1500
RATING_SCALE = 48


def display_rating(ordinal: float) -> int:
    """The rating players see (leaderboard, player pages, MQTT): the ordinal on a 1500 scale.

    One scale for every client, so the web page, ``moo watch`` and the SDK never disagree;
    ranking still uses the ordinal itself, of which this is an increasing function (floored
    at 0, which only a hopeless ordinal below -31 reaches).
    """
    return max(0, round(RATING_BASE + RATING_SCALE * ordinal))

log = logging.getLogger("moo.ratings")

def variant_of(config: MatchConfig) -> str:
    """The rating family of a match: ``""`` for classic 4-of-10 MOO (today's ratings, kept
    as they were), else the rules' canonical spec (``mastermind:4:123456``, ``moo:5:0123456789``,
    ``moo:4:0123456789:repeats``): one rating per distinct game."""
    return "" if is_classic(config.rules) else rules_spec(config.rules)


def ratings_path(db: str) -> str | None:
    """The ratings file beside the match database; None (memory only) for ``:memory:``.

    Also None for a PostgreSQL database (``postgresql://...``): there the ratings are the
    ``player_ratings`` table every node shares (server/ratings_pg.py), not a file.
    """
    if not db or db == ":memory:" or "://" in db:
        return None
    path = Path(db)
    return str(path.with_name(path.stem + ".ratings.sqlite3"))


@dataclass
class PlayerRating:
    name: str
    mu: float
    sigma: float
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    solved: int = 0
    guesses: int = 0
    time_ms: int = 0

    @property
    def ordinal(self) -> float:
        """The conservative estimate used for ranking: mu - 3 sigma."""
        return self.mu - 3.0 * self.sigma

    @property
    def avg_guesses(self) -> float | None:
        return self.guesses / self.solved if self.solved else None

    def row(self) -> dict[str, Any]:
        """A ``leaderboard`` row (docs/protocol.md), plus mu and sigma."""
        return {
            "name": self.name,
            "rating": display_rating(self.ordinal),
            "mu": round(self.mu, 3),
            "sigma": round(self.sigma, 3),
            "games": self.games,
            "wins": self.wins,
            "draws": self.draws,
            "losses": self.losses,
            "avg_guesses": None if self.avg_guesses is None else round(self.avg_guesses, 3),
            "avg_time_s": round(self.time_ms / 1000.0 / self.games, 3) if self.games else None,
        }


@dataclass(frozen=True)
class RatingChange:
    name: str
    match_id: str
    before: int
    after: int
    mu: float
    sigma: float
    outcome: str  # win / draw / loss
    #: the rating family: "" for classic 4-of-10 MOO, else the rules' spec
    variant: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = {**asdict(self), "delta": self.after - self.before}
        if not self.variant:
            del data["variant"]
        return data


class Ratings:
    """In-memory ratings with a periodic flush; call :meth:`record` for each finished match."""

    def __init__(
        self,
        path: str | None = None,
        *,
        on_change: Callable[[RatingChange, PlayerRating], None] | None = None,
        flush_interval_s: float = 1.0,
    ) -> None:
        self.path = path
        self.model = PlackettLuce()
        self.players: dict[str, PlayerRating] = {}
        #: variant spec -> casefolded name -> rating, for every family but classic
        self.variants: dict[str, dict[str, PlayerRating]] = {}
        self.on_change = on_change
        self.flush_interval_s = flush_interval_s
        self._dirty: set[str] = set()
        self._dirty_variants: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        if self.path is not None:
            rows, variant_rows = await asyncio.to_thread(self._load, self.path)
            for row in rows:
                self.players[row.name.casefold()] = row
            for variant, row in variant_rows:
                self.variants.setdefault(variant, {})[row.name.casefold()] = row
            self._task = asyncio.create_task(self._flusher(), name="ratings-flush")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
        await self.flush()

    @staticmethod
    def _load(path: str) -> tuple[list[PlayerRating], list[tuple[str, PlayerRating]]]:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(path) as conn:
            for table in sql.RATINGS_FILE_TABLES:
                conn.execute(table.sqlite)
            rows = conn.execute(sql.RATINGS_FILE_LOAD.sqlite).fetchall()
            variant_rows = conn.execute(sql.VARIANT_RATINGS_FILE_LOAD.sqlite).fetchall()
        return [PlayerRating(*row) for row in rows], [
            (row[0], PlayerRating(*row[1:])) for row in variant_rows
        ]

    async def _flusher(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval_s)
            try:
                await self.flush()
            except Exception:
                log.exception("cannot write ratings; will retry")

    async def flush(self) -> None:
        if self.path is None or not (self._dirty or self._dirty_variants):
            return
        names, self._dirty = self._dirty, set()
        keys, self._dirty_variants = self._dirty_variants, set()
        rows = [astuple(self.players[n]) for n in names]
        variant_rows = [(v, *astuple(self.variants[v][n])) for v, n in keys]
        try:
            await asyncio.to_thread(self._write, self.path, rows, variant_rows)
        except Exception:
            self._dirty |= names
            self._dirty_variants |= keys
            raise

    @staticmethod
    def _write(
        path: str, rows: list[tuple[Any, ...]], variant_rows: list[tuple[Any, ...]]
    ) -> None:
        with sqlite3.connect(path) as conn:
            for table in sql.RATINGS_FILE_TABLES:
                conn.execute(table.sqlite)
            conn.executemany(sql.RATINGS_FILE_SAVE.sqlite, rows)
            conn.executemany(sql.VARIANT_RATINGS_FILE_SAVE.sqlite, variant_rows)

    # -- updates ------------------------------------------------------------------------------
    def get(self, name: str, variant: str = "") -> PlayerRating:
        """``name``'s rating in ``variant``'s family (``""``: classic 4-of-10 MOO)."""
        key = name.casefold()
        table = self.players if not variant else self.variants.setdefault(variant, {})
        player = table.get(key)
        if player is None:
            fresh = self.model.rating(name=name)
            player = table[key] = PlayerRating(name, float(fresh.mu), float(fresh.sigma))
        return player

    def __call__(self, match: Match, events: list[Event]) -> None:
        """Arena listener: rate a match when its ``finished`` event is committed."""
        if match.finished and match.config.rated and any(e["kind"] == "finished" for e in events):
            self.record(match)

    def record(self, match: Match) -> list[RatingChange]:
        """Update both players from a finished match; returns the two changes."""
        result = match.result
        if result is None:
            return []
        names = match.players
        if names[0].casefold() == names[1].casefold():
            return []
        variant = variant_of(match.config)
        pair = (self.get(names[0], variant), self.get(names[1], variant))
        duration = int(match.last_at - match.created_at) if match.seq else 0
        changes = rate_pair(
            self.model, pair, result.get("winner"),
            (match.seats[0].solved_at, match.seats[1].solved_at), duration,
            match.match_id, variant,
        )
        for player, change in zip(pair, changes, strict=True):
            if variant:
                self._dirty_variants.add((variant, player.name.casefold()))
            else:
                self._dirty.add(player.name.casefold())
            self._changed(change, player)
        return changes

    def _changed(self, change: RatingChange, player: PlayerRating) -> None:
        # the MQTT rating topics (docs/mqtt.md) carry the classic rating only
        if self.on_change is not None and not change.variant:
            try:
                self.on_change(change, player)
            except Exception:
                log.exception("rating listener failed")

    # -- queries ------------------------------------------------------------------------------
    def leaderboard(
        self, by: str = "rating", limit: int = 50, variant: str = ""
    ) -> list[dict[str, Any]]:
        """The ranking of one family (``""``: classic; else a variant's canonical spec)."""
        table = self.players if not variant else self.variants.get(variant, {})
        players = [p for p in table.values() if p.games]
        if by == "average":
            players.sort(
                key=lambda p: (p.avg_guesses is None, p.avg_guesses or 0.0, -p.games, p.name)
            )
        else:
            players.sort(key=lambda p: (-p.ordinal, -p.games, p.name))
        return [p.row() for p in players[:limit]]

    async def board(
        self, by: str = "rating", limit: int = 50, variant: str = ""
    ) -> list[dict[str, Any]]:
        """:meth:`leaderboard` as the ``leaderboard`` request reads it (PostgreSQL: a query)."""
        return self.leaderboard(by, limit, variant)

    async def lookup(self, name: str) -> PlayerRating | None:
        """``name``'s classic rating, None before their first rated match."""
        return self.players.get(name.casefold())


def rate_pair(
    model: PlackettLuce,
    pair: tuple[PlayerRating, PlayerRating],
    winner: int | None,
    solved_at: tuple[int | None, int | None],
    duration_ms: int,
    match_id: str,
    variant: str,
) -> list[RatingChange]:
    """Apply one finished match to both seats' ratings (in place); returns the two changes.

    The one rating rule of both stores: the in-memory ratings of a single node and the rows
    a cluster node updates inside the transaction that finishes the match.
    """
    a, b = pair
    ranks = [1.0, 1.0] if winner is None else ([1.0, 2.0] if winner == 0 else [2.0, 1.0])
    before = (display_rating(a.ordinal), display_rating(b.ordinal))
    (ra,), (rb,) = model.rate(
        [[model.rating(mu=a.mu, sigma=a.sigma, name=a.name)],
         [model.rating(mu=b.mu, sigma=b.sigma, name=b.name)]],
        ranks=ranks,
    )
    changes = []
    for seat, (player, new) in enumerate(((a, ra), (b, rb))):
        player.mu, player.sigma = float(new.mu), float(new.sigma)
        player.games += 1
        outcome = "draw" if winner is None else ("win" if winner == seat else "loss")
        if outcome == "win":
            player.wins += 1
        elif outcome == "loss":
            player.losses += 1
        else:
            player.draws += 1
        if solved_at[seat] is not None:
            player.solved += 1
            player.guesses += int(solved_at[seat] or 0)
        player.time_ms += duration_ms
        changes.append(RatingChange(
            player.name, match_id, before[seat], display_rating(player.ordinal),
            player.mu, player.sigma, outcome, variant,
        ))
    return changes
