"""Ratings of a PostgreSQL arena (a cluster): one table every node reads, updated at the finish.

On SQLite one process sees every match, so ratings live in its memory (server/ratings.py). A
cluster's matches finish on many nodes, so there the ratings are the ``player_ratings`` rows
(server/schema.py, migration 5), one per (variant family, player):

* **Written by the match's owner, in the transaction that finishes the match**, one of two
  ways, both with the same rule as a single node (:func:`server.ratings.rate_pair`):

  - *Read, rate, write if unchanged* (:meth:`PgRatings.plan`): the store reads the two
    players' rows without a lock, this computes their new values, and the store's one
    ``moo_finish`` call commits the match's events, its ``results`` rows and the new values,
    the last only if every row is still as read (else that call writes nothing). Two or
    three round trips in all instead of seven: over a slow link to the database each one
    counts, and the players wait for the commit to see their match end.
  - *Under the rows' locks* (:meth:`PgRatings.rate_in_tx`), when a row changed since it was
    read (the same players finishing another match on another node at that moment): after
    ``moo_commit`` and the ``results`` rows, on the same connection, before ``COMMIT``, the
    rows are created if missing and locked in one ``INSERT ... ON CONFLICT DO UPDATE ...
    RETURNING``, rated, and written back by one ``UPDATE``.

  Both take the rows' locks in one fixed order, so two nodes finishing matches of the same
  players wait for each other instead of deadlocking. A match is therefore rated exactly once,
  together with its ``finished`` event, or not at all if that commit fails (then the match is
  not finished either).
* **Read by any node** for ``leaderboard`` and ``player``: a query each time, no cache, so
  every node gives the same answer.

A failure of the rating statements (not of the database) is confined to a savepoint and
logged: it never refuses the finish of a match.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import astuple, replace
from typing import Any

from moo.match import Event, Match, MatchConfig
from server import sql
from server.ratings import PlayerRating, RatingChange, Ratings, rate_pair, variant_of
from server.storage import Db, FinishedMatch, StatDelta
from server.storage_pg import PostgresStore, RatingPlan

__all__ = ["PgRatings"]

log = logging.getLogger("moo.ratings")


class PgRatings(Ratings):
    """:class:`~server.ratings.Ratings` whose state is the ``player_ratings`` table."""

    def __init__(
        self,
        store: PostgresStore,
        *,
        on_change: Callable[[RatingChange, PlayerRating], None] | None = None,
    ) -> None:
        super().__init__(None, on_change=on_change)
        self.store = store
        #: match id -> the changes its finishing transaction made, announced (MQTT) once the
        #: commit is acknowledged and the arena's listeners run
        self._made: OrderedDict[str, list[tuple[RatingChange, PlayerRating]]] = OrderedDict()

    async def start(self) -> None:
        self.store.rater = self

    async def stop(self) -> None:
        if self.store.rater is self:
            self.store.rater = None

    # -- the writer's side: the finishing commit --------------------------------------------------
    async def plan(self, db: Db, finished: list[FinishedMatch]) -> RatingPlan | None:
        """Rate the rated matches among ``finished`` from their players' rows as ``db`` reads
        them now (no lock, a missing row as a fresh one): what ``moo_finish`` writes if
        those rows are still so."""
        todo = self._todo(finished)
        if not todo:
            return None
        order, keys = _lock_order(todo)
        rows = await db.rows(sql.RATINGS_OF, [k[0] for k in order], [keys[k] for k in order])
        held = _held(rows)
        fresh = self.model.rating()
        for k in order:
            held.setdefault(k, PlayerRating(keys[k], float(fresh.mu), float(fresh.sigma)))
        seen = [(held[k].mu, held[k].sigma, held[k].games) for k in order]
        self._remember(self._rate(todo, held))
        return RatingPlan(
            [k[0] for k in order], [keys[k] for k in order], seen,
            [astuple(held[k])[1:] for k in order],
        )

    async def rate_in_tx(self, db: Db, finished: list[FinishedMatch]) -> None:
        """Rate the rated matches among ``finished`` on ``db`` (in its open transaction),
        under their rows' locks."""
        todo = self._todo(finished)
        if not todo:
            return
        order, keys = _lock_order(todo)
        fresh = self.model.rating()
        async with db.atomic():  # a savepoint: a failure here leaves the finish intact
            rows = await db.rows(
                sql.HOLD_RATINGS, float(fresh.mu), float(fresh.sigma),
                [k[0] for k in order], [keys[k] for k in order],
            )
            held = _held(rows)
            made = self._rate(todo, held)
            touched = list(held.items())
            # one array per column, in PlayerRating's (and RATING_COLUMNS') order
            columns = zip(*(astuple(p) for _, p in touched), strict=True)
            await db.run(sql.SAVE_RATINGS, [k[0] for k, _ in touched], *map(list, columns))
        self._remember(made)

    def _todo(self, finished: list[FinishedMatch]) -> list[tuple[str, str, list[StatDelta]]]:
        """(match id, variant family, stat deltas) of the rated matches among ``finished``."""
        todo = []
        for match_id, first_body, stats in finished:
            if first_body is None or len(stats) != 2:
                continue
            try:
                config = MatchConfig.from_dict(json.loads(first_body).get("config") or {})
            except (ValueError, TypeError, KeyError):
                log.exception("cannot read the config of match %s to rate it", match_id)
                continue
            names = (stats[0].player, stats[1].player)
            if not config.rated or names[0].casefold() == names[1].casefold():
                continue
            todo.append((match_id, variant_of(config), list(stats)))
        return todo

    def _rate(
        self,
        todo: list[tuple[str, str, list[StatDelta]]],
        held: dict[tuple[str, str], PlayerRating],
    ) -> list[tuple[str, list[tuple[RatingChange, PlayerRating]]]]:
        """Apply each match of ``todo`` to the ``held`` rows (in place, in order); each match's
        changes with a copy of the two rows after it."""
        made = []
        for match_id, variant, stats in todo:
            pair = (held[(variant, stats[0].player.casefold())],
                    held[(variant, stats[1].player.casefold())])
            winner = next((i for i, d in enumerate(stats) if d.outcome == "win"), None)
            changes = rate_pair(
                self.model, pair, winner, (stats[0].guesses, stats[1].guesses),
                int(stats[0].duration_ms), match_id, variant,
            )
            made.append((match_id, [(c, replace(p)) for c, p in zip(changes, pair, strict=True)]))
        return made

    def _remember(self, made: list[tuple[str, list[tuple[RatingChange, PlayerRating]]]]) -> None:
        """Keep the changes to announce once the commit is acknowledged (a commit that fails
        after this, or that rates again under the locks, leaves or replaces them)."""
        for match_id, pairs in made:
            self._made[match_id] = pairs
            while len(self._made) > 10_000:
                self._made.popitem(last=False)

    def __call__(self, match: Match, events: list[Event]) -> None:
        """Arena listener: the finish is durable, so its rating changes can be announced."""
        if any(e["kind"] == "finished" for e in events):
            for change, player in self._made.pop(match.match_id, ()):
                self._changed(change, player)

    def record(self, match: Match) -> list[RatingChange]:  # pragma: no cover - not used here
        raise NotImplementedError("a PostgreSQL arena rates matches in the finishing commit")

    # -- readers: any node --------------------------------------------------------------------
    async def board(
        self, by: str = "rating", limit: int = 50, variant: str = ""
    ) -> list[dict[str, Any]]:
        # the same order as Ratings.leaderboard: ties by games, then by name in code points
        query = sql.RATING_BOARD["average" if by == "average" else "rating"]

        async def read(db: Db) -> list[Any]:
            return await db.rows(query, variant, limit)

        return [PlayerRating(*tuple(row)).row() for row in await self.store.with_db(read)]

    async def lookup(self, name: str) -> PlayerRating | None:
        async def read(db: Db) -> Any:
            return await db.row(sql.RATING_OF, "", name)

        row = await self.store.with_db(read)
        return None if row is None else PlayerRating(*tuple(row))


def _held(rows: list[Any]) -> dict[tuple[str, str], PlayerRating]:
    """``player_ratings`` rows (variant, then RATING_COLUMNS) by (variant, casefolded name)."""
    return {(row[0], row[1].casefold()): PlayerRating(*tuple(row)[1:]) for row in rows}


def _lock_order(
    todo: list[tuple[str, str, list[StatDelta]]],
) -> tuple[list[tuple[str, str]], dict[tuple[str, str], str]]:
    """The (variant, casefolded name) keys the matches of ``todo`` change, sorted (one lock
    order on every node), and the name each is spelled with."""
    keys: dict[tuple[str, str], str] = {}
    for _, variant, stats in todo:
        for d in stats:
            keys.setdefault((variant, d.player.casefold()), d.player)
    return sorted(keys), keys
