"""The public MQTT event stream (docs/mqtt.md) on a cluster: each event published once, by the
match's owner (docs/cluster.md, "MQTT features relied on").

Two nodes publish to one broker (``--mqtt``, beside the bus on ``--cluster``); a match whose
players sit on different nodes is played to its end. A subscriber on ``moo/v1/#`` must see
every event of the match exactly once, in order, with no secret in it, and one result, although
both nodes saw the events (one ran the match, the other relayed them to its player).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cluster_support import Node, challenge_match, nodes, query, until
from tests.mqtt_support import Broker
from tests.pg_support import pg_url
from tests.server.test_mqtt import Subscriber
from tests.server.test_server_http import http_get
from tests.server_support import Client

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here


async def _mqtt(node: Node) -> dict[str, Any]:
    _, _, body = await http_get(node.port, "/healthz")
    state: dict[str, Any] = json.loads(body)["mqtt"]
    return state


async def test_each_event_is_published_once_by_the_owner(
    pg_url: str, broker: Broker, tmp_path: Path,
) -> None:
    await broker.start()
    try:
        extra = ("--mqtt", broker.url)
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=4000, extra=extra) as (a, b):
            for node in (a, b):
                async def connected(node: Node = node) -> bool:
                    return bool((await _mqtt(node))["connected"])

                await until(connected, 20, f"node {node.name}'s publisher connected")
            async with Subscriber(broker.port) as sub:
                ann, bob0, mid = await challenge_match(a.port)
                await bob0.close()
                bob = await Client.hello(b.port, "x", "moo.v1.msgpack", token=bob0.token)
                resumed = await bob.request({"type": "resume", "match_id": mid, "last_seq": 0})
                assert resumed["type"] == "match", resumed
                await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
                await bob.request({"type": "secret", "match_id": mid, "secret": "4567"})
                await ann.event(mid, "started")
                for guess in ("5678", "4567"):
                    await ann.request({"type": "guess", "match_id": mid, "guess": guess})
                await bob.request({"type": "guess", "match_id": mid, "guess": "9876"})
                await bob.request({"type": "guess", "match_id": mid, "guess": "1234"})
                fin = await ann.event(mid, "finished")
                assert fin["winner"] == 0
                result = await sub.wait_for(f"moo/v1/matches/{mid}/result")
                assert result["winner_name"] == "ann" and result["secrets"] == ["0123", "4567"]

                async def all_events() -> bool:
                    seqs = [e["seq"] for e in sub.on(f"moo/v1/matches/{mid}/events")]
                    return fin["seq"] in seqs

                await until(all_events, 20, "the finished event on the stream")
                # a ping round trip through each node, so anything a node would still publish
                # for this match has been handed to the broker by now
                for client in (ann, bob):
                    assert (await client.request({"type": "ping"}))["type"] == "pong"
                events = sub.on(f"moo/v1/matches/{mid}/events")
                seqs = [e["seq"] for e in events]
                # once each, in order, from 1: no node published an event twice
                assert seqs == list(range(1, fin["seq"] + 1)), seqs
                assert all("secret" not in e for e in events if e["kind"] == "secret")
                assert "secrets" not in events[-1] and events[-1]["kind"] == "finished"
                assert len(sub.on(f"moo/v1/matches/{mid}/result")) == 1
            rows = await query(pg_url, "SELECT node FROM owners WHERE match_id = $1", mid)
            assert [r[0] for r in rows] == ["a"]
            # the owner published the match (the other node may publish its own stats only)
            published = {n.name: (await _mqtt(n))["published"] for n in (a, b)}
            assert published["a"] >= len(seqs) + 1, published
            for c in (ann, bob):
                await c.close()
            for n in (a, b):
                assert await n.stop() == 0, n.text()
    finally:
        await broker.stop()
