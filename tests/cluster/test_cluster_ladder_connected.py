"""Connected bots on the ladder of a cluster (docs/ladder.md, "Connected bots" and "On a
cluster"): ``ladder_join`` and ``ladder_leave`` on any node go to the lobby leader, which
pairs the bot while its connection is open anywhere in the cluster (the lobby's presence) and
starts its games through the cluster's ``Create``, on the node of a seated bot.

Real ``moo serve`` nodes on one fresh PostgreSQL database and a Mosquitto broker, short
leases; the bots are the tests' protocol clients, and the hosted side is played with the play
job's token, as tests/cluster/test_cluster_ladder.py does.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.cluster_support import Node, following_a, nodes, query, until
from tests.ladder_support import GOOD, answered, next_job, submit, worker
from tests.mqtt_support import Broker
from tests.pg_support import pg_url
from tests.server_support import Client

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

LEASE_MS = 2000
#: numbers the viewers' names (a name, once registered, is its player's)
_VIEWERS = itertools.count(1)


@pytest.fixture(autouse=True)
def _worker_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every node takes workers with the same key (the nodes read MOO_* at start)."""
    monkeypatch.setenv("MOO_LADDER_WORKER_KEY", "k")


async def _joined(client: Client) -> dict[str, Any]:
    """``ladder_join`` (sent again while the ladder is moving); the bot object."""
    reply = await answered(client, {"type": "ladder_join"})
    assert reply["type"] == "ladder_status", reply
    bot: dict[str, Any] = reply["bot"]
    assert (bot["kind"], bot["status"], bot["owner"]) == ("connected", "active", client.name)
    return bot


async def _paired(client: Client, seen: set[str]) -> dict[str, int]:
    """The next pairing's two games as ``client`` is told of them (``match``, not in
    ``seen``): match id -> its seat."""
    games: dict[str, int] = {}
    while len(games) < 2:
        msg = await client.expect(lambda m: m.get("type") == "match"
                                  and m["match_id"] not in seen and m["match_id"] not in games)
        assert msg["config"]["ladder"] == "moo:4:0123456789", msg
        games[msg["match_id"]] = msg["seat"]
    assert sorted(games.values()) == [0, 1], games  # seats swapped
    return games


async def _play(match_id: str, seats: dict[int, Client], winner: int | None) -> None:
    """One game through its seats' connections: seat ``winner`` finds the other's secret at
    once, the other guesses wrong (``winner`` None: both find it, a draw)."""
    own = {s: (await c.event(match_id, "secret", seat=s))["secret"] for s, c in seats.items()}
    for s, c in seats.items():
        target = own[1 - s]
        guess = target if winner in (None, s) else next(
            x for x in ("0123", "4567", "8901") if x != target)
        await c.send({"type": "guess", "match_id": match_id, "guess": guess, "n": 1})
    for c in seats.values():
        await c.event(match_id, "finished")


async def _rows(node: Node) -> dict[str, dict[str, Any]]:
    """The standings as ``node`` answers them (from the leader), by bot."""
    viewer = await Client.hello(node.port, f"viewer-{node.name}-{next(_VIEWERS)}")
    try:
        reply = await answered(viewer, {"type": "ladder_show"})
    finally:
        await viewer.close()
    assert reply["type"] == "ladder_standings", reply
    return {r["bot"]: {k: r[k] for k in ("kind", "status", "games", "wins", "draws", "losses",
                                         "forfeits", "rating")} for r in reply["standings"]}


async def _counted(node: Node, games: int) -> dict[str, dict[str, Any]]:
    """The standings at ``node`` once every bot has ``games`` finished games."""
    rows: dict[str, dict[str, Any]] = {}

    async def done() -> bool:
        nonlocal rows
        rows = await _rows(node)
        return len(rows) == 2 and all(r["games"] == games for r in rows.values())

    await until(done, 30, f"{games} games counted for each bot at {node.name}")
    return rows


async def _owners(db: str, matches: list[str]) -> set[str]:
    """The nodes that run ``matches``, once the store has them all."""
    found: set[str] = set()

    async def stored() -> bool:
        nonlocal found
        rows = await query(db, "SELECT match_id, node FROM owners"
                               " WHERE match_id = ANY($1::text[])", matches)
        found = {r["node"] for r in rows}
        return len(rows) == len(matches)

    await until(stored, 20, "the games' matches stored")
    return found


async def test_a_connected_bot_on_b_plays_a_hosted_bot_the_leader_on_a_pairs(
    pg_url: str, broker: Broker
) -> None:
    """cbot joins on b, ann's hosted bot is checked and played by a worker on c; a (the
    leader) pairs them: the play job carries the hosted program only, both games run on b
    (cbot's node) and count; every node shows the same standings; ``ladder_leave`` on b makes
    cbot offline everywhere."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=LEASE_MS) as (a, b, c):
            await following_a(a, b, c)
            ann = await Client.hello(b.port, "ann")
            w = await worker(c.port)
            await answered(ann, {"type": "ladder_show"})  # the leader has read the ladder
            reply = await submit(ann, GOOD, name="alpha")
            assert reply["type"] == "ladder_submitted", reply
            alpha = reply["bot"]["bot_id"]
            check = await next_job(w, "check")
            await w.request({"type": "worker_done", "job_id": check["job_id"],
                             "accepted": True, "reason": "", "name": "x"})
            cbot = await Client.hello(b.port, "cbot", bot=True)
            bot = await _joined(cbot)
            # sent again (its answer lost, say): it is where the first one put it
            twice = await cbot.request({"type": "ladder_join"})
            assert twice["type"] == "ladder_status", twice
            assert twice["bot"]["bot_id"] == bot["bot_id"], twice
            job = await next_job(w, "play")
            assert [x["bot_id"] for x in job["bots"]] == [alpha], job  # the hosted side only
            games = await _paired(cbot, set())
            assert set(games) == set(job["matches"])
            # started through Create on the node of the seated bot (the hosted one is not
            # connected yet), not on the leader
            assert await _owners(pg_url, job["matches"]) == {"b"}
            hosted = await Client.hello(c.port, job["bots"][0]["player"],
                                        token=job["bots"][0]["token"], bot=True)
            for n, match_id in enumerate(job["matches"]):
                assert games[match_id] == 1 - n  # the hosted bot sits in seat n of game n
                await _play(match_id, {n: hosted, 1 - n: cbot}, winner=1 - n)
            await hosted.close()
            done = await w.request({"type": "worker_done", "job_id": job["job_id"]})
            assert done["type"] == "worker_noted", done
            views = [await _counted(node, 2) for node in (a, b, c)]
            assert views[0] == views[1] == views[2], views
            assert {k: (r["kind"], r["status"], r["wins"], r["losses"], r["forfeits"])
                    for k, r in views[0].items()} == {
                "alpha": ("hosted", "active", 0, 2, 0),
                "cbot": ("connected", "active", 2, 0, 0)}
            page = await answered(ann, {"type": "ladder_page", "bot_id": bot["bot_id"]})
            assert sorted(g["match_id"] for g in page["recent"]) == sorted(job["matches"])
            # leaving on b: offline at the leader, so on every node
            left = await cbot.request({"type": "ladder_leave"})
            assert left["type"] == "ladder_status", left
            assert left["bot"]["status"] == "offline"
            # (the leader may have paired them again already: those games are still owed)
            assert set(left["games"]).isdisjoint(job["matches"]) and len(left["games"]) in (
                0, 2), left
            for node in (a, b, c):
                assert (await _rows(node))["cbot"]["status"] == "offline", node.name
            await w.close()
            await cbot.close()
            await ann.close()
    finally:
        await broker.stop()


async def test_two_connected_bots_on_b_and_c_play_and_one_gone_past_the_grace_is_offline(
    pg_url: str, broker: Broker
) -> None:
    """cbot on b and dbot on c, paired by a with no worker: their games start at once and
    count. Paired again, dbot's connection is cut: its seats are forfeited after the grace,
    and it is offline (the leader saw it leave the lobby); cbot stays active."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=LEASE_MS,
                         extra=("--grace-ms", "2000")) as (a, b, c):
            await following_a(a, b, c)
            cbot = await Client.hello(b.port, "cbot", bot=True)
            dbot = await Client.hello(c.port, "dbot", bot=True)
            await _joined(cbot)
            await _joined(dbot)
            mine = await _paired(cbot, set())
            theirs = await _paired(dbot, set())
            assert set(mine) == set(theirs)
            # each game runs on the node of its first seat's bot
            first = {m: ("b" if s == 0 else "c") for m, s in mine.items()}
            for m in mine:
                assert await _owners(pg_url, [m]) == {first[m]}
            for match_id, seat in mine.items():
                await _play(match_id, {seat: cbot, 1 - seat: dbot}, winner=seat)
            views = [await _counted(node, 2) for node in (a, b, c)]
            assert views[0] == views[1] == views[2], views
            assert (views[0]["cbot"]["wins"], views[0]["dbot"]["losses"]) == (2, 2)
            # paired again at once; dbot goes away without a word
            again = await _paired(cbot, set(mine))
            await _paired(dbot, set(mine))
            dbot.ws.transport.abort()
            for match_id in again:
                finished = await cbot.event(match_id, "finished")
                assert finished["reason"] == "disconnect", finished
            for node in (a, b, c):
                rows = await _counted(node, 4)
                assert (rows["dbot"]["status"], rows["dbot"]["losses"],
                        rows["dbot"]["forfeits"]) == ("offline", 4, 2), (node.name, rows)
                assert (rows["cbot"]["status"], rows["cbot"]["wins"]) == ("active", 4)
            await cbot.close()
    finally:
        await broker.stop()


async def test_the_leader_killed_connected_bots_stay_active_and_are_paired_again(
    pg_url: str, broker: Broker
) -> None:
    """cbot (on b) and dbot (on c) have played a pairing and been paired again when a, the
    leader, is killed. b leads now and reads the ladder: both bots are active (their
    connections lived on), the games under way (on b and c) are played out and count, none
    void, and b pairs the two again."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=LEASE_MS) as (a, b, c):
            await following_a(a, b, c)
            cbot = await Client.hello(b.port, "cbot", bot=True)
            dbot = await Client.hello(c.port, "dbot", bot=True)
            await _joined(cbot)
            await _joined(dbot)
            first = await _paired(cbot, set())
            await _paired(dbot, set())
            for match_id, seat in first.items():
                await _play(match_id, {seat: cbot, 1 - seat: dbot}, winner=seat)
            second = await _paired(cbot, set(first))
            await _paired(dbot, set(first))
            assert await _owners(pg_url, list(second)) == {"b", "c"}  # none on a
            a.proc.kill()
            await a.proc.wait()
            await answered(cbot, {"type": "ladder_show"})  # b leads and has read the ladder
            for match_id, seat in second.items():
                await _play(match_id, {seat: cbot, 1 - seat: dbot}, winner=None)
            for node in (b, c):
                rows = await _counted(node, 4)
                assert {k: (r["status"], r["wins"], r["draws"], r["losses"])
                        for k, r in rows.items()} == {
                    "cbot": ("active", 2, 2, 0), "dbot": ("active", 0, 2, 2)}, node.name
            void = await query(pg_url, "SELECT match_id FROM ladder_games WHERE void <> 0")
            assert void == []
            third = await _paired(cbot, set(first) | set(second))  # by b
            await _paired(dbot, set(first) | set(second))
            pairings = await query(pg_url, "SELECT pairing FROM ladder_games"
                                           " WHERE match_id = ANY($1::text[])", list(third))
            assert len({r["pairing"] for r in pairings}) == 1
            await cbot.close()
            await dbot.close()
    finally:
        await broker.stop()
