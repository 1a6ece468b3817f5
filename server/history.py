"""History and players: finished matches by player, one match's full record, a player's page.

Everything here reads what the store already keeps: the ``results`` index (one row per seat of
each finished match, written in the transaction that finishes it) for history pages and guess
counts, and the event log for a match record. The score against the minimum strategy comes
from :mod:`bots.estimator` (the same code as ``moo report --games``), compared with the shipped
``minimum`` tree's exact distribution; estimates are cached per player and dropped when one of
their matches finishes, so a leaderboard costs one grouped query for the players not cached.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

from bots.estimator import Estimate, estimate, tally
from moo.errors import MooError, NoSuchMatch, NotFinished, SchemaError, UnknownPlayer
from moo.match import Event, Match
from server.ratings import Ratings, display_rating
from server.storage import HistoryRow, Store

__all__ = ["PROVISIONAL_SIGMA", "History", "decode_cursor", "encode_cursor"]

log = logging.getLogger("moo.history")

#: A rating is provisional (shown "1500?") while its uncertainty is above this. OpenSkill
#: starts at sigma 25/3 = 8.33; about a dozen decided games bring it under 6.
PROVISIONAL_SIGMA = 6.0
DEFAULT_LIMIT = 20


def encode_cursor(row: HistoryRow) -> str:
    """Opaque to clients: the sort key of the last row sent, so the next page starts after it
    whatever finishes meanwhile (no offsets that shift)."""
    raw = f"{row.ended_ms}|{row.seat}|{row.match_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


_BAD_CURSOR = "field 'cursor' is malformed: pass back a 'next' value unchanged"


def decode_cursor(cursor: str) -> tuple[int, str, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        ended, seat, match_id = raw.split("|", 2)
        key = (int(ended), match_id, int(seat))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise SchemaError(_BAD_CURSOR) from None
    if not match_id or key[2] not in (0, 1):
        raise SchemaError(_BAD_CURSOR)
    return key


def history_item(row: HistoryRow) -> dict[str, Any]:
    s = row.summary
    seat = row.seat
    winner = s.get("winner")
    result = "draw" if winner is None else "win" if winner == seat else "loss"
    players = list(s.get("players") or [])
    return {
        "match_id": row.match_id,
        "players": players,
        "seat": seat,
        "opponent": players[1 - seat] if len(players) == 2 else None,
        "result": result,
        "reason": s.get("reason"),
        "counts": s.get("counts"),
        "config": s.get("config"),
        "rated": bool(s.get("rated", True)),
        "ended_at": s.get("ended_at"),
    }


async def finished_log(store: Store, match_id: str) -> tuple[Match, list[Event]]:
    """A finished match rebuilt from its stored log, with the events it was rebuilt from.

    Only the unbroken run of events from seq 1 counts: a failed commit can only cut the tail,
    and a match whose stored run does not reach its end is not finished (``not_finished``).
    Shared by ``match_record`` and the ``analysis`` request (server/review_worker.py).
    """
    events = await store.match_events(match_id) if len(match_id) <= 40 else None
    if not events:
        raise NoSuchMatch(f"no match {match_id!r}")
    prefix = []
    for i, event in enumerate(events, start=1):
        if event.get("seq") != i:
            break
        prefix.append(event)
    match = Match.replay(prefix, keep_log=False)
    if not match.finished:
        raise NotFinished(f"match {match_id!r} has not finished")
    return match, prefix


class History:
    """The ``history``, ``match_record`` and ``player`` requests and the leaderboard's extras."""

    def __init__(
        self, store: Store, ratings: Ratings | None, cache_ttl_s: float | None = None
    ) -> None:
        self.store = store
        self.ratings = ratings
        #: how long a cached estimate may be used. None on a single node, where every finish
        #: passes this node's arena and invalidates exactly; a cluster node does not see the
        #: matches other nodes finish, so there its cache only spares repeated reads.
        self.cache_ttl_s = cache_ttl_s
        self._baseline: dict[int, int] | None = None
        self._baseline_missing = False
        #: casefolded name -> (distribution, estimate); dropped when they finish a match
        self._cache: dict[str, tuple[dict[str, int], Estimate | None]] = {}
        #: casefolded name -> loop time its cache entry was computed (with cache_ttl_s)
        self._cached_at: dict[str, float] = {}
        #: bumped on every invalidation, so a read that raced a finish is not cached
        self._generation = 0

    # -- arena listener -------------------------------------------------------------------------
    def __call__(self, match: Match, events: list[Event]) -> None:
        # match.finished first: one attribute read for the many commits that end nothing
        if match.finished and any(e["kind"] == "finished" for e in events):
            self._generation += 1
            for name in match.players:
                self._cache.pop(name.casefold(), None)

    # -- requests ---------------------------------------------------------------------------------
    async def history(self, me: str, msg: dict[str, Any]) -> dict[str, Any]:
        name = msg.get("player") or me
        player = await self.store.known_player(name)
        if player is None:
            raise UnknownPlayer(f"no player {name!r}")
        limit = msg.get("limit", DEFAULT_LIMIT)
        cursor = msg.get("cursor")
        before = decode_cursor(cursor) if cursor is not None else None
        rows = await self.store.history(player, before, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return {
            "type": "history",
            "player": player,
            "matches": [history_item(r) for r in rows],
            "next": encode_cursor(rows[-1]) if more and rows else None,
        }

    async def match_record(self, match_id: str, live: bool) -> dict[str, Any]:
        if live:
            raise NotFinished(f"match {match_id!r} is still being played")
        match, prefix = await finished_log(self.store, match_id)
        views = [v for v in (match.view(e, "spectator") for e in prefix) if v is not None]
        return {
            "type": "match_record",
            "match_id": match_id,
            "players": list(match.players),
            "config": match.config.to_dict(),
            "events": views,
        }

    async def player(self, name: str) -> dict[str, Any]:
        player = await self.store.known_player(name)
        if player is None:
            raise UnknownPlayer(f"no player {name!r}")
        distribution, est = (await self._estimates([player]))[player.casefold()]
        out = await self._rating(player)
        out.update(
            {
                "type": "player",
                "distribution": distribution,
                "vs_minimum": est.to_dict() if est is not None else None,
            }
        )
        return out

    async def decorate(self, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Leaderboard rows gain ``provisional`` and ``vs_minimum``."""
        estimates = await self._estimates([r["name"] for r in rows])
        out = []
        for row in rows:
            _, est = estimates.get(row["name"].casefold(), ({}, None))
            out.append(
                {
                    **row,
                    "provisional": row["sigma"] > PROVISIONAL_SIGMA,
                    "vs_minimum": est.to_dict() if est is not None else None,
                }
            )
        return out

    # -- internals ----------------------------------------------------------------------------
    async def _rating(self, player: str) -> dict[str, Any]:
        if self.ratings is not None:
            known = await self.ratings.lookup(player)
            if known is not None:
                row = known.row()
                mu, sigma = row["mu"], row["sigma"]
                return {
                    "name": player,
                    "rating": row["rating"],
                    "provisional": sigma > PROVISIONAL_SIGMA,
                    "mu": mu,
                    "sigma": sigma,
                    "games": row["games"],
                    "wins": row["wins"],
                    "draws": row["draws"],
                    "losses": row["losses"],
                }
            fresh = self.ratings.model.rating()
            mu, sigma = float(fresh.mu), float(fresh.sigma)
        else:  # pragma: no cover - the app always installs ratings
            mu, sigma = 25.0, 25.0 / 3.0
        return {
            "name": player,
            "rating": display_rating(mu - 3.0 * sigma),
            "provisional": True,
            "mu": round(mu, 3),
            "sigma": round(sigma, 3),
            "games": 0,
            "wins": 0,
            "draws": 0,
            "losses": 0,
        }

    async def _minimum(self) -> dict[int, int] | None:
        if self._baseline is None and not self._baseline_missing:
            from bots.tree import shipped_distribution

            try:
                self._baseline = await asyncio.to_thread(shipped_distribution, "minimum")
            except MooError as exc:
                log.warning("no score against minimum: %s", exc)
                self._baseline_missing = True
        return self._baseline

    async def _estimates(
        self, names: Sequence[str]
    ) -> dict[str, tuple[dict[str, int], Estimate | None]]:
        out: dict[str, tuple[dict[str, int], Estimate | None]] = {}
        missing = []
        now = asyncio.get_running_loop().time()
        for name in names:
            key = name.casefold()
            cached = self._cache.get(key)
            if (
                cached is not None
                and self.cache_ttl_s is not None
                and now - self._cached_at.get(key, now) > self.cache_ttl_s
            ):
                cached = None
            if cached is None:
                missing.append(name)
            else:
                out[key] = cached
        if missing:
            baseline = await self._minimum()
            generation = self._generation
            found = await self.store.guess_outcomes(missing)
            if len(self._cache) > 50_000:
                self._cache.clear()
                self._cached_at.clear()
            for name in missing:
                key = name.casefold()
                outcomes: Counter[tuple[int, bool]] = found.get(key, Counter())
                distribution = {
                    str(k): n for (k, solved), n in sorted(outcomes.items()) if solved
                }
                t = tally(o for o, n in outcomes.items() for _ in range(n))
                est = estimate(t, baseline) if baseline is not None else None
                out[key] = (distribution, est)
                if generation == self._generation:
                    self._cache[key] = out[key]
                    self._cached_at[key] = now
        return out
