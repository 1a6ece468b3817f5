"""PostgreSQL for the tests: the machine's server, a fresh database per test, dropped after.

The server is ``MOO_TEST_PG`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``, trust
auth, as ``.ci/run`` sets up). If it cannot be reached the tests *fail* with the reason: a
cluster test that skips quietly would let the PostgreSQL backend rot unseen.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

ADMIN_URL = os.environ.get("MOO_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
_RUN = f"moo_test_{os.getpid()}_{secrets.token_hex(3)}"
_count = itertools.count(1)


def url_for(dbname: str) -> str:
    parts = urlsplit(ADMIN_URL)
    return urlunsplit(parts._replace(path="/" + dbname))


async def _admin(sql: str) -> None:
    try:
        conn = await asyncpg.connect(ADMIN_URL, timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        raise AssertionError(
            f"PostgreSQL is not reachable at {ADMIN_URL} ({exc}); .ci/run installs and starts"
            " it, or set MOO_TEST_PG"
        ) from exc
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def create_database() -> str:
    """A new empty database with a unique name; returns its URL."""
    name = f"{_RUN}_{next(_count)}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    return name


def drop_database(name: str) -> None:
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def pg_url() -> Iterator[str]:
    """URL of a fresh database, dropped (connections and all) after the test."""
    name = create_database()
    try:
        yield url_for(name)
    finally:
        drop_database(name)
