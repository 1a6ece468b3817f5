"""Lobby and tournament requests retried under their ``request_id`` after the node that did
them was killed right after the commit (issue 31, gap 6 of docs/cluster.md "Status";
docs/protocol.md, "Retrying safely").

Real ``moo serve`` nodes on one fresh PostgreSQL database and a Mosquitto broker, short
leases. The request lands in the database, the node that stored it (the lobby's leader, and
the node of the match) dies with the answer, and the client, still connected to the other
node, sends the same request again: it gets the first answer (the same match, the same
tournament), not ``unknown_room`` or a second tournament, and the database holds one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

from bench.harness.services import TcpCut
from server.cluster.wire import LobbyCall
from tests.cluster_support import (
    Node,
    bus_items_to,
    database_relay,
    following_a,
    matches_of,
    nodes,
    query,
    start_node,
    until,
)
from tests.mqtt_support import Broker
from tests.pg_support import pg_url
from tests.server.test_server_http import http_get
from tests.server_support import Client

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

LEASE_MS = 2000


async def _retry(client: Client, msg: dict[str, Any]) -> dict[str, Any]:
    """Send ``msg`` until it is not refused with "try again" or ``storage_unavailable`` (the
    lobby or the match moving to the surviving node: the docs say to send it again)."""
    reply: dict[str, Any] = {}

    async def answered() -> bool:
        nonlocal reply
        reply = await client.request(msg, timeout=30)
        return not (reply.get("type") == "error" and (
            "try again" in reply.get("message", "") or reply["code"] == "storage_unavailable"))

    await until(answered, 60, f"an answer to {msg}", poll=0.2)
    return reply


async def _first_answer_is_no_refusal(client: Client, ref: Any, mid: str) -> None:
    """The first sending's own answer (its node re-sent it to the new leader, which found
    its match done) is the match, or a "try again" (nothing more was done): never a refusal
    of what happened, such as ``unknown_room``; and it is answered once."""
    first = await client.expect(lambda m: m.get("ref") == ref, 60)
    if first["type"] == "error":
        assert "try again" in first["message"], first
    else:
        assert first["type"] == "match" and first["match_id"] == mid, first
    await client.request({"type": "ping"})
    assert sum(1 for m in client.seen if m.get("ref") == ref) == 1


async def _room_of_ann_for_bob(a: Node, b: Node, request_id: str
                               ) -> tuple[Client, Client, dict[str, Any]]:
    """ann (on a, the lobby leader) opens a free room, so that its match runs on a; bob is on
    b. Returns them and bob's join of the room under ``request_id``."""
    await following_a(a, b)
    ann = await Client.hello(a.port, "ann")
    room = await ann.request({"type": "room_create", "pacing": "free"})
    bob = await Client.hello(b.port, "bob")
    return ann, bob, {"type": "room_join", "code": room["code"], "request_id": request_id}


async def test_a_room_join_retried_after_its_node_died_gets_its_match(
    pg_url: str, broker: Broker
) -> None:
    """ann (on a, the lobby leader) opens a room; bob (on b) joins it under a request id.
    The match starts on a (the room owner's node) and a is killed once it is committed. bob
    sends the join again on b: the match he was seated in (``match`` with the retry's
    ``ref``), one match in the database, and he plays it on b. Before request ids the room
    was gone with a, and the retry was ``unknown_room``."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=LEASE_MS) as (a, b):
            _ann, bob, join = await _room_of_ann_for_bob(a, b, "bob-join-1")
            first_ref = await bob.send(join)

            async def committed() -> bool:
                return len(await matches_of(pg_url, "bob")) == 1

            await until(committed, 30, "the match to be committed")
            a.proc.kill()  # whatever a had not sent yet dies with it
            await a.proc.wait()
            (mid,) = await matches_of(pg_url, "bob")
            reply = await _retry(bob, join)
            assert reply["type"] == "match", reply
            assert reply["match_id"] == mid and reply["opponent"] == "ann" and reply["seat"] == 1
            assert await matches_of(pg_url, "bob") == [mid]
            await _first_answer_is_no_refusal(bob, first_ref, mid)
            # the seat is his: the match goes on at b, which took it over
            secret = await _retry(bob, {"type": "secret", "match_id": mid, "secret": "0123"})
            assert secret["type"] == "event" and secret["kind"] == "secret", secret
            await bob.close()
            assert await b.stop() == 0
    finally:
        await broker.stop()


async def test_a_tournament_create_retried_after_the_leader_died_makes_one(
    pg_url: str, broker: Broker
) -> None:
    """ann (on b) creates a tournament under a request id; a, the lobby leader that runs
    the tournaments, stores it and is killed. ann sends the creation again: b, leading now,
    answers with the same tournament; the database holds one. Before request ids the retry
    made a second tournament."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=LEASE_MS) as (a, b):
            await following_a(a, b)
            ann = await Client.hello(b.port, "ann", bot=True)
            # the leader runs the tournaments once it has read them ("try again" until then)
            await _retry(ann, {"type": "tournaments"})
            create = {"type": "tournament_create", "name": "Friday", "format": "round-robin",
                      "pool": "bots", "request_id": "ann-friday"}
            await ann.send(create)

            async def stored() -> bool:
                return bool(await query(pg_url, "SELECT 1 FROM tournaments"))

            await until(stored, 30, "the tournament to be stored")
            a.proc.kill()
            await a.proc.wait()
            (tid,) = [r[0] for r in await query(pg_url, "SELECT tournament_id FROM tournaments")]
            reply = await _retry(ann, create)
            assert reply["type"] == "tournament", reply
            assert reply["tournament"]["tournament_id"] == tid
            assert reply["tournament"]["name"] == "Friday"
            rows = await query(pg_url, "SELECT tournament_id FROM tournaments")
            assert [r[0] for r in rows] == [tid]
            await ann.close()
            assert await b.stop() == 0
    finally:
        await broker.stop()


@contextlib.asynccontextmanager
async def _cut_a(pg_url: str, bus: str) -> AsyncIterator[tuple[Node, Node, TcpCut]]:
    """Node a reaching the database through a relay that the test can cut, node b directly."""
    async with (
        database_relay(pg_url) as (cut, via),
        nodes(via, "a", bus=bus, lease_ms=LEASE_MS) as (a,),
        nodes(pg_url, "b", bus=bus, lease_ms=LEASE_MS) as (b,),
    ):
        yield a, b, cut


async def test_a_room_join_retried_after_its_node_was_cut_from_the_database(
    pg_url: str, broker: Broker
) -> None:
    """As above, but a is not killed: it is cut from the database right after the match's
    commit (alive, on the bus, its lease running out). bob's retry on b is answered with the
    match from the database, and he plays it once b has taken it over."""
    await broker.start()
    try:
        async with _cut_a(pg_url, broker.url) as (a, b, cut):
            ann, bob, join = await _room_of_ann_for_bob(a, b, "bob-join-cut")
            first_ref = await bob.send(join)

            async def committed() -> bool:
                return len(await matches_of(pg_url, "bob")) == 1

            await until(committed, 30, "the match to be committed")
            await cut.down()
            (mid,) = await matches_of(pg_url, "bob")
            reply = await _retry(bob, join)
            assert reply["type"] == "match", reply
            assert reply["match_id"] == mid and reply["opponent"] == "ann" and reply["seat"] == 1
            assert await matches_of(pg_url, "bob") == [mid]
            await _first_answer_is_no_refusal(bob, first_ref, mid)
            secret = await _retry(bob, {"type": "secret", "match_id": mid, "secret": "0123"})
            assert secret["type"] == "event" and secret["kind"] == "secret", secret
            assert await matches_of(pg_url, "bob") == [mid]
            for c in (ann, bob):
                await c.close()
    finally:
        await broker.stop()


async def test_a_room_join_its_node_sends_again_is_answered_from_the_database(
    pg_url: str, broker: Broker
) -> None:
    """The path of gap 6: the join reaches the leader a (paused until then), which starts the
    match and commits it while bob's node b is cut from the broker, so the ``match`` answer
    never reaches b. When b is back on the bus it sends the unanswered join again to the
    leader: before request ids the room was gone (used) and bob was told ``unknown_room``; now
    b finds the match in the database and answers the join's own ``ref`` with it."""
    await broker.start()
    relay = TcpCut(broker.port)
    await relay.up()
    started: list[Node] = []
    try:
        started.append(await start_node(pg_url, "a", bus=broker.url, lease_ms=LEASE_MS))
        started.append(await start_node(pg_url, "b", bus=f"mqtt://127.0.0.1:{relay.port}",
                                        lease_ms=LEASE_MS))
        a, b = started
        await following_a(a, b)
        ann = await Client.hello(a.port, "ann")
        room = await ann.request({"type": "room_create", "pacing": "free"})
        bob = await Client.hello(b.port, "bob")
        async with bus_items_to(broker, "a", LobbyCall) as to_a:
            os.kill(a.proc.pid, signal.SIGSTOP)
            ref = await bob.send({"type": "room_join", "code": room["code"],
                                  "request_id": "bob-join-resent"})

            async def on_the_broker() -> bool:
                return any(c.op == "room_join" and c.msg.get("id") == ref for c in to_a)

            # not bob's next reply: the join may still be in the relay, and the cut lose it
            await until(on_the_broker, 10, "b's join to reach the broker")
            await relay.down()  # b off the bus (what it published is re-sent if unacknowledged)
            os.kill(a.proc.pid, signal.SIGCONT)

        async def committed() -> bool:
            return len(await matches_of(pg_url, "bob")) == 1

        await until(committed, 30, "the match to be committed")
        (mid,) = await matches_of(pg_url, "bob")
        await relay.up()  # b back on the bus: it sends the join again to the leader
        first = await bob.expect(lambda m: m.get("ref") == ref, 60)
        assert first["type"] == "match", first
        assert first["match_id"] == mid and first["seat"] == 1
        await bob.event(mid, "created")  # the events follow from seq 1
        await bob.request({"type": "ping"})
        assert sum(1 for m in bob.seen if m.get("ref") == ref) == 1
        assert await matches_of(pg_url, "bob") == [mid]
        for c in (ann, bob):
            await c.close()
    finally:
        for n in started:
            if n.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(n.proc.pid, signal.SIGCONT)
                n.proc.kill()
                await n.proc.wait()
        if relay.is_up:
            await relay.down()
        await broker.stop()


async def test_a_queue_retried_after_its_match_node_died_makes_no_second_entry(
    pg_url: str, broker: Broker
) -> None:
    """Two programs queue under request ids, p1 on a (the leader), p2 on b; p2's queue pairs
    them and the match starts on a (p1 waited first), which is killed right after the commit.
    p2 sends its queue again on b: ``queued`` (the same terms), the match it was paired into,
    no queue entry at the new leader and no second match."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=LEASE_MS) as (a, b):
            await following_a(a, b)
            p1 = await Client.hello(a.port, "p1", bot=True)
            p2 = await Client.hello(b.port, "p2", bot=True)
            q1 = {"type": "queue", "pool": "bots", "pacing": "free", "request_id": "q-p1"}
            q2 = {**q1, "request_id": "q-p2"}
            first = await p1.request(q1)
            assert first["type"] == "queued", first
            await p2.send(q2)

            async def committed() -> bool:
                return len(await matches_of(pg_url, "p2")) == 1

            await until(committed, 30, "the match to be committed")
            a.proc.kill()
            await a.proc.wait()
            (mid,) = await matches_of(pg_url, "p2")
            reply = await _retry(p2, q2)
            assert reply["type"] == "queued", reply
            assert {k: reply[k] for k in ("pool", "pacing", "rated", "rules")} == {
                k: first[k] for k in ("pool", "pacing", "rated", "rules")}
            await p2.expect(lambda m: m.get("type") == "match" and m["match_id"] == mid)

            async def b_leads() -> bool:
                _, _, body = await http_get(b.port, "/healthz")
                return bool(json.loads(body)["lobby_leader"] == "b")

            await until(b_leads, 30, "b to lead the lobby")
            _, _, body = await http_get(b.port, "/healthz")
            assert json.loads(body)["queue"] == 0
            assert await matches_of(pg_url, "p2") == [mid]
            await p2.close()
            assert await b.stop() == 0
    finally:
        await broker.stop()


async def test_a_join_retried_after_its_match_ended_on_another_node_replays_nothing(
    pg_url: str, broker: Broker
) -> None:
    """bob (on b) joins ann's room; the match runs on a, the room owner's node, and reaches
    bob through b. It ends, and then bob's join comes again (its first answer late, as in
    the 2-hour fault harness run of 2026-11-30, where a connection got a finished match's
    seqs 1-25 twice): answered with the match, nothing replayed a second time."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=LEASE_MS) as (a, b):
            ann, bob, join = await _room_of_ann_for_bob(a, b, "bob-join-end")
            first = await _retry(bob, join)
            assert first["type"] == "match", first
            mid = first["match_id"]
            await _retry(ann, {"type": "resign", "match_id": mid})
            await bob.event(mid, "finished")
            played = [e["seq"] for e in bob.events(mid)]
            assert played == sorted(set(played))
            reply = await _retry(bob, join)
            assert reply["type"] == "match" and reply["match_id"] == mid, reply
            await bob.request({"type": "ping"})
            assert [e["seq"] for e in bob.events(mid)] == played  # nothing twice
            for p in (ann, bob):
                await p.close()
    finally:
        await broker.stop()
