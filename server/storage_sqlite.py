"""The SQLite store: a single node's durable log, with one writer thread doing group commit.

SQLite in WAL mode. A single writer thread drains every queued operation (appends from many
matches and connections, and the reads and account writes of :class:`~server.storage.Store`)
into one transaction, commits once, and then releases all the waiters with one hop back to the
event loop, so the loop never blocks on disk I/O and never creates a task per write. What is
SQLite's own here is only that: the driver (:class:`_SqliteDb`, which runs an operation written
for both stores to its end on the writer thread), the writer (fixed-size multi-row INSERTs, a
PASSIVE checkpoint beside it) and the schema dialect (``server/schema.py``); every statement is
in ``server/sql.py``.
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
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from moo.errors import StorageError
from server import sql
from server.schema import upgrade_sqlite
from server.sql import Query
from server.storage import Append, Db, Done, Store, index_results

__all__ = ["SQLiteStore"]

log = logging.getLogger("moo.storage")

T = TypeVar("T")


class _Op:
    """One unit of work for the writer thread: an append, or a function run in a savepoint."""

    __slots__ = ("append", "done", "fn", "future", "result")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any] | None,
        done: Done | None = None,
        future: asyncio.Future[Any] | None = None,
        append: Append | None = None,
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
            if self.window > 0:
                # What arrives within the window shares this commit. Slept, then drained:
                # never ``SimpleQueue.get(timeout=...)``, whose C code in CPython 3.11 turns
                # a deadline that passed between its two tries at the queue's lock (the
                # thread descheduled there for longer than the window, as on a loaded
                # machine) into a negative timeout, which blocks for good: the writer then
                # sat with its batch while every caller waited (a test's server start, hung
                # beside two busy loops, stop 51).
                time.sleep(self.window)
            while True:
                try:
                    ops = self._queue.get_nowait()
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
                # No savepoint around the bulk insert: it is the transaction's first work, so
                # if it fails the whole transaction is rolled back and begun again, which is
                # the same thing and costs the usual commit two fewer calls into SQLite (each
                # one re-takes the GIL from the event loop).
                try:
                    _write_appends(conn, [op.append for op in appends if op.append])
                except sqlite3.Error:
                    conn.execute("ROLLBACK")
                    conn.execute("BEGIN IMMEDIATE")
                    for op in appends:
                        exc = _in_savepoint(
                            conn, lambda c, a=op.append: _write_appends(c, [a])  # type: ignore[misc]
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
        """Run ``fn`` on the writer's connection, in a savepoint of the next group commit."""
        assert self._loop is not None
        future: asyncio.Future[T] = self._loop.create_future()
        self._submit(_Op(fn, future=future))
        return await future

    # -- the Store's driver and writer ------------------------------------------------------
    async def with_db(self, op: Callable[[Db], Coroutine[Any, Any, T]]) -> T:
        return await self._call(lambda conn: _drive(op(_SqliteDb(conn))))

    def _enqueue(self, append: Append, done: Done) -> None:
        self._submit(_Op(None, done=done, append=append))


def _write_appends(conn: sqlite3.Connection, appends: Sequence[Append]) -> None:
    metas = [(a.match_id, a.meta, a.created_ms) for a in appends if a.meta is not None]
    if metas:
        conn.executemany(_INSERT_MATCH, metas)
    rows = [row for a in appends for row in a.rows]
    # A few multi-row INSERTs for the whole batch: executemany() releases and re-takes the GIL
    # around every row, and each re-take can wait out the event loop's switch interval, so a
    # batch of hundreds of rows took hundreds of milliseconds under load. Rows go in chunks of
    # fixed sizes (so only five statements are ever prepared and cached), each one
    # sqlite3_step(); the values are bound in C, nothing is re-encoded or parsed.
    start = 0
    while start < len(rows):
        left = len(rows) - start
        size = next(s for s in sql.EVENT_CHUNKS if s <= left)
        flat = [value for row in rows[start : start + size] for value in row]
        conn.execute(_INSERT_EVENTS[size], flat)
        start += size
    done = [a for a in appends if a.finished]
    if done:
        for a in done:
            conn.execute(_FINISH_MATCH, (a.match_id,))
            conn.executemany(_ADD_STATS, [(d.player, *d.counts()) for d in a.stats])
        _drive(index_results(_SqliteDb(conn), done))


# the writer's statements, looked up once
_INSERT_MATCH = sql.INSERT_MATCH.sqlite
_INSERT_EVENTS = {n: q.sqlite for n, q in sql.INSERT_EVENTS.items()}
_FINISH_MATCH = sql.FINISH_MATCH.sqlite
_ADD_STATS = sql.ADD_STATS.sqlite


def _drive(step: Coroutine[Any, Any, T]) -> T:
    """Run an operation written for both stores to its end, here on the writer thread.

    Its awaits are :class:`_SqliteDb`'s, which never wait for anything (each statement runs
    right there), so one ``send`` finishes it; one that did wait would be a bug, and says so.
    """
    try:
        step.send(None)
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]
    step.close()
    raise RuntimeError("a storage operation waited for something on SQLite's writer thread")


class _Atomic:
    """``Db.atomic()`` on SQLite: a savepoint (the writer's transaction is already open)."""

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def __aenter__(self) -> None:
        self.conn.execute("SAVEPOINT atomic")

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None:
            self.conn.execute("ROLLBACK TO atomic")
        self.conn.execute("RELEASE atomic")


class _SqliteDb(Db):
    """The writer thread's connection as the shared operations see it."""

    refused = (sqlite3.IntegrityError, sqlite3.DataError)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @staticmethod
    def _bind(args: Sequence[Any]) -> list[Any]:
        # a list parameter ({in_texts}) is read by json_each()
        return [json.dumps(a) if isinstance(a, list) else a for a in args]

    async def rows(self, query: Query, *args: Any) -> list[Any]:
        return self.conn.execute(query.sqlite, self._bind(args)).fetchall()

    async def row(self, query: Query, *args: Any) -> Any:
        return self.conn.execute(query.sqlite, self._bind(args)).fetchone()

    async def run(self, query: Query, *args: Any) -> None:
        self.conn.execute(query.sqlite, self._bind(args))

    async def run_many(self, query: Query, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(query.sqlite, rows)

    def atomic(self) -> _Atomic:
        return _Atomic(self.conn)


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
