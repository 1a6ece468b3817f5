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

Reads and account writes are :class:`~server.storage.Store`'s own operations (written once for
both backends, statements in ``server/sql.py``); here they only get a connection from a small
pool (:meth:`PostgresStore.with_db`), retried once on a connection error (a pooled connection
that died with a database restart fails its first use).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import asyncpg

from moo.errors import NameTaken, StorageError
from server import sql
from server.schema import upgrade_postgres
from server.sql import Query
from server.storage import (
    Append,
    Db,
    Done,
    FinishedMatch,
    Store,
    describe_db,
    finished_results,
    index_results,
)

__all__ = ["DB_NOW_MS", "UNAVAILABLE_ERRORS", "LeaseLost", "PostgresStore", "Rater", "RatingPlan"]

log = logging.getLogger("moo.storage")

T = TypeVar("T")

#: how many times a commit that PostgreSQL rolled back (a deadlock or serialization conflict
#: with another node) is run again before its appends fail with ``storage_unavailable``
ROLLBACK_RETRIES = 3
#: a commit slower than this is logged (a slow link to the database, a lock wait)
SLOW_COMMIT_S = 1.0
#: how many finishing commits (a finished match's events, its ``results`` rows and its
#: ratings: two or three round trips, seven when the ratings changed under them) may run at
#: once, each on a session of its own, beside the writer's one-round-trip commits of
#: everything else
FINISHERS = 3
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

    def __init__(self, append: Append, done: Done) -> None:
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
        #: the finishers' sessions not in use (FINISHERS at most, made when first needed)
        self._finisher_conns: list[Any] = []
        self._finisher_slots = asyncio.Semaphore(FINISHERS)
        #: finishers' sessions in use by a finishing commit now
        self._finishers_busy = 0
        #: the task opening finishers' sessions ahead of need (:meth:`_warm_finishers`)
        self._warming: asyncio.Task[None] | None = None
        #: matches whose finishing appends a finisher has (queued or in flight), and its task
        self._finishing: dict[str, asyncio.Task[None]] = {}
        self._pool: Any = None
        self._task: asyncio.Task[None] | None = None
        self._probe: asyncio.Task[None] | None = None
        self._heal: asyncio.Task[None] | None = None
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
        #: commits PostgreSQL rolled back (deadlock, serialization) and that were run again
        self.rollbacks = 0
        #: batches committed and appends in them, for /healthz (as SQLiteStore)
        self.commits = 0
        self.ops = 0
        #: seconds each recent commit took (BEGIN to COMMIT acknowledged)
        self.commit_seconds: list[float] = []
        #: rates the matches a commit finishes (the cluster's ratings, server/ratings_pg.py)
        self.rater: Rater | None = None
        #: called inside the transaction that finishes matches, after their ``finished``
        #: events, ``results`` rows and ratings: ``hook(db, [(match id, event 1, stat
        #: deltas)])``. With any, every finish takes the transaction of several round trips.
        self.finish_hooks: list[Callable[[Db, list[FinishedMatch]], Awaitable[None]]] = []
        #: finishing calls refused because a rating changed after it was read (then rated
        #: again under the rows' locks)
        self.stale_ratings = 0

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
            reset=_keep_session,
        )
        await self._pool
        self._available = True
        self._task = asyncio.get_running_loop().create_task(self._write_loop())
        self._warm_soon()

    async def close(self) -> None:
        """Commit everything queued, then close the connections."""
        if self._task is None or self._closed:
            return
        self._closing = True
        self._wake.set()
        await self._task
        while self._finishing:
            await asyncio.gather(*set(self._finishing.values()), return_exceptions=True)
        for hook in self.before_close:
            with contextlib.suppress(StorageError, *_UNAVAILABLE):
                await hook()
        self._closed = True
        for task in (self._probe, self._heal, self._warming):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for conn in [self._writer_conn, *self._finisher_conns]:
            if conn is not None:
                with contextlib.suppress(*_UNAVAILABLE):
                    await conn.close(timeout=2)
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
        self._recover()
        self._warm_soon()

    def _recover(self) -> None:
        """Run the :meth:`on_recovered` callbacks: dropped matches come back by replay."""
        for callback in self._recovered:
            asyncio.get_running_loop().create_task(callback())

    def _heal_soon(self) -> None:
        """A commit failed while the database answers (no outage, so no probe will report it
        back): the matches it dropped still have their durable prefix, so the recovery
        callbacks bring them back by replay after a probe interval, as after an outage."""
        if self._heal is None and not self._closing:
            self._heal = asyncio.get_running_loop().create_task(self._heal_after())

    async def _heal_after(self) -> None:
        try:
            await asyncio.sleep(self.probe_interval_s)
            if self._available and not self._closing:  # (else the outage's probe does it)
                self._recover()
        finally:
            self._heal = None

    async def _writer(self) -> Any:
        if self._writer_conn is None or self._writer_conn.is_closed():
            self._writer_conn = await self._connect("moo-writer")
        return self._writer_conn

    def _drop_writer(self, conn: Any) -> None:
        if conn is self._writer_conn:
            self._writer_conn = None
        if conn is not None:
            conn.terminate()

    async def _finisher(self) -> Any:
        """An open finisher's session: one opened ahead if there is one (and the missing
        ones opened ahead again for the next finishes), else a new one."""
        while self._finisher_conns:
            conn = self._finisher_conns.pop()
            if not conn.is_closed():
                return conn
        self._warm_soon()
        return self._watched(await self._connect("moo-finisher"))

    def _watched(self, conn: Any) -> Any:
        """``conn``, a finisher's session, whose loss (a database restart closes every
        session, an idle one included) opens its replacement ahead at once."""
        conn.add_termination_listener(self._finisher_lost)
        return conn

    def _finisher_lost(self, conn: Any) -> None:
        self._warm_soon()

    def _warm_soon(self) -> None:
        """Open the finishers' missing sessions in the background (:meth:`_warm_finishers`)."""
        if self._warming is None and not self._closing:
            self._warming = asyncio.get_running_loop().create_task(self._warm_finishers())

    async def _warm_finishers(self) -> None:
        """Have :data:`FINISHERS` sessions open for finishing commits, each with the
        statements of a finish prepared, before a finish needs one.

        A session made when a match ended had to connect and prepare the finishing call's
        three statements (the match's head, the rating rows, ``moo_finish``) before it could
        run them: five round trips more than the finish's own. Over a slow link to the
        database (the harness's ``slow-db`` just after a database restart had closed every
        session) that match's end took 5 s (issue 31, a 30-minute run of 2026-11-29). Run
        when the store opens, when the database is back, and when a finisher's session was
        lost (also idle: a database restart closes every session). While the database
        refuses (restarting), it tries again every probe interval for as long as the store
        counts it available; after an outage, the database's return starts it again.
        """
        try:
            while not self._closing and self._available:
                self._finisher_conns = [c for c in self._finisher_conns if not c.is_closed()]
                if len(self._finisher_conns) + self._finishers_busy >= FINISHERS:
                    return
                try:
                    conn = await self._connect("moo-finisher")
                    try:
                        await _prepare_finish(conn)
                    except BaseException:
                        conn.terminate()
                        raise
                except _OUTAGE as exc:
                    log.info("a finisher's session not opened ahead: %s", _reason(exc))
                    await asyncio.sleep(self.probe_interval_s)
                    continue
                except _UNAVAILABLE as exc:  # not the database's absence: no use insisting
                    log.warning("a finisher's session not opened ahead: %s", _reason(exc))
                    return
                if self._closing:
                    conn.terminate()
                    return
                self._finisher_conns.append(self._watched(conn))
        finally:
            self._warming = None

    # -- the writer -------------------------------------------------------------------------
    def _enqueue(self, append: Append, done: Done) -> None:
        if self._closing or self._task is None:
            raise StorageError("storage is closed")
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
            batch = self._hand_over_finishes(batch)
            if batch:
                _settle(await self._commit(batch, self._writer, self._drop_writer))

    def _hand_over_finishes(self, batch: list[_PgOp]) -> list[_PgOp]:
        """Give the appends of matches that finish in ``batch`` to a finisher of their own and
        return the rest, which the writer commits at once.

        A finishing commit also writes the match's ``results`` rows and ratings in its
        transaction: several round trips where everything else takes one. Over a slow link to
        the database (a round trip of 0.4 s) it took seconds, and every guess of every other
        match queued behind it waited that long: 5-7 s silences in the fault harness's
        ``slow-db``. A match's appends stay in order: all of a finishing match's appends in the
        batch go together, and any that would follow them go to the same finisher after them.
        """
        ending = {op.append.match_id for op in batch if op.append.finished}
        ending |= {op.append.match_id for op in batch if op.append.match_id in self._finishing}
        if not ending:
            return batch
        finishing = [op for op in batch if op.append.match_id in ending]
        before = {self._finishing[m] for m in ending if m in self._finishing}
        task = asyncio.get_running_loop().create_task(self._finish_batch(finishing, before))
        for match_id in ending:
            self._finishing[match_id] = task
        return [op for op in batch if op.append.match_id not in ending]

    async def _finish_batch(self, ops: list[_PgOp], before: set[asyncio.Task[None]]) -> None:
        """Commit finishing appends on a finisher's session (after ``before``, the finishers
        that have earlier appends of the same matches), then release their waiters."""
        try:
            if before:
                await asyncio.gather(*before, return_exceptions=True)
            async with self._finisher_slots:
                held: Any = None
                self._finishers_busy += 1

                async def get() -> Any:
                    nonlocal held
                    held = await self._finisher()
                    return held

                def drop(conn: Any) -> None:
                    nonlocal held
                    held = None  # not handed back: a fresh session is opened ahead
                    if conn is not None:
                        conn.terminate()

                try:
                    outcomes = await self._commit(ops, get, drop)
                finally:
                    self._finishers_busy -= 1
                if held is not None and not held.is_closed():
                    self._finisher_conns.append(held)
            _settle(outcomes)
        finally:
            me = asyncio.current_task()
            for op in ops:
                if self._finishing.get(op.append.match_id) is me:
                    del self._finishing[op.append.match_id]

    async def _commit(
        self,
        batch: list[_PgOp],
        get: Callable[[], Awaitable[Any]],
        drop: Callable[[Any], None],
    ) -> list[tuple[_PgOp, BaseException | None]]:
        """Commit ``batch`` on the session ``get()`` gives (the writer's or a finisher's);
        ``drop(conn)`` when that session is no longer to be trusted."""
        errors: dict[int, BaseException] = {}
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        watchdog: asyncio.TimerHandle | None = None
        conn: Any = None
        try:
            conn = await get()
            # A database that stops answering mid-commit must not hold every ack forever:
            # closing the socket makes whatever is awaiting fail at once.
            watchdog = loop.call_later(self.op_timeout_s, conn.terminate)
            try:
                await self._retried_call(conn, batch, errors)
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
            drop(conn)  # a fresh session for the next batch, whatever broke
            if isinstance(exc, _OUTAGE):
                self._lost(exc)
            else:
                log.error("commit of %d appends failed: %s", len(batch), _reason(exc))
                self._heal_soon()
            failure = StorageError(f"storage unavailable: {_reason(exc)}")
            return self._fail_followers(
                [(op, failure) for op in batch], {op.append.match_id for op in batch}, failure
            )
        finally:
            if watchdog is not None:
                watchdog.cancel()
        took = time.perf_counter() - started
        self.commit_seconds.append(took)
        if took > SLOW_COMMIT_S:
            log.warning("commit of %d appends (%d finishing) took %.1f s", len(batch),
                        sum(op.append.finished for op in batch), took)
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

    async def _retried_call(
        self, conn: Any, ops: list[_PgOp], errors: dict[int, BaseException]
    ) -> None:
        """:meth:`_fenced_call`, again when PostgreSQL rolled it back to break a deadlock or a
        serialization conflict with another node's transaction.

        Such a rollback wrote nothing and says nothing about the data or the database's
        health, and PostgreSQL's answer to it is to run the transaction again; failing the
        batch instead would drop live matches for a conflict that the next attempt does not
        meet (the writes take their row locks in one order, so a real cycle is rare).
        """
        for attempt in range(ROLLBACK_RETRIES + 1):
            try:
                await self._fenced_call(conn, ops, errors)
                return
            except asyncpg.TransactionRollbackError as exc:
                if attempt == ROLLBACK_RETRIES:
                    raise
                errors.clear()
                self.rollbacks += 1
                log.warning("commit of %d appends rolled back (%s); running it again",
                            len(ops), _reason(exc))

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
                # A batch that finishes matches also writes their history rows and ratings, in
                # the same transaction: with one ``moo_finish`` call when it can; else
                # (a rating changed since it was read, or extra hooks) as a transaction of
                # statements, first without a savepoint around each part (two round trips
                # fewer per part: this runs over slow links too), and only if one of those
                # parts fails, again with them, so that the part is left out, not the finish.
                lost = await self._finish_in_one_call(conn, node, epoch, ops, done)
                if lost is None:
                    try:
                        lost = await self._finishing_call(conn, node, epoch, ops, done, False)
                    except _Redo:
                        lost = await self._finishing_call(conn, node, epoch, ops, done, True)
            else:
                lost = await conn.fetchval(_COMMIT_BATCH, node, epoch, *_commit_args(ops))
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

    async def _finish_in_one_call(
        self, conn: Any, node: str | None, epoch: int | None, ops: list[_PgOp],
        done: list[Append],
    ) -> Any:
        """Commit ``ops`` and what finishing ``done`` writes with one ``moo_finish`` call;
        the matches the fence refused, or None when it must be done as a transaction instead.

        Round trips: the heads of matches created in an earlier batch, the ratings' rows
        (rated matches only), the call. The ratings are computed from the rows as read, without
        a lock; the call writes them only if no row changed since, else it raises
        serialization_failure having written nothing, and the caller's transaction rates the
        matches under the rows' locks.
        """
        if self.finish_hooks:
            return None
        heads = _heads_in(ops)
        missing = [a.match_id for a in done if a.match_id not in heads]
        if missing:
            for match_id, meta, first in await conn.fetch(_MATCH_HEADS, missing):
                heads[match_id] = (meta, first)
        rows = finished_results(done, heads)
        plan = None
        if self.rater is not None:
            finished = [(a.match_id, heads.get(a.match_id, (None, None))[1], list(a.stats))
                        for a in done]
            try:
                plan = await self.rater.plan(_PgDb(conn), finished)
            except (asyncpg.PostgresError, ValueError, KeyError, TypeError):
                log.exception("cannot rate %d finished matches from their rows as read",
                              len(done))
                return None  # the transaction rates them, or logs why it cannot
        columns = [list(c) for c in zip(*rows, strict=True)] if rows else [[]] * 7
        try:
            lost, skipped = await conn.fetchrow(
                _FINISH_BATCH, node, epoch, *_commit_args(ops), *columns,
                *(plan.args() if plan is not None else [[]] * 14),
            )
        except asyncpg.SerializationError:
            self.stale_ratings += 1
            return None
        if skipped:
            log.error("finishing %d matches left out %s", len(done), skipped)
        return lost

    async def _finishing_call(
        self, conn: Any, node: str | None, epoch: int | None, ops: list[_PgOp],
        done: list[Append], savepoints: bool,
    ) -> Any:
        async with conn.transaction():
            lost = await conn.fetchval(_COMMIT_BATCH, node, epoch, *_commit_args(ops))
            if not lost:
                await self._finish(_PgDb(conn, savepoints), done)
        return lost

    async def _finish(self, db: Db, done: list[Append]) -> None:
        """The ``results`` rows of the matches this transaction finishes (history), then
        their ratings and the finish hooks, in the same transaction."""
        firsts = await index_results(db, done)
        hooks = list(self.finish_hooks)
        if self.rater is not None:
            hooks.insert(0, self.rater.rate_in_tx)
        if not hooks:
            return
        finished = [(a.match_id, firsts.get(a.match_id), list(a.stats)) for a in done]
        for hook in hooks:
            try:
                await hook(db, finished)
            except (*_OUTAGE, asyncpg.InterfaceError):
                raise  # the database is gone: the whole commit fails, as it would anyway
            except (asyncpg.PostgresError, ValueError, KeyError, TypeError):
                # e.g. a deadlock between two nodes' finishes: the hook's savepoint is rolled
                # back and the match still finishes (its rating is missed, and logged)
                log.exception("finish hook failed for %d matches", len(done))

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

    async def with_db(self, op: Callable[[Db], Coroutine[Any, Any, T]]) -> T:
        # (the cluster's leases and bus still hand _run their own asyncpg statements)
        return await self._run(lambda conn: op(_PgDb(conn)))

    # -- failed sign-in budgets, shared by the nodes (server/accounts.py) -----------------------
    async def failure_level(self, key: str, rate: float, now_ms: int) -> float:
        """The budget ``key``'s level at ``now_ms``, drained at ``rate`` per second."""

        async def read(db: Db) -> float:
            row = await db.row(sql.FAILURE_LEVEL, now_ms, rate, key)
            return float(row[0]) if row else 0.0

        return await self.with_db(read)

    async def add_failure(self, key: str, rate: float, now_ms: int, forget_ms: int) -> None:
        """One more failure on ``key`` (drained first, in the same statement, so two nodes
        counting at once both count); rows untouched for ``forget_ms`` (drained to zero by
        then) are deleted now and then."""

        async def write(db: Db) -> None:
            await db.run(sql.ADD_FAILURE, key, now_ms, now_ms, rate, now_ms)
            if secrets.randbelow(50) == 0:
                await db.run(sql.FORGET_FAILURES, now_ms - forget_ms)

        await self.with_db(write)


_COMMIT_BATCH = sql.COMMIT_BATCH.postgresql
_FINISH_BATCH = sql.FINISH_BATCH.postgresql
_MATCH_HEADS = sql.MATCH_HEADS.postgresql
_RATINGS_OF = sql.RATINGS_OF.postgresql


@dataclass(frozen=True)
class RatingPlan:
    """The ratings a finishing commit writes: the rows of ``(variants[i], names[i])`` as they
    were read (``seen``: mu, sigma, games; a missing row as a fresh one) and as rated (``rated``:
    mu, sigma, games, wins, draws, losses, solved, guesses, time_ms), in the one lock order."""

    variants: list[str]
    names: list[str]
    seen: list[tuple[float, float, int]]
    rated: list[tuple[float, float, int, int, int, int, int, int, int]]

    def args(self) -> list[list[Any]]:
        """``moo_finish``'s 14 ratings arrays."""
        seen = [list(c) for c in zip(*self.seen, strict=True)] or [[]] * 3
        rated = [list(c) for c in zip(*self.rated, strict=True)] or [[]] * 9
        return [self.variants, self.names, *seen, *rated]


class Rater(Protocol):
    """Rates the matches a commit finishes, in either of the store's two ways."""

    async def plan(self, db: Db, finished: list[FinishedMatch]) -> RatingPlan | None:
        """Read the rows the rated matches among ``finished`` change (no lock) and rate
        them; None when none of them is rated."""

    async def rate_in_tx(self, db: Db, finished: list[FinishedMatch]) -> None:
        """Rate them on ``db``, in its open transaction, under the rows' locks."""


def _heads_in(ops: list[_PgOp]) -> dict[str, tuple[str | None, str | None]]:
    """``(meta, event 1)`` of the matches whose first append is in ``ops``."""
    heads: dict[str, tuple[str | None, str | None]] = {}
    for op in ops:
        a = op.append
        if a.meta is not None:
            first = next((body for _, seq, body in a.rows if seq == 1), None)
            if first is not None:
                heads[a.match_id] = (a.meta, first)
    return heads


async def _prepare_finish(conn: Any) -> None:
    """Run the statements of a finishing commit on ``conn`` once, on nothing: asyncpg
    prepares each on its first use and keeps it for the session, so a finish later sends only
    its own round trips. The ratings' read is :class:`server.ratings_pg.PgRatings`'s
    (the same text, so the same prepared statement); ``moo_finish`` on no matches, without
    a fence, writes nothing."""
    await conn.fetch(_MATCH_HEADS, [])
    await conn.fetch(_RATINGS_OF, [], [])
    await conn.fetchrow(_FINISH_BATCH, None, None, *_commit_args([]), *[[]] * 7, *[[]] * 14)


def _commit_args(ops: list[_PgOp]) -> list[Any]:
    """``moo_commit``'s arrays (after the fence) for a batch of appends."""
    appends = [op.append for op in ops]
    metas = [a for a in appends if a.meta is not None]
    rows = [row for a in appends for row in a.rows]
    done = [a for a in appends if a.finished]
    # one lock order on every node: two nodes finishing matches of the same players at once
    # (a tournament pairing's two games) would otherwise deadlock on their ``stats`` rows
    deltas = sorted((d for a in done for d in a.stats), key=lambda d: d.player.casefold())
    counts = [list(column) for column in zip(*(d.counts() for d in deltas), strict=True)]
    return [
        [a.match_id for a in metas], [a.meta for a in metas], [a.created_ms for a in metas],
        [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
        [a.match_id for a in done],
        [d.player for d in deltas],
        *(counts or [[]] * 6),
    ]


class _PgDb(Db):
    """An asyncpg connection as the shared operations see it."""

    refused = _DATA_ERRORS

    def __init__(self, conn: Any, savepoints: bool = True) -> None:
        self.conn = conn
        #: False: :meth:`atomic` takes no savepoint, and anything that fails inside it
        #: raises :class:`_Redo` (the transaction is spoilt: it must be run again with them)
        self.savepoints = savepoints

    async def rows(self, query: Query, *args: Any) -> list[Any]:
        return list(await self.conn.fetch(query.postgresql, *args))

    async def row(self, query: Query, *args: Any) -> Any:
        return await self.conn.fetchrow(query.postgresql, *args)

    async def run(self, query: Query, *args: Any) -> None:
        await self.conn.execute(query.postgresql, *args)

    async def run_many(self, query: Query, rows: Sequence[Sequence[Any]]) -> None:
        await self.conn.executemany(query.postgresql, rows)

    def atomic(self) -> Any:
        return self.conn.transaction() if self.savepoints else _redo_on_failure()


class _Redo(Exception):
    """A part of a finishing transaction run without its savepoint failed: PostgreSQL has
    aborted the transaction (a COMMIT now would quietly roll it back), so it is run again,
    savepoints and all. Not a subclass of anything a caller catches on its way out."""


async def _keep_session(conn: Any) -> None:
    """The pool's reset between two users of a reader session: nothing to do.

    The readers leave no session state behind (no ``SET``, ``LISTEN``, advisory lock or
    cursor; a transaction left open is rolled back by asyncpg before this), and asyncpg's
    default reset is a round trip per use: over a slow link to the database it doubled the
    time of every read (a replay's, a lookup's)."""


@contextlib.asynccontextmanager
async def _redo_on_failure() -> AsyncIterator[None]:
    try:
        yield
    except Exception as exc:
        raise _Redo(_reason(exc)) from exc


def _settle(outcomes: list[tuple[_PgOp, BaseException | None]]) -> None:
    """Release the waiters of committed (or failed) appends."""
    for op, exc in outcomes:
        try:
            op.done(exc)
        except Exception:
            log.exception("durability callback failed")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
