"""A hosted arena on a three-node cluster (issue #20): ``moo bot --tournament`` processes
spread over the nodes, the node that runs the tournaments (the lobby leader) killed in the
middle; every game the tournament started finishes, none by a forfeit, and the standings add up.

The suite's run is ten bots for 30 s, started by its creator as soon as all have joined;
``./dev verify`` runs the long form (``MOO_VERIFY_ALL=1``: twenty bots for two minutes).

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
from clients.sdk import Client
from clients.sdk.tokens import TokenStore
from tests.client_support import ROOT, moo_command
from tests.patience import patience
from tests.pg_server import PrivatePostgres

#: the long form, ./dev verify's: twenty bots for two minutes
LONG = os.environ.get("MOO_VERIFY_ALL") == "1"
BOTS = 20 if LONG else 10
DURATION_S = 120 if LONG else 30


async def _moo(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *moo_command(*args), cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)


async def _tournament(client: Client, tid: str, pred: Any) -> dict[str, Any]:
    """The first state of the tournament (now or in a later update) that satisfies ``pred``.

    The SDK's reader keeps the connection served (pings answered) while the test waits for
    the bot processes; its latest update of each tournament is in ``client.tournaments``."""
    reconnects = client.reconnects
    async with asyncio.timeout(patience(DURATION_S * 3)):
        while True:
            if client.reconnects != reconnects:  # watching belongs to a connection
                reconnects = client.reconnects
                await client.watch_tournament(tid)
            info = client.tournaments.get(tid)
            if info is not None and pred(info.data):
                return dict(info.data)
            await client.receive()


@pytest.mark.slow(45)
async def test_arena_of_bots_loses_no_game_to_a_node_kill(
        private_postgres: PrivatePostgres, mosquitto: str, tmp_path: Path) -> None:
    env = dict(os.environ, MOO_TOKENS=str(tmp_path / "tokens.json"), PYTHONUNBUFFERED="1")
    cluster = Cluster(n=3, lease_ms=3000, grace_ms=60000, pg=private_postgres,  # type: ignore[arg-type]
                      log_dir=Path(os.environ.get("MOO_TOURNAMENT_LOGS", tmp_path)))
    await cluster.open()
    procs: list[asyncio.subprocess.Process] = []
    try:
        _, b, c = cluster.nodes
        urls = [n.url for n in cluster.nodes]
        for _ in range(20):
            # a cluster that has just started may still be reading its tournaments at the
            # lobby's leader: a refusal that ends in "try again" changed nothing (the docs).
            # It starts when the test's creator says so, once every bot has joined (the
            # start time is only a safety net).
            create = await _moo(env, "tournament", "create", "--url", b.url, "--name", "arena",
                                "--format", "arena", "--rounds", "1", "--duration",
                                str(DURATION_S), "--pool", "bots", "--start-in",
                                str(int(patience(600))), "--as", "arena-host")
            out, err = await create.communicate()
            if create.returncode == 0 or b"try again" not in err:
                break
            await asyncio.sleep(0.5)
        assert create.returncode == 0, err.decode()
        tid = out.decode().strip().splitlines()[-1]
        watcher = Client([c.url, b.url, cluster.nodes[0].url], "watcher", bot=True)
        await watcher.connect()
        first = await watcher.watch_tournament(tid)
        assert first.status == "upcoming"
        for i in range(BOTS):
            order = urls[i % 3:] + urls[:i % 3]  # spread the bots over the nodes
            procs.append(await _moo(env, "bot", "random", "--url", ",".join(order),
                                    "--tournament", tid, "--name", f"ar-{i:02d}", "--seed",
                                    str(i), "--json"))
        await _tournament(watcher, tid, lambda t: len(t["players"]) == BOTS)
        # the creator (moo tournament create --as remembered its token) starts it now
        host = Client([b.url], "arena-host",
                      token=TokenStore(tmp_path / "tokens.json").get(b.url, "arena-host"))
        await host.connect()
        started = await host.start_tournament(tid)
        assert started.data["starts_at"] <= _now_ms(), started.data
        await host.close()
        running = await _tournament(watcher, tid, lambda t: t["status"] == "running"
                                    and t["game_count"] >= BOTS)
        # the middle of the arena (the first update from then on; they come with every game):
        # the lobby leader, which runs the tournaments, dies
        middle = running["starts_at"] + DURATION_S * 1000 // 2
        await _tournament(watcher, tid, lambda t: _now_ms() >= middle)
        leader = (await cluster.healthz(b))["lobby_leader"]
        victim = next(n for n in cluster.nodes if n.name == leader)
        await victim.stop(signal.SIGKILL)
        results: list[tuple[int, str]] = []
        for proc in procs:
            async with asyncio.timeout(patience(DURATION_S * 3)):
                out, err = await proc.communicate()
            results.append((proc.returncode or 0, err.decode()[-400:]))
        assert all(code == 0 for code, _ in results), results
        done = await _tournament(watcher, tid, lambda t: t["status"] == "finished")
        rows = done["standings"]
        # the long form's two minutes give every bot several games after the kill too; the
        # suite's 30 s, on a loaded machine, may give none after it (seen at load 18)
        assert len(rows) == BOTS and done["game_count"] >= (2 * BOTS if LONG else BOTS)
        assert all(g["result"] in ("1-0", "0-1", "1/2-1/2") for g in done["games"])
        # every match started for the tournament (its config names it) finished in the
        # database, none by a forfeit or a timeout, and they are exactly the games counted
        ends = await cluster.query(
            "SELECT m.match_id, m.finished, (SELECT body FROM events e WHERE e.match_id ="
            " m.match_id AND e.seq = 1), (SELECT body FROM events e WHERE e.match_id ="
            " m.match_id ORDER BY e.seq DESC LIMIT 1) FROM matches m WHERE EXISTS (SELECT 1"
            " FROM events e WHERE e.match_id = m.match_id AND e.seq = 1 AND"
            " e.body::jsonb #>> '{config,tournament_id}' = $1)", tid)
        assert len(ends) == done["game_count"]
        assert all(r[1] == 1 for r in ends)
        last = [json.loads(r[3]) for r in ends]
        assert {e["kind"] for e in last} == {"finished"}
        reasons = {e["reason"] for e in last}
        assert reasons <= {"solved", "guess_cap"}, reasons
        per_player: dict[str, list[float]] = {}
        for r, end in zip(ends, last, strict=True):
            players = json.loads(r[2])["players"]
            for seat, name in enumerate(players):
                points = 0.5 if end["winner"] is None else float(end["winner"] == seat)
                per_player.setdefault(name, []).append(points)
        for row in rows:
            mine = per_player.get(row["name"], [])
            assert row["games"] == len(mine) == row["wins"] + row["draws"] + row["losses"]
            assert row["score"] == sum(mine) == row["wins"] + row["draws"] / 2
        assert sum(r["games"] for r in rows) == 2 * done["game_count"]
        assert sum(r["wins"] for r in rows) == sum(r["losses"] for r in rows)
        print(f"arena: {done['game_count']} games by {BOTS} bots in {DURATION_S} s, node "
              f"{victim.name} (the leader) killed at the middle; per bot "
              f"{min(r['games'] for r in rows)}-{max(r['games'] for r in rows)} games")
        shown = await _moo(env, "tournament", "show", tid, "--url", b.url, "--json")
        out, err = await shown.communicate()
        assert shown.returncode == 0, err.decode()
        assert json.loads(out)["standings"] == rows
        await watcher.close()
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await cluster.close()


def _now_ms() -> int:
    return int(time.time() * 1000)
