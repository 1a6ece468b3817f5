"""Accounts over the wire: passwords (real Argon2id), sign-in from another device, changing the
password, signing out everywhere, the failed sign-in limits, and that nobody can tell whether a
name has a password.

The server here hashes with Argon2id at a tiny cost (``FAST``: 1 pass, 64 KiB) so the suite
stays quick; the hashing code is the production code, and one test runs the default cost.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from server.accounts import CLOSE_SIGNED_OUT, Accounts, FailureBudget, address_key
from server.connection import Connection
from server.settings import Settings
from server.storage_sqlite import SQLiteStore
from tests.server_support import ENCODINGS, Client, running, server_settings

FAST: dict[str, Any] = {"argon2_time_cost": 1, "argon2_memory_kib": 64, "argon2_parallelism": 1}
PASSWORD = "correct horse battery"


@pytest.fixture(params=ENCODINGS)
def enc(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _settings(tmp_path: Path, **extra: Any) -> Settings:
    return server_settings(tmp_path, **{**FAST, **extra})


async def _secured(port: int, name: str, enc: str) -> Client:
    """A connected owner of ``name`` who has set PASSWORD."""
    c = await Client.hello(port, name, enc)
    reply = await c.request({"type": "set_password", "password": PASSWORD})
    assert reply["type"] == "password_set", reply
    return c


async def test_sign_in_on_another_device_with_the_password(tmp_path: Path, enc: str) -> None:
    async with running(_settings(tmp_path)) as app:
        first = await Client.hello(app.port, "ann", enc)
        assert first.seen[0]["secured"] is False
        assert (await first.request({"type": "set_password", "password": PASSWORD}))[
            "type"] == "password_set"
        second = await Client.open(app.port, enc)
        welcome = await second.request({"type": "hello", "name": "ANN", "password": PASSWORD})
        assert welcome["type"] == "welcome" and welcome["name"] == "ann"
        assert welcome["secured"] is True
        assert welcome["token"] and welcome["token"] != first.token
        # one live connection per name: the first device was replaced, as with a token
        assert await first.closed() == 4001
        # each device keeps its own token: the first one still takes the name back
        third = await Client.open(app.port, enc)
        again = await third.request({"type": "hello", "name": "ann", "token": first.token})
        assert again["type"] == "welcome" and again["secured"] is True and "token" not in again
        account = await app.store.account("ann")  # what the database holds, either backend
        assert account is not None and account.password_hash is not None
        stored = account.password_hash
        assert stored.startswith("$argon2id$") and PASSWORD not in stored


async def test_every_failure_looks_the_same(tmp_path: Path, enc: str) -> None:
    async with running(_settings(tmp_path)) as app:
        await _secured(app.port, "ann", enc)
        await Client.hello(app.port, "bob", enc)  # owned, no password
        verified: list[str] = []
        verify = app.accounts._verify

        async def counting(hash_: str, password: str) -> bool:
            verified.append(hash_)
            return await verify(hash_, password)

        app.accounts._verify = counting  # type: ignore[method-assign,assignment]
        c = await Client.open(app.port, enc)
        errors = []
        for name in ("ann", "bob", "nobody"):  # wrong password / no password / unknown name
            err = await c.request({"type": "hello", "name": name, "password": "wrong password"})
            errors.append((err["type"], err["code"], err["message"]))
        assert errors == [("error", "bad_credentials", "wrong name or password")] * 3
        # each case paid for one Argon2 verification, so timing tells nothing either
        assert len(verified) == 3
        # the failed attempt registered nothing
        fresh = await Client.open(app.port, enc)
        welcome = await fresh.request({"type": "hello", "name": "nobody"})
        assert welcome["type"] == "welcome" and welcome["token"]
        # an owned name without token or password is refused the same way, secured or not
        for name in ("ann", "bob"):
            err = await c.request({"type": "hello", "name": name})
            assert err["code"] == "bad_token"
        # the player page shows the same fields for both
        seen = await Client.hello(app.port, "carl", enc)
        pa = await seen.request({"type": "player", "name": "ann"})
        pb = await seen.request({"type": "player", "name": "bob"})
        assert pa.keys() == pb.keys() and "secured" not in pa


async def test_change_password(tmp_path: Path, enc: str) -> None:
    async with running(_settings(tmp_path)) as app:
        ann = await _secured(app.port, "ann", enc)
        for bad in ({}, {"old_password": "not the one"}):
            err = await ann.request({"type": "set_password", "password": "new password", **bad})
            assert err["code"] == "bad_credentials"
        err = await ann.request({"type": "set_password", "password": "short",
                                 "old_password": PASSWORD})
        assert err["code"] == "bad_field" and "8-128" in err["message"]
        err = await ann.request({"type": "set_password", "password": "x" * 129,
                                 "old_password": PASSWORD})
        assert err["code"] == "bad_field"
        ok = await ann.request({"type": "set_password", "password": "new password",
                                "old_password": PASSWORD})
        assert ok["type"] == "password_set"
        other = await Client.open(app.port, enc)
        err = await other.request({"type": "hello", "name": "ann", "password": PASSWORD})
        assert err["code"] == "bad_credentials"
        welcome = await other.request({"type": "hello", "name": "ann", "password": "new password"})
        assert welcome["type"] == "welcome"
        both = await Client.open(app.port, enc)
        err = await both.request({"type": "hello", "name": "ann", "password": "new password",
                                  "token": ann.token})
        assert err["code"] == "bad_field"


async def test_sign_out_everywhere(tmp_path: Path, enc: str) -> None:
    async with running(_settings(tmp_path)) as app:
        ann = await _secured(app.port, "ann", enc)
        phone = await Client.open(app.port, enc)
        phone_token = (await phone.request(
            {"type": "hello", "name": "ann", "password": PASSWORD}))["token"]
        assert await ann.closed() == 4001
        reply = await phone.request({"type": "sign_out_all"})
        assert reply["type"] == "signed_out" and reply["token"]
        for old in (ann.token, phone_token):
            c = await Client.open(app.port, enc)
            assert (await c.request({"type": "hello", "name": "ann", "token": old}))[
                "code"] == "bad_token"
        c = await Client.open(app.port, enc)
        welcome = await c.request({"type": "hello", "name": "ann", "token": reply["token"]})
        assert welcome["type"] == "welcome"
        # the password still signs in: signing out revokes devices, not the password
        d = await Client.open(app.port, enc)
        assert (await d.request({"type": "hello", "name": "ann", "password": PASSWORD}))[
            "type"] == "welcome"


async def test_sign_out_closes_other_live_connections_with_4003(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Today a newer hello replaces an older connection (4001), so a name has one live
    connection; should several ever be live, sign_out_all must still close the others."""
    async with running(_settings(tmp_path)) as app:
        ann = await _secured(app.port, "ann", "moo.v1.json")
        original = app.lobby.arrive

        def keep_both(conn: Connection, player: str, bot: bool) -> Connection | None:
            original(conn, player, bot)
            return None  # the older connection stays open

        monkeypatch.setattr(app.lobby, "arrive", keep_both)
        other = await Client.open(app.port)
        await other.request({"type": "hello", "name": "ann", "password": PASSWORD})
        reply = await other.request({"type": "sign_out_all"})
        assert reply["type"] == "signed_out"
        assert await ann.closed() == CLOSE_SIGNED_OUT == 4003
        assert (await other.request({"type": "ping"}))["type"] == "pong"


async def test_failed_sign_ins_are_limited_per_name(tmp_path: Path) -> None:
    settings = _settings(tmp_path, signin_failures_per_name=3, signin_window_s=60.0)
    async with running(settings) as app:
        # the name budget's clock, stopped: it starts at the real time because on PostgreSQL
        # both budgets share one table, and the address budget (on the real clock) now and
        # then forgets the rows older than its window: a name row stamped in 1970 went with
        # them, one run in about twenty
        now = [time.time()]
        app.accounts.by_name.clock = lambda: now[0]
        await _secured(app.port, "ann", "moo.v1.json")
        c = await Client.open(app.port)
        for _ in range(3):
            err = await c.request({"type": "hello", "name": "ann", "password": "guess guess"})
            assert err["code"] == "bad_credentials"
        # even the right password is refused now, without being checked
        err = await c.request({"type": "hello", "name": "ANN", "password": PASSWORD})
        assert err["code"] == "too_many_attempts"
        assert 0 < err["retry_after_ms"] <= 20000  # one failure drains in 60 s / 3
        # another name from the same address is not affected by ann's limit
        assert (await c.request({"type": "hello", "name": "bob", "password": "guess guess"}))[
            "code"] == "bad_credentials"
        now[0] += err["retry_after_ms"] / 1000
        welcome = await c.request({"type": "hello", "name": "ann", "password": PASSWORD})
        assert welcome["type"] == "welcome"


async def test_failed_sign_ins_are_limited_per_address(tmp_path: Path) -> None:
    settings = _settings(tmp_path, signin_failures_per_address=4)
    async with running(settings) as app:
        c = await Client.open(app.port)
        for i in range(4):
            err = await c.request({"type": "hello", "name": f"n{i}", "password": "guess guess"})
            assert err["code"] == "bad_credentials"
        err = await c.request({"type": "hello", "name": "n9", "password": "guess guess"})
        assert err["code"] == "too_many_attempts" and err["retry_after_ms"] > 0
        # a wrong old_password counts too: a stolen token is no password oracle
        owner = await Client.hello(app.port, "zed")
        await owner.request({"type": "set_password", "password": PASSWORD})
        err = await owner.request({"type": "set_password", "password": "other pass",
                                   "old_password": "guess guess"})
        assert err["code"] == "too_many_attempts"


def test_failure_budget_drains_continuously() -> None:
    now = [0.0]
    budget = FailureBudget(limit=2, window_s=10.0, clock=lambda: now[0])
    assert budget.retry_after_s("k") == 0
    budget.fail("k")
    budget.fail("k")
    assert budget.retry_after_s("k") == pytest.approx(5.0)
    now[0] = 2.0
    assert budget.retry_after_s("k") == pytest.approx(3.0)
    now[0] = 5.0
    assert budget.retry_after_s("k") == 0
    assert budget.retry_after_s("other") == 0


def test_ipv6_addresses_count_per_64() -> None:
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::9")
    assert address_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("::ffff:192.0.2.7") == address_key("192.0.2.7") == "192.0.2.7"
    assert address_key("?") == "?"


async def test_default_cost_is_rfc9106_argon2id(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3")
    await store.open()
    try:
        await store.register_player("ann", "h", bot=False)
        accounts = Accounts(Settings(), store)
        await accounts.set_password("ann", PASSWORD, None, "127.0.0.1")
        account = await store.account("ann")
        assert account is not None and account.password_hash is not None
        assert account.password_hash.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
        signed_in, token = await accounts.sign_in("ann", PASSWORD, "127.0.0.1")
        assert signed_in.name == "ann" and (await store.player_by_token(
            __import__("server.accounts", fromlist=["hash_token"]).hash_token(token))) is not None
    finally:
        await store.close()


async def test_a_database_from_before_accounts_keeps_its_tokens(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite3"
    old = sqlite3.connect(db)
    old.executescript(
        "CREATE TABLE players (name TEXT PRIMARY KEY COLLATE NOCASE, token_hash TEXT UNIQUE,"
        " bot INTEGER NOT NULL, created_ms INTEGER NOT NULL);"
        "INSERT INTO players VALUES ('ann', 'oldhash', 0, 1);"
    )
    old.commit()
    old.close()
    store = SQLiteStore(db)
    await store.open()
    try:
        record = await store.player_by_token("oldhash")
        assert record is not None and record.name == "ann" and record.secured is False
        account = await store.account("ANN")
        assert account is not None and account.password_hash is None
    finally:
        await store.close()


def test_settings_refuse_unusable_costs() -> None:
    from server.settings import ConfigError

    with pytest.raises(ConfigError, match="argon2"):
        dataclasses.replace(Settings(), argon2_memory_kib=4)
    with pytest.raises(ConfigError, match="sign-in"):
        dataclasses.replace(Settings(), signin_window_s=0)
