"""Durable storage: the append-only event log per match is the source of truth.

Everything else the server knows about a match is rebuilt from its events
(``Match.replay``), so a crash can lose only what was never acknowledged. The promise to
clients is *durable before ack*: an accepted action is answered only after the transaction
holding its events has committed. To make that cheap, writes are group-committed: a writer
drains every queued append (from many matches and connections) into one transaction, commits
once, and then releases all the waiters. Callers never block the loop on disk I/O and never
create a task per write.

:class:`Store` is what the rest of the server sees, and it is also every read and account
write, written once: each is an operation on a :class:`Db` (a connection as both engines'
drivers present it) running the statements of ``server/sql.py``. The two backends add only what
differs: their driver, their group-commit writer and their schema dialect --
:class:`~server.storage_sqlite.SQLiteStore` (the embedded single-node backend) and
:class:`~server.storage_pg.PostgresStore` (the durable store of a cluster). Both create their
tables from the one list of migrations in ``server/schema.py``; ``server/stores.py`` picks the
backend from the ``db`` setting.
"""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar
from urllib.parse import urlsplit

from moo.errors import NameTaken
from moo.protocol import compact_json
from server import sql
from server.schema import ResultRow, result_rows
from server.sql import Query

__all__ = [
    "Account",
    "Append",
    "Db",
    "Done",
    "FinishedMatch",
    "HistoryRow",
    "PlayerRecord",
    "PlayerStats",
    "StatDelta",
    "Store",
    "StoredMatch",
    "describe_db",
    "finished_results",
    "index_results",
    "is_postgres_url",
    "read_stored",
]

log = logging.getLogger("moo.storage")

Event = dict[str, Any]
T = TypeVar("T")
#: Called on the event loop once an operation is durable (exc None) or has failed.
Done = Callable[[BaseException | None], None]


@dataclass(frozen=True)
class PlayerRecord:
    name: str
    bot: bool
    created_ms: int
    #: the name has a password (server/accounts.py)
    secured: bool = False


@dataclass(frozen=True)
class Account:
    """A name's sign-in data: ``password_hash`` is None until the owner sets a password."""

    name: str
    bot: bool
    password_hash: str | None


@dataclass(frozen=True)
class HistoryRow:
    """One finished match from one seat's side (the ``results`` index)."""

    match_id: str
    seat: int
    ended_ms: int
    summary: dict[str, Any]


@dataclass(frozen=True)
class StatDelta:
    """One player's part in one finished match."""

    player: str
    outcome: str  # "win" | "draw" | "loss"
    guesses: int | None  # guesses needed when the player solved the opponent's secret
    duration_ms: int

    def counts(self) -> tuple[int, int, int, int, int, int]:
        """What it adds to the player's ``stats`` row: wins, draws, losses, solved, guesses
        when solving, time (the writers' statement and ``moo_commit``'s arrays)."""
        return (
            int(self.outcome == "win"), int(self.outcome == "draw"), int(self.outcome == "loss"),
            int(self.guesses is not None), self.guesses or 0, self.duration_ms,
        )


@dataclass(frozen=True)
class PlayerStats:
    player: str
    games: int
    wins: int
    draws: int
    losses: int
    solved: int
    avg_guesses: float | None
    avg_time_ms: float | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> PlayerStats:
        """A ``stats`` row (``server.sql.STATS_COLUMNS``) with its sums turned into averages."""
        player, games, wins, draws, losses, solved, guesses, time_ms = row
        return cls(
            player, games, wins, draws, losses, solved,
            guesses / solved if solved else None,
            time_ms / games if games else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "player": self.player,
            "games": self.games,
            "wins": self.wins,
            "draws": self.draws,
            "losses": self.losses,
            "solved": self.solved,
            "avg_guesses": self.avg_guesses,
            "avg_time_ms": self.avg_time_ms,
        }


@dataclass(frozen=True)
class StoredMatch:
    match_id: str
    meta: dict[str, Any]
    events: list[Event]


#: a finished match as the finish hooks see it (server/ratings_pg.py): id, event 1, deltas
FinishedMatch = tuple[str, str | None, list[StatDelta]]


class Db(ABC):
    """One connection as the operations written once see it; each driver wraps its own.

    The operations are coroutines so that PostgreSQL's driver can wait for the network; on
    SQLite every await completes at once (the statement runs on the writer thread right there),
    so its driver runs an operation to its end in one step.
    """

    #: what the database raises for a row it refuses (a constraint, a value it cannot store):
    #: the statement failed, not the database
    refused: tuple[type[Exception], ...]

    @abstractmethod
    async def rows(self, query: Query, *args: Any) -> list[Any]:
        """Every row ``query`` selects (each indexable by column position)."""

    @abstractmethod
    async def row(self, query: Query, *args: Any) -> Any:
        """The first row ``query`` selects, None when there is none."""

    @abstractmethod
    async def run(self, query: Query, *args: Any) -> None:
        """Execute a statement that returns no rows."""

    @abstractmethod
    async def run_many(self, query: Query, rows: Sequence[Sequence[Any]]) -> None:
        """Execute ``query`` once for each parameter row."""

    @abstractmethod
    def atomic(self) -> AbstractAsyncContextManager[Any]:
        """A block whose statements take effect together or not at all (a transaction, or a
        savepoint inside the one already open)."""


class Append(NamedTuple):
    """An event append as plain data, so a whole batch of them is a few statements."""

    match_id: str
    #: ``(match_id, seq, JSON body)`` per event
    rows: list[tuple[str, int, str]]
    meta: str | None
    created_ms: int
    finished: bool
    stats: Sequence[StatDelta]


async def read_stored(db: Db, only: list[str] | None) -> list[StoredMatch]:
    """Unfinished matches with their logs, read on ``db``: all of them, or those in ``only``."""
    if only is None:
        matches = await db.rows(sql.UNFINISHED)
    else:
        matches = await db.rows(sql.UNFINISHED_AMONG, only)
    if not matches:
        return []
    events: dict[str, list[Event]] = {row[0]: [] for row in matches}
    for match_id, body in await db.rows(sql.EVENTS_OF, list(events)):
        events[match_id].append(json.loads(body))
    return [StoredMatch(m, json.loads(meta), events[m]) for m, meta in matches]


class Store(ABC):
    """What the arena and the lobby need from persistence, and nothing more.

    A backend implements :meth:`open`, :meth:`close`, :meth:`_enqueue` (its group-commit
    writer) and :meth:`with_db` (its driver); every other method is here, once.
    """

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None:
        """Commit everything queued, then release resources."""

    @abstractmethod
    def _enqueue(self, append: Append, done: Done) -> None:
        """Queue ``append`` for the next group commit; ``done`` runs on the loop after it."""

    @abstractmethod
    async def with_db(self, op: Callable[[Db], Coroutine[Any, Any, T]]) -> T:
        """Run ``op`` on a connection of this store and return its result.

        Each statement is atomic; several are atomic together inside ``db.atomic()`` (SQLite
        runs the whole operation in a savepoint of the next group commit anyway). A refused row
        raises one of ``db.refused``; a database that cannot be reached raises
        :class:`~moo.errors.StorageError`.
        """

    def append(
        self,
        match_id: str,
        events: Sequence[Event],
        done: Done,
        *,
        meta: dict[str, Any] | None = None,
        finished: bool = False,
        stats: Sequence[StatDelta] = (),
    ) -> None:
        """Queue events for durable append; ``done`` runs on the loop after the commit.

        ``meta`` (players, config, ...) is stored with the match's first append; ``finished``
        marks the match over and applies ``stats`` in the same transaction, so statistics can
        never disagree with the log.
        """
        self._enqueue(
            Append(
                match_id,
                [(match_id, int(e["seq"]), compact_json(e)) for e in events],
                compact_json(meta) if meta is not None else None,
                int(time.time() * 1000),
                finished,
                tuple(stats),
            ),
            done,
        )

    # -- matches ------------------------------------------------------------------------------
    async def unfinished_matches(self) -> list[StoredMatch]:
        return await self.stored_matches(None)

    async def stored_matches(self, only: list[str] | None) -> list[StoredMatch]:
        """Unfinished matches with their logs: all of them, or those of the ids in ``only``."""
        return await self.with_db(lambda db: read_stored(db, only))

    async def stored_match(self, match_id: str) -> StoredMatch | None:
        """One match with its metadata and log, finished or not (None: no such match)."""

        async def read(db: Db) -> StoredMatch | None:
            row = await db.row(sql.MATCH_META, match_id)
            if row is None:
                return None
            events = [json.loads(r[0]) for r in await db.rows(sql.EVENTS_OF_MATCH, match_id)]
            return StoredMatch(match_id, json.loads(row[0]), events)

        return await self.with_db(read)

    async def match_events(self, match_id: str, after: int = 0) -> list[Event] | None:
        """The match's committed events with ``seq > after`` in order; None if no such match."""

        async def read(db: Db) -> list[Event] | None:
            rows = await db.rows(sql.EVENTS_AFTER, after, match_id)
            return [json.loads(r[0]) for r in rows if r[0] is not None] if rows else None

        return await self.with_db(read)

    # -- hosted tournaments (server/tournaments.py) --------------------------------------------
    async def save_tournament(
        self, tournament_id: str, status: str, data: dict[str, Any], now_ms: int, version: int
    ) -> bool:
        """Store a tournament's whole state as its ``version`` (1: the first write), over
        version ``version - 1``; False, and nothing written, if the stored version is another
        (someone else wrote it meanwhile)."""
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)

        async def write(db: Db) -> bool:
            if version == 1:
                row = await db.row(sql.TOURNAMENT_INSERT, tournament_id, status, text, now_ms)
            else:
                row = await db.row(sql.TOURNAMENT_UPDATE, status, text, now_ms, version,
                                   tournament_id, version - 1)
            return row is not None

        return await self.with_db(write)

    async def load_tournaments(self, finished_since_ms: int) -> list[dict[str, Any]]:
        """Every unfinished tournament and those finished since ``finished_since_ms``."""

        async def read(db: Db) -> list[dict[str, Any]]:
            rows = await db.rows(sql.TOURNAMENTS_LOAD, finished_since_ms)
            return [json.loads(r[0]) for r in rows]

        return await self.with_db(read)

    async def match_end(self, match_id: str) -> tuple[bool, Event | None] | None:
        """Whether a match is finished, with its last event (the ``finished`` event once it
        is); None if there is no such match (a tournament's look at a game another node ran,
        or one whose creation was lost with a node)."""

        async def read(db: Db) -> tuple[bool, Event | None] | None:
            row = await db.row(sql.MATCH_END, match_id)
            if row is None:
                return None
            return bool(row[0]), None if row[1] is None else dict(json.loads(row[1]))

        return await self.with_db(read)

    async def tournament(self, tournament_id: str) -> dict[str, Any] | None:
        async def read(db: Db) -> dict[str, Any] | None:
            row = await db.row(sql.TOURNAMENT_ONE, tournament_id)
            return None if row is None else dict(json.loads(row[0]))

        return await self.with_db(read)

    # -- hosted bots and the ladder (server/ladder.py) ------------------------------------------
    async def ladder_new_bot(self, bot: Sequence[Any], token_hash: str, version: Sequence[Any],
                             job: Sequence[Any]) -> None:
        """A new hosted bot, all at once: its player (a program, with a token nobody is given
        yet), the bot row (:data:`sql.LADDER_BOT_COLUMNS` order), its first version (bot id,
        version, sha256, size, program, submitted) and the check job (id, kind, payload,
        created). Raises :class:`NameTaken` if the name is in use."""
        bot_id, name = bot[0], bot[1]

        async def write(db: Db) -> None:
            async with db.atomic():
                try:
                    await db.run(sql.INSERT_PLAYER, name, 1, bot[9])
                except db.refused as exc:
                    raise NameTaken(f"the name {name!r} is taken; pick another") from exc
                await db.run(sql.INSERT_TOKEN, token_hash, name, bot[9])
                await db.run(sql.LADDER_INSERT_BOT, *bot)
                await db.run(sql.LADDER_INSERT_VERSION, *version)
                await db.run(sql.LADDER_INSERT_JOB, *job)
            log.info("ladder: bot %s (%s) submitted", bot_id, name)

        await self.with_db(write)

    async def ladder_new_connected(self, bot: Sequence[Any]) -> None:
        """A connected bot's row (:data:`sql.LADDER_BOT_COLUMNS` order; server/ladder_connected
        .py): its player exists already, and it has no program. Raises :class:`NameTaken` if
        a bot of that name exists."""

        async def write(db: Db) -> None:
            try:
                await db.run(sql.LADDER_INSERT_BOT, *bot)
            except db.refused as exc:
                raise NameTaken(f"a bot named {bot[1]!r} is on the ladder already") from exc

        await self.with_db(write)

    async def ladder_new_version(self, bot: Sequence[Any], version: Sequence[Any],
                                 job: Sequence[Any]) -> None:
        """A new version of a bot (its row updated as :data:`sql.LADDER_UPDATE_BOT` takes it),
        with its check job, together."""

        async def write(db: Db) -> None:
            async with db.atomic():
                await db.run(sql.LADDER_UPDATE_BOT, *bot)
                await db.run(sql.LADDER_INSERT_VERSION, *version)
                await db.run(sql.LADDER_INSERT_JOB, *job)

        await self.with_db(write)

    async def ladder_update_bot(self, bot: Sequence[Any],
                                verdict: Sequence[Any] | None = None,
                                job: Sequence[Any] | None = None) -> None:
        """A bot's row (:data:`sql.LADDER_UPDATE_BOT` order), with a version's verdict
        (verdict, reason, bot id, version) and a job to queue, together."""

        async def write(db: Db) -> None:
            async with db.atomic():
                await db.run(sql.LADDER_UPDATE_BOT, *bot)
                if verdict is not None:
                    await db.run(sql.LADDER_VERDICT, *verdict)
                if job is not None:
                    await db.run(sql.LADDER_INSERT_JOB, *job)

        await self.with_db(write)

    async def ladder_bots(self) -> list[tuple[Any, ...]]:
        async def read(db: Db) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in await db.rows(sql.LADDER_BOTS)]

        return await self.with_db(read)

    async def ladder_versions(self, bot_id: str) -> list[tuple[Any, ...]]:
        """(version, sha256, size, submitted_ms, verdict, reason), newest first."""

        async def read(db: Db) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in await db.rows(sql.LADDER_VERSIONS, bot_id)]

        return await self.with_db(read)

    async def ladder_program(self, bot_id: str, version: int) -> str | None:
        """The version's program, base64."""

        async def read(db: Db) -> str | None:
            row = await db.row(sql.LADDER_PROGRAM, bot_id, version)
            return None if row is None else str(row[0])

        return await self.with_db(read)

    async def ladder_add_pairing(self, games: Sequence[Sequence[Any]],
                                 job: Sequence[Any] | None) -> None:
        """A pairing's game rows and its play job (none for two connected bots), together
        (written before the matches are created, so no ladder match exists that the ladder
        does not know)."""

        async def write(db: Db) -> None:
            async with db.atomic():
                for game in games:
                    await db.run(sql.LADDER_INSERT_GAME, *game)
                if job is not None:
                    await db.run(sql.LADDER_INSERT_JOB, *job)

        await self.with_db(write)

    async def ladder_game_end(self, match_id: str, ended_ms: int, winner: int | None,
                              reason: str) -> bool:
        """A ladder game's result; False if it was recorded already."""

        async def write(db: Db) -> bool:
            row = await db.row(sql.LADDER_GAME_END, ended_ms, winner, reason, match_id)
            return row is not None

        return await self.with_db(write)

    async def ladder_void(self, match_ids: Sequence[str]) -> list[str]:
        """The games among ``match_ids`` that have not ended are void; their ids."""

        async def write(db: Db) -> list[str]:
            return [str(r[0]) for r in await db.rows(sql.LADDER_GAMES_VOID, list(match_ids))]

        return await self.with_db(write)

    async def ladder_game_failure(self, match_id: str, seat: int, failure: str,
                                  stderr: str) -> None:
        async def write(db: Db) -> None:
            await db.run(sql.LADDER_GAME_FAILURE[seat], failure, stderr, match_id)

        await self.with_db(write)

    async def ladder_games(self) -> list[tuple[Any, ...]]:
        """Every ladder game (:data:`sql.LADDER_GAME_COLUMNS`), oldest first."""

        async def read(db: Db) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in await db.rows(sql.LADDER_GAMES)]

        return await self.with_db(read)

    async def ladder_claim(self, worker: str, lease_until: int) -> tuple[Any, ...] | None:
        """The oldest queued job, now claimed by ``worker``: (job id, kind, payload JSON)."""

        async def write(db: Db) -> tuple[Any, ...] | None:
            row = await db.row(sql.LADDER_CLAIM, worker, lease_until)
            return None if row is None else tuple(row)

        return await self.with_db(write)

    async def ladder_renew(self, job_id: str, worker: str, lease_until: int) -> bool:
        async def write(db: Db) -> bool:
            return await db.row(sql.LADDER_RENEW, lease_until, job_id, worker) is not None

        return await self.with_db(write)

    async def ladder_job_done(self, job_id: str, worker: str) -> tuple[Any, ...] | None:
        """The job, done, if ``worker`` held it: (job id, kind, payload JSON)."""

        async def write(db: Db) -> tuple[Any, ...] | None:
            row = await db.row(sql.LADDER_JOB_DONE, job_id, worker)
            return None if row is None else tuple(row)

        return await self.with_db(write)

    async def ladder_expire(self, now_ms: int, worker: str = "") -> list[tuple[Any, ...]]:
        """Claims whose lease ran out by ``now_ms`` (and every claim of ``worker``, if named)
        let go: checks and evals queued again, play jobs lost. The jobs, as claimed."""

        async def write(db: Db) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in await db.rows(sql.LADDER_EXPIRE, now_ms, worker)]

        return await self.with_db(write)

    async def ladder_job(self, job_id: str) -> tuple[Any, ...] | None:
        """One job, whatever its state: (kind, payload JSON, state, claiming worker or
        None); None if there is none."""

        async def read(db: Db) -> tuple[Any, ...] | None:
            row = await db.row(sql.LADDER_JOB, job_id)
            return None if row is None else tuple(row)

        return await self.with_db(read)

    async def ladder_open_jobs(self) -> list[tuple[Any, ...]]:
        """Queued and claimed jobs: (job id, kind, payload JSON, state)."""

        async def read(db: Db) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in await db.rows(sql.LADDER_OPEN_JOBS)]

        return await self.with_db(read)

    async def ladder_add_history(self, rows: Sequence[Sequence[Any]]) -> None:
        """Rating points (bot id, games, at, rating, low, high); a point already there stays."""

        async def write(db: Db) -> None:
            async with db.atomic():
                for row in rows:
                    await db.run(sql.LADDER_INSERT_HISTORY, *row)

        await self.with_db(write)

    async def ladder_history(self, bot_id: str, limit: int) -> list[tuple[Any, ...]]:
        """The bot's ``limit`` latest rating points, oldest first."""

        async def read(db: Db) -> list[tuple[Any, ...]]:
            rows = [tuple(r) for r in await db.rows(sql.LADDER_HISTORY, bot_id, limit)]
            return rows[::-1]

        return await self.with_db(read)

    # -- players and statistics -----------------------------------------------------------------
    async def register_player(self, name: str, token_hash: str, bot: bool) -> PlayerRecord:
        """Create a player; raises :class:`NameTaken` if the name is in use."""
        now = int(time.time() * 1000)

        async def write(db: Db) -> PlayerRecord:
            async with db.atomic():
                try:
                    await db.run(sql.INSERT_PLAYER, name, int(bot), now)
                except db.refused as exc:
                    raise NameTaken(f"the name {name!r} is taken; pick another") from exc
                await db.run(sql.INSERT_TOKEN, token_hash, name, now)
            return PlayerRecord(name, bot, now)

        return await self.with_db(write)

    async def player_by_token(self, token_hash: str) -> PlayerRecord | None:
        async def read(db: Db) -> PlayerRecord | None:
            row = await db.row(sql.PLAYER_BY_TOKEN, token_hash)
            return PlayerRecord(row[0], bool(row[1]), row[2], bool(row[3])) if row else None

        return await self.with_db(read)

    async def player_stats(self, name: str) -> PlayerStats | None:
        async def read(db: Db) -> PlayerStats | None:
            row = await db.row(sql.PLAYER_STATS, name)
            return None if row is None else PlayerStats.from_row(row)

        return await self.with_db(read)

    async def leaderboard(self, by: str, limit: int = 50) -> list[dict[str, Any]]:
        """Top players by ``rating`` or by ``average`` guesses when solving."""
        query = sql.STATS_BOARD["average" if by == "average" else "rating"]

        async def read(db: Db) -> list[dict[str, Any]]:
            keys = (
                "name", "games", "wins", "draws", "losses", "rating", "avg_guesses", "avg_time_s"
            )
            return [dict(zip(keys, tuple(row))) for row in await db.rows(query, limit)]

        return await self.with_db(read)

    # -- accounts (server/accounts.py) --------------------------------------------------------
    async def account(self, name: str) -> Account | None:
        """The name's sign-in data (case-insensitive), None for a name nobody owns."""

        async def read(db: Db) -> Account | None:
            row = await db.row(sql.ACCOUNT, name)
            return Account(row[0], bool(row[1]), row[2]) if row else None

        return await self.with_db(read)

    async def add_token(self, name: str, token_hash: str, keep: int) -> None:
        """Another device's token for ``name``; only the ``keep`` newest tokens stay valid."""
        now = int(time.time() * 1000)

        async def write(db: Db) -> None:
            async with db.atomic():
                await db.run(sql.INSERT_TOKEN, token_hash, name, now)
                await db.run(sql.KEEP_NEWEST_TOKENS, name, name, keep)

        await self.with_db(write)

    async def set_password_hash(self, name: str, password_hash: str) -> None:
        async def write(db: Db) -> None:
            await db.run(sql.SET_PASSWORD_HASH, password_hash, name)

        await self.with_db(write)

    async def rotate_tokens(self, name: str, token_hash: str) -> None:
        """Revoke every token of ``name`` and make ``token_hash`` its only one."""
        now = int(time.time() * 1000)

        async def write(db: Db) -> None:
            async with db.atomic():
                await db.run(sql.DROP_TOKENS, name)
                await db.run(sql.INSERT_TOKEN, token_hash, name, now)

        await self.with_db(write)

    # -- history (server/history.py) ----------------------------------------------------------
    async def history(
        self, player: str, before: tuple[int, str, int] | None, limit: int
    ) -> list[HistoryRow]:
        """The player's finished matches, newest first, strictly before the key
        ``(ended_ms, match_id, seat)`` when given; at most ``limit`` rows."""

        async def read(db: Db) -> list[HistoryRow]:
            if before is None:
                rows = await db.rows(sql.HISTORY, player, limit)
            else:
                rows = await db.rows(sql.HISTORY_BEFORE, player, *before, limit)
            return [HistoryRow(r[0], r[1], r[2], json.loads(r[3])) for r in rows]

        return await self.with_db(read)

    async def guess_outcomes(self, names: Sequence[str]) -> dict[str, Counter[tuple[int, bool]]]:
        """casefolded name -> ``(guesses made, solved?)`` -> matches, over the finished matches
        that can be set against the minimum strategy (``moo.variants.against_minimum``:
        classic 4-of-10 MOO without the assistant)."""
        wanted = list(dict.fromkeys(n.casefold() for n in names))

        async def read(db: Db) -> dict[str, Counter[tuple[int, bool]]]:
            out: dict[str, Counter[tuple[int, bool]]] = {n: Counter() for n in wanted}
            for player, guesses, solved, count in await db.rows(sql.GUESS_OUTCOMES, wanted):
                out.setdefault(player.casefold(), Counter())[(guesses, bool(solved))] += count
            return out

        return await self.with_db(read)

    async def known_player(self, name: str) -> str | None:
        """The stored spelling of a name that registered or played a finished match."""

        async def read(db: Db) -> str | None:
            row = await db.row(sql.PLAYER_NAME, name)
            if row is None:
                row = await db.row(sql.RESULT_PLAYER, name)
            return str(row[0]) if row else None

        return await self.with_db(read)

    # -- availability ---------------------------------------------------------------------------
    @property
    def available(self) -> bool:
        """False while the backend is known to be unreachable (reported by /healthz)."""
        return True

    def on_recovered(self, callback: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``callback`` each time the backend is reachable again after an outage.

        Backends that cannot lose their connection (SQLite) never call it.
        """
        return None


async def index_results(db: Db, done: Sequence[Append]) -> dict[str, str | None]:
    """Write the ``results`` rows (history, distributions) of the matches being finished.

    Both writers call it inside the transaction that marks the matches finished, once per
    match. Event 1 and the meta may have been committed by an earlier batch, so they are read
    back here; the rows come from :func:`server.schema.result_rows` (shared with the migration
    that indexed older matches). The index is derived data: a refused row is logged and rolled
    back to a savepoint, never allowed to fail the matches' commit. Returns each match's
    event 1 (the finish hooks read its config).
    """
    heads: dict[str, tuple[str | None, str | None]] = {}
    try:
        async with db.atomic():
            heads = {
                m: (meta, first)
                for m, meta, first in await db.rows(sql.MATCH_HEADS, [a.match_id for a in done])
            }
            rows = finished_results(done, heads)
            if rows:
                await db.run_many(sql.RESULTS_UPSERT, rows)
    except db.refused:
        log.exception("cannot index the results of %d finished matches", len(done))
    return {m: first for m, (_, first) in heads.items()}


def finished_results(
    done: Sequence[Append], heads: dict[str, tuple[str | None, str | None]]
) -> list[ResultRow]:
    """The ``results`` rows of the matches ``done`` finishes, given each one's ``(meta, event
    1)`` in ``heads`` (a match missing there gets none)."""
    rows: list[ResultRow] = []
    for a in done:
        meta, first = heads.get(a.match_id, (None, None))
        rows.extend(result_rows(a.match_id, first, a.rows[-1][2] if a.rows else None, meta))
    return rows


def is_postgres_url(db: str) -> bool:
    """Whether the ``db`` setting names a PostgreSQL database rather than a SQLite file."""
    return db.startswith(("postgresql://", "postgres://"))


def describe_db(db: str) -> str:
    """The ``db`` setting as logs and /healthz may show it: a URL loses user and password."""
    if not is_postgres_url(db):
        return db
    parts = urlsplit(db)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"postgresql://{host}{port}{parts.path}"

