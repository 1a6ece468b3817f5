"""tests/server/test_conformance.py again, on PostgreSQL: the protocol as docs/protocol.md states it
(hello with tokens, one live match per person, rejoining seats, ...) must not depend on the
backend.

As tests/server/test_server_pg.py does for the match tests, the conformance test functions are
re-collected here with ``server_settings`` pointed at PostgreSQL. Some tests start a second
server on another ``tmp_path`` and expect a fresh database there, so each distinct path gets its
own fresh database (tests/pg_support.py), all dropped after the test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from server.settings import Settings
from tests.pg_support import create_database, drop_database, url_for
from tests.server import test_conformance as _conformance
from tests.server_support import server_settings

globals().update({k: v for k, v in vars(_conformance).items() if k.startswith("test_")})
pytestmark = _conformance.pytestmark  # the same encodings parametrisation


@pytest.fixture(autouse=True)
def _on_postgres(postgres: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``server_settings(tmp_path, ...)`` now names a PostgreSQL database, one per path."""
    made: dict[Path, str] = {}

    def settings(tmp_path: Path, **overrides: Any) -> Settings:
        if tmp_path not in made:
            # called from inside the test's running loop; create_database runs its own
            with ThreadPoolExecutor(1) as pool:
                made[tmp_path] = pool.submit(create_database).result()
        return dataclasses.replace(
            server_settings(tmp_path, **overrides), db=url_for(made[tmp_path])
        )

    monkeypatch.setattr(_conformance, "server_settings", settings)
    try:
        yield
    finally:
        for name in made.values():
            drop_database(name)
