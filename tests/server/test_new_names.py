"""The per-address budget of new names (docs/protocol.md, "Session"; server/accounts.py).

Without it, 600 connections from one address registered 600 names in 1.7 s. Every ``hello``
without a token or password spends one of the address's ``new_names_per_address`` per
``new_names_window_s``; past it the hello is refused with ``too_many_names`` and
``retry_after_ms``, registering nothing, while a hello with a token still works.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from server.settings import ConfigError, Settings, load_settings
from tests.patience import patience
from tests.server_support import ENCODINGS, Client, running, server_settings

ROOT = Path(__file__).resolve().parents[2]

LIMIT = 3
WINDOW_S = 600.0


async def _hello(port: int, name: str, enc: str = "moo.v1.json", **headers: str) -> Any:
    client = await Client.open(port, enc, additional_headers=headers)
    return client, await client.request({"type": "hello", "name": name})


@pytest.mark.parametrize("enc", ENCODINGS)
async def test_new_names_past_the_budget_are_refused(tmp_path: Path, enc: str) -> None:
    settings = server_settings(
        tmp_path, new_names_per_address=LIMIT, new_names_window_s=WINDOW_S
    )
    async with running(settings) as app:
        tokens = []
        for i in range(LIMIT):
            _, welcome = await _hello(app.port, f"p{i}", enc)
            assert welcome["type"] == "welcome", welcome
            tokens.append(welcome["token"])
        client, refused = await _hello(app.port, "one-too-many", enc)
        assert refused["type"] == "error" and refused["code"] == "too_many_names", refused
        assert "too many new names from this address" in refused["message"]
        assert "ref" in refused
        # the budget drains continuously: one name comes back every window / limit seconds
        assert 0 < refused["retry_after_ms"] <= WINDOW_S / LIMIT * 1000
        assert refused["retry_after_ms"] > WINDOW_S / LIMIT * 1000 - 60_000
        assert await app.store.known_player("one-too-many") is None  # nothing registered
        # the refused connection may go on: a name it already has comes back with its token
        back = await client.request({"type": "hello", "token": tokens[0]})
        assert back["type"] == "welcome" and back["name"] == "p0", back
        # a taken name asked for without a token spends the budget too (bad_token otherwise)
        _, probe = await _hello(app.port, "p1", enc)
        assert probe["code"] == "too_many_names", probe


async def test_a_burst_of_concurrent_hellos_registers_only_the_budget(tmp_path: Path) -> None:
    """The check and the spending are one step: hellos racing each other cannot all pass."""
    settings = server_settings(tmp_path, new_names_per_address=LIMIT)
    async with running(settings) as app:
        replies = await asyncio.gather(*(_hello(app.port, f"r{i}") for i in range(12)))
        codes = sorted(reply.get("code", reply["type"]) for _, reply in replies)
        assert codes == ["too_many_names"] * (12 - LIMIT) + ["welcome"] * LIMIT, codes


async def test_each_forwarded_address_has_its_own_budget(tmp_path: Path) -> None:
    """Behind a trusted proxy the budget is the client's (X-Forwarded-For), not the proxy's;
    the same header from an untrusted peer changes nothing (tests/server/test_proxy.py)."""
    settings = server_settings(
        tmp_path, new_names_per_address=1, trusted_proxies=["127.0.0.1"]
    )
    async with running(settings) as app:
        for i, address in enumerate(["198.51.100.1", "198.51.100.2", "2001:db8::1"]):
            _, welcome = await _hello(app.port, f"f{i}", **{"X-Forwarded-For": address})
            assert welcome["type"] == "welcome", (address, welcome)
        _, again = await _hello(app.port, "f9", **{"X-Forwarded-For": "198.51.100.1"})
        assert again["code"] == "too_many_names", again
        # an IPv6 address counts as its /64, as for the sign-in limit
        _, same64 = await _hello(app.port, "f8", **{"X-Forwarded-For": "2001:db8::2"})
        assert same64["code"] == "too_many_names", same64
    untrusted = server_settings(tmp_path / "u", new_names_per_address=1)
    (tmp_path / "u").mkdir()
    async with running(untrusted) as app:
        _, first = await _hello(app.port, "g1", **{"X-Forwarded-For": "198.51.100.1"})
        assert first["type"] == "welcome", first
        _, second = await _hello(app.port, "g2", **{"X-Forwarded-For": "198.51.100.2"})
        assert second["code"] == "too_many_names", second  # both are 127.0.0.1 to it


def test_the_budget_settings_are_checked() -> None:
    assert Settings().new_names_per_address == 100
    assert load_settings(None, overrides={"new_names_per_address": "5"}).new_names_per_address \
        == 5
    with pytest.raises(ConfigError, match="new_names_per_address must be >= 1"):
        Settings(new_names_per_address=0)
    with pytest.raises(ConfigError, match="new_names_window_s > 0"):
        Settings(new_names_window_s=0.0)


def test_a_bad_budget_on_the_command_line_is_one_line(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "cli", "serve", "--port", "0", "--db",
         str(tmp_path / "x.sqlite3"), "--new-names-per-address", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=patience(60),
    )
    assert run.returncode == 2
    assert run.stderr.strip() == (
        "moo serve: new_names_per_address must be >= 1 and new_names_window_s > 0"
    ), run.stderr
