"""Every statement the stores run, written once: the SQLite and PostgreSQL dialects differ here.

A single node keeps its data in SQLite (server/storage_sqlite.py), a cluster in PostgreSQL
(server/storage_pg.py), and both must answer every question the same way. So each statement is
written once, as a :class:`Query`, in the SQL the two engines share, and rendered for both
when this module is imported (nothing is rendered per call). What the two spell differently is
said in one table, :data:`WORDS`, that the schema's migrations (server/schema.py) use too:

``?``
    a parameter; PostgreSQL's are numbered (``$1``, ``$2``, ...) in the order they appear, so a
    value used twice is passed twice.
``{in_texts}``
    ``column {in_texts}`` is true when the column equals one of a list of strings passed as one
    parameter: PostgreSQL reads a ``text[]``, SQLite the list as JSON text (its driver encodes
    lists), so a query takes any number of ids without a statement per length.
``{insert_order}``
    what orders rows by insertion: SQLite's ``rowid``, the identity column ``seq`` that
    PostgreSQL's ``tokens`` has instead (schema migration 3).
``{classic}``
    a ``results`` row whose match counts against the minimum strategy: the SQL form of
    ``moo.variants.against_minimum`` over the row's ``summary.config`` (SQLite's JSON functions,
    PostgreSQL's ``jsonb``).
``{skip_locked}``
    a job claim's row lock: PostgreSQL's ``FOR UPDATE SKIP LOCKED`` (several workers, through
    several nodes, each take a different job without waiting for each other); nothing on
    SQLite, whose one writer runs one claim at a time anyway.
``{bytewise}``
    the collation that orders names by code point (as Python sorts strings).
``{bigint}``, ``{nocase}``, ``{without_rowid}``
    words of the schema's table definitions (server/schema.py says what they are).

Both drivers run a :class:`Query` through :class:`server.storage.Db`; a statement that only
one engine can run (PostgreSQL's group commit function, its ratings arrays, SQLite's ratings
file) is still here, and says which engine runs it.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["WORDS", "Dialect", "Query", "render"]

Dialect = Literal["sqlite", "postgresql"]

#: ``results`` rows count against the minimum strategy when their config has these values
#: (an absent field is the classic default): see ``{classic}``
_CLASSIC_FIELDS = (
    ("assist", "false"),
    ("rules.game", "'moo'"),
    ("rules.length", "4"),
    ("rules.alphabet", "'0123456789'"),
    ("rules.repeats_in_guess", "false"),
)

WORDS: dict[Dialect, dict[str, str]] = {
    "sqlite": {
        "bigint": "INTEGER",
        "nocase": "COLLATE NOCASE",
        "without_rowid": " WITHOUT ROWID",
        "in_texts": "IN (SELECT value FROM json_each(?))",
        "insert_order": "rowid",
        "skip_locked": "",
        "bytewise": "BINARY",
        "classic": " AND ".join(
            f"COALESCE(json_extract(summary, '$.config.{path}'), {value.replace('false', '0')})"
            f" = {value.replace('false', '0')}"
            for path, value in _CLASSIC_FIELDS
        ),
    },
    "postgresql": {
        "bigint": "BIGINT",
        "nocase": 'COLLATE "moo_nocase"',
        "without_rowid": "",
        "in_texts": "= ANY(?::text[])",
        "insert_order": "seq",
        "skip_locked": " FOR UPDATE SKIP LOCKED",
        "bytewise": '"C"',
        "classic": " AND ".join(
            "COALESCE(summary::jsonb #>> '{config," + path.replace(".", ",") + "}', '"
            + value.strip("'") + "') = '" + value.strip("'") + "'"
            for path, value in _CLASSIC_FIELDS
        ),
    },
}


def render(text: str, dialect: Dialect) -> str:
    """``text`` as ``dialect`` runs it: its words filled in, then (PostgreSQL) ``?`` numbered."""
    sql = text.format(**WORDS[dialect])
    if dialect == "postgresql":
        head, *rest = sql.split("?")
        sql = head + "".join(f"${n}{part}" for n, part in enumerate(rest, 1))
    return sql


class Query:
    """One statement in both dialects, rendered once.

    ``only`` names the one engine that runs a statement the other has no use for (the test of
    this module prepares every statement on each engine that runs it).
    """

    __slots__ = ("engines", "postgresql", "sqlite")

    def __init__(self, text: str, only: Dialect | None = None) -> None:
        self.sqlite = render(text, "sqlite")
        self.postgresql = render(text, "postgresql")
        self.engines: tuple[Dialect, ...] = (only,) if only else ("sqlite", "postgresql")

    def __repr__(self) -> str:
        return f"Query({self.sqlite!r})"


# -- matches and their event logs ----------------------------------------------------------------
#: SQLite's group commit writes these (PostgreSQL's does the same inside ``moo_commit``)
INSERT_MATCH = Query("INSERT INTO matches(match_id, meta, created_ms) VALUES (?, ?, ?)")
#: the event rows of a batch go in as multi-row INSERTs of these fixed sizes (SQLite; see
#: server/storage_sqlite.py): a handful of prepared statements, whatever the batch
EVENT_CHUNKS = (256, 64, 16, 4, 1)
INSERT_EVENTS = {
    n: Query("INSERT INTO events(match_id, seq, body) VALUES " + ",".join(["(?,?,?)"] * n))
    for n in EVENT_CHUNKS
}
FINISH_MATCH = Query("UPDATE matches SET finished = 1 WHERE match_id = ?")
#: one player's part in a finished match: player, then :meth:`StatDelta.counts`
ADD_STATS = Query(
    "INSERT INTO stats AS s (player, games, wins, draws, losses, solved, solved_guesses,"
    " time_ms) VALUES (?, 1, ?, ?, ?, ?, ?, ?) ON CONFLICT (player) DO UPDATE SET"
    " games = s.games + 1, wins = s.wins + excluded.wins, draws = s.draws + excluded.draws,"
    " losses = s.losses + excluded.losses, solved = s.solved + excluded.solved,"
    " solved_guesses = s.solved_guesses + excluded.solved_guesses,"
    " time_ms = s.time_ms + excluded.time_ms"
)
#: PostgreSQL's whole group commit in one round trip (schema migration 4): the fence, then
#: the batch's matches, events, finishes and statistics as arrays
COMMIT_BATCH = Query("SELECT moo_commit(" + ", ".join(["?"] * 16) + ")", only="postgresql")
#: ``moo_commit``'s 16 arguments, the ``results`` rows (7 arrays) and the ratings as read and as
#: rated (14 arrays): one finishing commit in one call (server/schema.py, migration 9)
FINISH_BATCH = Query(
    "SELECT lost, skipped FROM moo_finish(" + ", ".join(["?"] * 37) + ")", only="postgresql"
)

UNFINISHED = Query("SELECT match_id, meta FROM matches WHERE finished = 0 ORDER BY created_ms")
UNFINISHED_AMONG = Query(
    "SELECT match_id, meta FROM matches WHERE finished = 0 AND match_id {in_texts}"
    " ORDER BY created_ms"
)
EVENTS_OF = Query(
    "SELECT match_id, body FROM events WHERE match_id {in_texts} ORDER BY match_id, seq"
)
MATCH_META = Query("SELECT meta FROM matches WHERE match_id = ?")
EVENTS_OF_MATCH = Query("SELECT body FROM events WHERE match_id = ? ORDER BY seq")
#: one row with a NULL body for a match with no event after ``seq``; none for no such match
EVENTS_AFTER = Query(
    "SELECT e.body FROM matches m LEFT JOIN events e ON e.match_id = m.match_id AND e.seq > ?"
    " WHERE m.match_id = ? ORDER BY e.seq"
)

# -- the results index of finished matches (history) ---------------------------------------------
#: meta and event 1 of the matches a commit finishes (the rest of their ``results`` rows)
MATCH_HEADS = Query(
    "SELECT m.match_id, m.meta, e.body FROM matches m"
    " LEFT JOIN events e ON e.match_id = m.match_id AND e.seq = 1"
    " WHERE m.match_id {in_texts}"
)
#: every finished match with its meta, first and last event (the backfill of migration 3)
FINISHED_MATCH_ENDS = Query(
    "SELECT m.match_id, m.meta,"
    " (SELECT body FROM events WHERE match_id = m.match_id AND seq = 1) AS first_body,"
    " (SELECT body FROM events WHERE match_id = m.match_id ORDER BY seq DESC LIMIT 1)"
    " AS last_body FROM matches m WHERE m.finished = 1"
)
#: write (or rewrite) one ``server.schema.ResultRow``
RESULTS_UPSERT = Query(
    "INSERT INTO results(player, ended_ms, match_id, seat, guesses, solved, summary)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (player, ended_ms, match_id, seat) DO UPDATE SET"
    " guesses = excluded.guesses, solved = excluded.solved, summary = excluded.summary"
)
_HISTORY = "SELECT match_id, seat, ended_ms, summary FROM results WHERE player = ?"
_NEWEST_FIRST = " ORDER BY ended_ms DESC, match_id DESC, seat DESC LIMIT ?"
#: a page of a player's history: one backward range scan of the primary key, no sort
HISTORY = Query(_HISTORY + _NEWEST_FIRST)
HISTORY_BEFORE = Query(_HISTORY + " AND (ended_ms, match_id, seat) < (?, ?, ?)" + _NEWEST_FIRST)
GUESS_OUTCOMES = Query(
    "SELECT player, guesses, solved, count(*) FROM results"
    " WHERE player {in_texts} AND {classic} GROUP BY player, guesses, solved"
)
RESULT_PLAYER = Query("SELECT player FROM results WHERE player = ? LIMIT 1")

# -- players and accounts -------------------------------------------------------------------------
INSERT_PLAYER = Query("INSERT INTO players(name, bot, created_ms) VALUES (?, ?, ?)")
INSERT_TOKEN = Query("INSERT INTO tokens(token_hash, name, created_ms) VALUES (?, ?, ?)")
DROP_TOKENS = Query("DELETE FROM tokens WHERE name = ?")
#: name, then name and how many to keep: every token of the name but its newest ones goes
KEEP_NEWEST_TOKENS = Query(
    "DELETE FROM tokens WHERE name = ? AND token_hash NOT IN (SELECT token_hash FROM tokens"
    " WHERE name = ? ORDER BY created_ms DESC, {insert_order} DESC LIMIT ?)"
)
ACCOUNT = Query("SELECT name, bot, password_hash FROM players WHERE name = ?")
PLAYER_NAME = Query("SELECT name FROM players WHERE name = ?")
PLAYER_BY_TOKEN = Query(
    "SELECT p.name, p.bot, p.created_ms, p.password_hash IS NOT NULL FROM tokens t"
    " JOIN players p ON p.name = t.name WHERE t.token_hash = ?"
)
SET_PASSWORD_HASH = Query("UPDATE players SET password_hash = ? WHERE name = ?")

#: failed sign-in budgets a cluster's nodes share (PostgreSQL; a single node keeps them in
#: memory): key, now, rate
FAILURE_LEVEL = Query(
    "SELECT GREATEST(0.0, level - GREATEST(0, ? - stamp_ms) / 1000.0 * ?)"
    " FROM signin_failures WHERE key = ?",
    only="postgresql",
)
#: key, now, now, rate, now: drained first in the same statement, so two nodes counting at
#: once both count
ADD_FAILURE = Query(
    "INSERT INTO signin_failures AS f (key, level, stamp_ms) VALUES (?, 1.0, ?)"
    " ON CONFLICT (key) DO UPDATE SET level = GREATEST(0.0, f.level"
    " - GREATEST(0, ? - f.stamp_ms) / 1000.0 * ?) + 1.0, stamp_ms = GREATEST(f.stamp_ms, ?)",
    only="postgresql",
)
FORGET_FAILURES = Query("DELETE FROM signin_failures WHERE stamp_ms < ?", only="postgresql")

# -- statistics and the leaderboard of the stats table --------------------------------------------
#: the ``stats`` columns ``server.storage.PlayerStats.from_row`` reads, in its order
STATS_COLUMNS = "player, games, wins, draws, losses, solved, solved_guesses, time_ms"
PLAYER_STATS = Query(f"SELECT {STATS_COLUMNS} FROM stats WHERE player = ?")
#: rating: the smoothed score share (a win 1, a draw 1/2; two virtual draws so one lucky game
#: does not top the board), in points out of 1000; averages as floating point in both engines
_STATS_BOARD = (
    "SELECT * FROM (SELECT player, games, wins, draws, losses,"
    " CAST(round(1000.0 * (wins + 0.5 * draws + 1) / (games + 2)) AS INTEGER) AS rating,"
    " CASE WHEN solved > 0 THEN CAST(solved_guesses AS DOUBLE PRECISION) / solved END"
    " AS avg_guesses,"
    " CASE WHEN games > 0 THEN CAST(time_ms AS DOUBLE PRECISION) / 1000.0 / games END"
    " AS avg_time_s FROM stats) AS board ORDER BY "
)
STATS_BOARD = {
    "rating": Query(_STATS_BOARD + "rating DESC, games DESC, player LIMIT ?"),
    "average": Query(
        _STATS_BOARD + "avg_guesses IS NULL, avg_guesses ASC, games DESC, player LIMIT ?"
    ),
}

# -- ratings ---------------------------------------------------------------------------------------
#: a rating row: ``server.ratings.PlayerRating``'s fields in order
RATING_COLUMNS = "name, mu, sigma, games, wins, draws, losses, solved, guesses, time_ms"
_RATING_DECL = (
    "mu REAL NOT NULL, sigma REAL NOT NULL,"
    " games INTEGER NOT NULL, wins INTEGER NOT NULL, draws INTEGER NOT NULL,"
    " losses INTEGER NOT NULL, solved INTEGER NOT NULL, guesses INTEGER NOT NULL,"
    " time_ms INTEGER NOT NULL"
)
#: a single node's ratings file (SQLite, server/ratings.py): classic, then the other families
RATINGS_FILE_TABLES = (
    Query(f"CREATE TABLE IF NOT EXISTS ratings (name TEXT PRIMARY KEY, {_RATING_DECL})",
          only="sqlite"),
    Query(
        "CREATE TABLE IF NOT EXISTS variant_ratings (variant TEXT NOT NULL, name TEXT NOT NULL,"
        f" {_RATING_DECL}, PRIMARY KEY (variant, name))",
        only="sqlite",
    ),
)
RATINGS_FILE_LOAD = Query(f"SELECT {RATING_COLUMNS} FROM ratings", only="sqlite")
VARIANT_RATINGS_FILE_LOAD = Query(
    f"SELECT variant, {RATING_COLUMNS} FROM variant_ratings", only="sqlite"
)
RATINGS_FILE_SAVE = Query(
    f"INSERT OR REPLACE INTO ratings ({RATING_COLUMNS}) VALUES ({', '.join(['?'] * 10)})",
    only="sqlite",
)
VARIANT_RATINGS_FILE_SAVE = Query(
    f"INSERT OR REPLACE INTO variant_ratings (variant, {RATING_COLUMNS}) VALUES"
    f" ({', '.join(['?'] * 11)})",
    only="sqlite",
)
#: a cluster's ``player_ratings`` rows (PostgreSQL, server/ratings_pg.py). Creates the missing
#: rows of (variants, names, fresh mu, fresh sigma) and locks them all, in the given order
HOLD_RATINGS = Query(
    f"INSERT INTO player_ratings AS r (variant, {RATING_COLUMNS})"
    " SELECT v, n, ?, ?, 0, 0, 0, 0, 0, 0, 0"
    " FROM unnest(?::text[], ?::text[]) WITH ORDINALITY AS t(v, n, i) ORDER BY i"
    f" ON CONFLICT (variant, name) DO UPDATE SET mu = r.mu RETURNING variant, {RATING_COLUMNS}",
    only="postgresql",
)
#: writes back the rows :data:`HOLD_RATINGS` locked: one array per column, variant first
SAVE_RATINGS = Query(
    "UPDATE player_ratings r SET mu = t.mu, sigma = t.sigma, games = t.games,"
    " wins = t.wins, draws = t.draws, losses = t.losses, solved = t.solved,"
    " guesses = t.guesses, time_ms = t.time_ms"
    " FROM unnest(?::text[], ?::text[], ?::float8[], ?::float8[], ?::int[],"
    " ?::int[], ?::int[], ?::int[], ?::int[], ?::bigint[], ?::bigint[])"
    " AS t(v, n, mu, sigma, games, wins, draws, losses, solved, guesses, time_ms)"
    " WHERE r.variant = t.v AND r.name = t.n",
    only="postgresql",
)
#: a family's leaderboard: the order of ``server.ratings.Ratings.leaderboard``
_RATING_BOARD = (
    f"SELECT {RATING_COLUMNS} FROM player_ratings WHERE variant = ? AND games > 0 ORDER BY "
)
RATING_BOARD = {
    "rating": Query(_RATING_BOARD + "mu - 3 * sigma DESC, games DESC, name COLLATE {bytewise}"
                    " LIMIT ?"),
    "average": Query(
        _RATING_BOARD + "solved = 0, CAST(guesses AS DOUBLE PRECISION) / NULLIF(solved, 0),"
        " games DESC, name COLLATE {bytewise} LIMIT ?"
    ),
}
RATING_OF = Query(f"SELECT {RATING_COLUMNS} FROM player_ratings WHERE variant = ? AND name = ?")
#: the rows of (variants, names) that exist, unlocked: a finish rates from them and ``moo_finish``
#: writes the new values only if the rows are still so (server/ratings_pg.py)
RATINGS_OF = Query(
    f"SELECT r.variant, r.{RATING_COLUMNS.replace(', ', ', r.')} FROM player_ratings r"
    " JOIN unnest(?::text[], ?::text[]) AS t(v, n) ON r.variant = t.v AND r.name = t.n",
    only="postgresql",
)

# -- the cluster's directory and leases (server/storage_cluster.py) -------------------------------
#: the database's clock in ms: every lease is judged by it, never by a node's own clock
_NOW = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
#: owner rows whose node holds a live lease in the row's epoch
_LIVE_OWNER = f"JOIN nodes n ON n.name = o.node AND n.epoch = o.epoch AND n.expires_ms > {_NOW}"

OWNER_OF = Query(
    f"SELECT o.node, o.epoch FROM owners o {_LIVE_OWNER} WHERE o.match_id = ?",
    only="postgresql",
)
OWNERS_OF = Query(
    f"SELECT o.match_id, o.node, o.epoch FROM owners o {_LIVE_OWNER}"
    " WHERE o.match_id {in_texts}",
    only="postgresql",
)
MATCH_FINISHED = Query("SELECT finished FROM matches WHERE match_id = ?")
ALIVE_NODES = Query(
    f"SELECT name, epoch FROM nodes WHERE epoch > 0 AND expires_ms > {_NOW}",
    only="postgresql",
)
#: (``jsonb_exists``: the ``?`` operator, which would read as a parameter here)
UNFINISHED_OF_PLAYER = Query(
    "SELECT match_id FROM matches WHERE finished = 0"
    " AND jsonb_exists(meta::jsonb -> 'players', ?)",
    only="postgresql",
)
LIVE_ELSEWHERE = Query(
    f"SELECT o.match_id FROM owners o {_LIVE_OWNER} JOIN matches m ON m.match_id = o.match_id"
    " WHERE m.finished = 0 AND o.node <> ? ORDER BY m.created_ms LIMIT ?",
    only="postgresql",
)
NODE_SESSION = Query(
    "SELECT 1 FROM pg_stat_activity WHERE application_name = ? LIMIT 1", only="postgresql"
)
BEGIN_EPOCH = Query(
    f"INSERT INTO nodes(name, epoch, expires_ms) VALUES (?, 1, {_NOW} + ?)"
    " ON CONFLICT (name) DO UPDATE SET epoch = nodes.epoch + 1,"
    " expires_ms = EXCLUDED.expires_ms RETURNING epoch",
    only="postgresql",
)
RENEW_LEASE = Query(
    f"UPDATE nodes SET expires_ms = {_NOW} + ? WHERE name = ? AND epoch = ? RETURNING epoch",
    only="postgresql",
)
END_LEASE = Query(
    f"UPDATE nodes SET expires_ms = LEAST(expires_ms, {_NOW} - 1) WHERE name = ? AND epoch = ?",
    only="postgresql",
)
OWNED = Query(
    "SELECT match_id FROM owners WHERE match_id {in_texts} AND node = ? AND epoch = ?",
    only="postgresql",
)
OWNED_UNFINISHED = Query(
    "SELECT o.match_id FROM owners o JOIN matches m ON m.match_id = o.match_id"
    " WHERE o.node = ? AND o.epoch = ? AND m.finished = 0",
    only="postgresql",
)
OTHERS_ALIVE = Query(
    f"SELECT 1 FROM nodes WHERE name <> ? AND expires_ms > {_NOW} LIMIT 1", only="postgresql"
)
#: unfinished matches whose owner's lease ran out, or whose owner restarted (a new epoch)
ORPHANS = Query(
    "SELECT o.match_id, o.node, o.epoch FROM owners o JOIN matches m ON m.match_id = o.match_id"
    " LEFT JOIN nodes n ON n.name = o.node"
    " WHERE m.finished = 0 AND NOT (o.node = ? AND o.epoch = ?)"
    f" AND (n.name IS NULL OR n.epoch <> o.epoch OR n.expires_ms < {_NOW}) LIMIT ?",
    only="postgresql",
)
#: exactly one node wins each: the row must still name the orphan's (node, epoch), and that
#: lease must still be out
CLAIM_ORPHANS = Query(
    "UPDATE owners o SET node = ?, epoch = ?"
    " FROM unnest(?::text[], ?::text[], ?::bigint[]) AS c(match_id, node, epoch)"
    " WHERE o.match_id = c.match_id AND o.node = c.node AND o.epoch = c.epoch"
    " AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.name = c.node"
    f" AND n.epoch = c.epoch AND n.expires_ms >= {_NOW})"
    " RETURNING o.match_id",
    only="postgresql",
)
CLAIM_FROM = Query(
    "UPDATE owners o SET node = ?, epoch = ? FROM matches m"
    " WHERE m.match_id = o.match_id AND m.finished = 0 AND o.node = ? AND o.epoch = ?"
    " RETURNING o.match_id",
    only="postgresql",
)

# -- hosted tournaments (server/tournaments.py; schema migration 7) ---------------------------
#: the first write of a tournament; no row back if it exists already
TOURNAMENT_INSERT = Query(
    "INSERT INTO tournaments(tournament_id, status, data, updated_ms, version)"
    " VALUES (?, ?, ?, ?, 1) ON CONFLICT (tournament_id) DO NOTHING RETURNING tournament_id"
)
#: a later write, over the version the writer read or wrote last; no row back if another
#: writer came in between
TOURNAMENT_UPDATE = Query(
    "UPDATE tournaments SET status = ?, data = ?, updated_ms = ?, version = ?"
    " WHERE tournament_id = ? AND version = ? RETURNING tournament_id"
)
#: every tournament not finished, and those finished since the given time (ms)
TOURNAMENTS_LOAD = Query(
    "SELECT data FROM tournaments WHERE status <> 'finished' OR updated_ms >= ?"
    " ORDER BY updated_ms"
)
TOURNAMENT_ONE = Query("SELECT data FROM tournaments WHERE tournament_id = ?")
#: whether a match is finished, and its last event; no row for no such match
MATCH_END = Query(
    "SELECT m.finished, (SELECT e.body FROM events e WHERE e.match_id = m.match_id"
    " ORDER BY e.seq DESC LIMIT 1) FROM matches m WHERE m.match_id = ?"
)


# -- hosted bots and the ladder (server/ladder.py; schema migration 8) --------------------------
LADDER_BOT_COLUMNS = (
    "bot_id, name, owner, family, rules, status, reason, version, checking, created_ms, exact"
)
LADDER_INSERT_BOT = Query(
    f"INSERT INTO ladder_bots({LADDER_BOT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
LADDER_UPDATE_BOT = Query(
    "UPDATE ladder_bots SET status = ?, reason = ?, version = ?, checking = ?, exact = ?"
    " WHERE bot_id = ?"
)
LADDER_BOTS = Query(f"SELECT {LADDER_BOT_COLUMNS} FROM ladder_bots ORDER BY created_ms")
LADDER_INSERT_VERSION = Query(
    "INSERT INTO ladder_versions(bot_id, version, sha256, size, program, submitted_ms,"
    " verdict, reason) VALUES (?, ?, ?, ?, ?, ?, 'checking', '')"
)
LADDER_VERDICT = Query(
    "UPDATE ladder_versions SET verdict = ?, reason = ? WHERE bot_id = ? AND version = ?"
)
LADDER_VERSIONS = Query(
    "SELECT version, sha256, size, submitted_ms, verdict, reason FROM ladder_versions"
    " WHERE bot_id = ? ORDER BY version DESC"
)
LADDER_PROGRAM = Query("SELECT program FROM ladder_versions WHERE bot_id = ? AND version = ?")
LADDER_GAME_COLUMNS = (
    "match_id, family, pairing, bot0, bot1, version0, version1, created_ms, ended_ms, winner,"
    " reason, failure0, failure1, stderr0, stderr1, void"
)
LADDER_INSERT_GAME = Query(
    "INSERT INTO ladder_games(match_id, family, pairing, bot0, bot1, version0, version1,"
    " created_ms, failure0, failure1, stderr0, stderr1, void) VALUES (?, ?, ?, ?, ?, ?, ?, ?,"
    " '', '', '', '', 0)"
)
#: the games of a lost play job that had not ended: void
LADDER_GAMES_VOID = Query(
    "UPDATE ladder_games SET void = 1 WHERE match_id {in_texts} AND ended_ms IS NULL"
    " RETURNING match_id"
)
#: a game's end, once (a finish heard twice changes nothing); a row back the first time
LADDER_GAME_END = Query(
    "UPDATE ladder_games SET ended_ms = ?, winner = ?, reason = ?"
    " WHERE match_id = ? AND ended_ms IS NULL RETURNING match_id"
)
LADDER_GAME_FAILURE = {
    seat: Query(
        f"UPDATE ladder_games SET failure{seat} = ?, stderr{seat} = ? WHERE match_id = ?"
    )
    for seat in (0, 1)
}
LADDER_GAMES = Query(f"SELECT {LADDER_GAME_COLUMNS} FROM ladder_games ORDER BY created_ms")
LADDER_JOB_COLUMNS = "job_id, kind, payload"
LADDER_INSERT_JOB = Query(
    "INSERT INTO ladder_jobs(job_id, kind, payload, state, created_ms)"
    " VALUES (?, ?, ?, 'queued', ?)"
)
#: the next queued job, claimed by one worker: on PostgreSQL the row is locked and skipped by
#: every other claim running at the same moment ({skip_locked}). Checks first (their authors
#: wait for the verdict); then an exact evaluation if none is being computed (so a version's
#: score comes soon after it is accepted, without taking every slot from the games); then
#: games; then the other evaluations. The oldest first within a kind
LADDER_CLAIM = Query(
    "UPDATE ladder_jobs SET state = 'claimed', worker = ?, lease_until = ?"
    " WHERE job_id = (SELECT job_id FROM ladder_jobs WHERE state = 'queued'"
    " ORDER BY CASE kind WHEN 'check' THEN 0 WHEN 'play' THEN 2 ELSE CASE WHEN EXISTS"
    " (SELECT 1 FROM ladder_jobs AS e WHERE e.kind = 'eval' AND e.state = 'claimed')"
    " THEN 3 ELSE 1 END END, created_ms,"
    " job_id LIMIT 1{skip_locked})"
    f" RETURNING {LADDER_JOB_COLUMNS}"
)
LADDER_RENEW = Query(
    "UPDATE ladder_jobs SET lease_until = ? WHERE job_id = ? AND state = 'claimed'"
    " AND worker = ? RETURNING job_id"
)
LADDER_JOB_DONE = Query(
    "UPDATE ladder_jobs SET state = 'done', worker = NULL WHERE job_id = ?"
    f" AND state = 'claimed' AND worker = ? RETURNING {LADDER_JOB_COLUMNS}"
)
#: claims whose lease ran out (or, with the worker named, all of that worker's): a check or
#: an eval goes back to the queue, a play job is lost (its games end by the match rules)
LADDER_EXPIRE = Query(
    "UPDATE ladder_jobs SET state = CASE WHEN kind = 'play' THEN 'lost' ELSE 'queued' END,"
    " worker = NULL WHERE state = 'claimed' AND (lease_until < ? OR worker = ?)"
    f" RETURNING {LADDER_JOB_COLUMNS}"
)
#: one job by id, whatever its state: a ``ladder_submit`` sent again finds its check job; a
#: cluster's new leader, the claims of a worker connected to another node
LADDER_JOB = Query("SELECT kind, payload, state, worker FROM ladder_jobs WHERE job_id = ?")
LADDER_OPEN_JOBS = Query(
    f"SELECT {LADDER_JOB_COLUMNS}, state FROM ladder_jobs WHERE state IN ('queued', 'claimed')"
)
LADDER_INSERT_HISTORY = Query(
    "INSERT INTO ladder_history(bot_id, games, at_ms, rating, low, high) VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (bot_id, games) DO NOTHING"
)
LADDER_HISTORY = Query(
    "SELECT at_ms, games, rating, low, high FROM ladder_history WHERE bot_id = ?"
    " ORDER BY games DESC LIMIT ?"
)
