"""The database schema: one list of versioned migrations, rendered for SQLite and PostgreSQL.

Both backends must hold the same tables with the same meaning, or a cluster on PostgreSQL and a
single node on SQLite drift apart. So the schema is written once, as :data:`MIGRATIONS`, in the
SQL both engines share; the few words they spell differently are placeholders that
:func:`render` fills per dialect, from the one table of dialect differences that every query
uses too (``server/sql.py``, ``WORDS``):

``{bigint}``
    a 64-bit integer column (SQLite's ``INTEGER`` is already 64-bit; PostgreSQL's is not).
``{nocase}``
    the collation that makes player names case-insensitive: SQLite's built-in ``NOCASE``, and on
    PostgreSQL the ICU collation ``moo_nocase`` (created by migration 1) that compares letters
    without case, so uniqueness, lookups and ``ON CONFLICT`` all ignore case the same way.
``{without_rowid}``
    SQLite's ``WITHOUT ROWID`` (a table clustered on its primary key); nothing on PostgreSQL.

A statement that only one engine needs is wrapped in :class:`Only`; a column added to an existing
table is an :class:`AddColumn` (SQLite has no ``ADD COLUMN IF NOT EXISTS``, so it checks first).
A migration that must also derive rows from existing data names a :class:`Backfill`: each
dialect's driver runs the same statements (``server/sql.py``), and the derivation itself
(:func:`result_rows`) is one function.

Each database records what it holds in ``schema_version`` (one row per applied migration).
:func:`upgrade_sqlite` and :func:`upgrade_postgres` apply what is missing, each under a lock so
that several servers starting at once against one database cannot race (SQLite: one
``BEGIN IMMEDIATE`` transaction; PostgreSQL: a session advisory lock around one transaction).
A database that is *newer* than this code is refused rather than guessed at.

Migration 1 uses ``IF NOT EXISTS`` throughout, so a SQLite file made before versioning existed
(same tables, no ``schema_version``) is adopted as version 1 without change.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from server import sql
from server.sql import WORDS, Dialect

__all__ = [
    "LATEST",
    "MIGRATIONS",
    "PG_LOCK_KEY",
    "AddColumn",
    "Backfill",
    "Migration",
    "Only",
    "SchemaError",
    "render",
    "result_rows",
    "upgrade_postgres",
    "upgrade_sqlite",
]

class SchemaError(RuntimeError):
    """The database's schema cannot be used by this code (e.g. it is newer)."""


@dataclass(frozen=True)
class Only:
    """A statement that only ``dialect`` runs."""

    dialect: Dialect
    sql: str


@dataclass(frozen=True)
class AddColumn:
    """``ALTER TABLE table ADD COLUMN column decl``, skipped where the column already exists.

    PostgreSQL says so itself (``IF NOT EXISTS``); on SQLite :func:`upgrade_sqlite` looks the
    column up first. A SQLite file written by the accounts branch before it was merged (its
    own ``PRAGMA user_version`` step had already added ``players.password_hash``) therefore
    upgrades too.
    """

    table: str
    column: str
    decl: str


@dataclass(frozen=True)
class Backfill:
    """Rows a migration derives from data already there, run after its statements."""

    sqlite: Callable[[sqlite3.Connection], None]
    postgresql: Callable[[Any], Awaitable[None]]


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str | Only | AddColumn, ...]
    backfill: Backfill | None = None


log = logging.getLogger("moo.storage")

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)

#: one row of ``results``: player, ended_ms, match_id, seat, guesses, solved (0/1), summary
ResultRow = tuple[str, int, str, int, int, int, str]

def result_rows(
    match_id: str, first_body: str | None, last_body: str | None, meta_body: str | None
) -> list[ResultRow]:
    """The ``results`` rows (one per seat) of a finished match, from its stored JSON.

    ``first_body`` is the match's event 1 (``created``: players, config), ``last_body`` its
    last event (``finished``: winner, reason, counts, solved) and ``meta_body`` the ``matches``
    row's meta (which seats were bots). The index is derived data: anything unreadable gives
    no rows (and a log line) rather than failing the transaction that finishes the match.
    Both stores call this on every finish and the migration that made the table calls it on
    every match that finished before.
    """
    try:
        if first_body is None or last_body is None:
            return []
        finished = json.loads(last_body)
        if finished.get("kind") != "finished":
            return []
        created = json.loads(first_body)
        meta = json.loads(meta_body) if meta_body else {}
        config = created.get("config") or {}
        players = list(created["players"])
        summary = _ENCODER.encode(
            {
                "players": players,
                "bots": meta.get("bots", [None, None]),
                "winner": finished.get("winner"),
                "reason": finished.get("reason"),
                "counts": finished.get("counts"),
                "solved": finished.get("solved"),
                "config": config,
                "rated": bool(config.get("rated", True)),
                "created_at": created.get("at"),
                "ended_at": finished.get("at"),
            }
        )
        ended = int(finished.get("at") or 0)
        counts = finished.get("counts") or [0, 0]
        solved = finished.get("solved") or [False, False]
        return [
            (str(players[seat]), ended, match_id, seat, int(counts[seat]),
             int(bool(solved[seat])), summary)
            for seat in (0, 1)
        ]
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        log.exception("cannot index the result of match %s for history", match_id)
        return []


def _backfill_results_sqlite(conn: sqlite3.Connection) -> None:
    """Index every match that finished before ``results`` existed (SQLite)."""
    for match_id, meta, first, last in conn.execute(sql.FINISHED_MATCH_ENDS.sqlite).fetchall():
        conn.executemany(sql.RESULTS_UPSERT.sqlite, result_rows(match_id, first, last, meta))


async def _backfill_results_pg(conn: Any) -> None:
    """Index every match that finished before ``results`` existed (PostgreSQL)."""
    rows = await conn.fetch(sql.FINISHED_MATCH_ENDS.postgresql)
    out = [r for row in rows for r in result_rows(row[0], row[2], row[3], row[1])]
    if out:
        await conn.executemany(sql.RESULTS_UPSERT.postgresql, out)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "players, matches, event log, statistics",
        (
            Only(
                "postgresql",
                "CREATE COLLATION IF NOT EXISTS moo_nocase"
                " (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
            ),
            """CREATE TABLE IF NOT EXISTS players (
                name TEXT {nocase} PRIMARY KEY,
                token_hash TEXT UNIQUE,
                bot INTEGER NOT NULL,
                created_ms {bigint} NOT NULL
            )""",
            """CREATE TABLE IF NOT EXISTS matches (
                match_id TEXT PRIMARY KEY,
                meta TEXT NOT NULL,
                finished INTEGER NOT NULL DEFAULT 0,
                created_ms {bigint} NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS matches_unfinished ON matches(finished)"
            " WHERE finished = 0",
            # Rows are appended in commit order and only the small (match_id, seq) index takes
            # the random inserts (on SQLite a clustered WITHOUT ROWID table cost 1.6-2.4x the
            # writer's CPU per row). The unique pair also refuses a second writer's fork.
            """CREATE TABLE IF NOT EXISTS events (
                match_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                body TEXT NOT NULL,
                UNIQUE (match_id, seq)
            )""",
            """CREATE TABLE IF NOT EXISTS stats (
                player TEXT {nocase} PRIMARY KEY,
                games INTEGER NOT NULL DEFAULT 0,
                wins INTEGER NOT NULL DEFAULT 0,
                draws INTEGER NOT NULL DEFAULT 0,
                losses INTEGER NOT NULL DEFAULT 0,
                solved INTEGER NOT NULL DEFAULT 0,
                solved_guesses {bigint} NOT NULL DEFAULT 0,
                time_ms {bigint} NOT NULL DEFAULT 0
            )""",
        ),
    ),
    Migration(
        2,
        "cluster nodes and match ownership (leases with epochs)",
        (
            # One row per node name: its epoch (bumped each time a process starts under the
            # name, so a restarted node never inherits its previous incarnation's matches) and
            # when its lease ends, in ms of the database's clock (nodes' clocks never matter).
            """CREATE TABLE IF NOT EXISTS nodes (
                name TEXT PRIMARY KEY,
                epoch {bigint} NOT NULL,
                expires_ms {bigint} NOT NULL
            )""",
            # The owner of each match: the only (node, epoch) allowed to append to its log.
            """CREATE TABLE IF NOT EXISTS owners (
                match_id TEXT PRIMARY KEY,
                node TEXT NOT NULL,
                epoch {bigint} NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS owners_node ON owners(node, epoch)",
        ),
    ),
    Migration(
        3,
        "accounts (passwords, a token per device) and the results index of finished matches",
        (
            # Argon2id hash of the name's password (server/accounts.py); NULL until one is set.
            AddColumn("players", "password_hash", "TEXT"),
            # Every device signed in to a name has its own token (only its SHA-256 is kept).
            """CREATE TABLE IF NOT EXISTS tokens (
                token_hash TEXT PRIMARY KEY,
                name TEXT {nocase} NOT NULL,
                created_ms {bigint} NOT NULL
            )""",
            # Insertion order breaks ties between tokens made in the same millisecond (which
            # ones are the newest ``keep``): SQLite has its rowid, PostgreSQL gets an identity.
            Only(
                "postgresql",
                "ALTER TABLE tokens ADD COLUMN IF NOT EXISTS seq BIGINT"
                " GENERATED ALWAYS AS IDENTITY",
            ),
            "CREATE INDEX IF NOT EXISTS tokens_by_name ON tokens(name, created_ms)",
            # A player's one token from before moves to ``tokens``, so it keeps working;
            # ``players.token_hash`` stays (NULL) rather than rebuilding the table.
            "INSERT INTO tokens(token_hash, name, created_ms)"
            " SELECT token_hash, name, created_ms FROM players WHERE token_hash IS NOT NULL"
            " ON CONFLICT DO NOTHING",
            "UPDATE players SET token_hash = NULL WHERE token_hash IS NOT NULL",
            # History: one row per seat of every finished match, written in the transaction
            # that marks the match finished, keyed so a page of a player's history is one
            # index range scan.
            """CREATE TABLE IF NOT EXISTS results (
                player TEXT {nocase} NOT NULL,
                ended_ms {bigint} NOT NULL,
                match_id TEXT NOT NULL,
                seat INTEGER NOT NULL,
                guesses INTEGER NOT NULL,
                solved INTEGER NOT NULL,
                summary TEXT NOT NULL,
                PRIMARY KEY (player, ended_ms, match_id, seat)
            ){without_rowid}""",
        ),
        Backfill(_backfill_results_sqlite, _backfill_results_pg),
    ),
    Migration(
        4,
        "one-round-trip group commit function (PostgreSQL)",
        (
            # The PostgreSQL store's whole group commit in one call, so a batch costs one round
            # trip (one implicit transaction) instead of four or five: under load each round
            # trip waits for a turn of the server's busy event loop. With a fence (cluster
            # node), matches this node does not own in this epoch under a live lease are
            # returned and nothing is written; the caller calls again without them.
            Only(
                "postgresql",
                """CREATE OR REPLACE FUNCTION moo_commit(
                    fence_node TEXT, fence_epoch BIGINT,
                    new_ids TEXT[], new_metas TEXT[], new_created BIGINT[],
                    ev_ids TEXT[], ev_seqs INTEGER[], ev_bodies TEXT[],
                    done_ids TEXT[],
                    st_players TEXT[], st_wins INTEGER[], st_draws INTEGER[],
                    st_losses INTEGER[], st_solved INTEGER[], st_guesses BIGINT[],
                    st_time BIGINT[]
                ) RETURNS TEXT[] LANGUAGE plpgsql AS $moo$
                DECLARE
                    lost TEXT[];
                    i INTEGER;
                BEGIN
                    IF fence_node IS NOT NULL THEN
                        INSERT INTO owners(match_id, node, epoch)
                            SELECT unnest(new_ids), fence_node, fence_epoch
                            ON CONFLICT (match_id) DO NOTHING;
                        PERFORM 1 FROM owners o
                            WHERE o.match_id = ANY(ev_ids || new_ids || done_ids)
                            AND o.node = fence_node AND o.epoch = fence_epoch
                            FOR SHARE;
                        SELECT coalesce(array_agg(ids.m), ARRAY[]::TEXT[]) INTO lost
                            FROM (SELECT DISTINCT unnest(ev_ids || new_ids || done_ids) AS m) ids
                            WHERE NOT EXISTS (
                                SELECT 1 FROM owners o JOIN nodes n
                                    ON n.name = o.node AND n.epoch = o.epoch
                                WHERE o.match_id = ids.m AND o.node = fence_node
                                AND o.epoch = fence_epoch
                                AND n.expires_ms >
                                    CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT));
                        IF cardinality(lost) > 0 THEN
                            RETURN lost;
                        END IF;
                    END IF;
                    INSERT INTO matches(match_id, meta, created_ms)
                        SELECT * FROM unnest(new_ids, new_metas, new_created);
                    INSERT INTO events(match_id, seq, body)
                        SELECT * FROM unnest(ev_ids, ev_seqs, ev_bodies);
                    UPDATE matches SET finished = 1 WHERE match_id = ANY(done_ids);
                    FOR i IN 1 .. coalesce(cardinality(st_players), 0) LOOP
                        INSERT INTO stats AS s (player, games, wins, draws, losses, solved,
                                                solved_guesses, time_ms)
                        VALUES (st_players[i], 1, st_wins[i], st_draws[i], st_losses[i],
                                st_solved[i], st_guesses[i], st_time[i])
                        ON CONFLICT (player) DO UPDATE SET games = s.games + 1,
                            wins = s.wins + EXCLUDED.wins, draws = s.draws + EXCLUDED.draws,
                            losses = s.losses + EXCLUDED.losses,
                            solved = s.solved + EXCLUDED.solved,
                            solved_guesses = s.solved_guesses + EXCLUDED.solved_guesses,
                            time_ms = s.time_ms + EXCLUDED.time_ms;
                    END LOOP;
                    RETURN ARRAY[]::TEXT[];
                END
                $moo$""",
            ),
        ),
    ),
    Migration(
        5,
        "player ratings per variant family, shared by a cluster's nodes",
        (
            # One row per (variant family, player): "" is classic 4-of-10 MOO, else the rules'
            # canonical spec (server/ratings.py variant_of). A PostgreSQL arena updates it in
            # the transaction that finishes a rated match (server/ratings_pg.py) and every node
            # reads its leaderboard here. A single node on SQLite keeps its ratings in memory
            # and in the ratings file beside the database, as before: there the table stays
            # empty (one schema for both, like nodes and owners).
            """CREATE TABLE IF NOT EXISTS player_ratings (
                variant TEXT NOT NULL,
                name TEXT {nocase} NOT NULL,
                mu DOUBLE PRECISION NOT NULL,
                sigma DOUBLE PRECISION NOT NULL,
                games INTEGER NOT NULL,
                wins INTEGER NOT NULL,
                draws INTEGER NOT NULL,
                losses INTEGER NOT NULL,
                solved INTEGER NOT NULL,
                guesses {bigint} NOT NULL,
                time_ms {bigint} NOT NULL,
                PRIMARY KEY (variant, name)
            ){without_rowid}""",
        ),
    ),
    Migration(
        6,
        "failed sign-in budgets shared by a cluster's nodes",
        (
            # One row per budget key ("name:<casefolded name>", "addr:<address or /64>"): the
            # level a continuous drain leaves (server/accounts.py SharedFailureBudget), so a
            # name's limit holds across every node of a cluster instead of per node. A single
            # node on SQLite keeps its budgets in memory: there the table stays empty.
            """CREATE TABLE IF NOT EXISTS signin_failures (
                key TEXT PRIMARY KEY,
                level DOUBLE PRECISION NOT NULL,
                stamp_ms {bigint} NOT NULL
            ){without_rowid}""",
        ),
    ),
    Migration(
        7,
        "hosted tournaments (server/tournaments.py)",
        (
            # One row per tournament: its whole state (moo/tourney.py Tournament.to_dict) as
            # JSON, rewritten after every change by the node that runs the tournaments (one
            # node; a cluster's lobby leader), and read back when a server starts or a new
            # leader takes over. ``status`` and ``updated_ms`` only serve the listing;
            # ``version`` counts the writes: each write names the version it replaces, so a
            # node that no longer leads (and has not heard yet) cannot overwrite its successor.
            """CREATE TABLE IF NOT EXISTS tournaments (
                tournament_id TEXT PRIMARY KEY,
                status TEXT NOT NULL,
                data TEXT NOT NULL,
                updated_ms {bigint} NOT NULL,
                version {bigint} NOT NULL
            ){without_rowid}""",
        ),
    ),
    Migration(
        8,
        "hosted bots and the ladder (server/ladder.py)",
        (
            # A hosted bot: its player name (registered in ``players`` as a program), its
            # owner, its ladder (the variant family as a rules spec, and the rules object as
            # JSON), where it stands, the version that plays and the one being checked, and
            # its exact evaluation (JSON). docs/protocol.md, "Ladder".
            """CREATE TABLE IF NOT EXISTS ladder_bots (
                bot_id TEXT PRIMARY KEY,
                name TEXT NOT NULL {nocase} UNIQUE,
                owner TEXT NOT NULL {nocase},
                family TEXT NOT NULL,
                rules TEXT NOT NULL,
                status TEXT NOT NULL,
                reason TEXT NOT NULL,
                version INTEGER,
                checking INTEGER,
                created_ms {bigint} NOT NULL,
                exact TEXT NOT NULL
            ){without_rowid}""",
            # Every version of a bot: the program (base64 text: the same in both engines), its
            # SHA-256 and the compliance check's verdict.
            """CREATE TABLE IF NOT EXISTS ladder_versions (
                bot_id TEXT NOT NULL,
                version INTEGER NOT NULL,
                sha256 TEXT NOT NULL,
                size INTEGER NOT NULL,
                program TEXT NOT NULL,
                submitted_ms {bigint} NOT NULL,
                verdict TEXT NOT NULL,
                reason TEXT NOT NULL,
                PRIMARY KEY (bot_id, version)
            ){without_rowid}""",
            # One row per ladder game (the match itself is an ordinary match): the two bots in
            # seat order with the versions that play, the pairing it belongs to, its end, and
            # what each program's failure and standard error were (for its author); ``void``:
            # 1 when its play job was lost with its worker before it ended (it counts for
            # nobody).
            """CREATE TABLE IF NOT EXISTS ladder_games (
                match_id TEXT PRIMARY KEY,
                family TEXT NOT NULL,
                pairing TEXT NOT NULL,
                bot0 TEXT NOT NULL,
                bot1 TEXT NOT NULL,
                version0 INTEGER NOT NULL,
                version1 INTEGER NOT NULL,
                created_ms {bigint} NOT NULL,
                ended_ms {bigint},
                winner INTEGER,
                reason TEXT,
                failure0 TEXT NOT NULL,
                failure1 TEXT NOT NULL,
                stderr0 TEXT NOT NULL,
                stderr1 TEXT NOT NULL,
                void INTEGER NOT NULL
            ){without_rowid}""",
            "CREATE INDEX IF NOT EXISTS ladder_games_bot0 ON ladder_games(bot0, created_ms)",
            "CREATE INDEX IF NOT EXISTS ladder_games_bot1 ON ladder_games(bot1, created_ms)",
            # The bot workers' work: queued, claimed by one worker until ``lease_until`` (ms),
            # then done, or lost (a play job whose worker went away). ``payload`` is JSON.
            """CREATE TABLE IF NOT EXISTS ladder_jobs (
                job_id TEXT PRIMARY KEY,
                kind TEXT NOT NULL,
                payload TEXT NOT NULL,
                state TEXT NOT NULL,
                worker TEXT,
                lease_until {bigint},
                created_ms {bigint} NOT NULL
            ){without_rowid}""",
            "CREATE INDEX IF NOT EXISTS ladder_jobs_state ON ladder_jobs(state, created_ms)",
            # A bot's rating after each of its pairings (the page's chart).
            """CREATE TABLE IF NOT EXISTS ladder_history (
                bot_id TEXT NOT NULL,
                games INTEGER NOT NULL,
                at_ms {bigint} NOT NULL,
                rating DOUBLE PRECISION NOT NULL,
                low DOUBLE PRECISION,
                high DOUBLE PRECISION,
                PRIMARY KEY (bot_id, games)
            ){without_rowid}""",
        ),
    ),
    Migration(
        9,
        "one-round-trip finishing commit function (PostgreSQL)",
        (
            # A commit that finishes matches also writes their ``results`` rows and ratings.
            # As separate statements in one transaction that was seven round trips, over 5 s on
            # a slow link to the database, and every player of the match waited that long for
            # its end (the fault harness's ``slow-db`` stalls). ``moo_finish`` does it in one
            # call: ``moo_commit``, then the results rows (a refused one is left out, with the
            # reason in ``skipped``, never failing the finish), then the ratings. The caller
            # computed those from the rows as it read them a moment before, so they are
            # written only if every row is still as read (``rt_seen_*``); if one is not,
            # the function raises serialization_failure (40001) and nothing is written: the
            # caller then rates the matches under the rows' locks (server/storage_pg.py). A
            # deadlock is raised too (the caller runs the call again); any other failure of a
            # part leaves that part out and says why in ``skipped``.
            Only(
                "postgresql",
                """CREATE OR REPLACE FUNCTION moo_finish(
                    fence_node TEXT, fence_epoch BIGINT,
                    new_ids TEXT[], new_metas TEXT[], new_created BIGINT[],
                    ev_ids TEXT[], ev_seqs INTEGER[], ev_bodies TEXT[],
                    done_ids TEXT[],
                    st_players TEXT[], st_wins INTEGER[], st_draws INTEGER[],
                    st_losses INTEGER[], st_solved INTEGER[], st_guesses BIGINT[],
                    st_time BIGINT[],
                    rs_players TEXT[], rs_ended BIGINT[], rs_ids TEXT[], rs_seats INTEGER[],
                    rs_guesses INTEGER[], rs_solved INTEGER[], rs_summaries TEXT[],
                    rt_variants TEXT[], rt_names TEXT[],
                    rt_seen_mu FLOAT8[], rt_seen_sigma FLOAT8[], rt_seen_games INTEGER[],
                    rt_mu FLOAT8[], rt_sigma FLOAT8[], rt_games INTEGER[], rt_wins INTEGER[],
                    rt_draws INTEGER[], rt_losses INTEGER[], rt_solved INTEGER[],
                    rt_guesses BIGINT[], rt_time BIGINT[],
                    OUT lost TEXT[], OUT skipped TEXT
                ) LANGUAGE plpgsql AS $moo$
                DECLARE
                    changed INTEGER;
                BEGIN
                    skipped := NULL;
                    lost := moo_commit(fence_node, fence_epoch, new_ids, new_metas,
                                       new_created, ev_ids, ev_seqs, ev_bodies, done_ids,
                                       st_players, st_wins, st_draws, st_losses, st_solved,
                                       st_guesses, st_time);
                    IF cardinality(lost) > 0 THEN
                        RETURN;
                    END IF;
                    BEGIN
                        INSERT INTO results(player, ended_ms, match_id, seat, guesses, solved,
                                            summary)
                            SELECT * FROM unnest(rs_players, rs_ended, rs_ids, rs_seats,
                                                 rs_guesses, rs_solved, rs_summaries)
                            ON CONFLICT (player, ended_ms, match_id, seat) DO UPDATE SET
                                guesses = excluded.guesses, solved = excluded.solved,
                                summary = excluded.summary;
                    EXCEPTION
                        WHEN transaction_rollback THEN
                            RAISE;  -- a deadlock: the caller runs the call again
                        WHEN OTHERS THEN
                            skipped := 'results: ' || SQLERRM;
                    END;
                    IF coalesce(cardinality(rt_names), 0) = 0 THEN
                        RETURN;
                    END IF;
                    BEGIN
                        -- the rows as read (a missing one was read as fresh), locked in the
                        -- caller's order: the one lock order of every node
                        INSERT INTO player_ratings AS r (variant, name, mu, sigma, games, wins,
                                draws, losses, solved, guesses, time_ms)
                            SELECT v, n, mu, sigma, 0, 0, 0, 0, 0, 0, 0
                            FROM unnest(rt_variants, rt_names, rt_seen_mu, rt_seen_sigma)
                                WITH ORDINALITY AS t(v, n, mu, sigma, i) ORDER BY i
                            ON CONFLICT (variant, name) DO UPDATE SET mu = r.mu;
                        SELECT count(*) INTO changed FROM player_ratings r
                            JOIN unnest(rt_variants, rt_names, rt_seen_mu, rt_seen_sigma,
                                        rt_seen_games) AS t(v, n, mu, sigma, games)
                            ON r.variant = t.v AND r.name = t.n
                            WHERE (r.mu, r.sigma, r.games)
                                IS DISTINCT FROM (t.mu, t.sigma, t.games);
                        IF changed > 0 THEN
                            RAISE EXCEPTION 'moo_finish: % ratings changed since they were read',
                                changed USING ERRCODE = 'serialization_failure';
                        END IF;
                        UPDATE player_ratings r SET mu = t.mu, sigma = t.sigma,
                                games = t.games, wins = t.wins, draws = t.draws,
                                losses = t.losses, solved = t.solved, guesses = t.guesses,
                                time_ms = t.time_ms
                            FROM unnest(rt_variants, rt_names, rt_mu, rt_sigma, rt_games,
                                        rt_wins, rt_draws, rt_losses, rt_solved, rt_guesses,
                                        rt_time)
                                AS t(v, n, mu, sigma, games, wins, draws, losses, solved,
                                     guesses, time_ms)
                            WHERE r.variant = t.v AND r.name = t.n;
                    EXCEPTION
                        WHEN transaction_rollback THEN
                            RAISE;
                        WHEN OTHERS THEN
                            skipped := concat_ws('; ', skipped, 'ratings: ' || SQLERRM);
                    END;
                END
                $moo$""",
            ),
        ),
    ),
)

#: the version a database has once every migration here is applied
LATEST = MIGRATIONS[-1].version

#: the key of the PostgreSQL advisory lock held while migrating ("moo_sch" in ASCII)
PG_LOCK_KEY = 0x6D6F6F5F736368

_VERSION_TABLE = """CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_ms {bigint} NOT NULL
)"""


def _render_one(dialect: Dialect, stmt: str | Only | AddColumn) -> str | None:
    if isinstance(stmt, AddColumn):
        guard = " IF NOT EXISTS" if dialect == "postgresql" else ""
        return f"ALTER TABLE {stmt.table} ADD COLUMN{guard} {stmt.column} {stmt.decl}"
    if isinstance(stmt, Only):
        if stmt.dialect != dialect:
            return None
        stmt = stmt.sql
    return stmt.format(**WORDS[dialect])


def render(dialect: Dialect, migration: Migration) -> list[str]:
    """The statements of ``migration`` as ``dialect`` runs them, in order.

    (On SQLite an :class:`AddColumn` whose column exists is skipped when applied.)
    """
    out = []
    for stmt in migration.statements:
        sql = _render_one(dialect, stmt)
        if sql is not None:
            out.append(sql)
    return out


def _sqlite_has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))


def _pending(current: int, where: str) -> list[Migration]:
    if current > LATEST:
        raise SchemaError(
            f"{where} has schema version {current}, newer than this server knows ({LATEST});"
            " upgrade the server"
        )
    return [m for m in MIGRATIONS if m.version > current]


def upgrade_sqlite(conn: sqlite3.Connection, where: str = "the database") -> tuple[int, list[int]]:
    """Bring a SQLite database (autocommit connection) up to :data:`LATEST`.

    Returns the version found and the versions applied. One ``BEGIN IMMEDIATE`` transaction
    takes the write lock before the version is read, so a second process waits and then finds
    nothing to do; SQLite's DDL is transactional, so a failed migration leaves no half.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_VERSION_TABLE.format(**WORDS["sqlite"]))
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        current = int(row[0] or 0)
        applied = []
        for migration in _pending(current, where):
            for stmt in migration.statements:
                if isinstance(stmt, AddColumn) and _sqlite_has_column(
                    conn, stmt.table, stmt.column
                ):
                    continue
                sql = _render_one("sqlite", stmt)
                if sql is not None:
                    conn.execute(sql)
            if migration.backfill is not None:
                migration.backfill.sqlite(conn)
            conn.execute(
                "INSERT INTO schema_version(version, description, applied_ms) VALUES (?, ?, ?)",
                (migration.version, migration.description, int(time.time() * 1000)),
            )
            applied.append(migration.version)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return current, applied


async def upgrade_postgres(conn: Any, where: str = "the database") -> tuple[int, list[int]]:
    """Bring a PostgreSQL database (an asyncpg connection) up to :data:`LATEST`.

    A session-level advisory lock serialises every node that starts at once; the migrations
    then run in one transaction, so a failure leaves the previous version intact.
    """
    await conn.execute("SELECT pg_advisory_lock($1)", PG_LOCK_KEY)
    try:
        async with conn.transaction():
            await conn.execute(_VERSION_TABLE.format(**WORDS["postgresql"]))
            current = int(
                await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_version")
            )
            applied = []
            for migration in _pending(current, where):
                for sql in render("postgresql", migration):
                    await conn.execute(sql)
                if migration.backfill is not None:
                    await migration.backfill.postgresql(conn)
                await conn.execute(
                    "INSERT INTO schema_version(version, description, applied_ms)"
                    " VALUES ($1, $2, $3)",
                    migration.version,
                    migration.description,
                    int(time.time() * 1000),
                )
                applied.append(migration.version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", PG_LOCK_KEY)
    return current, applied
