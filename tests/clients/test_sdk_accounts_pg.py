"""tests/clients/test_sdk_accounts.py's SDK test again, on PostgreSQL: sign-in, password, sign-out,
history, match record and player through the SDK against a server on ``postgresql://``.

Re-collected as tests/server/test_server_pg.py does; the ``moo play`` test (a ``moo serve``
subprocess on its own SQLite file) stays in its own module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from server.settings import Settings
from tests.clients import test_sdk_accounts as _sdk
from tests.pg_support import pg_url
from tests.server_support import server_settings

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

test_sdk_accounts_and_history = _sdk.test_sdk_accounts_and_history


@pytest.fixture(autouse=True)
def _on_postgres(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``server_settings(tmp_path, ...)`` in the re-collected test now names ``pg_url``."""

    def settings(tmp_path: Path, **overrides: Any) -> Settings:
        return dataclasses.replace(server_settings(tmp_path, **overrides), db=pg_url)

    monkeypatch.setattr(_sdk, "server_settings", settings)
    yield
