"""The ladder's records: hosted bots, ladder games, standings, and the small helpers the
ladder's modules share (server/ladder.py is the service; server/ladder_schedule.py pairs and
rates, server/ladder_workers.py hands out the jobs)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from moo.errors import SchemaError
from server.matches import Follower

__all__ = [
    "CONNECTED_VERSION",
    "CONNECTION_GONE",
    "FORFEIT_REASONS",
    "MAX_BOTS_PER_OWNER",
    "MAX_ERRORS",
    "MAX_HISTORY",
    "MAX_KEY_STRIKES",
    "MAX_RECENT",
    "MAX_UPLOADS",
    "TICK_S",
    "UPLOAD_TTL_S",
    "WORKER_GONE",
    "Fit",
    "LadderBot",
    "LadderGame",
    "Rating",
    "Standing",
    "Upload",
    "Worker",
    "center",
    "certainty",
    "dumps",
    "exact_status",
    "exact_values",
    "finite",
    "player_of",
    "round_rating",
    "valid_bot_name",
    "with_ref",
]

#: uploads open at once per connection, and how long one lives without a chunk
MAX_UPLOADS = 2
UPLOAD_TTL_S = 600.0
#: bots not withdrawn per owner
MAX_BOTS_PER_OWNER = 10
#: seconds between two looks at the ladder (expired claims, new pairings)
TICK_S = 0.5
#: a cluster node that starts leading waits this long before it reads the ladder (the former
#: leader's last writes land meanwhile)
HANDOVER_S = 1.0
#: a cluster's leader: seconds a game's match may be away from it before the store is asked
#: whether it finished, and a void game's match may be missing from the store before the
#: game is taken as never started
POLL_S = 1.0
MISSING_S = 10.0
#: at most this long, a claimed play job's answer waits for its two matches to be stored
#: (a worker's bots that said hello on another cluster node before that would not find them)
STORED_WAIT_S = 5.0
#: how many entries the lists of ``ladder_mine`` and ``ladder_page`` keep
MAX_ERRORS = 50
MAX_RECENT = 50
MAX_HISTORY = 200
#: wrong worker keys on one connection before it is closed
MAX_KEY_STRIKES = 5
#: the error log's line for a seat whose worker went away mid-game
WORKER_GONE = "disconnect: its worker stopped during the game"
#: ... and for a connected bot's seat (server/ladder_connected.py): its own connection
CONNECTION_GONE = "disconnect: its connection closed during the game"
#: a game's ends that are the seat's own doing (counted as forfeits when lost)
FORFEIT_REASONS = frozenset(("disconnect", "timeout"))
#: the version of a connected bot (it has no program: server/ladder_connected.py), in its
#: ``ladder_bots`` row and in its games' rows
CONNECTED_VERSION = 0

_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def valid_bot_name(name: str) -> bool:
    """A hosted bot's name is a player name (docs/protocol.md, "Session")."""
    return 1 <= len(name) <= 24 and set(name) <= _NAME_CHARS


class Rating(Protocol):
    """One bot's rating from the fit (``moo.bradley_terry.BTRating``)."""

    @property
    def rating(self) -> float: ...

    @property
    def low(self) -> float: ...

    @property
    def high(self) -> float: ...


#: the ladder's rating fit: games as (first, second, score of the first) -> ratings by name
Fit = Callable[[Sequence[tuple[str, str, float]]], Mapping[str, Rating]]


@dataclass
class LadderBot:
    bot_id: str
    name: str
    owner: str
    family: str
    rules: dict[str, Any]
    status: str
    reason: str
    version: int | None
    checking: int | None
    created_ms: int
    exact: dict[str, Any]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LadderBot:
        return cls(str(row[0]), str(row[1]), str(row[2]), str(row[3]), json.loads(row[4]),
                   str(row[5]), str(row[6]), row[7], row[8], int(row[9]), json.loads(row[10]))

    def row(self) -> tuple[Any, ...]:
        """The whole row, in :data:`server.sql.LADDER_BOT_COLUMNS` order."""
        return (self.bot_id, self.name, self.owner, self.family, dumps(self.rules),
                self.status, self.reason, self.version, self.checking, self.created_ms,
                dumps(self.exact))

    def update_row(self) -> tuple[Any, ...]:
        """The changing part, as :data:`server.sql.LADDER_UPDATE_BOT` takes it."""
        return (self.status, self.reason, self.version, self.checking, dumps(self.exact),
                self.bot_id)

    @property
    def kind(self) -> str:
        """``hosted`` (a submitted program) or ``connected`` (a client that opted in)."""
        return "connected" if self.version == CONNECTED_VERSION else "hosted"

    def public(self) -> dict[str, Any]:
        return {"bot_id": self.bot_id, "name": self.name, "owner": self.owner,
                "kind": self.kind,
                "rules": dict(self.rules), "status": self.status, "version": self.version,
                "checking": self.checking, "created_at": self.created_ms,
                "exact": dict(self.exact)}


@dataclass
class LadderGame:
    match_id: str
    family: str
    pairing: str
    bots: tuple[str, str]
    versions: tuple[int, int]
    created_ms: int
    ended_ms: int | None = None
    winner: int | None = None
    reason: str | None = None
    failures: list[str] = field(default_factory=lambda: ["", ""])
    stderr: list[str] = field(default_factory=lambda: ["", ""])
    #: its play job was lost with its worker before it ended: it counts for nobody
    void: bool = False

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LadderGame:
        return cls(str(row[0]), str(row[1]), str(row[2]), (str(row[3]), str(row[4])),
                   (int(row[5]), int(row[6])), int(row[7]),
                   None if row[8] is None else int(row[8]),
                   None if row[9] is None else int(row[9]), row[10],
                   [str(row[11]), str(row[12])], [str(row[13]), str(row[14])], bool(row[15]))

    @property
    def finished(self) -> bool:
        return self.ended_ms is not None

    def seat_of(self, bot_id: str) -> int:
        return self.bots.index(bot_id)

    @property
    def hosted(self) -> bool:
        """A worker plays a seat of it (False: both seats are connected bots)."""
        return any(v != CONNECTED_VERSION for v in self.versions)

    def result_for(self, seat: int) -> str:
        if self.winner is None:
            return "draw"
        return "win" if self.winner == seat else "loss"

    def failure_of(self, seat: int) -> str:
        """Why ``seat`` lost by its own doing ("" if it did not)."""
        if self.result_for(seat) != "loss":
            return ""
        if self.failures[seat]:
            return self.failures[seat]
        if self.reason in FORFEIT_REASONS:
            if self.versions[seat] == CONNECTED_VERSION and self.reason == "disconnect":
                return CONNECTION_GONE
            return WORKER_GONE if self.reason == "disconnect" else f"{self.reason}: no answer"
        return ""


@dataclass
class Upload:
    data: bytearray
    touched: float


@dataclass(eq=False)
class Worker:
    worker_id: str
    slots: int
    name: str
    #: job id -> kind, the claims this connection holds
    jobs: dict[str, str] = field(default_factory=dict)


@dataclass
class Standing:
    rating: float | None = None
    low: float | None = None
    high: float | None = None
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    forfeits: int = 0

    def fields(self) -> dict[str, Any]:
        return {"rating": round_rating(self.rating), "low": round_rating(self.low),
                "high": round_rating(self.high), "games": self.games, "wins": self.wins,
                "draws": self.draws, "losses": self.losses, "forfeits": self.forfeits}


def certainty(st: Standing | None) -> tuple[int, float]:
    """Sorts the least certain first: fewest games, then the widest interval."""
    if st is None:
        return (0, 0.0)
    width = (st.high - st.low) if st.high is not None and st.low is not None else math.inf
    return (st.games, -(width if math.isfinite(width) else 1e9))


def center(st: Standing | None) -> float:
    return 1500.0 if st is None or st.rating is None else st.rating


def finite(value: float | None, instead: float | None = None) -> float | None:
    if value is None or not math.isfinite(value):
        return instead
    return value


def round_rating(value: float | None) -> int | None:
    value = finite(value)
    return None if value is None else round(value)


def exact_values(exact: Any) -> dict[str, str] | None:
    """A worker's exact scores, checked: three fractions as ``p/q`` text (None: none)."""
    if exact is None:
        return None
    values = {k: exact.get(k) for k in ("vs_minimum", "vs_strongest", "average")}
    for value in values.values():
        if not isinstance(value, str) or len(value) > 64:
            raise SchemaError("field 'exact' needs vs_minimum, vs_strongest and average as "
                              "'p/q' text")
        try:
            Fraction(value)
        except (ValueError, ZeroDivisionError):
            raise SchemaError(f"field 'exact': {value!r} is not a fraction 'p/q'") from None
    return {k: str(v) for k, v in values.items()}


def exact_status(status: str, reason: str = "") -> dict[str, Any]:
    return {"status": status, "vs_minimum": None, "vs_strongest": None, "average": None,
            "reason": reason}


def player_of(conn: Follower) -> str:
    assert conn.player is not None
    return conn.player


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def with_ref(msg: dict[str, Any], ref: Any) -> dict[str, Any]:
    if ref is not None:
        msg["ref"] = ref
    return msg


def fit_standings(games: Iterable[LadderGame], family: str, fit: Fit) -> dict[str, Standing]:
    """A family's standings from every finished, non-void game of ``games``: the records,
    and the ratings of ``fit`` over all of them."""
    table: dict[str, Standing] = {}
    scored: list[tuple[str, str, float]] = []
    for g in games:
        if g.family != family or not g.finished or g.void:
            continue
        for seat in (0, 1):
            st = table.setdefault(g.bots[seat], Standing())
            st.games += 1
            result = g.result_for(seat)
            if result == "win":
                st.wins += 1
            elif result == "draw":
                st.draws += 1
            else:
                st.losses += 1
                if g.failure_of(seat):
                    st.forfeits += 1
        scored.append((g.bots[0], g.bots[1], 0.5 if g.winner is None else float(g.winner == 0)))
    if scored:
        for bot_id, r in fit(scored).items():
            found = table.get(bot_id)
            if found is not None:
                found.rating, found.low, found.high = r.rating, r.low, r.high
    return table


def standing_rows(bots: Iterable[LadderBot], family: str,
                  table: Mapping[str, Standing]) -> list[dict[str, Any]]:
    """``ladder_standings``'s rows: the family's active, paused and offline bots, best rated
    first (those without a rating last, by name)."""
    rows = []
    for bot in bots:
        if bot.family != family or bot.status not in ("active", "paused", "offline"):
            continue
        st = table.get(bot.bot_id, Standing())
        rows.append({"bot": bot.name, "bot_id": bot.bot_id, "owner": bot.owner,
                     "kind": bot.kind, "status": bot.status, **st.fields(),
                     "exact": dict(bot.exact)})
    rows.sort(key=lambda r: (r["rating"] is None, -(r["rating"] or 0), r["bot"].casefold()))
    return rows
