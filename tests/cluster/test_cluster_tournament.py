"""A hosted arena on a three-node cluster (issue #20): twenty ``moo bot --tournament``
processes spread over the nodes for two minutes, the node that runs the tournaments (the lobby
leader) killed in the middle; every game the tournament started finishes, none by a forfeit,
and the standings add up.

Real components throughout (bench/harness/cluster.py: PostgreSQL, a broker, ``moo serve
--cluster`` nodes); nothing waits on a sleep, every wait ends at its event.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from bench.harness.cluster import Cluster
from tests.client_support import ROOT, moo_command
from tests.patience import patience
from tests.pg_server import PrivatePostgres
from tests.server_support import Client

BOTS = 20
DURATION_S = 120


async def _moo(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *moo_command(*args), cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)


async def _tournament(client: Client, tid: str, pred: Any) -> dict[str, Any]:
    msg = await client.expect(lambda m: m.get("type") == "tournament"
                              and m["tournament"]["tournament_id"] == tid
                              and pred(m["tournament"]), timeout=DURATION_S * 3)
    return dict(msg["tournament"])


@pytest.mark.slow
async def test_arena_of_twenty_bots_loses_no_game_to_a_node_kill(
        private_postgres: PrivatePostgres, mosquitto: str, tmp_path: Path) -> None:
    env = dict(os.environ, MOO_TOKENS=str(tmp_path / "tokens.json"), PYTHONUNBUFFERED="1")
    cluster = Cluster(n=3, lease_ms=3000, grace_ms=60000, pg=private_postgres)  # type: ignore[arg-type]
    await cluster.open()
    procs: list[asyncio.subprocess.Process] = []
    try:
        a, b, c = cluster.nodes
        urls = [n.url for n in cluster.nodes]
        create = await _moo(env, "tournament", "create", "--url", b.url, "--name", "arena",
                            "--format", "arena", "--rounds", "1", "--duration",
                            str(DURATION_S), "--pool", "bots", "--start-in", "20")
        out, err = await create.communicate()
        assert create.returncode == 0, err.decode()
        tid = out.decode().strip().splitlines()[-1]
        watcher = await Client.hello(c.port, "watcher", bot=True)
        first = await watcher.request({"type": "tournament_watch", "tournament_id": tid})
        assert first["type"] == "tournament", first
        for i in range(BOTS):
            order = urls[i % 3:] + urls[:i % 3]  # spread the bots over the nodes
            procs.append(await _moo(env, "bot", "random", "--url", ",".join(order),
                                    "--tournament", tid, "--name", f"ar-{i:02d}", "--seed",
                                    str(i), "--json"))
        running = await _tournament(watcher, tid, lambda t: t["status"] == "running"
                                    and len(t["players"]) == BOTS and len(t["games"]) >= 20)
        # the middle of the arena (the first update from then on; they come with every game):
        # the lobby leader, node a, which runs the tournaments, dies
        middle = running["starts_at"] + DURATION_S * 1000 // 2
        await _tournament(watcher, tid, lambda t: _now_ms() >= middle)
        await a.stop(signal.SIGKILL)
        results: list[tuple[int, str]] = []
        for proc in procs:
            async with asyncio.timeout(patience(DURATION_S * 3)):
                out, err = await proc.communicate()
            results.append((proc.returncode or 0, err.decode()[-400:]))
        assert all(code == 0 for code, _ in results), results
        done = await _tournament(watcher, tid, lambda t: t["status"] == "finished")
        rows = done["standings"]
        games = done["games"]
        assert len(rows) == BOTS and len(games) >= 2 * BOTS
        assert all(g["result"] in ("1-0", "0-1", "1/2-1/2") for g in games)
        for r in rows:
            assert r["games"] == r["wins"] + r["draws"] + r["losses"]
            assert r["score"] == r["wins"] + r["draws"] / 2
            assert r["games"] == sum(1 for g in games if r["name"] in g["players"])
        assert sum(r["games"] for r in rows) == 2 * len(games)
        assert sum(r["wins"] for r in rows) == sum(r["losses"] for r in rows)
        # every game's match finished in the database, none by a forfeit or a timeout
        ids = [g["match_id"] for g in games]
        rows_db = await cluster.query(
            "SELECT m.match_id, e.body FROM matches m JOIN events e ON e.match_id = m.match_id"
            " WHERE m.match_id = ANY($1::text[]) AND m.finished = 1 AND e.seq = ("
            "SELECT max(seq) FROM events WHERE match_id = m.match_id)", ids)
        assert len(rows_db) == len(ids)
        reasons = {json.loads(r[1])["reason"] for r in rows_db}
        assert reasons <= {"solved", "guess_cap"}, reasons
        # the matches started for the tournament are exactly its games (none orphaned)
        started = await cluster.query(
            "SELECT match_id FROM events WHERE seq = 1 AND body::jsonb #>> "
            "'{config,tournament_id}' = $1", tid)
        assert sorted(r[0] for r in started) == sorted(ids)
        shown = await _moo(env, "tournament", "show", tid, "--url", b.url, "--json")
        out, err = await shown.communicate()
        assert shown.returncode == 0, err.decode()
        assert json.loads(out)["standings"] == rows
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await cluster.close()


def _now_ms() -> int:
    return int(time.time() * 1000)
