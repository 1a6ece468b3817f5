"""Both storage backends behind one interface: SQLite and PostgreSQL give the same answers.

Every store test runs twice (``backend`` = sqlite, postgresql). PostgreSQL is the machine's
server with a fresh database per test (tests/pg_support.py); it must be reachable.
Also here: the versioned schema (one source, both dialects), ``moo db upgrade``, migrations
racing at start, and what a PostgreSQL outage does to a running server.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import asyncpg
import pytest

from bench.harness.services import TcpCut
from moo.errors import NameTaken, StorageError
from server import sql
from server.schema import (
    LATEST,
    MIGRATIONS,
    SchemaError,
    render,
    upgrade_postgres,
    upgrade_sqlite,
)
from server.settings import ConfigError, Settings
from server.storage import StatDelta, Store
from server.storage_pg import PostgresStore
from server.storage_sqlite import SQLiteStore
from server.stores import make_store
from tests.patience import patience
from tests.pg_support import pg_url
from tests.server import test_server_restart as _restart
from tests.server_support import Client, free_match, running, server_settings

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "db.sqlite3")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def store(db: str) -> AsyncIterator[Store]:
    s = make_store(Settings(db=db, commit_window_ms=5))
    await s.open()
    try:
        yield s
    finally:
        await s.close()


def _done(loop: asyncio.AbstractEventLoop) -> asyncio.Future[BaseException | None]:
    return loop.create_future()


async def _count_events(db: str) -> int:
    if db.startswith("postgresql://"):
        conn = await asyncpg.connect(db)
        try:
            return int(await conn.fetchval("SELECT count(*) FROM events"))
        finally:
            await conn.close()
    return int(sqlite3.connect(db).execute("SELECT count(*) FROM events").fetchone()[0])


# -- the Store interface, both backends ------------------------------------------------------
def test_the_setting_picks_the_backend(tmp_path: Path) -> None:
    assert isinstance(make_store(Settings(db=str(tmp_path / "x"))), SQLiteStore)
    assert isinstance(make_store(Settings(db="postgresql://h:1/d")), PostgresStore)


async def test_appends_from_many_matches_share_commits_and_are_durable(
    store: Store, db: str
) -> None:
    loop = asyncio.get_running_loop()
    futures = []
    for i in range(200):
        fut = _done(loop)
        store.append(
            f"m{i}",
            [{"seq": 1, "kind": "created", "at": 0, "players": ["a", "b"]}],
            fut.set_result,
            meta={"players": ["a", "b"], "bots": [None, None]},
        )
        futures.append(fut)
    async with asyncio.timeout(patience(15)):
        assert await asyncio.gather(*futures) == [None] * 200
    assert getattr(store, "ops") == 200 and getattr(store, "commits") < 200  # noqa: B009
    # committed means visible to a fresh connection from outside the store
    assert await _count_events(db) == 200


async def test_a_batch_of_any_size_lands_row_for_row(store: Store) -> None:
    """SQLite writes rows as fixed-size multi-row INSERTs: every size must split without loss."""
    loop = asyncio.get_running_loop()
    sizes = [1, 2, 3, 5, 17, 64, 255, 256, 257, 345]
    futures = []
    for i, n in enumerate(sizes):
        fut = _done(loop)
        events = [
            {"seq": s, "kind": "guess", "at": s, "guess": f"{s:04d}"} for s in range(1, n + 1)
        ]
        store.append(f"m{i}", events, fut.set_result, meta={"n": n})
        futures.append(fut)
    assert await asyncio.gather(*futures) == [None] * len(sizes)
    assert getattr(store, "commits") == 1  # noqa: B009 -- queued together, committed together
    for i, n in enumerate(sizes):
        got = await store.match_events(f"m{i}")
        assert got is not None and [e["seq"] for e in got] == list(range(1, n + 1))
        assert got[-1]["guess"] == f"{n:04d}"
        assert await store.match_events(f"m{i}", after=n - 1) == got[-1:]
        assert await store.match_events(f"m{i}", after=n) == []
    stored = await store.unfinished_matches()
    assert [(s.match_id, s.meta["n"], len(s.events)) for s in stored] == [
        (f"m{i}", n, n) for i, n in enumerate(sizes)
    ]
    some = await store.stored_matches(["m4", "m1", "nope"])  # a cluster node adopting these
    assert {s.match_id: [e["seq"] for e in s.events] for s in some} == {
        "m1": [1, 2], "m4": list(range(1, 18))
    }
    assert await store.stored_matches([]) == []


async def test_a_refused_append_does_not_take_its_batch_with_it(store: Store) -> None:
    loop = asyncio.get_running_loop()
    done = [_done(loop) for _ in range(3)]
    event = {"seq": 1, "kind": "created", "at": 0}
    store.append("m", [event], done[0].set_result, meta={})
    store.append("m", [event], done[1].set_result)  # duplicate seq: refused (no fork)
    store.append("n", [event], done[2].set_result, meta={})
    out = await asyncio.gather(*done)
    assert out[0] is None and out[2] is None
    assert isinstance(out[1], sqlite3.IntegrityError | asyncpg.UniqueViolationError)
    assert await store.match_events("m") == [event]
    assert await store.match_events("n") == [event]
    assert await store.match_events("zzz") is None


async def test_players_statistics_and_leaderboard(store: Store) -> None:
    await store.register_player("Ann", "h1", bot=False)
    with pytest.raises(NameTaken):
        await store.register_player("ann", "h2", bot=False)  # names ignore case
    await store.register_player("zed", "h3", bot=True)
    record = await store.player_by_token("h1")
    assert record is not None and record.name == "Ann" and not record.bot
    bot = await store.player_by_token("h3")
    assert bot is not None and bot.bot
    assert await store.player_by_token("nope") is None
    loop = asyncio.get_running_loop()
    fut = _done(loop)
    store.append(
        "m1", [{"seq": 1, "kind": "created", "at": 0}], fut.set_result, meta={},
        finished=True,
        stats=[StatDelta("Ann", "win", 5, 60_000), StatDelta("bob", "loss", None, 60_000)],
    )
    assert await fut is None
    fut2 = _done(loop)
    store.append(
        "m2", [{"seq": 1, "kind": "created", "at": 0}], fut2.set_result, meta={},
        finished=True, stats=[StatDelta("ANN", "draw", 7, 30_000)],
    )
    assert await fut2 is None
    ann = await store.player_stats("ann")
    assert ann is not None and ann.player == "Ann"
    assert (ann.games, ann.wins, ann.draws, ann.losses, ann.solved) == (2, 1, 1, 0, 2)
    assert ann.avg_guesses == 6.0 and ann.avg_time_ms == 45_000
    assert await store.player_stats("nobody") is None
    board = await store.leaderboard("rating")
    assert board == [
        {"name": "Ann", "games": 2, "wins": 1, "draws": 1, "losses": 0, "rating": 625,
         "avg_guesses": 6.0, "avg_time_s": 45.0},
        {"name": "bob", "games": 1, "wins": 0, "draws": 0, "losses": 1, "rating": 333,
         "avg_guesses": None, "avg_time_s": 60.0},
    ]
    assert [r["name"] for r in await store.leaderboard("average")] == ["Ann", "bob"]
    assert await store.unfinished_matches() == []


# -- accounts and history, both backends ------------------------------------------------------
def _finish(
    store: Store, match_id: str, players: list[str], at: int, winner: int | None,
    counts: list[int], solved: list[bool], *, split: bool = False,
) -> list[asyncio.Future[BaseException | None]]:
    """A finished match's events; ``split`` commits ``created`` and ``finished`` separately."""
    loop = asyncio.get_running_loop()
    created = {"seq": 1, "kind": "created", "at": at - 1000, "players": players,
               "config": {"rated": True}}
    finished = {"seq": 2, "kind": "finished", "at": at, "winner": winner,
                "reason": "solved", "counts": counts, "solved": solved}
    meta = {"players": players, "bots": [None, "minimum"]}
    futures = [_done(loop) for _ in range(2 if split else 1)]
    if split:
        store.append(match_id, [created], futures[0].set_result, meta=meta)
        store.append(match_id, [finished], futures[1].set_result, finished=True)
    else:
        store.append(match_id, [created, finished], futures[0].set_result, meta=meta,
                     finished=True)
    return futures


async def test_tokens_per_device_passwords_and_rotation(store: Store) -> None:
    await store.register_player("Ann", "t0", bot=False)
    first = await store.player_by_token("t0")
    assert first is not None and first.name == "Ann" and first.secured is False
    account = await store.account("ANN")
    assert account is not None and account.name == "Ann" and account.password_hash is None
    assert await store.account("nobody") is None
    await store.set_password_hash("ann", "$argon2id$x")
    account = await store.account("ann")
    assert account is not None and account.password_hash == "$argon2id$x"
    secured = await store.player_by_token("t0")
    assert secured is not None and secured.secured is True
    for i in range(1, 5):  # every device its own token; only the 3 newest stay (even
        await store.add_token("Ann", f"t{i}", keep=3)  # when made in the same millisecond)
    alive = [t for t in ("t0", "t1", "t2", "t3", "t4") if await store.player_by_token(t)]
    assert alive == ["t2", "t3", "t4"]
    await store.rotate_tokens("ann", "fresh")
    assert [t for t in ("t2", "t3", "t4", "fresh") if await store.player_by_token(t)] == [
        "fresh"
    ]


async def test_history_pages_outcomes_and_known_players(store: Store) -> None:
    await store.register_player("Ann", "h", bot=False)
    futures = []
    for i in range(5):  # ann wins in 5, 6, 7, 8 guesses, then a draw in 9 (unsolved)
        futures += _finish(
            store, f"m{i}", ["Ann", "Bob"], 10_000 + i, 0 if i < 4 else None,
            [5 + i, 9], [i < 4, False], split=i % 2 == 1,
        )
    assert await asyncio.gather(*futures) == [None] * len(futures)
    page = await store.history("ann", None, 2)
    assert [(r.match_id, r.seat, r.ended_ms) for r in page] == [
        ("m4", 0, 10_004), ("m3", 0, 10_003)
    ]
    assert page[1].summary["bots"] == [None, "minimum"] and page[1].summary["winner"] == 0
    last = page[-1]
    rest = await store.history("ANN", (last.ended_ms, last.match_id, last.seat), 10)
    assert [r.match_id for r in rest] == ["m2", "m1", "m0"]
    bob = await store.history("bob", None, 10)
    assert {r.seat for r in bob} == {1} and len(bob) == 5
    outcomes = await store.guess_outcomes(["ANN", "bob", "nobody"])
    assert outcomes["ann"] == {(5, True): 1, (6, True): 1, (7, True): 1, (8, True): 1,
                               (9, False): 1}
    assert outcomes["bob"] == {(9, False): 5} and outcomes["nobody"] == {}
    assert await store.known_player("ANN") == "Ann"  # registered
    assert await store.known_player("BOB") == "Bob"  # only played (never said hello)
    assert await store.known_player("carl") is None


async def test_postgres_history_pages_are_index_range_scans(pg_url: str) -> None:
    """As on SQLite (tests/server/test_history.py): a page of history is one backward range scan of
    the ``results`` primary key, with no sort, first page and cursor pages alike. (Scans the
    planner would prefer on a nearly empty table are switched off so the plan shows what the
    index allows.)"""
    conn = await asyncpg.connect(pg_url)
    try:
        await upgrade_postgres(conn)
        await conn.execute("SET enable_seqscan = off")
        await conn.execute("SET enable_bitmapscan = off")
        for query, args in (
            (sql.HISTORY, ("ann", 20)), (sql.HISTORY_BEFORE, ("ann", 1, "m", 0, 20))
        ):
            plan = " ".join(r[0] for r in await conn.fetch("EXPLAIN " + query.postgresql, *args))
            assert "Index Scan Backward using results_pkey" in plan and "Sort" not in plan, plan
    finally:
        await conn.close()


async def test_the_accounts_migration_moves_tokens_and_indexes_old_matches(db: str) -> None:
    """A database at schema version 2 (one token per player in ``players``, finished matches
    without ``results``) comes up with its old token working and its history indexed."""
    s = make_store(Settings(db=db, commit_window_ms=5))
    await s.open()
    try:
        assert await asyncio.gather(
            *_finish(s, "old1", ["Ann", "Bob"], 5_000, 1, [7, 6], [False, True])
        ) == [None]
    finally:
        await s.close()
    # undo migration 3 the way a version-2 database looked
    undo = [
        "DROP TABLE results", "DROP TABLE tokens",
        "INSERT INTO players(name, token_hash, bot, created_ms) VALUES ('Ann', 'oldhash', 0, 1)",
        "DELETE FROM schema_version WHERE version >= 3",
    ]
    if db.startswith("postgresql://"):
        conn = await asyncpg.connect(db)
        try:
            for sql in [*undo, "ALTER TABLE players DROP COLUMN password_hash"]:
                await conn.execute(sql)
        finally:
            await conn.close()
    else:
        with sqlite3.connect(db) as c:
            for sql in [*undo, "ALTER TABLE players DROP COLUMN password_hash"]:
                c.execute(sql)
    s = make_store(Settings(db=db, commit_window_ms=5))
    await s.open()
    try:
        record = await s.player_by_token("oldhash")
        assert record is not None and record.name == "Ann" and record.secured is False
        rows = await s.history("bob", None, 10)
        assert [(r.match_id, r.seat, r.ended_ms, r.summary["winner"]) for r in rows] == [
            ("old1", 1, 5_000, 1)
        ]
        assert (await s.guess_outcomes(["ann"]))["ann"] == {(7, False): 1}
    finally:
        await s.close()


# -- the statements: written once, valid on both engines ---------------------------------------
def _statements() -> list[sql.Query]:
    """Every statement of server/sql.py, also those kept in its dicts and tuples."""
    found: list[sql.Query] = []
    for value in vars(sql).values():
        if isinstance(value, dict):
            value = tuple(value.values())
        found += [q for q in (value if isinstance(value, tuple) else (value,))
                  if isinstance(q, sql.Query)]
    return found


def test_a_statement_is_rendered_for_each_engine() -> None:
    text = "SELECT a FROM t WHERE b = ? AND c {in_texts} ORDER BY {insert_order} LIMIT ?"
    assert sql.render(text, "sqlite") == (
        "SELECT a FROM t WHERE b = ? AND c IN (SELECT value FROM json_each(?))"
        " ORDER BY rowid LIMIT ?"
    )
    assert sql.render(text, "postgresql") == (
        "SELECT a FROM t WHERE b = $1 AND c = ANY($2::text[]) ORDER BY seq LIMIT $3"
    )
    queries = _statements()
    assert len(queries) > 40
    for q in queries:  # every word filled in, PostgreSQL's parameters SQLite's in order
        assert not re.search(r"\{[a-z_]+\}", q.sqlite + q.postgresql), q
        numbers = [int(n) for n in re.findall(r"\$(\d+)", q.postgresql)]
        assert numbers == list(range(1, q.sqlite.count("?") + 1)), q
        assert "?" not in q.postgresql, q


async def test_every_statement_is_valid_on_each_engine_that_runs_it(db: str) -> None:
    """Each statement is prepared (parsed, its tables and columns resolved, typed) on a fully
    migrated database of every engine that runs it; SQLite's also on a ratings file."""
    queries = _statements()
    if db.startswith("postgresql://"):
        conn = await asyncpg.connect(db)
        try:
            await upgrade_postgres(conn)
            mine = [q for q in queries if "postgresql" in q.engines]
            for q in mine:
                await conn.prepare(q.postgresql)
        finally:
            await conn.close()
    else:
        lite = sqlite3.connect(db, isolation_level=None)
        upgrade_sqlite(lite)
        for table in sql.RATINGS_FILE_TABLES:  # the ratings file's own tables, here alike
            lite.execute(table.sqlite)
        mine = [q for q in queries if "sqlite" in q.engines]
        for q in mine:
            lite.execute("EXPLAIN " + q.sqlite, [None] * q.sqlite.count("?"))
        lite.close()
    assert len(mine) > 30


# -- the schema ------------------------------------------------------------------------------
def test_one_source_renders_both_dialects() -> None:
    sqlite_sql = [s for m in MIGRATIONS for s in render("sqlite", m)]
    pg_sql = [s for m in MIGRATIONS for s in render("postgresql", m)]
    assert all("{" not in s for s in sqlite_sql + pg_sql)
    assert any("COLLATE NOCASE" in s for s in sqlite_sql)
    assert any('COLLATE "moo_nocase"' in s for s in pg_sql)
    assert not any("CREATE COLLATION" in s for s in sqlite_sql)
    assert [m.version for m in MIGRATIONS] == list(range(1, LATEST + 1))


def _moo_db(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "db", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=patience(60),
    )


def test_moo_db_upgrade_applies_once_then_is_up_to_date(db: str) -> None:
    first = _moo_db("upgrade", "--db", db)
    assert first.returncode == 0, first.stderr
    assert f"schema version 0 -> {LATEST}" in first.stdout
    assert "applied migration 1 (" in first.stdout
    again = _moo_db("upgrade", "--db", db)
    assert again.returncode == 0 and f"schema version {LATEST}, up to date" in again.stdout


@pytest.mark.parametrize(
    ("db", "message"),
    [
        ("mysql://h/d", "got a mysql:// URL"),
        ("postgresql://127.0.0.1:5432", "names no database"),
        ("postgresql://127.0.0.1:x/d", "the port must be a number"),
        ("postgresql://127.0.0.1:1/d", "postgresql://127.0.0.1:1/d: "),
    ],
)
def test_moo_db_upgrade_mistakes_get_one_line(db: str, message: str) -> None:
    out = _moo_db("upgrade", "--db", db)
    assert out.returncode in (1, 2)
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_bad_db_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="names no database"):
        Settings(db="postgres://host/")


def test_a_sqlite_file_from_before_versioning_is_adopted_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE players (name TEXT PRIMARY KEY COLLATE NOCASE, token_hash TEXT UNIQUE,"
        " bot INTEGER NOT NULL, created_ms INTEGER NOT NULL);"
        "INSERT INTO players VALUES ('Old', 'h', 0, 1);"
    )
    conn.commit()
    conn.close()
    out = _moo_db("upgrade", "--db", str(path))
    assert out.returncode == 0, out.stderr
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM players").fetchall() == [("Old",)]
    assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (LATEST,)


async def test_a_newer_database_is_refused(db: str) -> None:
    assert _moo_db("upgrade", "--db", db).returncode == 0
    if db.startswith("postgresql://"):
        conn = await asyncpg.connect(db)
        await conn.execute(
            "INSERT INTO schema_version VALUES ($1, 'from the future', 0)", LATEST + 1
        )
        await conn.close()
    else:
        with sqlite3.connect(db) as c:
            c.execute("INSERT INTO schema_version VALUES (?, 'from the future', 0)", (LATEST + 1,))
    out = _moo_db("upgrade", "--db", db)
    assert out.returncode == 1 and f"schema version {LATEST + 1}, newer" in out.stderr
    s = make_store(Settings(db=db))
    with pytest.raises((SchemaError, StorageError), match="newer than this server"):
        await s.open()


async def test_nodes_starting_together_migrate_once(pg_url: str) -> None:
    """Eight connections race to upgrade one empty database: one applies, all succeed."""
    conns = [await asyncpg.connect(pg_url) for _ in range(8)]
    try:
        results = await asyncio.gather(*(upgrade_postgres(c) for c in conns))
    finally:
        for c in conns:
            await c.close()
    applied = [r[1] for r in results]
    assert sorted(applied, key=len) == [[]] * 7 + [list(range(1, LATEST + 1))]
    conn = await asyncpg.connect(pg_url)
    rows = await conn.fetch("SELECT version FROM schema_version ORDER BY version")
    await conn.close()
    assert [r[0] for r in rows] == list(range(1, LATEST + 1))


# -- a server on PostgreSQL while the database goes away and comes back -------------------------
async def test_database_down_refuses_with_storage_unavailable_then_heals(
    pg_url: str, tmp_path: Path
) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(pg_url)
    cut = TcpCut(parts.port or 5432)
    await cut.up()
    via = pg_url.replace(f":{parts.port}/", f":{cut.port}/")
    async with running(server_settings(tmp_path, db=via, pacing="free")) as app:
        assert app.health()["db"] == "ok"
        ann, bob, mid = await free_match(app.port)
        ok = await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
        assert ok["kind"] == "guess" and ok["guess"] == "5678"

        await cut.down()
        refused = await ann.request({"type": "guess", "match_id": mid, "guess": "6789"})
        assert refused["type"] == "error" and refused["code"] == "storage_unavailable"
        assert app.health()["db"] == "unavailable"
        # the match is out of memory until it is replayed, but it is not gone: a request for
        # it meanwhile is refused as retryable, not as an unknown match
        again = await bob.request({"type": "guess", "match_id": mid, "guess": "0123"})
        assert again["type"] == "error" and again["code"] == "storage_unavailable", again
        assert "being restored" in again["message"]
        newcomer = await Client.open(app.port)
        hello = await newcomer.request({"type": "hello", "name": "cat"})
        assert hello["type"] == "error" and hello["code"] == "storage_unavailable"

        await cut.up()  # the database is back: the store notices by itself
        async with asyncio.timeout(patience(15)):
            while app.health()["db"] != "ok" or mid not in app.arena.live:
                await asyncio.sleep(0.05)
        cat = await Client.hello(app.port, "cat")
        assert cat.name == "cat"
        # ann stayed attached: the replayed match goes on for her with no resume (its
        # `resumed` event comes by itself, docs/protocol.md "storage_unavailable")
        came = await ann.event(mid, "resumed")
        # the dropped match is back from its durable prefix: the refused guess is not in it
        await ann.request({"type": "resume", "match_id": mid, "last_seq": 0})
        await ann.event(mid, "resumed", seq=came["seq"])  # the replay's own copy
        guesses = [e.get("guess") for e in ann.events(mid) if e["kind"] == "guess"]
        assert guesses.count("5678") == 2 and "6789" not in guesses  # live + replayed
        again = await ann.request({"type": "guess", "match_id": mid, "guess": "4567"})
        assert again["kind"] == "guess" and again["guess"] == "4567"
        logged = await app.store.match_events(mid)
        assert logged is not None
        assert [e["guess"] for e in logged if e["kind"] == "guess"] == ["5678", "4567"]
        for c in (ann, bob, newcomer, cat):
            await c.close()
    await cut.down()



async def _refuse_guess(admin: asyncpg.Connection, guess: str) -> None:
    """Make every commit that writes an event naming ``guess`` fail (a trigger raises), with
    the database answering all along."""
    await admin.execute(
        "CREATE TABLE refuse(guess TEXT);"
        "CREATE FUNCTION refuse_guess() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN IF EXISTS (SELECT 1 FROM refuse WHERE NEW.body LIKE"
        " '%\"' || refuse.guess || '\"%') THEN RAISE EXCEPTION 'refused'; END IF;"
        " RETURN NEW; END $$;"
        "CREATE TRIGGER refuse BEFORE INSERT ON events FOR EACH ROW"
        " EXECUTE FUNCTION refuse_guess();"
    )
    await admin.execute("INSERT INTO refuse VALUES ($1)", guess)


async def test_a_failed_commit_with_the_database_up_brings_its_match_back(
    pg_url: str, tmp_path: Path
) -> None:
    """A commit that fails while the database answers (no outage, so no probe reports it back;
    here a trigger refuses it, as a deadlock that outlived its retries would): the dropped match
    is replayed from its durable prefix a moment later, and its players go on with no resume."""
    admin = await asyncpg.connect(pg_url)
    try:
        async with running(server_settings(tmp_path, db=pg_url, pacing="free")) as app:
            await _refuse_guess(admin, "6789")
            ann, bob, mid = await free_match(app.port)
            ok = await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
            assert ok["kind"] == "guess" and ok["guess"] == "5678"
            refused = await ann.request({"type": "guess", "match_id": mid, "guess": "6789"})
            assert refused["type"] == "error" and refused["code"] == "storage_unavailable"
            assert app.health()["db"] == "ok"  # one failed commit is not an outage
            # replayed by itself, and ann, still attached, hears of it with no resume
            came = await ann.event(mid, "resumed")
            assert mid in app.arena.live and came["seq"] > ok["seq"]
            again = await ann.request({"type": "guess", "match_id": mid, "guess": "4567"})
            assert again["kind"] == "guess" and again["guess"] == "4567"
            logged = await app.store.match_events(mid)
            assert logged is not None
            assert [e["guess"] for e in logged if e["kind"] == "guess"] == ["5678", "4567"]
            for c in (ann, bob):
                await c.close()
    finally:
        await admin.close()



async def test_a_replay_that_fails_while_the_database_answers_is_tried_again(
    pg_url: str, tmp_path: Path
) -> None:
    """The failed commit's match comes back by replay a moment later; when that replay's own
    read fails too, with the database still answering (here the table is renamed away; in the
    fault harness, a link that broke a read as well as the write), nothing else would ever
    call for it again: the match stayed out of memory, its players waiting for good (found
    beside two busy loops, stop 50). The replay is tried again until it gets through."""
    admin = await asyncpg.connect(pg_url)
    try:
        async with running(server_settings(tmp_path, db=pg_url, pacing="free")) as app:
            await _refuse_guess(admin, "6789")
            ann, bob, mid = await free_match(app.port)
            ok = await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
            assert ok["kind"] == "guess" and ok["guess"] == "5678"
            await admin.execute("ALTER TABLE matches RENAME TO matches_away")
            refused = await ann.request({"type": "guess", "match_id": mid, "guess": "6789"})
            assert refused["type"] == "error" and refused["code"] == "storage_unavailable"
            async with asyncio.timeout(patience(15)):
                while app.readopt_failures == 0:  # the replay's read failed
                    await asyncio.sleep(0.02)
            assert app.health()["db"] == "ok" and mid not in app.arena.live
            await admin.execute("ALTER TABLE matches_away RENAME TO matches")
            came = await ann.event(mid, "resumed")  # tried again, and back
            assert mid in app.arena.live and came["seq"] > ok["seq"]
            again = await ann.request({"type": "guess", "match_id": mid, "guess": "4567"})
            assert again["kind"] == "guess" and again["guess"] == "4567"
            logged = await app.store.match_events(mid)
            assert logged is not None
            assert [e["guess"] for e in logged if e["kind"] == "guess"] == ["5678", "4567"]
            for c in (ann, bob):
                await c.close()
    finally:
        await admin.close()


async def test_a_finish_that_landed_though_its_answer_was_lost_reaches_every_follower(
    pg_url: str, tmp_path: Path
) -> None:
    """The commit that finishes a match lands, but its session is cut before the answer comes
    back (here the watchdog cuts it while a trigger holds the commit; in the fault harness, a
    reset link to the database). The node drops the match as failed and parks its followers;
    once the database answers, only unfinished matches come back by replay, so this one's
    players and spectator, never told its end, would wait forever. They are sent the rest
    of the log from their cursors."""
    admin = await asyncpg.connect(pg_url)
    try:
        async with running(server_settings(tmp_path, db=pg_url, pacing="free")) as app:
            store = cast(PostgresStore, app.store)
            # the commit is held 1.5 s, the watchdog cuts its session at 0.5 s, and the probe
            # asks again 3 s after that: the commit has landed long before it is back
            store.op_timeout_s, store.probe_interval_s = 0.5, 3.0
            await admin.execute(
                "CREATE FUNCTION hold_finish() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN IF NEW.body LIKE '%\"kind\":\"finished\"%' THEN"
                " PERFORM pg_sleep(1.5); END IF; RETURN NEW; END $$;"
                "CREATE TRIGGER hold_finish BEFORE INSERT ON events FOR EACH ROW"
                " EXECUTE FUNCTION hold_finish();"
            )
            ann, bob, mid = await free_match(app.port)
            cat = await Client.hello(app.port, "cat")
            await cat.request({"type": "watch", "match_id": mid})
            await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
            solved = await bob.request({"type": "guess", "match_id": mid, "guess": "0123"})
            assert solved["type"] == "error" and solved["code"] == "storage_unavailable"
            ends = [await c.event(mid, "finished") for c in (ann, bob, cat)]
            logged = await app.store.match_events(mid)
            assert logged is not None and logged[-1]["kind"] == "finished"  # it did land
            for c, end in zip((ann, bob, cat), ends, strict=True):
                assert end["seq"] == logged[-1]["seq"] and end["winner"] == 1
                seqs = [e["seq"] for e in c.events(mid)]
                assert len(seqs) == len(set(seqs))  # each event once
            for c in (ann, bob, cat):
                await c.close()
    finally:
        await admin.close()


# -- restart on PostgreSQL: SIGKILL / SIGTERM of a real `moo serve` mid-match ----------------------
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
async def test_restart_on_postgres_loses_no_acknowledged_guess(
    tmp_path: Path, sig: int, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/server/test_server_restart.py's test, with its server processes on ``--db pg_url``."""
    original = _restart.served

    @asynccontextmanager
    async def served(db: Path) -> AsyncIterator[_restart.ServerProcess]:
        # start_server only hands str(db) to --db, so the URL goes through unchanged
        async with original(cast(Path, pg_url)) as server:
            yield server

    monkeypatch.setattr(_restart, "served", served)
    await _restart.test_restart_loses_no_acknowledged_guess(tmp_path, sig)
    conn = await asyncpg.connect(pg_url)
    try:
        unfinished = await conn.fetchval("SELECT count(*) FROM matches WHERE finished = 0")
        guesses = await conn.fetchval("SELECT count(*) FROM events WHERE body LIKE '%\"guess\"%'")
    finally:
        await conn.close()
    assert unfinished == 0 and guesses > 3  # the matches ran and finished on PostgreSQL


def test_no_ratings_file_is_named_after_a_database_url() -> None:
    """Ratings are kept in memory on PostgreSQL (for now): no 'postgresql:/...' directory."""
    from server.ratings import ratings_path

    assert ratings_path("postgresql://127.0.0.1/moo") is None
    assert ratings_path("var/moo.sqlite3") == "var/moo.ratings.sqlite3"


async def test_metrics_on_a_single_node(db: str, tmp_path: Path) -> None:
    from tests.server.test_server_http import http_get

    async with running(server_settings(tmp_path, db=db)) as app:
        ann = await Client.hello(app.port, "ann")
        bot = await ann.request({"type": "play_bot", "strategy": "first"})
        assert bot["type"] == "match", bot
        status, headers, body = await http_get(app.port, "/metrics")
        text = body.decode()
        assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
        assert 'moo_connections{node=""} 1.0' in text
        assert 'moo_live_matches{node=""} 1.0' in text
        assert 'moo_db_up{node=""} 1.0' in text
        assert "moo_storage_commits_total" in text
        await ann.close()



async def _lock_waiters(conn: asyncpg.Connection) -> int:
    # (inside a transaction the list of sessions is read once and kept: a session that
    # connects later, as a finisher's does, would never be seen without a fresh reading)
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    return int(await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND datname = current_database()"
    ))


def _won(store: Store, match_id: str, pair: tuple[str, str]
         ) -> asyncio.Future[BaseException | None]:
    """A one-event match appended finished: ``pair[0]`` beat ``pair[1]`` (their ``stats``
    rows are locked by its commit). The future gets the append's outcome."""
    fut = _done(asyncio.get_running_loop())
    store.append(match_id, [{"seq": 1, "kind": "created", "at": 0}], fut.set_result,
                 meta={}, finished=True,
                 stats=[StatDelta(pair[0], "win", 5, 1000), StatDelta(pair[1], "loss", None, 1000)])
    return fut


async def test_two_writers_finishing_the_same_players_at_once_neither_deadlock_nor_drop(
        pg_url: str) -> None:
    """Two nodes' writers finish matches of the same players at the same moment, the players in
    one seat order on one node and in the other on the other (a tournament pairing's two
    games). Each writer taking the ``stats`` row locks in its own order is a deadlock that
    PostgreSQL breaks by rolling one commit back; its match would drop. Made to happen here:
    a third session holds C's row while writer 2 finishes (B, C) and (A, D) in one batch and
    writer 1 finishes (A, B); then lets go."""
    one = make_store(Settings(db=pg_url, commit_window_ms=0))
    two = make_store(Settings(db=pg_url, commit_window_ms=50))
    other = await asyncpg.connect(pg_url)
    try:
        for s in (one, two):
            await s.open()
        assert await _won(one, "m0", ("A", "B")) is None
        assert await _won(one, "m1", ("C", "D")) is None  # every stats row exists
        async with other.transaction():
            await other.execute("SELECT 1 FROM stats WHERE player = 'C' FOR UPDATE")
            second = [_won(two, "m2", ("B", "C")), _won(two, "m3", ("A", "D"))]
            async with asyncio.timeout(patience(15)):
                while await _lock_waiters(other) < 1:  # writer 2 waits for C
                    await asyncio.sleep(0.02)
            first = _won(one, "m4", ("A", "B"))
            async with asyncio.timeout(patience(15)):
                while await _lock_waiters(other) < 2:  # writer 1 waits too
                    await asyncio.sleep(0.02)
        async with asyncio.timeout(patience(30)):
            assert await asyncio.gather(first, *second) == [None, None, None]
        assert (getattr(one, "rollbacks"), getattr(two, "rollbacks")) == (0, 0)  # noqa: B009
        games = {n: (await one.player_stats(n)) for n in "ABCD"}
        assert {n: g.games for n, g in games.items() if g} == {"A": 3, "B": 3, "C": 2, "D": 2}
    finally:
        await other.close()
        for s in (one, two):
            await s.close()


async def test_a_commit_rolled_back_to_break_a_deadlock_is_run_again(pg_url: str) -> None:
    """A deadlock with some other transaction (here a session that holds C's row, then asks for
    A's while the writer holds A's and waits for C's): PostgreSQL rolls the writer's commit
    back (the other session waits far longer before it checks), which wrote nothing; the writer
    runs it again once the other session is done, and the match never notices."""
    store = make_store(Settings(db=pg_url, commit_window_ms=0))
    other = await asyncpg.connect(pg_url)
    try:
        await store.open()
        assert await _won(store, "m0", ("A", "C")) is None
        await other.execute("SET deadlock_timeout = '60s'")  # the writer is the one to yield
        async with other.transaction():
            await other.execute("SELECT 1 FROM stats WHERE player = 'C' FOR UPDATE")
            fut = _won(store, "m1", ("A", "C"))
            async with asyncio.timeout(patience(15)):
                while await _lock_waiters(other) < 1:  # the writer holds A, waits for C
                    await asyncio.sleep(0.02)
                await other.execute("SELECT 1 FROM stats WHERE player = 'A' FOR UPDATE")
                while getattr(store, "rollbacks") == 0:  # noqa: B009 (the writer hears of it)
                    await asyncio.sleep(0.02)
                assert not fut.done()  # run again: waiting for C's row, not failed
        async with asyncio.timeout(patience(30)):
            assert await fut is None
        a = await store.player_stats("A")
        assert a is not None and a.games == 2
        assert await _count_events(pg_url) == 2
    finally:
        await other.close()
        await store.close()


async def test_a_finishing_commit_that_waits_does_not_hold_up_other_matches(pg_url: str) -> None:
    """A finishing commit writes the match's results and ratings too: several round trips,
    seconds over a slow link to the database. Here it waits on a row lock that another session
    holds; a guess of another match, appended after it, is committed and acknowledged
    meanwhile, and the finish lands once the lock is let go. (One writer for everything made
    the guess wait behind the finish: the fault harness's 5-7 s silences under ``slow-db``.)"""
    store = make_store(Settings(db=pg_url, commit_window_ms=0))
    other = await asyncpg.connect(pg_url)
    loop = asyncio.get_running_loop()
    try:
        await store.open()
        assert await _won(store, "m0", ("A", "B")) is None  # A's stats row exists
        begun = _done(loop)
        store.append("m2", [{"seq": 1, "kind": "created", "at": 0}], begun.set_result, meta={})
        assert await begun is None
        async with other.transaction():
            await other.execute("SELECT 1 FROM stats WHERE player = 'A' FOR UPDATE")
            finish = _won(store, "m1", ("A", "C"))
            async with asyncio.timeout(patience(15)):
                while await _lock_waiters(other) < 1:  # the finish waits for A's row
                    await asyncio.sleep(0.02)
            guess = _done(loop)
            store.append("m2", [{"seq": 2, "kind": "guess", "at": 1}], guess.set_result)
            async with asyncio.timeout(patience(15)):
                assert await guess is None
            assert not finish.done()
        async with asyncio.timeout(patience(15)):
            assert await finish is None
        assert [e["seq"] for e in await store.match_events("m2") or []] == [1, 2]
        assert [e["seq"] for e in await store.match_events("m1") or []] == [1]
    finally:
        await other.close()
        await store.close()


async def test_a_finish_hook_that_fails_leaves_the_finish_and_the_results_in(
        pg_url: str) -> None:
    """The finishing transaction runs its parts (results rows, ratings) without a savepoint
    each, for its round trips; a part that fails there spoils the transaction, which is then
    run again with savepoints: the failed part is left out (and logged), the finish and the
    other parts land, and nothing is acknowledged that was rolled back."""
    store = make_store(Settings(db=pg_url, commit_window_ms=0))
    calls: list[bool] = []

    async def failing(db: object, finished: object) -> None:
        calls.append(bool(getattr(db, "savepoints", True)))
        async with db.atomic():  # type: ignore[attr-defined]
            await db.run(sql.Query("SELECT 1 / 0", only="postgresql"))  # type: ignore[attr-defined]

    try:
        await store.open()
        cast(PostgresStore, store).finish_hooks.append(failing)
        loop = asyncio.get_running_loop()
        done = _done(loop)
        store.append("m9", [{"seq": 1, "kind": "created", "at": 0,
                             "players": ["P", "Q"], "config": {}},
                            {"seq": 2, "kind": "finished", "at": 5, "winner": 0,
                             "reason": "solved", "counts": [3, 4], "solved": [True, False]}],
                     done.set_result, meta={}, finished=True,
                     stats=[StatDelta("P", "win", 3, 1000), StatDelta("Q", "loss", None, 1000)])
        async with asyncio.timeout(patience(15)):
            assert await done is None
        assert calls == [False, True]  # without savepoints, then again with them
        assert [e["kind"] for e in await store.match_events("m9") or []] == [
            "created", "finished"]
        assert [r.match_id for r in await store.history("P", None, 10)] == ["m9"]
    finally:
        await store.close()
