"""A numbered guess retried after its node was killed right after the commit (issue 31, gap 5 of
docs/cluster.md "Status"; docs/protocol.md, "Retrying safely").

Real ``moo serve`` nodes on one fresh PostgreSQL database, short leases. The guess lands in
the log, the node dies with the answer, the match is taken over by the other node, and the
client, back on that node with its token, sends the same guess under the same number: the
log must hold one guess, and the answer must be the original event.
"""

from __future__ import annotations

import json
from typing import Any

from tests.cluster_support import nodes, query, until
from tests.mqtt_support import Broker
from tests.pg_support import pg_url
from tests.server.test_server_http import http_get
from tests.server_support import Client, free_match

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

LEASE_MS = 2000


async def _on_bus(*ports: int) -> None:
    for port in ports:
        async def up(port: int = port) -> bool:
            _, _, body = await http_get(port, "/healthz")
            return bool(json.loads(body)["bus"] == "ok")

        await until(up, 20, f"node on port {port} on the bus")


async def _guesses(db: str, mid: str) -> list[dict[str, Any]]:
    rows = await query(db, "SELECT body FROM events WHERE match_id = $1 ORDER BY seq", mid)
    return [e for e in (json.loads(r[0]) for r in rows) if e["kind"] == "guess"]


async def test_a_guess_retried_after_its_node_died_is_not_played_twice(pg_url: str) -> None:
    async with nodes(pg_url, "a", "b", lease_ms=LEASE_MS) as (a, b):
        ann, bob, mid = await free_match(a.port)
        await ann.send({"type": "guess", "match_id": mid, "guess": "5678", "n": 1})

        async def committed() -> bool:
            return len(await _guesses(pg_url, mid)) == 1

        await until(committed, 30, "the guess to be committed")
        a.proc.kill()  # whatever answer a had not sent yet dies with it
        await a.proc.wait()

        async def taken_over() -> bool:
            rows = await query(pg_url, "SELECT node FROM owners WHERE match_id = $1", mid)
            return bool(rows) and rows[0][0] == "b"

        await until(taken_over, 30, "node b to take the match over")
        ann_b = await Client.hello(b.port, "x", token=ann.token)
        retry = {"type": "guess", "match_id": mid, "guess": "5678", "n": 1}
        reply = await ann_b.request(retry)
        (logged,) = await _guesses(pg_url, mid)
        assert reply["type"] == "event" and reply["kind"] == "guess", reply
        assert {k: reply[k] for k in logged} == logged  # the original event, all of it
        taken = await ann_b.request({**retry, "guess": "5679"})
        assert taken["code"] == "guess_taken" and taken["expected"] == 2, taken
        assert len(await _guesses(pg_url, mid)) == 1
        second = await ann_b.request({**retry, "guess": "6789", "n": 2})
        assert second["type"] == "event" and second["n"] == 2, second
        for c in (ann, bob, ann_b):
            await c.close()
        assert await b.stop() == 0


async def test_the_guess_that_ended_the_match_retried_after_its_node_died(
    pg_url: str, broker: Broker
) -> None:
    """The finishing guess lands, its node dies with the answer; no node runs the match any
    more (nothing is taken over: it is finished), so the retry is answered from the log by
    the node the client is on: the original event, not ``unknown_match``."""
    await broker.start()
    async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=LEASE_MS) as (a, b):
        await _on_bus(a.port, b.port)  # b forwards the retry (the match ran on a)
        ann, bob, mid = await free_match(a.port)
        await bob.request({"type": "guess", "match_id": mid, "guess": "9876", "n": 1})
        await ann.send({"type": "guess", "match_id": mid, "guess": "4567", "n": 1})

        async def finished() -> bool:
            rows = await query(pg_url, "SELECT finished FROM matches WHERE match_id = $1", mid)
            return bool(rows) and rows[0][0] == 1

        await until(finished, 30, "the finishing guess to be committed")
        a.proc.kill()
        await a.proc.wait()
        ann_b = await Client.hello(b.port, "x", token=ann.token)
        retry = {"type": "guess", "match_id": mid, "guess": "4567", "n": 1}
        reply = await ann_b.request(retry)
        while reply.get("code") == "not_available":  # "try again": a's lease not over yet
            assert "try again" in reply["message"], reply
            await until(_a_released(pg_url, mid), 30, "node a's hold on the match to end")
            reply = await ann_b.request(retry)
        ann_guesses = [g for g in await _guesses(pg_url, mid) if g["seat"] == 0]
        assert len(ann_guesses) == 1
        assert reply["type"] == "event", reply
        assert {k: reply[k] for k in ann_guesses[0]} == ann_guesses[0]
        taken = await ann_b.request({**retry, "guess": "4568"})
        assert taken["code"] == "guess_taken", taken
        for c in (ann, bob, ann_b):
            await c.close()
        assert await b.stop() == 0


def _a_released(db: str, mid: str) -> Any:
    """Node a's lease ran out: the directory names no owner for the match any more."""

    async def check() -> bool:
        rows = await query(
            db, "SELECT expires_ms < CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS"
            " BIGINT) FROM nodes WHERE name = 'a'",
        )
        return not rows or bool(rows[0][0])

    return check
