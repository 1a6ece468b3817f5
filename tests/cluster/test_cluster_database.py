"""A real PostgreSQL restart under a running cluster (docs/cluster.md, "Failures").

The other database-outage tests cut a TCP relay in front of the machine's shared server; here
the database server itself goes down (fast shutdown: every session terminated) and comes back
on the same port, as in an upgrade or a crash of the database host. Two nodes, one match whose
players sit on different nodes: while the database is down both players are refused with
``storage_unavailable`` (the node's own player directly, the other one through the bus) and
``/healthz`` says so; when it is back the nodes heal by themselves, the players resume, the
match is played to its end, and the log holds exactly the acknowledged guesses.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from tests.cluster_support import Node, challenge_match, nodes, query, until
from tests.mqtt_support import Broker
from tests.pg_server import PrivatePostgres
from tests.server.test_server_http import http_get
from tests.server_support import Client

RETRYABLE = {"storage_unavailable", "not_available"}


async def _db_state(node: Node) -> str:
    status, _, body = await http_get(node.port, "/healthz")
    health: dict[str, Any] = json.loads(body)
    return str(health.get("db")) if status in (200, 503) else f"http {status}"


async def _resume(
    node: Node, token: str | None, mid: str, enc: str, then: str = "resumed"
) -> Client:
    """Reconnect and ``resume`` as a client does after an outage: a refusal documented as
    retryable is retried, within a bound; any other answer fails the test. ``then`` is the
    event that shows the seat is live again (``resumed`` after a re-adoption by replay)."""
    seen: list[Any] = []
    clients: list[Client] = []

    async def attempt() -> bool:
        client = await Client.hello(node.port, "x", enc, token=token)
        clients.append(client)
        reply = await client.request({"type": "resume", "match_id": mid, "last_seq": 0})
        seen.append(reply)
        if reply.get("type") == "error":
            assert reply["code"] in RETRYABLE, reply
            return False
        assert reply["type"] == "match" and reply["match_id"] == mid, reply
        await client.event(mid, then)
        return True

    try:
        await until(attempt, 40, f"match {mid} resumed on {node.name} ({seen})", poll=0.2)
    finally:
        for old in clients[:-1]:
            await old.close()
    return clients[-1]


async def test_a_real_database_restart_under_a_cluster(
    private_postgres: PrivatePostgres, broker: Broker
) -> None:
    pg = private_postgres
    try:
        pg.init()
        pg.start()
        admin = await asyncpg.connect(pg.url)
        await admin.execute("CREATE DATABASE moo")
        await admin.close()
        db = pg.url.rsplit("/", 1)[0] + "/moo"
        await broker.start()
        async with nodes(db, "a", "b", bus=broker.url, lease_ms=4000) as (a, b):
            # ann (JSON) on a, bob (MessagePack) on b; the match is made on a, so a owns it
            ann, bob0, mid = await challenge_match(a.port)
            await bob0.close()
            bob = await _resume(b, bob0.token, mid, "moo.v1.msgpack", then="back")
            await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
            await bob.request({"type": "secret", "match_id": mid, "secret": "4567"})
            await ann.event(mid, "started")
            ok = await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
            assert ok["kind"] == "guess"
            ok = await bob.request({"type": "guess", "match_id": mid, "guess": "9876"})
            assert ok["kind"] == "guess"  # acknowledged by the owner, through the bus

            pg.stop()  # the database server goes down: every session is terminated
            refused = await ann.request({"type": "guess", "match_id": mid, "guess": "6789"})
            assert refused["type"] == "error" and refused["code"] == "storage_unavailable"
            refused = await bob.request({"type": "guess", "match_id": mid, "guess": "8765"})
            assert refused["type"] == "error" and refused["code"] in RETRYABLE, refused
            assert await _db_state(a) == "unavailable"

            pg.start()  # back on the same port: the nodes notice by themselves
            for node in (a, b):
                async def healed(node: Node = node) -> bool:
                    return await _db_state(node) == "ok"

                await until(healed, 30, f"node {node.name} reporting the database back")
            await ann.close()
            await bob.close()
            ann = await _resume(a, ann.token, mid, "moo.v1.json")
            bob = await _resume(b, bob0.token, mid, "moo.v1.msgpack")
            ok = await ann.request({"type": "guess", "match_id": mid, "guess": "4567"})
            assert ok["kind"] == "guess"  # ann solves in 2; bob may still draw
            ok = await bob.request({"type": "guess", "match_id": mid, "guess": "0123"})
            assert ok["kind"] == "guess"
            fins = [await p.event(mid, "finished") for p in (ann, bob)]
            assert all(f["winner"] is None for f in fins), fins  # both solved in two: a draw

            rows = await query(
                db, "SELECT body FROM events WHERE match_id = $1 ORDER BY seq", mid
            )
            logged = [json.loads(r[0]) for r in rows]
            guesses = [e["guess"] for e in logged if e["kind"] == "guess"]
            # every acknowledged guess, once; nothing that was refused
            assert sorted(guesses) == sorted(["5678", "9876", "4567", "0123"]), guesses
            assert [e["seq"] for e in logged] == list(range(1, len(logged) + 1))
            for p in (ann, bob):
                await p.close()
            for n in (a, b):
                assert await n.stop() == 0, n.text()
    finally:
        await broker.stop()
