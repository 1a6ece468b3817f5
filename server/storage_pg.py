"""PostgreSQL backend of :class:`~server.storage.Store`, through asyncpg on the event loop.

The promise is the SQLite store's: an action is acknowledged only after the transaction holding
its events has committed (``synchronous_commit = on`` is forced on the writer's session, so a
server configured for asynchronous commit cannot weaken it). Writes are group-committed the same
way: :meth:`PostgresStore.append` only queues; one writer task takes everything queued while the
previous commit was in flight and writes it with one call of the ``moo_commit`` function
(server/schema.py, migration 3): one round trip and one transaction of array-valued statements,
whatever the number of matches and rows; then it releases every waiter.

Failures. A row the database refuses (a duplicate ``(match_id, seq)``) fails only its own
append: the batch is retried one append per call. A lost or refused connection, or a commit
that does not finish within ``op_timeout_s`` (a watchdog then terminates the socket), fails the
whole batch with :class:`~moo.errors.StorageError` -- players see ``storage_unavailable`` and
nothing in it is acknowledged -- and also every queued append of the same matches, so a log can
never get a hole (a later event committed after an earlier one failed). The store then probes
the database once a second; when it answers again, the callbacks given to :meth:`on_recovered`
run (the server re-adopts the matches it had to drop) and writes go on.

Reads and account writes go through a small connection pool and are retried once on a
connection error (a pooled connection that died with a database restart fails its first use).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import asyncpg

from moo.errors import NameTaken, StorageError
from server.schema import CLASSIC_RESULTS_PG, RESULTS_UPSERT_PG, result_rows, upgrade_postgres
from server.storage import (
    Account,
    Done,
    Event,
    HistoryRow,
    PlayerRecord,
    PlayerStats,
    StatDelta,
    Store,
    StoredMatch,
    _Append,
    _dumps,
    describe_db,
)

__all__ = ["DB_NOW_MS", "UNAVAILABLE_ERRORS", "LeaseLost", "PostgresStore"]

log = logging.getLogger("moo.storage")

T = TypeVar("T")

#: errors that mean "this row is refused", not "the database is gone"
_DATA_ERRORS = (asyncpg.IntegrityConstraintViolationError, asyncpg.DataError)
#: errors that make an operation fail with ``storage_unavailable``
_UNAVAILABLE = (
    OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.PostgresError,
    # not an InterfaceError in asyncpg, but the same thing to us: this session is unusable
    asyncpg.InternalClientError,
)
#: (public: the cluster's lease loops treat them as "try again next time")
UNAVAILABLE_ERRORS = _UNAVAILABLE
#: of those, the ones that mean the database itself is unreachable or refusing work (as
#: opposed to one bad statement): they flip /healthz to "unavailable" and start the probe
_OUTAGE = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.OperatorInterventionError,
    asyncpg.InsufficientResourcesError,
    asyncpg.PostgresSystemError,
    asyncpg.ReadOnlySQLTransactionError,
)


class LeaseLost(StorageError):
    """This node no longer owns the match (its lease passed to another node): refused."""

    #: the match lives on elsewhere: the arena does not wait to replay it here
    moved = True


#: the database's clock in ms: every lease is judged by it, never by a node's own clock
DB_NOW_MS = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"


class _PgOp:
    __slots__ = ("append", "done")

    def __init__(self, append: _Append, done: Done) -> None:
        self.append = append
        self.done = done


class PostgresStore(Store):
    """PostgreSQL with one writer connection doing group commit and a pool for the rest."""

    def __init__(
        self,
        url: str,
        *,
        commit_window_ms: float = 0.0,
        connect_timeout_s: float = 5.0,
        op_timeout_s: float = 10.0,
        pool_size: int = 4,
        probe_interval_s: float = 1.0,
    ) -> None:
        self.url = url
        self.where = describe_db(url)
        self.window = commit_window_ms / 1000.0
        self.connect_timeout_s = connect_timeout_s
        self.op_timeout_s = op_timeout_s
        self.pool_size = pool_size
        self.probe_interval_s = probe_interval_s
        self._pending: list[_PgOp] = []
        self._wake = asyncio.Event()
        self._writer_conn: Any = None
        self._pool: Any = None
        self._task: asyncio.Task[None] | None = None
        self._probe: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = False
        self._recovered: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._available = False
        #: (node, epoch) when this store belongs to a cluster node: every append is then
        #: fenced -- committed only if that node, in that epoch, owns the match and its lease
        #: has not run out (server/cluster/leases.py sets it)
        self.fence: tuple[str, int] | None = None
        #: run after the last commit, while the connections are still open (the cluster
        #: node ends its lease there)
        self.before_close: list[Callable[[], Coroutine[Any, Any, None]]] = []
        #: appends' matches the fence refused (a /metrics counter)
        self.fenced = 0
        #: batches committed and appends in them, for /healthz (as SQLiteStore)
        self.commits = 0
        self.ops = 0
        #: seconds each recent commit took (BEGIN to COMMIT acknowledged)
        self.commit_seconds: list[float] = []
        #: called inside the transaction that finishes matches, after their ``finished``
        #: events and ``results`` rows: ``hook(connection, [(match id, event 1, stat deltas)])``
        #: (the cluster's ratings, server/ratings_pg.py)
        self.finish_hooks: list[
            Callable[[Any, list[tuple[str, str | None, list[StatDelta]]]], Awaitable[None]]
        ] = []

    # -- lifecycle ------------------------------------------------------------------------
    async def open(self) -> None:
        """Connect, bring the schema up to date (under the advisory lock), start the writer."""
        try:
            conn = await self._connect("moo-writer")
        except _UNAVAILABLE as exc:
            raise StorageError(f"cannot open db {self.where}: {_reason(exc)}") from exc
        try:
            await upgrade_postgres(conn, self.where)
        except BaseException:
            await conn.close()
            raise
        self._writer_conn = conn
        self._pool = asyncpg.create_pool(
            self.url,
            min_size=0,
            max_size=self.pool_size,
            timeout=self.connect_timeout_s,
            command_timeout=self.op_timeout_s,
            server_settings={"application_name": self.session_label("moo-reader")},
        )
        await self._pool
        self._available = True
        self._task = asyncio.get_running_loop().create_task(self._write_loop())

    async def close(self) -> None:
        """Commit everything queued, then close the connections."""
        if self._task is None or self._closed:
            return
        self._closing = True
        self._wake.set()
        await self._task
        for hook in self.before_close:
            with contextlib.suppress(StorageError, *_UNAVAILABLE):
                await hook()
        self._closed = True
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
        if self._writer_conn is not None:
            with contextlib.suppress(*_UNAVAILABLE):
                await self._writer_conn.close(timeout=2)
        if self._pool is not None:
            try:
                async with asyncio.timeout(2):
                    await self._pool.close()
            except (TimeoutError, *_UNAVAILABLE):
                self._pool.terminate()

    def session_label(self, role: str) -> str:
        """The ``application_name`` of this store's sessions of ``role`` (writer, reader,
        probe): what ``pg_stat_activity`` shows for them."""
        return role

    async def _connect(self, name: str) -> Any:
        return await asyncpg.connect(
            self.url,
            timeout=self.connect_timeout_s,
            command_timeout=self.op_timeout_s,
            server_settings={
                "application_name": self.session_label(name), "synchronous_commit": "on"
            },
        )

    # -- availability -----------------------------------------------------------------------
    @property
    def available(self) -> bool:
        return self._available

    def on_recovered(self, callback: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._recovered.append(callback)

    def _lost(self, exc: BaseException) -> None:
        if self._available:
            log.error("database %s unavailable: %s", self.where, _reason(exc))
        self._available = False
        if self._probe is None and not self._closing:
            self._probe = asyncio.get_running_loop().create_task(self._probe_until_back())

    async def _probe_until_back(self) -> None:
        try:
            while not self._closing:
                await asyncio.sleep(self.probe_interval_s)
                if self._available:
                    break
                # a session of its own: the writer's may be in use by a commit at this very
                # moment, and one asyncpg connection takes one operation at a time
                conn = None
                try:
                    conn = await self._connect("moo-probe")
                    await conn.fetchval("SELECT 1")
                except _UNAVAILABLE:
                    continue
                finally:
                    if conn is not None:
                        conn.terminate()
                self._back()
                break
        finally:
            self._probe = None

    def _back(self) -> None:
        if self._available:
            return
        self._available = True
        log.warning("database %s is back", self.where)
        for callback in self._recovered:
            asyncio.get_running_loop().create_task(callback())

    async def _writer(self) -> Any:
        if self._writer_conn is None or self._writer_conn.is_closed():
            self._writer_conn = await self._connect("moo-writer")
        return self._writer_conn

    async def _drop_writer(self) -> None:
        conn, self._writer_conn = self._writer_conn, None
        if conn is not None:
            conn.terminate()

    # -- the writer -------------------------------------------------------------------------
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
        if self._closing or self._task is None:
            raise StorageError("storage is closed")
        append = _Append(
            match_id,
            [(match_id, int(e["seq"]), _dumps(e)) for e in events],
            _dumps(meta) if meta is not None else None,
            int(time.time() * 1000),
            finished,
            tuple(stats),
        )
        self._pending.append(_PgOp(append, done))
        if not self._wake.is_set():
            self._wake.set()

    async def _write_loop(self) -> None:
        while True:
            if not self._pending:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            if self.window:
                await asyncio.sleep(self.window)
            batch, self._pending = self._pending, []
            outcomes = await self._commit(batch)
            for op, exc in outcomes:
                try:
                    op.done(exc)
                except Exception:
                    log.exception("durability callback failed")

    async def _commit(self, batch: list[_PgOp]) -> list[tuple[_PgOp, BaseException | None]]:
        errors: dict[int, BaseException] = {}
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        watchdog: asyncio.TimerHandle | None = None
        try:
            conn = await self._writer()
            # A database that stops answering mid-commit must not hold every ack forever:
            # closing the socket makes whatever is awaiting fail at once.
            watchdog = loop.call_later(self.op_timeout_s, conn.terminate)
            try:
                await self._fenced_call(conn, batch, errors)
            except _DATA_ERRORS:
                # one refused row spoils its call: each append again on its own, so only the
                # bad one fails (nothing of the failed call was written)
                errors.clear()
                for op in batch:
                    try:
                        await self._fenced_call(conn, [op], errors)
                    except _DATA_ERRORS as exc:
                        errors[id(op)] = exc
        except _UNAVAILABLE as exc:
            await self._drop_writer()  # a fresh session for the next batch, whatever broke
            if isinstance(exc, _OUTAGE):
                self._lost(exc)
            else:
                log.error("commit of %d appends failed: %s", len(batch), _reason(exc))
            failure = StorageError(f"storage unavailable: {_reason(exc)}")
            return self._fail_followers(
                [(op, failure) for op in batch], {op.append.match_id for op in batch}, failure
            )
        finally:
            if watchdog is not None:
                watchdog.cancel()
        self.commit_seconds.append(time.perf_counter() - started)
        if len(self.commit_seconds) > 5000:
            del self.commit_seconds[:1000]
        self.commits += 1
        self.ops += len(batch)
        self._back()
        outcomes = [(op, errors.get(id(op))) for op in batch]
        if not errors:
            return outcomes
        failed = {op.append.match_id for op in batch if id(op) in errors}
        return self._fail_followers(
            outcomes, failed, StorageError("an earlier write of this match failed")
        )

    async def _fenced_call(
        self, conn: Any, ops: list[_PgOp], errors: dict[int, BaseException]
    ) -> None:
        """Commit ``ops`` with one ``moo_commit`` call (one round trip, one transaction).

        With a fence (a cluster node), the function first claims new matches for this node,
        locks the ownership rows of every match in the call ``FOR SHARE`` (a takeover, an
        UPDATE of those rows, then waits for this commit and replays a log that includes it:
        a log cannot fork), and returns the matches this node does not own in its epoch under
        a live lease, writing nothing; those appends get :class:`LeaseLost` and the rest are
        committed by a second call.
        """
        node, epoch = self.fence if self.fence is not None else (None, None)
        while ops:
            done = [op.append for op in ops if op.append.finished]
            if done:
                # A batch that finishes matches also writes their history rows, in the same
                # transaction (two more round trips, once per finished match's batch only).
                async with conn.transaction():
                    lost = await conn.fetchval(_COMMIT_SQL, node, epoch, *_commit_args(ops))
                    if not lost:
                        await _index_results(conn, done, self.finish_hooks)
            else:
                lost = await conn.fetchval(_COMMIT_SQL, node, epoch, *_commit_args(ops))
            if not lost:
                return
            gone = set(lost)
            failure = LeaseLost("this node no longer owns the match; reconnect and resume it")
            for op in ops:
                if op.append.match_id in gone:
                    errors[id(op)] = failure
            log.warning("fenced off %d matches this node no longer owns", len(gone))
            self.fenced += len(gone)
            ops = [op for op in ops if op.append.match_id not in gone]

    def _fail_followers(
        self,
        outcomes: list[tuple[_PgOp, BaseException | None]],
        failed: set[str],
        failure: BaseException,
    ) -> list[tuple[_PgOp, BaseException | None]]:
        """Also fail the queued appends of matches whose write just failed (no holes)."""
        keep = []
        for op in self._pending:
            if op.append.match_id in failed:
                outcomes.append((op, failure))
            else:
                keep.append(op)
        self._pending = keep
        return outcomes

    # -- reads and account writes ---------------------------------------------------------------
    async def _run(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``fn(connection)`` from the pool; one retry on a dead connection."""
        if self._pool is None or self._closed:
            raise StorageError("storage is closed")
        for attempt in (1, 2):
            try:
                async with self._pool.acquire() as conn:
                    try:
                        return await fn(conn)
                    except asyncpg.InternalClientError:
                        # the session's protocol state is broken (seen after a database
                        # restart: an operation interrupted mid-way): never hand it out again
                        conn.terminate()
                        raise
            except (NameTaken, *_DATA_ERRORS):
                raise
            except _UNAVAILABLE as exc:
                if attempt == 2 or not isinstance(
                    exc, asyncpg.InterfaceError | ConnectionError | asyncpg.InternalClientError
                ):
                    if isinstance(exc, _OUTAGE):
                        self._lost(exc)
                    raise StorageError(f"storage unavailable: {_reason(exc)}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def unfinished_matches(self) -> list[StoredMatch]:
        return await self.stored_matches(None)

    async def stored_matches(self, only: list[str] | None) -> list[StoredMatch]:
        """Unfinished matches with their logs: all of them, or those of the ids in ``only``."""

        async def read(conn: Any) -> list[StoredMatch]:
            matches = await conn.fetch(
                "SELECT match_id, meta FROM matches WHERE finished = 0"
                " AND ($1::text[] IS NULL OR match_id = ANY($1::text[])) ORDER BY created_ms",
                only,
            )
            if not matches:
                return []
            ids = [row["match_id"] for row in matches]
            events: dict[str, list[Event]] = {i: [] for i in ids}
            for row in await conn.fetch(
                "SELECT match_id, body FROM events WHERE match_id = ANY($1::text[])"
                " ORDER BY match_id, seq",
                ids,
            ):
                events[row["match_id"]].append(json.loads(row["body"]))
            return [
                StoredMatch(row["match_id"], json.loads(row["meta"]), events[row["match_id"]])
                for row in matches
            ]

        return await self._run(read)

    async def stored_match(self, match_id: str) -> StoredMatch | None:
        async def read(conn: Any) -> StoredMatch | None:
            meta = await conn.fetchval("SELECT meta FROM matches WHERE match_id = $1", match_id)
            if meta is None:
                return None
            rows = await conn.fetch(
                "SELECT body FROM events WHERE match_id = $1 ORDER BY seq", match_id
            )
            return StoredMatch(match_id, json.loads(meta), [json.loads(r[0]) for r in rows])

        return await self._run(read)

    async def match_events(self, match_id: str, after: int = 0) -> list[Event] | None:
        async def read(conn: Any) -> list[Event] | None:
            rows = await conn.fetch(
                "SELECT m.match_id, e.body FROM matches m"
                " LEFT JOIN events e ON e.match_id = m.match_id AND e.seq > $2"
                " WHERE m.match_id = $1 ORDER BY e.seq",
                match_id,
                after,
            )
            if not rows:
                return None
            return [json.loads(row["body"]) for row in rows if row["body"] is not None]

        return await self._run(read)

    async def register_player(self, name: str, token_hash: str, bot: bool) -> PlayerRecord:
        now = int(time.time() * 1000)

        async def write(conn: Any) -> PlayerRecord:
            try:
                async with conn.transaction():
                    await conn.execute(
                        "INSERT INTO players(name, bot, created_ms) VALUES ($1, $2, $3)",
                        name,
                        int(bot),
                        now,
                    )
                    await conn.execute(
                        "INSERT INTO tokens(token_hash, name, created_ms) VALUES ($1, $2, $3)",
                        token_hash,
                        name,
                        now,
                    )
            except asyncpg.UniqueViolationError as exc:
                raise NameTaken(f"the name {name!r} is taken; pick another") from exc
            return PlayerRecord(name, bot, now)

        return await self._run(write)

    async def player_by_token(self, token_hash: str) -> PlayerRecord | None:
        async def read(conn: Any) -> PlayerRecord | None:
            row = await conn.fetchrow(
                "SELECT p.name, p.bot, p.created_ms, p.password_hash IS NOT NULL FROM tokens t"
                " JOIN players p ON p.name = t.name WHERE t.token_hash = $1",
                token_hash,
            )
            return PlayerRecord(row[0], bool(row[1]), row[2], bool(row[3])) if row else None

        return await self._run(read)

    # -- accounts (the same semantics as SQLiteStore's) ---------------------------------------
    async def account(self, name: str) -> Account | None:
        async def read(conn: Any) -> Account | None:
            row = await conn.fetchrow(
                "SELECT name, bot, password_hash FROM players WHERE name = $1", name
            )
            return Account(row[0], bool(row[1]), row[2]) if row else None

        return await self._run(read)

    async def add_token(self, name: str, token_hash: str, keep: int) -> None:
        now = int(time.time() * 1000)

        async def write(conn: Any) -> None:
            # ``seq`` (an identity) breaks ties within a millisecond, as SQLite's rowid does
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO tokens(token_hash, name, created_ms) VALUES ($1, $2, $3)",
                    token_hash,
                    name,
                    now,
                )
                await conn.execute(
                    "DELETE FROM tokens WHERE name = $1 AND token_hash NOT IN (SELECT token_hash"
                    " FROM tokens WHERE name = $1 ORDER BY created_ms DESC, seq DESC LIMIT $2)",
                    name,
                    keep,
                )

        await self._run(write)

    # -- failed sign-in budgets, shared by the nodes (server/accounts.py) -----------------------
    async def failure_level(self, key: str, rate: float, now_ms: int) -> float:
        """The budget ``key``'s level at ``now_ms``, drained at ``rate`` per second."""

        async def read(conn: Any) -> float:
            level = await conn.fetchval(
                "SELECT GREATEST(0.0, level - GREATEST(0, $2 - stamp_ms) / 1000.0 * $3)"
                " FROM signin_failures WHERE key = $1",
                key, now_ms, rate,
            )
            return float(level or 0.0)

        return await self._run(read)

    async def add_failure(self, key: str, rate: float, now_ms: int, forget_ms: int) -> None:
        """One more failure on ``key`` (drained first, in the same statement, so two nodes
        counting at once both count); rows untouched for ``forget_ms`` (drained to zero by
        then) are deleted now and then."""

        async def write(conn: Any) -> None:
            await conn.execute(
                "INSERT INTO signin_failures AS f (key, level, stamp_ms) VALUES ($1, 1.0, $2)"
                " ON CONFLICT (key) DO UPDATE SET level = GREATEST(0.0, f.level"
                " - GREATEST(0, $2 - f.stamp_ms) / 1000.0 * $3) + 1.0,"
                " stamp_ms = GREATEST(f.stamp_ms, $2)",
                key, now_ms, rate,
            )
            if secrets.randbelow(50) == 0:
                await conn.execute(
                    "DELETE FROM signin_failures WHERE stamp_ms < $1", now_ms - forget_ms
                )

        await self._run(write)

    async def set_password_hash(self, name: str, password_hash: str) -> None:
        async def write(conn: Any) -> None:
            await conn.execute(
                "UPDATE players SET password_hash = $1 WHERE name = $2", password_hash, name
            )

        await self._run(write)

    async def rotate_tokens(self, name: str, token_hash: str) -> None:
        now = int(time.time() * 1000)

        async def write(conn: Any) -> None:
            async with conn.transaction():
                await conn.execute("DELETE FROM tokens WHERE name = $1", name)
                await conn.execute(
                    "INSERT INTO tokens(token_hash, name, created_ms) VALUES ($1, $2, $3)",
                    token_hash,
                    name,
                    now,
                )

        await self._run(write)

    # -- history ----------------------------------------------------------------------------
    async def history(
        self, player: str, before: tuple[int, str, int] | None, limit: int
    ) -> list[HistoryRow]:
        async def read(conn: Any) -> list[HistoryRow]:
            if before is None:
                rows = await conn.fetch(
                    "SELECT match_id, seat, ended_ms, summary FROM results WHERE player = $1"
                    " ORDER BY ended_ms DESC, match_id DESC, seat DESC LIMIT $2",
                    player,
                    limit,
                )
            else:
                rows = await conn.fetch(
                    "SELECT match_id, seat, ended_ms, summary FROM results WHERE player = $1"
                    " AND (ended_ms, match_id, seat) < ($2, $3, $4)"
                    " ORDER BY ended_ms DESC, match_id DESC, seat DESC LIMIT $5",
                    player,
                    *before,
                    limit,
                )
            return [
                HistoryRow(r[0], r[1], r[2], json.loads(r[3])) for r in rows
            ]

        return await self._run(read)

    async def guess_outcomes(self, names: Sequence[str]) -> dict[str, Counter[tuple[int, bool]]]:
        wanted = list(dict.fromkeys(n.casefold() for n in names))

        async def read(conn: Any) -> dict[str, Counter[tuple[int, bool]]]:
            out: dict[str, Counter[tuple[int, bool]]] = {n: Counter() for n in wanted}
            for player, guesses, solved, count in await conn.fetch(
                "SELECT player, guesses, solved, count(*) FROM results"
                f" WHERE player = ANY($1::text[]) AND {CLASSIC_RESULTS_PG}"
                " GROUP BY player, guesses, solved",
                wanted,
            ):
                out.setdefault(player.casefold(), Counter())[(guesses, bool(solved))] += count
            return out

        return await self._run(read)

    async def known_player(self, name: str) -> str | None:
        async def read(conn: Any) -> str | None:
            row = await conn.fetchrow("SELECT name FROM players WHERE name = $1", name)
            if row is None:
                row = await conn.fetchrow(
                    "SELECT player FROM results WHERE player = $1 LIMIT 1", name
                )
            return str(row[0]) if row else None

        return await self._run(read)

    async def player_stats(self, name: str) -> PlayerStats | None:
        async def read(conn: Any) -> PlayerStats | None:
            row = await conn.fetchrow(
                f"SELECT {PlayerStats.COLUMNS} FROM stats WHERE player = $1", name
            )
            return None if row is None else PlayerStats.from_row(row)

        return await self._run(read)

    async def leaderboard(self, by: str, limit: int = 50) -> list[dict[str, Any]]:
        # the same figures as SQLiteStore.leaderboard (see there), as float8 not numeric
        order = (
            "avg_guesses IS NULL, avg_guesses ASC, games DESC"
            if by == "average"
            else "rating DESC, games DESC"
        )

        async def read(conn: Any) -> list[dict[str, Any]]:
            rows = await conn.fetch(
                "SELECT * FROM (SELECT player, games, wins, draws, losses,"
                " CAST(round(1000.0 * (wins + 0.5 * draws + 1) / (games + 2)) AS INTEGER)"
                " AS rating,"
                " CASE WHEN solved > 0 THEN CAST(solved_guesses AS FLOAT8) / solved END"
                " AS avg_guesses,"
                " CASE WHEN games > 0 THEN time_ms / 1000.0::FLOAT8 / games END AS avg_time_s"
                f" FROM stats) AS board ORDER BY {order}, player LIMIT $1",
                limit,
            )
            keys = (
                "name", "games", "wins", "draws", "losses", "rating", "avg_guesses", "avg_time_s"
            )
            return [dict(zip(keys, tuple(row))) for row in rows]

        return await self._run(read)


_COMMIT_SQL = "SELECT moo_commit(" + ", ".join(f"${i}" for i in range(1, 17)) + ")"


def _commit_args(ops: list[_PgOp]) -> list[Any]:
    """``moo_commit``'s arrays (after the fence) for a batch of appends."""
    appends = [op.append for op in ops]
    metas = [a for a in appends if a.meta is not None]
    rows = [row for a in appends for row in a.rows]
    done = [a for a in appends if a.finished]
    deltas = [d for a in done for d in a.stats]
    return [
        [a.match_id for a in metas], [a.meta for a in metas], [a.created_ms for a in metas],
        [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
        [a.match_id for a in done],
        [d.player for d in deltas],
        [int(d.outcome == "win") for d in deltas],
        [int(d.outcome == "draw") for d in deltas],
        [int(d.outcome == "loss") for d in deltas],
        [int(d.guesses is not None) for d in deltas],
        [d.guesses or 0 for d in deltas],
        [d.duration_ms for d in deltas],
    ]


async def _index_results(
    conn: Any,
    done: list[_Append],
    hooks: Sequence[
        Callable[[Any, list[tuple[str, str | None, list[StatDelta]]]], Awaitable[None]]
    ] = (),
) -> None:
    """Write the ``results`` rows of the matches this transaction finishes (history), then
    run the finish ``hooks`` (ratings) in the same transaction.

    Same rows as SQLite's (:func:`server.schema.result_rows`). Event 1 and the meta may have
    been committed by an earlier batch, so they are read back inside this transaction. The
    index is derived data: a failure is logged and rolled back to a savepoint, never allowed
    to fail the match's commit.
    """
    found: dict[str, tuple[str | None, str | None]] = {}
    try:
        async with conn.transaction():
            found = {
                row[0]: (row[1], row[2])
                for row in await conn.fetch(
                    "SELECT m.match_id, m.meta, e.body FROM matches m"
                    " LEFT JOIN events e ON e.match_id = m.match_id AND e.seq = 1"
                    " WHERE m.match_id = ANY($1::text[])",
                    [a.match_id for a in done],
                )
            }
            rows = []
            for a in done:
                meta, first = found.get(a.match_id, (None, None))
                last = a.rows[-1][2] if a.rows else None
                rows.extend(result_rows(a.match_id, first, last, meta))
            if rows:
                await conn.executemany(RESULTS_UPSERT_PG, rows)
    except _DATA_ERRORS:
        log.exception("cannot index the results of %d finished matches", len(done))
    if not hooks:
        return
    finished = [(a.match_id, found.get(a.match_id, (None, None))[1], list(a.stats))
                for a in done]
    for hook in hooks:
        try:
            await hook(conn, finished)
        except (*_OUTAGE, asyncpg.InterfaceError):
            raise  # the database is gone: the whole commit fails, as it would anyway
        except (asyncpg.PostgresError, ValueError, KeyError, TypeError):
            # e.g. a deadlock between two nodes' finishes: the hook's savepoint is rolled back
            # and the match still finishes (its rating is missed, and logged)
            log.exception("finish hook failed for %d matches", len(done))


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
