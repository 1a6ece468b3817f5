"""The ladder on a cluster (docs/ladder.md, "On a cluster"): requests on every node, pairing
and scheduling on the lobby leader, jobs through the store, workers on any node, and a leader
killed mid-run.

Real ``moo serve`` nodes on one fresh PostgreSQL database and a Mosquitto broker, short
leases. The worker is scripted by the test (tests/ladder_support.py: its bots play through
their own connections, nothing runs in the sandbox); tests/clients/test_worker.py and
``bench/ladder_run.py --cluster`` run the real one.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster_support import following_a, nodes, query, until
from tests.ladder_support import GOOD, answered, next_job, play_pairing, submit, worker
from tests.mqtt_support import Broker
from tests.pg_support import pg_url
from tests.server_support import Client

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

LEASE_MS = 2000


@pytest.fixture(autouse=True)
def _worker_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every node takes workers with the same key (the nodes read MOO_* at start)."""
    monkeypatch.setenv("MOO_LADDER_WORKER_KEY", "k")


async def _two_bots(ann: Client, w: Client) -> list[str]:
    """Two bots of ann's, submitted on ann's node and checked by the worker."""
    ids = []
    for name in ("alpha", "beta"):
        await answered(ann, {"type": "ladder_show"})  # the leader has read the ladder
        reply = await submit(ann, GOOD, name=name)
        assert reply["type"] == "ladder_submitted", reply
        ids.append(reply["bot"]["bot_id"])
    for _ in ids:
        job = await next_job(w, "check")
        done = await w.request({"type": "worker_done", "job_id": job["job_id"],
                                "accepted": True, "reason": "", "name": "x"})
        assert done["type"] == "worker_noted", done
    return ids


async def _standings(client: Client) -> list[dict[str, Any]]:
    reply = await answered(client, {"type": "ladder_show"})
    assert reply["type"] == "ladder_standings", reply
    return [{k: r[k] for k in ("bot", "games", "wins", "draws", "losses", "rating")}
            for r in reply["standings"]]


async def _games(client: Client, n: int) -> None:
    async def counted() -> bool:
        rows = await _standings(client)
        return len(rows) == 2 and all(r["games"] == n for r in rows)

    await until(counted, 60, f"{n} games counted for each bot")


async def _unfinished(db: str, matches: list[str]) -> list[Any]:
    """Those of ``matches`` whose ladder game has no end stored."""
    return await query(db, "SELECT match_id FROM ladder_games WHERE ended_ms IS NULL"
                           " AND match_id = ANY($1::text[])", matches)


async def test_submit_on_one_node_worker_on_another_same_standings_everywhere(
    pg_url: str, broker: Broker
) -> None:
    """ann submits on b, the worker works on c, a (the leader) pairs: the games are played,
    and every node shows the same standings."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=LEASE_MS) as (a, b, c):
            await following_a(a, b, c)
            ann = await Client.hello(b.port, "ann")
            w = await worker(c.port)
            await _two_bots(ann, w)
            checked = await ann.of_type("ladder_checked")  # told on b, from the leader
            assert checked["accepted"] is True, checked
            job = await next_job(w, "play")
            await play_pairing(c.port, job, 0)  # bots connect to c; the matches run on a
            done = await w.request({"type": "worker_done", "job_id": job["job_id"]})
            assert done["type"] == "worker_noted", done
            await _games(ann, 2)
            views = [await _standings(await Client.hello(n.port, f"viewer-{n.name}"))
                     for n in (a, b, c)]
            assert views[0] == views[1] == views[2], views
            winner, loser = job["bots"][0]["player"], job["bots"][1]["player"]
            assert {r["bot"]: r["wins"] for r in views[0]} == {winner: 2, loser: 0}
            assert await _unfinished(pg_url, job["matches"]) == []
            # a connected bot joins and leaves there too, at the leader (docs/ladder.md, "On a
            # cluster"; tests/cluster/test_cluster_ladder_connected.py plays its games)
            robo = await Client.hello(b.port, "robo", bot=True)
            joined = await robo.request({"type": "ladder_join"})
            assert joined["type"] == "ladder_status", joined
            assert (joined["bot"]["kind"], joined["bot"]["status"]) == ("connected", "active")
            left = await robo.request({"type": "ladder_leave"})
            assert left["type"] == "ladder_status", left
            assert left["bot"]["status"] == "offline", left
            await robo.close()
            await w.close()
            await ann.close()
    finally:
        await broker.stop()


async def test_the_leader_killed_mid_run_leaves_no_game_stuck_and_pairing_goes_on(
    pg_url: str, broker: Broker
) -> None:
    """A pairing's play job is claimed (its matches started on a, the leader) and a is
    killed before a move. The matches are taken over; the bots, on c, play them there; the
    worker's messages reach b, leading now, which knows its claim from the store; the games
    count, and b pairs the two bots again, once."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=LEASE_MS) as (a, b, c):
            await following_a(a, b, c)
            ann = await Client.hello(b.port, "ann")
            w = await worker(c.port)
            await _two_bots(ann, w)
            job = await next_job(w, "play")

            # the games' matches committed first: a claim answered as the leader dies before
            # its matches are stored is the documented void case, not the one tested here
            async def stored() -> bool:
                rows = await query(pg_url, "SELECT match_id FROM matches"
                                           " WHERE match_id = ANY($1::text[])", job["matches"])
                return len(rows) == 2

            await until(stored, 20, "the pairing's two matches stored")
            a.proc.kill()
            await a.proc.wait()
            await play_pairing(c.port, job, 1)
            done = await answered(w, {"type": "worker_done", "job_id": job["job_id"]})
            assert done["type"] == "worker_noted", done
            await _games(ann, 2)
            assert await _unfinished(pg_url, job["matches"]) == []
            # pairing goes on at b: one new pairing, not two
            again = await next_job(w, "play")
            assert set(again["matches"]).isdisjoint(job["matches"])
            pairings = await query(pg_url, "SELECT DISTINCT pairing FROM ladder_games")
            assert len(pairings) == 2, pairings
            await play_pairing(c.port, again, None)
            await answered(w, {"type": "worker_done", "job_id": again["job_id"]})
            await _games(ann, 4)
            rows = await _standings(await Client.hello(c.port, "viewer"))
            winner, loser = job["bots"][1]["player"], job["bots"][0]["player"]
            assert {r["bot"]: (r["wins"], r["draws"]) for r in rows} == {
                winner: (2, 2), loser: (0, 2)}
            assert await _unfinished(pg_url, job["matches"] + again["matches"]) == []
            await w.close()
            await ann.close()
    finally:
        await broker.stop()
