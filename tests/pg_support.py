"""PostgreSQL for the tests: one server for the session, a fresh database per test, dropped after.

The server is ``MOO_TEST_PG`` when it is set (an external one, e.g.
``postgresql://postgres@127.0.0.1:5432/postgres`` with trust auth); otherwise the session
starts a private one (tests/pg_server.py: ``initdb`` in a temporary folder, a free port) the
first time a test needs it, and stops it when the session ends. Either way a test that needs
PostgreSQL and cannot have it *fails* with the reason (``./dev test --quick`` leaves such
tests out, counted): a cluster test that skipped quietly would let the PostgreSQL backend rot
unseen.
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

from tests import pg_server
from tests.patience import patience

EXTERNAL = os.environ.get("MOO_TEST_PG")
_RUN = f"moo_test_{os.getpid()}_{secrets.token_hex(3)}"
_count = itertools.count(1)
#: the admin URL of the session's server once the ``postgres`` fixture has it running
_admin_url: str | None = None


def problem() -> str | None:
    """Why the session cannot have a PostgreSQL server, or None (checked before collection)."""
    if EXTERNAL:
        return None
    why = pg_server.problem()
    return None if why is None else f"{why}, and MOO_TEST_PG is not set"


def admin_url() -> str:
    if _admin_url is None:
        raise AssertionError("PostgreSQL is not started: the test must take the postgres fixture")
    return _admin_url


def url_for(dbname: str) -> str:
    parts = urlsplit(admin_url())
    return urlunsplit(parts._replace(path="/" + dbname))


async def _admin(sql: str, url: str | None = None) -> None:
    url = url or admin_url()
    try:
        conn = await asyncpg.connect(url, timeout=patience(30))
    except (OSError, asyncpg.PostgresError) as exc:
        raise AssertionError(f"PostgreSQL is not reachable at {url} ({exc})") from exc
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def create_database() -> str:
    """A new empty database with a unique name on the session's server; returns its name."""
    name = f"{_RUN}_{next(_count)}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    return name


def drop_database(name: str) -> None:
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """The session's PostgreSQL server (its admin URL), started on first use."""
    global _admin_url
    if EXTERNAL:
        asyncio.run(_admin("SELECT 1", EXTERNAL))
        _admin_url = EXTERNAL
        yield EXTERNAL
        return
    why = problem()
    if why is not None:
        pytest.fail(f"{why} (apt-get install postgresql; ./dev test does as root)",
                    pytrace=False)
    server = pg_server.PrivatePostgres()
    try:
        server.init()
        server.start()
        _admin_url = server.url
        yield server.url
    finally:
        _admin_url = None
        server.destroy()


@pytest.fixture
def pg_url(postgres: str) -> Iterator[str]:
    """URL of a fresh database, dropped (connections and all) after the test."""
    name = create_database()
    try:
        yield url_for(name)
    finally:
        drop_database(name)
