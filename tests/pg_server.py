"""A PostgreSQL server of the tests' own: ``initdb`` in a temporary folder, started and stopped
on demand on a free port.

The session's server (tests/pg_support.py) is one of these unless ``MOO_TEST_PG`` names another;
a test that restarts the database (the server process going down, every connection terminated,
then coming back on the same port, which a cluster has to survive) takes one of its own
(``private_postgres``). Debian's binaries (``/usr/lib/postgresql/<version>/bin``), trust auth
on 127.0.0.1, no fsync (the data is thrown away). Run as root (as CI is), the server runs as
the ``postgres`` user, which PostgreSQL requires. Missing binaries are an error, never a skip:
``./dev test`` installs the package when it runs as root (deploy/debian-packages.txt).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.harness.services import PrivatePostgres as _Server
from bench.harness.services import bindir, postgres_problem
from tests.patience import patience

__all__ = ["PrivatePostgres", "bindir", "private_postgres", "problem"]


def problem() -> str | None:
    """Why a private server cannot run here, or None."""
    return postgres_problem()


class PrivatePostgres(_Server):
    """bench/harness/services.py's server, its ``pg_ctl`` steps bounded by the tests' patience;
    a missing binary fails the test that needs it (``./dev test`` installs the package)."""

    def __init__(self) -> None:
        try:
            super().__init__(timeout=patience(120))
        except RuntimeError as exc:
            raise AssertionError(str(exc)) from None


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A server of the test's own, made but not yet initialised; destroyed after the test."""
    pg = PrivatePostgres()
    try:
        yield pg
    finally:
        pg.destroy()
