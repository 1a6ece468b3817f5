"""Durable storage: the append-only event log per match is the source of truth.

Everything else the server knows about a match is rebuilt from its events
(``Match.replay``), so a crash can lose only what was never acknowledged. The promise to
clients is *durable before ack*: an accepted action is answered only after the transaction
holding its events has committed. To make that cheap, writes are group-committed: a single
writer thread drains every queued operation (from many matches and connections) into one
transaction, commits once, and then releases all the waiters with one hop back to the event
loop. Callers therefore never block the loop on disk I/O and never create a task per write.

:class:`Store` is the small interface the rest of the server sees. :class:`SQLiteStore` is
the embedded single-node backend; ``server/storage_pg.py`` holds the PostgreSQL one (the
durable store of a cluster). Both create their tables from the one list of migrations in
``server/schema.py``; :func:`open_store` picks the backend from the ``db`` setting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar
from urllib.parse import urlsplit

from moo.errors import NameTaken, StorageError
from server.schema import (
    CLASSIC_RESULTS_SQLITE,
    RESULTS_UPSERT_SQLITE,
    result_rows,
    upgrade_sqlite,
)

__all__ = [
    "Account",
    "Done",
    "HistoryRow",
    "PlayerRecord",
    "PlayerStats",
    "SQLiteStore",
    "StatDelta",
    "Store",
    "StoredMatch",
    "describe_db",
    "is_postgres_url",
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

    #: the ``stats`` columns :meth:`from_row` reads, in its order (both backends' queries)
    COLUMNS = "player, games, wins, draws, losses, solved, solved_guesses, time_ms"

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> PlayerStats:
        """A ``stats`` row (:attr:`COLUMNS`) with its sums turned into averages."""
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


class Store(ABC):
    """What the arena and the lobby need from persistence, and nothing more."""

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None:
        """Commit everything queued, then release resources."""

    @abstractmethod
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

    @abstractmethod
    async def unfinished_matches(self) -> list[StoredMatch]: ...

    @abstractmethod
    async def stored_match(self, match_id: str) -> StoredMatch | None:
        """One match with its metadata and log, finished or not (None: no such match)."""

    @abstractmethod
    async def match_events(self, match_id: str, after: int = 0) -> list[Event] | None:
        """The match's committed events with ``seq > after`` in order; None if no such match."""

    @abstractmethod
    async def register_player(self, name: str, token_hash: str, bot: bool) -> PlayerRecord:
        """Create a player; raises :class:`NameTaken` if the name is in use."""

    @abstractmethod
    async def player_by_token(self, token_hash: str) -> PlayerRecord | None: ...

    @abstractmethod
    async def player_stats(self, name: str) -> PlayerStats | None: ...

    # -- accounts (server/accounts.py) --------------------------------------------------------
    @abstractmethod
    async def account(self, name: str) -> Account | None:
        """The name's sign-in data (case-insensitive), None for a name nobody owns."""

    @abstractmethod
    async def add_token(self, name: str, token_hash: str, keep: int) -> None:
        """Another device's token for ``name``; only the ``keep`` newest tokens stay valid."""

    @abstractmethod
    async def set_password_hash(self, name: str, password_hash: str) -> None: ...

    @abstractmethod
    async def rotate_tokens(self, name: str, token_hash: str) -> None:
        """Revoke every token of ``name`` and make ``token_hash`` its only one."""

    # -- history (server/history.py) ----------------------------------------------------------
    @abstractmethod
    async def history(
        self, player: str, before: tuple[int, str, int] | None, limit: int
    ) -> list[HistoryRow]:
        """The player's finished matches, newest first, strictly before the key
        ``(ended_ms, match_id, seat)`` when given; at most ``limit`` rows."""

    @abstractmethod
    async def guess_outcomes(self, names: Sequence[str]) -> dict[str, Counter[tuple[int, bool]]]:
        """casefolded name -> ``(guesses made, solved?)`` -> matches, over the finished matches
        that can be set against the minimum strategy (``moo.variants.against_minimum``:
        classic 4-of-10 MOO without the assistant)."""

    @abstractmethod
    async def known_player(self, name: str) -> str | None:
        """The stored spelling of a name that registered or played a finished match."""

    @abstractmethod
    async def leaderboard(self, by: str, limit: int = 50) -> list[dict[str, Any]]:
        """Top players by ``rating`` or by ``average`` guesses when solving."""

    @property
    def available(self) -> bool:
        """False while the backend is known to be unreachable (reported by /healthz)."""
        return True

    def on_recovered(self, callback: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``callback`` each time the backend is reachable again after an outage.

        Backends that cannot lose their connection (SQLite) never call it.
        """
        return None


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


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _not_json(obj: Any) -> Any:
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


# The C encoder behind json.dumps, built once: JSONEncoder.encode() builds a new one on every
# call, which was a third of the cost of encoding an event. No cycle check (events are trees).
_C_ENCODE = (
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )
    if json.encoder.c_make_encoder is not None  # type: ignore[attr-defined]
    else None
)


def _dumps(obj: Any) -> str:
    """Compact JSON, as ``json.dumps(obj, separators=(",", ":"), ensure_ascii=False)``."""
    if _C_ENCODE is not None:
        return "".join(_C_ENCODE(obj, 0))
    return _ENCODER.encode(obj)


class _Append(NamedTuple):
    """An event append as plain data, so a whole batch of them is a few multi-row INSERTs."""

    match_id: str
    rows: list[tuple[str, int, str]]
    meta: str | None
    created_ms: int
    finished: bool
    stats: Sequence[StatDelta]


class _Op:
    """One unit of work for the writer thread: an append, or a function run in a savepoint."""

    __slots__ = ("append", "done", "fn", "future", "result")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any] | None,
        done: Done | None = None,
        future: asyncio.Future[Any] | None = None,
        append: _Append | None = None,
    ) -> None:
        self.fn = fn
        self.done = done
        self.future = future
        self.append = append
        self.result: Any = None


class SQLiteStore(Store):
    """SQLite in WAL mode with one writer thread doing group commit."""

    def __init__(
        self, path: str | Path, *, commit_window_ms: float = 0.0, synchronous: str = "FULL"
    ) -> None:
        self.path = Path(path)
        self.window = commit_window_ms / 1000.0
        self.synchronous = synchronous.upper()
        self._queue: queue.SimpleQueue[list[_Op] | None] = queue.SimpleQueue()
        self._pending: list[_Op] = []
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._stop_checkpoints = threading.Event()
        self.checkpoint_interval_s = 1.0
        #: batches committed and operations in them, for the benchmark and /healthz
        self.commits = 0
        self.ops = 0

    # -- lifecycle ------------------------------------------------------------------------
    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        ready: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="moo-sqlite", daemon=True
        )
        self._thread.start()
        await ready

    async def close(self) -> None:
        if self._thread is None or self._closed:
            return
        self._hand_over()
        self._closed = True
        self._queue.put(None)
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)

    # -- the writer thread ----------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        # Checkpoints run on their own thread (see _checkpoints), never inside a commit.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("PRAGMA foreign_keys=ON")
        upgrade_sqlite(conn, str(self.path))
        return conn

    def _run(self, ready: asyncio.Future[None]) -> None:
        assert self._loop is not None
        loop = self._loop
        try:
            conn = self._connect()
        except Exception as exc:
            loop.call_soon_threadsafe(_settle, ready, None, StorageError(f"cannot open db: {exc}"))
            return
        loop.call_soon_threadsafe(_settle, ready, None, None)
        checkpointer = threading.Thread(target=self._checkpoints, name="moo-wal", daemon=True)
        checkpointer.start()
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                break
            batch = list(first)
            deadline = time.monotonic() + self.window
            while True:
                try:
                    timeout = deadline - time.monotonic()
                    ops = self._queue.get(timeout=timeout) if timeout > 0 else (
                        self._queue.get_nowait()
                    )
                except queue.Empty:
                    break
                if ops is None:
                    stop = True
                    break
                batch.extend(ops)
            outcomes = self._commit(conn, batch)
            try:
                loop.call_soon_threadsafe(_deliver, outcomes)
            except RuntimeError:  # loop closed: nobody is waiting any more
                pass
        self._stop_checkpoints.set()
        checkpointer.join()
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()

    def _checkpoints(self) -> None:
        """Copy the WAL back into the database off the commit path.

        SQLite's automatic checkpoint runs inside whichever commit crosses the WAL size limit,
        and with FULL sync it writes and fsyncs the database file there: hundreds of
        milliseconds during which no acknowledgement can go out. A PASSIVE checkpoint from a
        second connection runs beside the writer instead of blocking it.
        """
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            log.exception("no checkpoint connection; the WAL will grow until restart")
            return
        try:
            conn.execute("PRAGMA busy_timeout=1000")
            while not self._stop_checkpoints.wait(self.checkpoint_interval_s):
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as exc:
                    log.warning("checkpoint failed: %s", exc)
        finally:
            conn.close()

    def _commit(
        self, conn: sqlite3.Connection, batch: list[_Op]
    ) -> list[tuple[_Op, BaseException | None]]:
        """One transaction for the whole batch.

        Appends go in as a handful of ``executemany`` calls: the writer thread must re-take
        the GIL after every SQLite call, and under load each re-take can wait for the event
        loop's switch interval, so the number of calls per batch, not rows, sets the commit
        rate. Only if that bulk insert fails are the appends retried one by one in savepoints,
        so one bad operation cannot spoil its neighbours.
        """
        errors: dict[int, BaseException] = {}
        appends = [op for op in batch if op.append is not None]
        others = [op for op in batch if op.append is None]
        try:
            conn.execute("BEGIN IMMEDIATE")
            if appends:
                try:
                    conn.execute("SAVEPOINT bulk")
                    _write_appends(conn, [op.append for op in appends if op.append])
                    conn.execute("RELEASE bulk")
                except sqlite3.Error:
                    conn.execute("ROLLBACK TO bulk")
                    conn.execute("RELEASE bulk")
                    for op in appends:
                        exc = _in_savepoint(
                            conn, lambda c, a=op.append: _write_appends(c, [a])  # type: ignore[list-item,misc]
                        )
                        if exc is not None:
                            errors[id(op)] = exc
            for op in others:
                assert op.fn is not None
                box: list[Any] = []
                fn = op.fn
                exc = _in_savepoint(conn, lambda c, fn=fn, box=box: box.append(fn(c)))  # type: ignore[misc]
                if exc is not None:
                    errors[id(op)] = exc
                elif box:
                    op.result = box[0]
            conn.execute("COMMIT")
        except Exception as exc:
            log.exception("commit of %d operations failed", len(batch))
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            failure = StorageError(f"storage failed: {exc}")
            return [(op, failure) for op in batch]
        self.commits += 1
        self.ops += len(batch)
        return [(op, errors.get(id(op))) for op in batch]

    # -- submitting work --------------------------------------------------------------------
    def _submit(self, op: _Op) -> None:
        """Queue ``op``; everything submitted in one loop iteration is handed over at once."""
        if self._closed or self._thread is None:
            raise StorageError("storage is closed")
        self._pending.append(op)
        if len(self._pending) == 1:
            assert self._loop is not None
            self._loop.call_soon(self._hand_over)

    def _hand_over(self) -> None:
        # One queue operation (one cross-thread wake-up) per loop iteration, not per write.
        ops, self._pending = self._pending, []
        if ops:
            self._queue.put(ops)

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        assert self._loop is not None
        future: asyncio.Future[T] = self._loop.create_future()
        self._submit(_Op(fn, future=future))
        return await future

    # -- the Store interface ----------------------------------------------------------------
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
        append = _Append(
            match_id,
            [(match_id, int(e["seq"]), _dumps(e)) for e in events],
            _dumps(meta) if meta is not None else None,
            int(time.time() * 1000),
            finished,
            tuple(stats),
        )
        self._submit(_Op(None, done=done, append=append))

    async def unfinished_matches(self) -> list[StoredMatch]:
        def read(conn: sqlite3.Connection) -> list[StoredMatch]:
            out = []
            for match_id, meta in conn.execute(
                "SELECT match_id, meta FROM matches WHERE finished = 0 ORDER BY created_ms"
            ).fetchall():
                out.append(StoredMatch(match_id, json.loads(meta), _events(conn, match_id)))
            return out

        return await self._call(read)

    async def stored_match(self, match_id: str) -> StoredMatch | None:
        def read(conn: sqlite3.Connection) -> StoredMatch | None:
            row = conn.execute(
                "SELECT meta FROM matches WHERE match_id = ?", (match_id,)
            ).fetchone()
            if row is None:
                return None
            return StoredMatch(match_id, json.loads(row[0]), _events(conn, match_id))

        return await self._call(read)

    async def match_events(self, match_id: str, after: int = 0) -> list[Event] | None:
        def read(conn: sqlite3.Connection) -> list[Event] | None:
            found = conn.execute(
                "SELECT 1 FROM matches WHERE match_id = ?", (match_id,)
            ).fetchone()
            return _events(conn, match_id, after) if found else None

        return await self._call(read)

    async def register_player(self, name: str, token_hash: str, bot: bool) -> PlayerRecord:
        now = int(time.time() * 1000)

        def write(conn: sqlite3.Connection) -> PlayerRecord:
            try:
                conn.execute(
                    "INSERT INTO players(name, bot, created_ms) VALUES (?, ?, ?)",
                    (name, int(bot), now),
                )
            except sqlite3.IntegrityError as exc:
                raise NameTaken(f"the name {name!r} is taken; pick another") from exc
            conn.execute(
                "INSERT INTO tokens(token_hash, name, created_ms) VALUES (?, ?, ?)",
                (token_hash, name, now),
            )
            return PlayerRecord(name, bot, now)

        return await self._call(write)

    async def player_by_token(self, token_hash: str) -> PlayerRecord | None:
        def read(conn: sqlite3.Connection) -> PlayerRecord | None:
            row = conn.execute(
                "SELECT p.name, p.bot, p.created_ms, p.password_hash IS NOT NULL FROM tokens t"
                " JOIN players p ON p.name = t.name WHERE t.token_hash = ?",
                (token_hash,),
            ).fetchone()
            return PlayerRecord(row[0], bool(row[1]), row[2], bool(row[3])) if row else None

        return await self._call(read)

    async def player_stats(self, name: str) -> PlayerStats | None:
        def read(conn: sqlite3.Connection) -> PlayerStats | None:
            row = conn.execute(
                f"SELECT {PlayerStats.COLUMNS} FROM stats WHERE player = ?", (name,)
            ).fetchone()
            return None if row is None else PlayerStats.from_row(row)

        return await self._call(read)

    async def leaderboard(self, by: str, limit: int = 50) -> list[dict[str, Any]]:
        # rating: the smoothed score share (a win 1, a draw 1/2; two virtual draws so one
        # lucky game does not top the board), in points out of 1000.
        order = (
            "avg_guesses IS NULL, avg_guesses ASC, games DESC"
            if by == "average"
            else "rating DESC, games DESC"
        )

        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = conn.execute(
                "SELECT player, games, wins, draws, losses,"
                " CAST(round(1000.0 * (wins + 0.5 * draws + 1) / (games + 2)) AS INTEGER)"
                " AS rating,"
                " CASE WHEN solved > 0 THEN 1.0 * solved_guesses / solved END AS avg_guesses,"
                " CASE WHEN games > 0 THEN time_ms / 1000.0 / games END AS avg_time_s"
                f" FROM stats ORDER BY {order}, player LIMIT ?",
                (limit,),
            ).fetchall()
            keys = (
                "name", "games", "wins", "draws", "losses", "rating", "avg_guesses", "avg_time_s"
            )
            return [dict(zip(keys, row)) for row in rows]

        return await self._call(read)

    # -- accounts ---------------------------------------------------------------------------
    async def account(self, name: str) -> Account | None:
        def read(conn: sqlite3.Connection) -> Account | None:
            row = conn.execute(
                "SELECT name, bot, password_hash FROM players WHERE name = ?", (name,)
            ).fetchone()
            return Account(row[0], bool(row[1]), row[2]) if row else None

        return await self._call(read)

    async def add_token(self, name: str, token_hash: str, keep: int) -> None:
        now = int(time.time() * 1000)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO tokens(token_hash, name, created_ms) VALUES (?, ?, ?)",
                (token_hash, name, now),
            )
            conn.execute(
                "DELETE FROM tokens WHERE name = ? AND token_hash NOT IN (SELECT token_hash"
                " FROM tokens WHERE name = ? ORDER BY created_ms DESC, rowid DESC LIMIT ?)",
                (name, name, keep),
            )

        await self._call(write)

    async def set_password_hash(self, name: str, password_hash: str) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE players SET password_hash = ? WHERE name = ?",
                         (password_hash, name))

        await self._call(write)

    async def rotate_tokens(self, name: str, token_hash: str) -> None:
        now = int(time.time() * 1000)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM tokens WHERE name = ?", (name,))
            conn.execute(
                "INSERT INTO tokens(token_hash, name, created_ms) VALUES (?, ?, ?)",
                (token_hash, name, now),
            )

        await self._call(write)

    # -- history ----------------------------------------------------------------------------
    async def history(
        self, player: str, before: tuple[int, str, int] | None, limit: int
    ) -> list[HistoryRow]:
        def read(conn: sqlite3.Connection) -> list[HistoryRow]:
            if before is None:
                rows = conn.execute(
                    "SELECT match_id, seat, ended_ms, summary FROM results WHERE player = ?"
                    " ORDER BY ended_ms DESC, match_id DESC, seat DESC LIMIT ?",
                    (player, limit),
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT match_id, seat, ended_ms, summary FROM results WHERE player = ?"
                    " AND (ended_ms, match_id, seat) < (?, ?, ?)"
                    " ORDER BY ended_ms DESC, match_id DESC, seat DESC LIMIT ?",
                    (player, *before, limit),
                ).fetchall()
            return [HistoryRow(m, seat, ended, json.loads(body)) for m, seat, ended, body in rows]

        return await self._call(read)

    async def guess_outcomes(self, names: Sequence[str]) -> dict[str, Counter[tuple[int, bool]]]:
        wanted = list(dict.fromkeys(n.casefold() for n in names))

        def read(conn: sqlite3.Connection) -> dict[str, Counter[tuple[int, bool]]]:
            out: dict[str, Counter[tuple[int, bool]]] = {n: Counter() for n in wanted}
            for start in range(0, len(wanted), 200):
                chunk = wanted[start : start + 200]
                marks = ",".join("?" * len(chunk))
                for player, guesses, solved, count in conn.execute(
                    "SELECT player, guesses, solved, COUNT(*) FROM results"
                    f" WHERE player IN ({marks}) AND {CLASSIC_RESULTS_SQLITE}"
                    " GROUP BY player, guesses, solved",
                    chunk,
                ):
                    out.setdefault(player.casefold(), Counter())[(guesses, bool(solved))] += count
            return out

        return await self._call(read)

    async def known_player(self, name: str) -> str | None:
        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT name FROM players WHERE name = ?", (name,)).fetchone()
            if row is None:
                row = conn.execute(
                    "SELECT player FROM results WHERE player = ? LIMIT 1", (name,)
                ).fetchone()
            return str(row[0]) if row else None

        return await self._call(read)


def _write_appends(conn: sqlite3.Connection, appends: list[_Append]) -> None:
    metas = [(a.match_id, a.meta, a.created_ms) for a in appends if a.meta is not None]
    if metas:
        conn.executemany(
            "INSERT INTO matches(match_id, meta, created_ms) VALUES (?, ?, ?)", metas
        )
    rows = [row for a in appends for row in a.rows]
    # A few multi-row INSERTs for the whole batch: executemany() releases and re-takes the GIL
    # around every row, and each re-take can wait out the event loop's switch interval, so a
    # batch of hundreds of rows took hundreds of milliseconds under load. Rows go in chunks of
    # fixed sizes (so only five statements are ever prepared and cached), each one
    # sqlite3_step(); the values are bound in C, nothing is re-encoded or parsed.
    start = 0
    while start < len(rows):
        left = len(rows) - start
        size = next(s for s in _CHUNKS if s <= left)
        flat = [value for row in rows[start : start + size] for value in row]
        conn.execute(_INSERT_EVENTS[size], flat)
        start += size
    for a in appends:
        if a.finished:
            conn.execute("UPDATE matches SET finished = 1 WHERE match_id = ?", (a.match_id,))
            for delta in a.stats:
                _apply_stat(conn, delta)
            _index_result(conn, a.match_id, a.rows[-1][2] if a.rows else None)


_CHUNKS = (256, 64, 16, 4, 1)
_INSERT_EVENTS = {
    n: "INSERT INTO events(match_id, seq, body) VALUES " + ",".join(["(?,?,?)"] * n)
    for n in _CHUNKS
}


def _in_savepoint(
    conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], Any]
) -> BaseException | None:
    conn.execute("SAVEPOINT op")
    try:
        fn(conn)
    except Exception as exc:
        conn.execute("ROLLBACK TO op")
        conn.execute("RELEASE op")
        return exc
    conn.execute("RELEASE op")
    return None


def _events(conn: sqlite3.Connection, match_id: str, after: int = 0) -> list[Event]:
    return [
        json.loads(body)
        for (body,) in conn.execute(
            "SELECT body FROM events WHERE match_id = ? AND seq > ? ORDER BY seq",
            (match_id, after),
        )
    ]


def _index_result(conn: sqlite3.Connection, match_id: str, last_body: str | None) -> None:
    """Write the finished match's ``results`` rows (history, distributions).

    Runs inside the transaction that marks the match finished, once per match. The rows come
    from :func:`server.schema.result_rows` (shared with PostgreSQL and with the migration that
    indexed older matches). The index is derived data: a failure here is logged and never
    allowed to fail the match's commit.
    """
    try:
        first = conn.execute(
            "SELECT body FROM events WHERE match_id = ? AND seq = 1", (match_id,)
        ).fetchone()
        meta = conn.execute("SELECT meta FROM matches WHERE match_id = ?", (match_id,)).fetchone()
        rows = result_rows(match_id, first[0] if first else None, last_body,
                           meta[0] if meta else None)
        conn.executemany(RESULTS_UPSERT_SQLITE, rows)
    except sqlite3.Error:
        log.exception("cannot index the result of match %s for history", match_id)


def _apply_stat(conn: sqlite3.Connection, d: StatDelta) -> None:
    conn.execute("INSERT OR IGNORE INTO stats(player) VALUES (?)", (d.player,))
    conn.execute(
        "UPDATE stats SET games = games + 1, wins = wins + ?, draws = draws + ?,"
        " losses = losses + ?, solved = solved + ?, solved_guesses = solved_guesses + ?,"
        " time_ms = time_ms + ? WHERE player = ?",
        (
            int(d.outcome == "win"), int(d.outcome == "draw"), int(d.outcome == "loss"),
            int(d.guesses is not None), d.guesses or 0, d.duration_ms, d.player,
        ),
    )


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is None:
        future.set_result(result)
    else:
        future.set_exception(exc)


def _deliver(outcomes: list[tuple[_Op, BaseException | None]]) -> None:
    """Release every waiter of one committed batch, in submission order."""
    for op, exc in outcomes:
        if op.future is not None:
            _settle(op.future, op.result, exc)
        elif op.done is not None:
            try:
                op.done(exc)
            except Exception:
                log.exception("durability callback failed")
