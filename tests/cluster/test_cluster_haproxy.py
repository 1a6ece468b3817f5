"""The demo cluster behind HAProxy: deploy/local-cluster.sh up, a ``moo tournament`` over
``wss://`` (TLS ended by HAProxy, self-signed certificate) to the end, then ``down``.

Three nodes, one broker, one PostgreSQL database (the fixture's fresh one), HAProxy spreading
the bots over the nodes: the bots pair through the cluster lobby and play across nodes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.mqtt_support import free_port
from tests.patience import patience
from tests.pg_support import pg_url
from tests.server_support import Client

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow(31)
def test_tournament_through_haproxy_over_tls(
    haproxy: str, pg_url: str, tmp_path: Path
) -> None:
    parts = urlsplit(pg_url)
    ports = [free_port() for _ in range(6)]
    env = {
        **os.environ,
        "MOO_PG": pg_url.rsplit("/", 1)[0],
        "MOO_CLUSTER_DB": parts.path.lstrip("/"),
        "MOO_MQTT_PORT": str(ports[0]),
        "MOO_NODE_PORTS": " ".join(map(str, ports[1:4])),
        "MOO_TLS_PORT": str(ports[4]),
        "MOO_PLAIN_PORT": str(ports[5]),
        "MOO_CLUSTER_VAR": str(tmp_path / "cluster"),
        "MOO_KEEP_LOGS": "1",  # the node logs are read below, after `down`
        # The sign-in limits drain continuously (20 per 15 minutes by default): 21 refused
        # Argon2 verifications in a row take long enough on a busy machine for one to drain.
        # A day's window keeps the count whole however slow the machine is.
        "MOO_SIGNIN_WINDOW_S": "86400",
    }
    script = str(ROOT / "deploy" / "local-cluster.sh")
    env["MOO_UP_TIMEOUT_S"] = str(int(patience(120)))
    up = subprocess.run([script, "up"], env=env, capture_output=True, text=True,
                        timeout=patience(180))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"wss://127.0.0.1:{ports[4]}/" in up.stdout
        out = tmp_path / "results.jsonl"
        run = subprocess.run(
            [sys.executable, "-m", "cli", "tournament", "first", "random", "larmouth",
             "--url", f"wss://127.0.0.1:{ports[4]}/", "--rounds", "2", "--out", str(out),
             "--no-progress", "--concurrency", "6"],
            cwd=ROOT, capture_output=True, text=True, timeout=patience(300),
            env={**env, "SSL_CERT_FILE": str(tmp_path / "cluster" / "cert.pem")},
        )
        assert run.returncode == 0, run.stdout + run.stderr
        results = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(results) == 12  # 3 pairs x 2 rounds x both ways
        assert all(r["reason"] in ("solved", "cap") for r in results), results
        assert "12 matches (12 played" in run.stdout
        asyncio.run(_forwarded_addresses(
            ports[5], ports[1:4], [str(tmp_path / "cluster" / f"{n}.sock") for n in "abc"]))
        # every node is still healthy after the run
        status = subprocess.run([script, "status"], env=env, capture_output=True, text=True)
        lines = [ln for ln in status.stdout.splitlines() if ln[:2] in ("a:", "b:", "c:")]
        assert len(lines) == 3 and all('"status":"ok"' in ln for ln in lines), status.stdout
    finally:
        down = subprocess.run([script, "down"], env=env, capture_output=True, text=True)
        assert down.returncode == 0 and "down" in down.stdout
    for name in ("a", "b", "c"):
        log = (tmp_path / "cluster" / f"{name}.log").read_text()
        assert "Traceback" not in log and " ERROR " not in log, log
        assert "stopped" in log  # drained on SIGTERM


async def _fail(port: int | str, name: str, **connect: Any) -> str:
    """One failed sign-in on a connection of its own, to a TCP port or through a Unix socket
    (a path). (Not many on one connection: the handshake timeout bounds the time to a
    *completed* hello on a connection, docs/server.md, and each refusal costs an Argon2
    verification, which a busy machine can stretch past it.)"""
    if isinstance(port, str):
        c = await Client.open_unix(port, **connect)
    else:
        c = await Client.open(port, **connect)
    try:
        reply = await c.request({"type": "hello", "name": name, "password": "guess guess"})
    finally:
        await c.close()
    assert reply["type"] == "error", reply
    return str(reply["code"])


async def _forwarded_addresses(proxy: int, node_ports: list[int], sockets: list[str]) -> None:
    """The nodes run with --trusted-proxy unix (local-cluster.sh): HAProxy reaches them through
    their Unix sockets, and a player's failed sign-ins through HAProxy count against the
    player's own address, as HAProxy put it in X-Forwarded-For, not against the proxy's.
    (Loopback addresses other than 127.0.0.1 stand for players on other machines.)"""
    ann = {"local_addr": ("127.0.0.2", 0)}
    for i in range(20):  # the default per-address limit
        assert await _fail(proxy, f"ann{i}", **ann) == "bad_credentials"
    assert await _fail(proxy, "ann20", **ann) == "too_many_attempts"
    # another player through the same proxy is not limited, whichever node they reach
    assert await _fail(proxy, "bob", local_addr=("127.0.0.3", 0)) == "bad_credentials"
    # every node shares the count (PostgreSQL), and each believes the header only on its
    # Unix socket (the proxy's way in), never on its TCP port
    as_proxy = {"additional_headers": {"X-Forwarded-For": "127.0.0.2"}}
    limited = []
    for port, sock in zip(node_ports, sockets, strict=True):
        if await _fail(sock, "carl", **as_proxy) == "too_many_attempts":
            limited.append(port)
        forged = {"local_addr": ("127.0.0.3", 0), **as_proxy}
        assert await _fail(port, "carl", **forged) == "bad_credentials"  # not from the proxy
        # and the proxy's own connections were never counted as one address: another client
        # through it
        other = {"additional_headers": {"X-Forwarded-For": "127.0.0.4"}}
        assert await _fail(sock, "dan", **other) == "bad_credentials"
    assert sorted(limited) == sorted(node_ports), limited  # one budget for the cluster
