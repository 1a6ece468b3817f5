"""The cluster-wide lobby state (issue #11): ratings, challenges and rooms across a leader
change, the ``matches`` listing, ``rematch`` across nodes, and X-Forwarded-For behind a proxy.

Real components throughout: PostgreSQL, a Mosquitto broker and ``moo serve`` nodes
(tests/cluster_support.py); nothing waits on a sleep, every wait polls with a deadline.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from moo.variants import parse_rules_spec
from tests.cluster_support import Node, nodes, query, until
from tests.mqtt_support import Broker
from tests.pg_support import pg_url
from tests.server_support import Client
from tests.test_server_http import http_get

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

VARIANT = "moo:3:0123456789"


async def _on_bus(*ns: Node) -> None:
    for n in ns:
        async def ok(n: Node = n) -> bool:
            _, _, body = await http_get(n.port, "/healthz")
            return bool(json.loads(body)["bus"] == "ok")

        await until(ok, 15, f"{n.name} on the bus")


async def _leader_is(node: Node, leader: str) -> bool:
    lines = [ln for ln in node.text().splitlines() if "lobby leader is" in ln]
    return bool(lines) and lines[-1].split("lobby leader is ", 1)[1].startswith(f"{leader} ")


async def _challenge(src: Client, dst: Client, **terms: Any) -> tuple[str, dict[str, Any]]:
    """``src`` challenges ``dst``, who accepts: the match id and ``dst``'s match message."""
    sent = await src.request({"type": "challenge", "opponent": dst.name, **terms})
    assert sent["type"] == "challenge_sent", sent
    offer = await dst.expect(lambda m: m.get("challenge_id") == sent["challenge_id"])
    m = await dst.request({"type": "accept", "challenge_id": offer["challenge_id"]})
    assert m["type"] == "match", m
    await src.expect(lambda x: x.get("type") == "match" and x["match_id"] == m["match_id"])
    return str(m["match_id"]), m


async def _board(c: Client, variant: str | None = None) -> list[tuple[str, int, int, int]]:
    msg: dict[str, Any] = {"type": "leaderboard"}
    if variant is not None:
        msg["variant"] = variant
    reply = await c.request(msg)
    assert reply["type"] == "leaderboard", reply
    return [(p["name"], p["rating"], p["games"], p["wins"]) for p in reply["players"]]


async def test_ratings_are_shared_and_durable_in_postgresql(pg_url: str, tmp_path: Path) -> None:
    """A rated match finished on node a (classic) and one on node b (a variant) are rated once,
    in PostgreSQL: the leaderboards and ``player`` answers are the same from every node, and
    still there after every node restarted."""
    broker = Broker(tmp_path)
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=4000) as (a, b):
            await _on_bus(a, b)
            ann = await Client.hello(a.port, "ann")
            bob = await Client.hello(b.port, "bob")
            # classic, on a (the challenger's node): bob resigns, ann wins
            mid, _ = await _challenge(ann, bob, pacing="free")
            await bob.request({"type": "resign", "match_id": mid})
            for p in (ann, bob):
                await p.event(mid, "finished")
            # a variant, on b: ann resigns, bob wins
            vid, _ = await _challenge(bob, ann, pacing="free", rules=parse_rules_spec(VARIANT).to_dict())
            await ann.request({"type": "resign", "match_id": vid})
            for p in (ann, bob):
                await p.event(vid, "finished")
            owners = {r[0]: r[1] for r in await query(pg_url, "SELECT match_id, node FROM owners")}
            assert owners == {mid: "a", vid: "b"}

            classic_a, classic_b = await _board(ann), await _board(bob)
            assert classic_a == classic_b, (classic_a, classic_b)
            assert [(n, g, w) for n, _, g, w in classic_a] == [("ann", 1, 1), ("bob", 1, 0)]
            assert classic_a[0][1] > classic_a[1][1]
            variant_a, variant_b = await _board(ann, VARIANT), await _board(bob, VARIANT)
            assert variant_a == variant_b
            assert [(n, g, w) for n, _, g, w in variant_a] == [("bob", 1, 1), ("ann", 1, 0)]
            pa = await ann.request({"type": "player", "name": "BOB"})
            pb = await bob.request({"type": "player", "name": "bob"})
            assert pa["games"] == pb["games"] == 1 and pa["rating"] == pb["rating"]
            assert pa["rating"] == classic_a[1][1]
            rows = await query(
                pg_url, "SELECT variant, name, games FROM player_ratings ORDER BY variant, name"
            )
            assert [tuple(r) for r in rows] == [
                ("", "ann", 1), ("", "bob", 1), (VARIANT, "ann", 1), (VARIANT, "bob", 1)
            ]
            for p in (ann, bob):
                await p.close()
            for n in (a, b):
                assert await n.stop(signal.SIGTERM) == 0, n.text()
        # every node restarted: the ratings are still there, from any node
        async with nodes(pg_url, "c", bus=broker.url, lease_ms=4000) as (c,):
            carl = await Client.hello(c.port, "carl")
            assert await _board(carl) == classic_a
            assert await _board(carl, VARIANT) == variant_a
            await carl.close()
    finally:
        await broker.stop()
