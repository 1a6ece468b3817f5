"""``moo db upgrade``: bring a database's schema up to date without starting a server.

The server applies the same migrations at start (under the same lock), so this verb is for
operators who want the upgrade to happen, and be seen, before any node is rolled out. It takes
the database the way ``moo serve`` does: ``--db`` (a SQLite file or
``postgresql://HOST[:PORT]/DBNAME``), else ``--config FILE`` / ``MOO_DB``, else the default.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
from pathlib import Path

from server.schema import LATEST, MIGRATIONS, SchemaError, upgrade_postgres, upgrade_sqlite
from server.settings import ConfigError, load_settings
from server.storage import describe_db, is_postgres_url

__all__ = ["configure", "main", "upgrade"]


def configure(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    up = verbs.add_parser(
        "upgrade",
        help="apply the schema migrations the database lacks (safe to run any number of times)",
        description="Apply the schema migrations the database lacks; safe to repeat, and safe "
        "while servers start (they take the same lock).",
    )
    up.add_argument(
        "--db", help="SQLite file path or postgresql://HOST[:PORT]/DBNAME (default: as moo serve)"
    )
    up.add_argument("--config", metavar="FILE", help="TOML file to read db from")


def main(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.config, overrides={"db": args.db})
    except ConfigError as exc:
        print(f"moo db: {exc}", file=sys.stderr)
        return 2
    where = describe_db(settings.db)
    try:
        found, applied = upgrade(settings.db)
    except (SchemaError, OSError, sqlite3.Error) as exc:
        print(f"moo db: {where}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # asyncpg's errors: connection refused, no such database, ...
        if type(exc).__module__.startswith("asyncpg"):
            print(f"moo db: {where}: {exc}", file=sys.stderr)
            return 1
        raise
    if not applied:
        print(f"{where}: schema version {found}, up to date")
        return 0
    names = {m.version: m.description for m in MIGRATIONS}
    for version in applied:
        print(f"{where}: applied migration {version} ({names[version]})")
    print(f"{where}: schema version {found} -> {LATEST}")
    return 0


def upgrade(db: str) -> tuple[int, list[int]]:
    """Apply what is missing; returns the version found and the versions applied."""
    if is_postgres_url(db):
        return asyncio.run(_upgrade_postgres(db))
    path = Path(db)
    if not path.parent.exists():
        raise OSError(f"no such directory: {path.parent}")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        return upgrade_sqlite(conn, str(path))
    finally:
        conn.close()


async def _upgrade_postgres(url: str) -> tuple[int, list[int]]:
    import asyncpg

    conn = await asyncpg.connect(url, timeout=10)
    try:
        return await upgrade_postgres(conn, describe_db(url))
    finally:
        await conn.close()
