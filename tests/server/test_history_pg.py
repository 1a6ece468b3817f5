"""tests/server/test_history.py again, on PostgreSQL: history pages, match records, player pages and
the leaderboard's extras must be the same as on SQLite.

The server-level test functions of ``tests/server/test_history.py`` are re-collected with
``server_settings`` pointed at a fresh PostgreSQL database (as tests/server/test_server_pg.py does).
Left out: the SQLite query-plan check and the SQLite file surgery of the upgrade test (the
results backfill of migration 3 runs on both backends in tests/server/test_storage_pg.py), and the
page routes, which never touch the store, and the cache test, which makes its own SQLite store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from server.settings import Settings
from tests.pg_support import pg_url
from tests.server import test_history as _history
from tests.server_support import server_settings

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

_SQLITE_ONLY = {
    "test_history_query_uses_the_index",
    "test_a_database_from_before_history_is_indexed_once",
    "test_page_routes_serve_the_web_client",
    "test_a_cluster_nodes_player_cache_expires",
}
globals().update(
    {k: v for k, v in vars(_history).items() if k.startswith("test_") and k not in _SQLITE_ONLY}
)
pytestmark = _history.pytestmark  # the same encodings parametrisation


@pytest.fixture(autouse=True)
def _on_postgres(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``server_settings(tmp_path, ...)`` in the re-collected tests now names ``pg_url``."""

    def settings(tmp_path: Path, **overrides: Any) -> Settings:
        return dataclasses.replace(server_settings(tmp_path, **overrides), db=pg_url)

    monkeypatch.setattr(_history, "server_settings", settings)
    yield
