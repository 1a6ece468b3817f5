"""``moo bot`` and ``moo tournament`` across a server's death (real processes throughout).

A single ``moo serve`` on SQLite is killed with SIGKILL while the clients play and started
again on the same port. The clients must reconnect, resume their matches and finish the run,
and no match may end by ``disconnect``, ``resign`` or ``timeout`` because of the kill.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path

import pytest

from clients.tournament.runner import make_plan
from tests.cluster_support import client_resync_off, nodes  # noqa: F401
from tests.failover_support import ROOT, Server, dead_url
from tests.mqtt_support import Broker
from tests.patience import patience
from tests.pg_support import pg_url
from tests.server.test_server_http import http_get

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

FORFEITS = ("disconnect", "resign", "timeout")


async def _moo(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )


async def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _live_matches(port: int) -> bool:
    """The server runs at least one match that has started (secrets set, guesses flowing)."""
    _, _, body = await http_get(port, "/healthz")
    return int(json.loads(body)["live_matches"]) >= 1


@pytest.mark.slow(30)
async def test_tournament_resumes_matches_across_a_sigkill(tmp_path: Path) -> None:
    server = Server(tmp_path / "arena.db")
    await server.start()
    out = tmp_path / "t.jsonl"
    # paced as in the two-node test below, so that the games left after the check last
    # seconds, not the fraction of one a loaded machine can keep this process waiting
    proc = await _moo("tournament", "minimum", "random", "--url", server.url, "--rounds", "12",
                      "--seed", "5", "--concurrency", "4", "--out", str(out), "--no-progress",
                      "--name-prefix", "fo-", "--client-rate", "2")
    try:
        async with asyncio.timeout(patience(60)):
            # mid-tournament, with matches the server has announced (so their seats must be
            # resumed after the kill, not simply re-created)
            while len(await _lines(out)) < 3 or not await _live_matches(server.port):
                await asyncio.sleep(0.01)
        killed_ms = int(time.time() * 1000)
        await server.kill()
        await server.start()
        async with asyncio.timeout(patience(240)):
            _, stderr = await proc.communicate()
        assert proc.returncode == 0, stderr.decode()
        records = [json.loads(line) for line in await _lines(out)]
        jobs = make_plan(["minimum", "random"], fmt="roundrobin", rounds=12, seed=5,
                         secrets="uniform")
        assert sorted(r["key"] for r in records) == sorted(j.key for j in jobs)
        assert [r for r in records if r["reason"] in FORFEITS] == []
        # some matches were being played when the server died, and were finished after it
        spanning = [r for r in records if r["started_ms"] < killed_ms < r["finished_ms"]]
        assert spanning, "no match was in flight at the kill"
        assert all(r["reason"] in ("solved", "guess_cap") for r in spanning)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await server.stop()


async def test_moo_bot_with_a_dead_first_url_rides_a_sigkill(tmp_path: Path) -> None:
    server = Server(tmp_path / "arena.db")
    await server.start()
    games = 6
    proc = await _moo("bot", "random", "--vs-bot", "random", "--games", str(games), "--json",
                      "--seed", "3", "--url", f"{dead_url()},{server.url}")
    assert proc.stdout is not None
    try:
        lines: list[dict[str, object]] = []
        async with asyncio.timeout(patience(60)):
            lines.append(json.loads(await proc.stdout.readline()))
        await server.kill()
        await server.start()
        async with asyncio.timeout(patience(180)):
            rest, stderr = await proc.communicate()
        assert proc.returncode == 0, stderr.decode()
        lines += [json.loads(line) for line in rest.decode().splitlines()]
        matches = [m for m in lines if m["type"] == "match"]
        summary = [m for m in lines if m["type"] == "summary"]
        assert len(matches) == games, lines
        assert len({m["match_id"] for m in matches}) == games
        assert all(m["outcome"] in ("win", "loss", "draw") for m in matches), matches
        assert [m for m in matches if m["reason"] in FORFEITS] == []
        assert summary and summary[0]["matches"] == games, summary
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await server.stop()


@pytest.mark.slow(25, nodes=True)
async def test_tournament_across_two_cluster_nodes_when_one_dies(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """Two nodes on one PostgreSQL database and one broker; the node every client starts on
    (the first URL) is killed mid-tournament: the clients move to the second node, which takes
    the dead node's matches over within the lease, and every match ends normally."""
    await broker.start()
    out = tmp_path / "t.jsonl"
    proc: asyncio.subprocess.Process | None = None
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=2000) as (a, b):
            urls = f"ws://127.0.0.1:{a.port}/,ws://127.0.0.1:{b.port}/"
            # Two messages a second per client (bursts of 4): a game of about eight messages
            # takes a few seconds, so the kill below lands in the middle of the tournament
            # even if this process is kept off the CPU for a second or more after its third
            # line. At the default 18 a second the 13 games after it once took one second in
            # all, and a loaded machine delayed the kill past their end (no game spanned it).
            proc = await _moo("tournament", "minimum", "random", "--url", urls, "--rounds", "8",
                              "--seed", "9", "--concurrency", "4", "--out", str(out),
                              "--no-progress", "--name-prefix", "cl-", "--client-rate", "2")
            async with asyncio.timeout(patience(60)):
                while len(await _lines(out)) < 3:
                    await asyncio.sleep(0.05)
            killed_ms = int(time.time() * 1000)
            await a.stop(signal.SIGKILL)
            async with asyncio.timeout(patience(240)):
                _, stderr = await proc.communicate()
            assert proc.returncode == 0, stderr.decode() + b.text()
            records = [json.loads(line) for line in await _lines(out)]
            jobs = make_plan(["minimum", "random"], fmt="roundrobin", rounds=8, seed=9,
                             secrets="uniform")
            assert sorted(r["key"] for r in records) == sorted(j.key for j in jobs)
            assert [r for r in records if r["reason"] in FORFEITS] == []
            assert [r for r in records if r["started_ms"] < killed_ms < r["finished_ms"]]
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await broker.stop()


@pytest.mark.slow(25, nodes=True)
async def test_moo_bot_across_two_cluster_nodes_when_one_dies(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """``moo bot`` (the SDK's reconnecting path) on node a, then a is killed: it moves to b,
    resumes the match b took over, and plays all its games."""
    await broker.start()
    proc: asyncio.subprocess.Process | None = None
    games = 5
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=2000) as (a, b):
            proc = await _moo("bot", "random", "--vs-bot", "random", "--games", str(games),
                              "--json", "--seed", "4", "--url",
                              f"ws://127.0.0.1:{a.port}/", "--url", f"ws://127.0.0.1:{b.port}/")
            assert proc.stdout is not None
            lines: list[dict[str, object]] = []
            async with asyncio.timeout(patience(60)):
                lines.append(json.loads(await proc.stdout.readline()))
            await a.stop(signal.SIGKILL)
            async with asyncio.timeout(patience(180)):
                rest, stderr = await proc.communicate()
            assert proc.returncode == 0, stderr.decode() + b.text()
            lines += [json.loads(line) for line in rest.decode().splitlines()]
            matches = [m for m in lines if m["type"] == "match"]
            assert len({m["match_id"] for m in matches}) == games, lines
            assert all(m["outcome"] in ("win", "loss", "draw") for m in matches), matches
            assert [m for m in matches if m["reason"] in FORFEITS] == []
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await broker.stop()
