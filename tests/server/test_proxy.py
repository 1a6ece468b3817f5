"""The client's address behind a reverse proxy: X-Forwarded-For believed only from
``trusted_proxies`` (server/proxy.py), as the per-address sign-in limit sees it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from server.proxy import client_address
from server.settings import ConfigError, load_settings
from tests.patience import patience
from tests.server_support import Client, running, server_settings

FAST: dict[str, Any] = {"argon2_time_cost": 1, "argon2_memory_kib": 64, "argon2_parallelism": 1}
ROOT = Path(__file__).resolve().parents[2]


def test_the_header_is_believed_only_from_a_trusted_proxy() -> None:
    proxies = ("127.0.0.1", "10.0.0.0/8")
    # not from a proxy: the header is whatever the client wrote, ignored
    assert client_address("198.51.100.4", ["203.0.113.7"], proxies) == "198.51.100.4"
    # from the proxy: its entry (the rightmost) names the client
    assert client_address("127.0.0.1", ["203.0.113.7"], proxies) == "203.0.113.7"
    # what a client wrote before the proxy appended its entry does not count
    assert client_address("127.0.0.1", ["6.6.6.6, 203.0.113.7"], proxies) == "203.0.113.7"
    assert client_address("127.0.0.1", ["6.6.6.6", "203.0.113.7"], proxies) == "203.0.113.7"
    # a chain of trusted proxies is walked through
    assert client_address("127.0.0.1", ["203.0.113.7, 10.1.2.3"], proxies) == "203.0.113.7"
    # IPv6 and IPv4-mapped peers
    assert client_address("::ffff:127.0.0.1", ["2001:db8::5"], proxies) == "2001:db8::5"
    # no header, an unreadable entry, or only proxies: the peer's own address
    assert client_address("127.0.0.1", [], proxies) == "127.0.0.1"
    assert client_address("127.0.0.1", ["unknown"], proxies) == "127.0.0.1"
    assert client_address("127.0.0.1", ["203.0.113.7, junk"], proxies) == "127.0.0.1"
    assert client_address("127.0.0.1", ["10.9.9.9"], proxies) == "127.0.0.1"
    # nothing trusted: never believed
    assert client_address("127.0.0.1", ["203.0.113.7"], ()) == "127.0.0.1"


def test_trusted_proxies_setting_is_checked() -> None:
    assert load_settings(None, overrides={"trusted_proxies": "127.0.0.1, 10.0.0.0/8"}) \
        .trusted_proxies == ["127.0.0.1", "10.0.0.0/8"]
    with pytest.raises(ConfigError, match="trusted_proxies"):
        load_settings(None, overrides={"trusted_proxies": "localhost"})
    run = subprocess.run(
        [sys.executable, "-m", "cli", "serve", "--trusted-proxy", "nope", "--port", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=patience(60),
    )
    assert run.returncode != 0
    assert "trusted_proxies" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


async def _fail(c: Client, name: str) -> str:
    reply = await c.request({"type": "hello", "name": name, "password": "guess guess"})
    assert reply["type"] == "error", reply
    return str(reply["code"])


async def _from(port: int, forwarded: str | None) -> Client:
    headers = {"X-Forwarded-For": forwarded} if forwarded is not None else {}
    return await Client.open(port, additional_headers=headers)


@pytest.mark.parametrize("trusted", [True, False])
async def test_the_sign_in_limit_counts_the_forwarded_address(
    tmp_path: Path, trusted: bool
) -> None:
    """Two failed sign-ins per address. Behind a trusted proxy (this test's own address,
    127.0.0.1) each forwarded client has its own budget; untrusted, the header changes
    nothing and every connection from 127.0.0.1 shares one."""
    settings = server_settings(
        tmp_path, signin_failures_per_address=2, **FAST,
        trusted_proxies=["127.0.0.1"] if trusted else [],
    )
    async with running(settings) as app:
        first = await _from(app.port, "203.0.113.7")
        assert [await _fail(first, f"n{i}") for i in range(2)] == ["bad_credentials"] * 2
        assert await _fail(first, "n2") == "too_many_attempts"
        second = await _from(app.port, "6.6.6.6, 203.0.113.8")
        direct = await _from(app.port, None)
        if trusted:
            assert await _fail(second, "n3") == "bad_credentials"
            # the same forwarded client on a new connection is still limited
            again = await _from(app.port, "203.0.113.7")
            assert await _fail(again, "n4") == "too_many_attempts"
            assert await _fail(direct, "n5") == "bad_credentials"  # the proxy itself
            await again.close()
        else:
            assert await _fail(second, "n3") == "too_many_attempts"
            assert await _fail(direct, "n5") == "too_many_attempts"
        for c in (first, second, direct):
            await c.close()


def test_the_unix_socket_is_a_proxy_only_when_trusted() -> None:
    assert client_address("unix", ["203.0.113.7"], ("unix",)) == "203.0.113.7"
    assert client_address("unix", ["203.0.113.7"], ("127.0.0.1",)) == "unix"
    # over TCP, even from loopback, "unix" trusts nobody: no local process can forge
    assert client_address("127.0.0.1", ["203.0.113.7"], ("unix",)) == "127.0.0.1"
    assert load_settings(None, overrides={"trusted_proxies": "unix"}).trusted_proxies == ["unix"]


async def test_a_proxy_on_the_unix_socket_names_the_client(tmp_path: Path) -> None:
    """``--unix PATH --trusted-proxy unix``: the socket (mode 0600) is the proxy's way in; its
    X-Forwarded-For counts, the same header over TCP does not."""
    import stat

    sock = tmp_path / "node.sock"
    settings = server_settings(
        tmp_path, signin_failures_per_address=2, **FAST, trusted_proxies=["unix"],
        unix=str(sock),
    )
    async with running(settings) as app:
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        for i in range(2):  # two failures over TCP from a forged address: counted as TCP's
            tcp = await _from(app.port, f"203.0.113.{i}")
            assert await _fail(tcp, f"t{i}") == "bad_credentials"
            await tcp.close()
        tcp = await _from(app.port, "203.0.113.9")
        assert await _fail(tcp, "t9") == "too_many_attempts"
        via_proxy = await Client.open_unix(
            str(sock), additional_headers={"X-Forwarded-For": "198.51.100.1"}
        )
        assert await _fail(via_proxy, "u1") == "bad_credentials"  # its own budget
        await via_proxy.close()
        await tcp.close()
    assert not sock.exists()  # removed at the stop
