"""The bus's publishing path in isolation (server/cluster/bus.py): batching per node and loop
turn, order, re-publishing what the broker never acknowledged, and relay gap detection.

The end-to-end behaviour (real nodes, broker, PostgreSQL) is in tests/cluster/test_cluster_bus.py;
these pin the parts whose failure would only show as a rare lost or reordered message there.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from server.cluster.bus import Bus


class FakeInfo:
    def __init__(self) -> None:
        self.acked = False
        self.rc_failed = False

    def is_published(self) -> bool:
        if self.rc_failed:  # as paho for a publish that failed (e.g. no connection)
            raise RuntimeError("Message publish failed")
        return self.acked


class FakeClient:
    """Records what the bus hands to the MQTT client, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any], FakeInfo]] = []
        self.written = 0  # how many had been handed over when the socket was last written

    def publish_now(self, topic: str, payload: bytes) -> FakeInfo:
        info = FakeInfo()
        self.sent.append((topic, json.loads(payload), info))
        return info

    def write_now(self) -> None:
        self.written = len(self.sent)


class FakeConn:
    def __init__(self) -> None:
        self.closed: tuple[int, str] | None = None
        self.closing = False
        self.player = "ann"

    def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)


def _bus() -> Bus:
    def anything(*args: Any, **kwargs: Any) -> None:
        return None

    arena = SimpleNamespace(act=anything, resume=anything, watch=anything, unwatch=anything,
                            detach=anything, create=anything, player_matches=anything, live={},
                            _storage_failed=anything, listing=anything)
    lobby = SimpleNamespace(arrive=anything, leave=anything, enqueue=anything,
                            unqueue=anything, challenge=anything, answer=anything,
                            room_create=anything, room_join=anything, room_cancel=anything,
                            rematch=anything, _free=anything)
    app: Any = SimpleNamespace(arena=arena, lobby=lobby,
                               store=SimpleNamespace(player_by_token=anything))
    return Bus(app, "mqtt://127.0.0.1:1", "a", 10_000)


async def test_requests_and_relays_of_one_turn_go_out_batched_in_order() -> None:
    bus = _bus()
    client = FakeClient()
    bus._client = client  # type: ignore[assignment]
    for i in range(3):
        bus._send("moo-cluster/b/req", {"rid": f"r{i}", "op": "act", "msg": {"i": i}})
    bus._send("moo-cluster/c/req", {"rid": "r9", "op": "act", "msg": {}})
    bus.relay("b", "conn1", {"type": "ack", "ref": 1})
    bus.relay("b", "conn2", {"type": "event", "seq": 5})
    assert client.sent == []  # nothing before the end of the turn
    await asyncio.sleep(0)
    topics = [t for t, _, _ in client.sent]
    assert topics == ["moo-cluster/b/req", "moo-cluster/c/req", "moo-cluster/b/out"]
    assert [r["rid"] for r in client.sent[0][1]["batch"]] == ["r0", "r1", "r2"]
    out = client.sent[2][1]
    assert [item["conn"] for item in out["batch"]] == ["conn1", "conn2"]
    assert out["n"] == 1 and out["from"] == "a"
    assert client.written == 3  # written in the same turn, after the last of them
    bus.relay("b", "conn1", {"type": "event", "seq": 6})
    await asyncio.sleep(0)
    assert client.sent[3][1]["n"] == 2  # numbered per destination, for gap detection


async def test_what_the_broker_did_not_acknowledge_is_kept_in_order() -> None:
    bus = _bus()
    client = FakeClient()
    bus._client = client  # type: ignore[assignment]
    for i in range(4):
        bus._publish("moo-cluster/b/req", json.dumps({"i": i}).encode())
    client.sent[0][2].acked = True
    client.sent[1][2].acked = True
    bus._publish("moo-cluster/b/req", json.dumps({"i": 4}).encode())
    # acknowledged ones at the head are forgotten; the rest stay, in order
    assert [json.loads(p)["i"] for _, _, p, _ in bus._unacked] == [2, 3, 4]
    client.sent[2][2].rc_failed = True
    assert [json.loads(p)["i"] for _, _, p, _ in bus._unacked] == [2, 3, 4]  # failed: kept
    bus._client = None  # no session: kept to be published in the next one
    bus._publish("moo-cluster/b/req", json.dumps({"i": 5}).encode())
    assert [json.loads(p)["i"] for _, _, p, _ in bus._unacked] == [2, 3, 4, 5]
    assert not bus._unacked[-1][0].is_published()


def test_a_gap_in_relays_closes_the_clients_relayed_to_that_node() -> None:
    bus = _bus()
    ann, bob = FakeConn(), FakeConn()
    bus._local = {"c1": ann, "c2": bob}  # type: ignore[dict-item]
    bus._relayed = {"c1": {"m1": "b"}, "c2": {"m2": "c"}}
    for n in (1, 2, 3):
        bus._check_gap({"run": "x", "from": "b", "n": n})
    assert ann.closed is None and bob.closed is None
    bus._check_gap({"run": "x", "from": "b", "n": 5})  # 4 was lost
    assert ann.closed is not None and ann.closed[0] == 1012
    assert bob.closed is None  # relayed to another node
    bus._check_gap({"run": "y", "from": "b", "n": 7})  # a new process of b: no history
    bus._check_gap({"run": "y", "from": "b", "n": 8})
    assert bob.closed is None


async def test_a_request_that_overtakes_the_new_owners_replay_waits_for_it() -> None:
    """A node that has just claimed a match is named by the owners table before its replay is
    done: forwarded requests for the match reaching it then must wait (in order) and be served
    once it runs, not be answered "unknown match" (players gave up, and forfeited, on that)."""
    bus = _bus()
    arena: Any = bus.app.arena
    arena.recent = {}
    served: list[tuple[str, Any]] = []
    replayed = asyncio.Event()

    async def owner_once_replayed(match_id: str) -> str | None:
        await replayed.wait()
        return None  # it runs here now

    def act(conn: Any, msg: dict[str, Any], received: float | None = None) -> None:
        served.append(("act", msg["guess"]))

    async def resume(conn: Any, match_id: str, last_seq: int, ref: Any) -> None:
        served.append(("resume", last_seq))

    bus._remote_owner = owner_once_replayed  # type: ignore[method-assign]
    bus._act, bus._resume = act, resume
    base = {"from": "b", "conn": "c1", "player": "ann"}
    await bus._serve({**base, "rid": "r1", "op": "resume",
                      "msg": {"type": "resume", "match_id": "m1", "last_seq": 3}})
    await bus._serve({**base, "rid": "r2", "op": "act",
                      "msg": {"type": "guess", "match_id": "m1", "guess": "0123"}})
    await bus._serve({**base, "rid": "r2", "op": "act",  # delivered twice: applied once
                      "msg": {"type": "guess", "match_id": "m1", "guess": "0123"}})
    for _ in range(5):
        await asyncio.sleep(0)
    assert served == [] and len(bus._until_live["m1"]) == 2  # held, nobody refused
    arena.live["m1"] = object()
    replayed.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert served == [("resume", 3), ("act", "0123")]  # in arrival order
    assert "m1" not in bus._until_live


async def test_a_request_for_a_match_that_went_elsewhere_is_refused_as_retryable() -> None:
    bus = _bus()
    arena: Any = bus.app.arena
    arena.recent = {}
    relayed: list[dict[str, Any]] = []

    async def elsewhere(match_id: str) -> str | None:
        return "c"

    def relay(origin: str, conn_id: str, msg: dict[str, Any], **kwargs: Any) -> None:
        relayed.append(msg)

    bus._remote_owner = elsewhere  # type: ignore[method-assign]
    bus.relay = relay  # type: ignore[method-assign,assignment]
    await bus._serve({"from": "b", "conn": "c1", "player": "ann", "rid": "r1", "op": "act",
                      "msg": {"type": "guess", "match_id": "m1", "guess": "0123", "id": 7}})
    for _ in range(20):
        await asyncio.sleep(0)
    assert [(m["code"], m["ref"]) for m in relayed] == [("not_available", 7)]
    assert "try again" in relayed[0]["message"]
