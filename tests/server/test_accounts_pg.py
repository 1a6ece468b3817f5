"""tests/server/test_accounts.py again, on PostgreSQL: sign-in, tokens per device, sign-out
everywhere and the sign-in limits must behave exactly as on SQLite.

As in test_server_pg.py, the server-level test functions of ``test_accounts.py`` are
re-collected here with ``server_settings`` pointed at a fresh PostgreSQL database. Left out: the
tests that open a SQLite file themselves (the Argon2 defaults and the pre-accounts SQLite
upgrade; migration 3 on both backends is in test_storage_pg.py) and the pure unit tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from server.settings import Settings
from tests.pg_support import pg_url
from tests.server import test_accounts as _accounts
from tests.server_support import Client, running, server_settings

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

_SQLITE_ONLY = {
    "test_default_cost_is_rfc9106_argon2id",
    "test_a_database_from_before_accounts_keeps_its_tokens",
    "test_failure_budget_drains_continuously",
    "test_ipv6_addresses_count_per_64",
    "test_settings_refuse_unusable_costs",
}
globals().update(
    {k: v for k, v in vars(_accounts).items() if k.startswith("test_") and k not in _SQLITE_ONLY}
)
enc = _accounts.enc  # the encodings fixture the re-collected tests take


@pytest.fixture(autouse=True)
def _on_postgres(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``server_settings(tmp_path, ...)`` in the re-collected tests now names ``pg_url``."""

    def settings(tmp_path: Path, **overrides: Any) -> Settings:
        return dataclasses.replace(server_settings(tmp_path, **overrides), db=pg_url)

    monkeypatch.setattr(_accounts, "server_settings", settings)
    yield


async def test_failed_sign_ins_count_across_nodes(pg_url: str, tmp_path: Path) -> None:
    """Two servers on one PostgreSQL database (as a cluster's nodes are): the failures one
    counts for a name are the other's too, so spreading guesses over nodes gains nothing."""
    settings = dataclasses.replace(
        _accounts._settings(tmp_path, signin_failures_per_name=3, signin_window_s=60.0),
        db=pg_url,
    )
    async with running(settings) as one, running(
        dataclasses.replace(settings, port=0)
    ) as two:
        await _accounts._secured(one.port, "ann", "moo.v1.json")
        a = await Client.open(one.port)
        b = await Client.open(two.port)
        for client in (a, b, a):
            err = await client.request({"type": "hello", "name": "ann", "password": "wrong one"})
            assert err["code"] == "bad_credentials", err
        for client in (a, b):  # 3 failures in all: both nodes refuse, even the right password
            err = await client.request({"type": "hello", "name": "ANN",
                                        "password": _accounts.PASSWORD})
            assert err["code"] == "too_many_attempts" and err["retry_after_ms"] > 0, err
        rows = await _accounts_rows(pg_url)
        assert rows == [("name:ann", 3.0)], rows  # one row for both nodes


async def test_the_new_names_budget_is_one_for_all_nodes(pg_url: str, tmp_path: Path) -> None:
    """New names per address (docs/protocol.md, "Session") are counted in the database too:
    registering on another node gains nothing."""
    settings = dataclasses.replace(
        server_settings(tmp_path, new_names_per_address=2), db=pg_url
    )
    async with running(settings) as one, running(settings) as two:
        replies = []
        for port, name in ((one.port, "n1"), (two.port, "n2"), (two.port, "n3"),
                           (one.port, "n4")):
            client = await Client.open(port)
            replies.append(await client.request({"type": "hello", "name": name}))
        codes = [r.get("code", r["type"]) for r in replies]
        assert codes == ["welcome", "welcome", "too_many_names", "too_many_names"], replies
        assert replies[2]["retry_after_ms"] > 0


async def _accounts_rows(db: str) -> list[tuple[str, float]]:
    import asyncpg

    conn = await asyncpg.connect(db)
    try:
        rows = await conn.fetch(
            "SELECT key, round(level::numeric, 0)::float8 FROM signin_failures"
            " WHERE key LIKE 'name:%' ORDER BY key"
        )
    finally:
        await conn.close()
    return [(str(r[0]), float(r[1])) for r in rows]
