"""tests/server/test_server_matches.py again, on PostgreSQL: a node on ``--db postgresql://...``
must behave exactly as on SQLite.

Rather than copying tests (which would drift), this module re-collects the test functions of
``test_server_matches.py`` and, around each, points the ``server_settings`` they call at
a fresh PostgreSQL database (tests/pg_support.py). The originals run unchanged on SQLite in
their own module. The restart test runs on PostgreSQL in test_storage_pg.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from server.settings import Settings
from tests.pg_support import pg_url
from tests.server import test_server_matches as _matches
from tests.server_support import server_settings

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

globals().update({k: v for k, v in vars(_matches).items() if k.startswith("test_")})
pytestmark = _matches.pytestmark  # the same encodings parametrisation


@pytest.fixture(autouse=True)
def _on_postgres(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``server_settings(tmp_path, ...)`` in the re-collected tests now names ``pg_url``."""

    def settings(tmp_path: Path, **overrides: Any) -> Settings:
        return dataclasses.replace(server_settings(tmp_path, **overrides), db=pg_url)

    monkeypatch.setattr(_matches, "server_settings", settings)
    yield
