"""``moo export``: every finished match as one JSON line, for analysis (docs/export.md).

Like the open game databases of chess sites: one self-contained record per match with the
players, the configuration, the secrets with their salts and commitments (so anyone can check
fairness), every guess with its response and time, and the result. The database is opened
read-only (a running server is not disturbed and a wrong path creates nothing); records are
written to a temporary file that replaces ``--out`` only when complete.

    moo export --db var/moo.sqlite3 --out games.jsonl
    moo export --db var/moo.sqlite3 --since 2026-11-01 --out november.jsonl
    moo export --db postgresql://127.0.0.1/moo --out games.jsonl

On PostgreSQL the reads run in one read-only transaction on their own connection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moo.variants import rules_from_dict, rules_spec
from server.storage import describe_db, is_postgres_url

__all__ = ["FORMAT", "ExportError", "configure", "main", "match_record", "records",
           "stored_record"]

#: the ``format`` field of every record; bumped only for incompatible changes
FORMAT = "moo-export/1"


class ExportError(Exception):
    """A problem the person running the command can fix; shown as one line."""


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


def parse_since(text: str) -> int:
    """``2026-11-01`` or ``2026-11-01T12:00[:00][Z|+01:00]`` -> ms since the epoch (UTC if no
    zone is given)."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ExportError(
            f"--since {text!r} is not an ISO date (e.g. 2026-11-01 or 2026-11-01T12:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def match_record(
    match_id: str, meta: dict[str, Any], events: list[dict[str, Any]]
) -> dict[str, Any]:
    """One finished match's log -> its export record (docs/export.md)."""
    created = events[0]
    finished = events[-1]
    if created.get("kind") != "created" or finished.get("kind") != "finished":
        raise ValueError(f"match {match_id}: the log does not run from created to finished")
    started_at = next((e["at"] for e in events if e["kind"] == "started"), None)
    guesses: list[list[dict[str, Any]]] = [[], []]
    for e in events:
        if e["kind"] == "guess":
            guesses[e["seat"]].append(
                {
                    "n": e["n"],
                    "guess": e["guess"],
                    "bulls": e["bulls"],
                    "cows": e["cows"],
                    "at": e["at"],
                    "ms": e["at"] - started_at if started_at is not None else None,
                }
            )
    config = created.get("config") or {}
    bots = list(meta.get("bots") or [None, None])
    return {
        "format": FORMAT,
        "match_id": match_id,
        "players": list(created["players"]),
        "bots": bots,
        "config": config,
        "variant": rules_spec(rules_from_dict(dict(config.get("rules") or {}))),
        "rated": bool(config.get("rated", True)),
        # the hosted tournament the match was a game of (docs/protocol.md, "Tournaments")
        "tournament_id": config.get("tournament_id"),
        # the permanent ladder (its family) the match was a game of (docs/protocol.md, "Ladder")
        "ladder": config.get("ladder"),
        "created_at": _iso(created.get("at")),
        "started_at": _iso(started_at),
        "ended_at": _iso(finished.get("at")),
        "commitments": finished.get("commitments"),
        "secrets": finished.get("secrets"),
        "salts": finished.get("salts"),
        "guesses": guesses,
        "result": {
            "winner": finished.get("winner"),
            "reason": finished.get("reason"),
            "counts": finished.get("counts"),
            "solved": finished.get("solved"),
        },
    }


def _open(db: str) -> sqlite3.Connection:
    path = Path(db)
    if not path.exists():
        raise ExportError(f"no database at {db}")
    if path.is_dir():
        raise ExportError(f"{db} is a directory, not a database file")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.Error as exc:
        raise ExportError(f"cannot read {db}: {exc}") from None
    if not {"matches", "events"} <= tables:
        conn.close()
        raise ExportError(f"{db} is not a MOO Arena database (no matches/events tables)")
    return conn


#: finished matches read per round trip from PostgreSQL
_PG_CHUNK = 200


def _pg_records(url: str, since_ms: int | None) -> Iterator[dict[str, Any]]:
    """:func:`records` from PostgreSQL: one read-only transaction, matches in chunks.

    The export is a plain synchronous generator, so it drives its own event loop; the
    ``results`` index (migration 3 of server/schema.py) gives the end times and the order.
    """
    import asyncpg

    where = describe_db(url)
    loop = asyncio.new_event_loop()
    conn: Any = None
    try:
        try:
            conn = loop.run_until_complete(asyncpg.connect(
                url, timeout=10, server_settings={"default_transaction_read_only": "on"}
            ))
            tx = conn.transaction(isolation="repeatable_read", readonly=True)
            loop.run_until_complete(tx.start())
            tables = loop.run_until_complete(conn.fetchrow(
                "SELECT to_regclass('matches') IS NOT NULL AND to_regclass('events') IS NOT NULL,"
                " to_regclass('results') IS NOT NULL"
            ))
            if not tables[0]:
                raise ExportError(
                    f"{where} is not a MOO Arena database (no matches/events tables)"
                )
            if tables[1]:  # the history index knows every end time
                query = (
                    "SELECT match_id FROM results WHERE seat = 0 AND ended_ms >= $1"
                    " ORDER BY ended_ms, match_id"
                )
            else:  # a database no server of this version has opened yet
                query = (
                    "SELECT match_id FROM matches WHERE finished = 1 AND $1::bigint IS NOT NULL"
                    " ORDER BY created_ms"
                )
            ids = [
                row[0]
                for row in loop.run_until_complete(conn.fetch(
                    query, since_ms if since_ms is not None else -(2**62)
                ))
            ]
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise ExportError(f"cannot read {where}: {exc}") from None
        for start in range(0, len(ids), _PG_CHUNK):
            chunk = ids[start : start + _PG_CHUNK]
            try:
                metas = dict(loop.run_until_complete(conn.fetch(
                    "SELECT match_id, meta FROM matches WHERE match_id = ANY($1::text[])", chunk
                )))
                events: dict[str, list[dict[str, Any]]] = {i: [] for i in chunk}
                for match_id, body in loop.run_until_complete(conn.fetch(
                    "SELECT match_id, body FROM events WHERE match_id = ANY($1::text[])"
                    " ORDER BY match_id, seq",
                    chunk,
                )):
                    events[match_id].append(json.loads(body))
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                raise ExportError(f"cannot read {where}: {exc}") from None
            for match_id in chunk:
                log = events[match_id]
                if not log or match_id not in metas:
                    continue
                if since_ms is not None and (log[-1].get("at") or 0) < since_ms:
                    continue
                yield match_record(match_id, json.loads(metas[match_id]), log)
    finally:
        if conn is not None:
            loop.run_until_complete(conn.close(timeout=2))
        loop.close()


def records(db: str, since_ms: int | None = None) -> Iterator[dict[str, Any]]:
    """Every finished match in ``db`` that ended at or after ``since_ms``, oldest end first."""
    if is_postgres_url(db):
        yield from _pg_records(db, since_ms)
        return
    conn = _open(db)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if "results" in tables:  # the history index knows every end time
            ids = [
                row[0]
                for row in conn.execute(
                    "SELECT match_id FROM results WHERE seat = 0 AND ended_ms >= ?"
                    " ORDER BY ended_ms, match_id",
                    (since_ms if since_ms is not None else -(2**62),),
                )
            ]
        else:  # a database no server of this version has opened yet
            ids = [
                row[0]
                for row in conn.execute(
                    "SELECT match_id FROM matches WHERE finished = 1 ORDER BY created_ms"
                )
            ]
        for match_id in ids:
            meta_row = conn.execute(
                "SELECT meta FROM matches WHERE match_id = ?", (match_id,)
            ).fetchone()
            events = [
                json.loads(body)
                for (body,) in conn.execute(
                    "SELECT body FROM events WHERE match_id = ? ORDER BY seq", (match_id,)
                )
            ]
            if not events or meta_row is None:
                continue
            record = match_record(match_id, json.loads(meta_row[0]), events)
            if since_ms is not None and (events[-1].get("at") or 0) < since_ms:
                continue
            yield record
    except sqlite3.Error as exc:
        raise ExportError(f"cannot read {db}: {exc}") from None
    finally:
        conn.close()


def stored_record(db: str, match_id: str) -> dict[str, Any]:
    """One match's export record, read from ``db`` (``moo analyse MATCH_ID --db``).

    :class:`ExportError` when the database has no such match or the match has not finished.
    """
    if is_postgres_url(db):
        meta, events = _pg_one(db, match_id)
    else:
        conn = _open(db)
        try:
            row = conn.execute(
                "SELECT meta FROM matches WHERE match_id = ?", (match_id,)
            ).fetchone()
            events = [json.loads(body) for (body,) in conn.execute(
                "SELECT body FROM events WHERE match_id = ? ORDER BY seq", (match_id,)
            )]
            meta = json.loads(row[0]) if row is not None else None
        except sqlite3.Error as exc:
            raise ExportError(f"cannot read {db}: {exc}") from None
        finally:
            conn.close()
    if meta is None or not events:
        raise ExportError(f"no match {match_id!r} in {describe_db(db)}")
    if events[-1].get("kind") != "finished":
        raise ExportError(f"match {match_id!r} has not finished")
    return match_record(match_id, meta, events)


def _pg_one(url: str, match_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    import asyncpg

    async def read() -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        conn = await asyncpg.connect(
            url, timeout=10, server_settings={"default_transaction_read_only": "on"})
        try:
            meta = await conn.fetchval("SELECT meta FROM matches WHERE match_id = $1", match_id)
            rows = await conn.fetch(
                "SELECT body FROM events WHERE match_id = $1 ORDER BY seq", match_id)
            return (json.loads(meta) if meta is not None else None,
                    [json.loads(r[0]) for r in rows])
        finally:
            await conn.close(timeout=2)

    try:
        return asyncio.run(read())
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise ExportError(f"cannot read {describe_db(url)}: {exc}") from None


def with_analysis(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` plus ``analysis``: per seat, the judge's review of each guess
    (``bots.judge.review.GuessAnalysis.to_dict()``), or ``null`` for a match that cannot be
    analysed (no secrets, word MOO, rules too large) with ``analysis_error`` saying why."""
    from bots.judge.review import analyse_guesses, from_export
    from moo.variants import rules_from_dict
    from moo.words import WordRules

    try:
        raw, players = from_export(record)
        if not all(p["secret"] for p in players):
            raise ValueError("the match never started: no secrets")
        rules = rules_from_dict(raw)
        if isinstance(rules, WordRules):
            raise ValueError("word MOO matches are not analysed (no exact solver for words)")
        record["analysis"] = [
            [a.to_dict() for a in analyse_guesses(rules, p["secret"], p["guesses"])]
            for p in players
        ]
    except (ValueError, TypeError) as exc:
        record["analysis"] = None
        record["analysis_error"] = str(exc)
    return record


def _analysed(matches: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Each match with its analysis, under a progress bar: seconds a match add up."""
    from bots.playout import Progress

    progress = Progress(len(matches), "analysing")
    for i, record in enumerate(matches):
        yield with_analysis(record)
        progress(i + 1)
    progress.finish()


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True,
                        help="the server's database: a SQLite file or a postgresql:// URL")
    parser.add_argument("--since", default=None, metavar="ISO-DATE",
                        help="only matches that ended at or after this time (UTC if no zone)")
    parser.add_argument("--out", required=True, metavar="FILE.jsonl",
                        help="output file, one JSON line per match ('-' for stdout)")
    parser.add_argument("--analysis", action="store_true",
                        help="add each player's post-match analysis by exact values "
                        "(docs/analysis.md); milliseconds per classic match")


def main(args: argparse.Namespace) -> int:
    try:
        since = parse_since(args.since) if args.since else None
        found = records(args.db, since)
        if getattr(args, "analysis", False):
            found = _analysed(list(found))
        if args.out == "-":
            for record in found:
                sys.stdout.write(json.dumps(record, separators=(",", ":")) + "\n")
            return 0
        out = Path(args.out)
        if out.is_dir():
            raise ExportError(f"--out {args.out} is a directory")
        if not out.parent.is_dir():
            raise ExportError(f"--out: no directory {out.parent}")
        n = 0
        fd, tmp = tempfile.mkstemp(prefix=".moo-export-", dir=out.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for record in found:
                    fh.write(json.dumps(record, separators=(",", ":")) + "\n")
                    n += 1
            os.replace(tmp, out)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except ExportError as exc:
        print(f"moo export: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"moo export: {exc.strerror or exc}: {exc.filename or args.out}", file=sys.stderr)
        return 1
    print(f"exported {n} finished matches to {out}")
    return 0
