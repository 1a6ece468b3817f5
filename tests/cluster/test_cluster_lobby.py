"""The cluster-wide lobby state (issue #11): ratings, challenges and rooms across a leader
change, the ``matches`` listing, ``rematch`` across nodes, and X-Forwarded-For behind a proxy.

Real components throughout: PostgreSQL, a Mosquitto broker and ``moo serve`` nodes
(tests/cluster_support.py); nothing waits on a sleep, every wait polls with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from bench.harness.services import TcpCut
from moo.variants import parse_rules_spec
from server.cluster.wire import Create
from tests.cluster_support import (
    Node,
    bus_items_to,
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


async def _follow(leader: str, *ns: Node) -> None:
    for n in ns:
        async def follows(n: Node = n) -> bool:
            return await _leader_is(n, leader)

        await until(follows, 15, f"{n.name} to follow {leader}")


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


async def test_ratings_are_shared_and_durable_in_postgresql(
    pg_url: str, broker: Broker, tmp_path: Path,
) -> None:
    """A rated match finished on node a (classic) and one on node b (a variant) are rated once,
    in PostgreSQL: the leaderboards and ``player`` answers are the same from every node, and
    still there after every node restarted."""
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
            rules = parse_rules_spec(VARIANT).to_dict()
            vid, _ = await _challenge(bob, ann, pacing="free", rules=rules)
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


async def test_challenges_and_rooms_survive_the_lobby_leaders_death(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """ann (a program, so her entries stay open while she plays) opens two rooms and
    challenges bob, and carl opens a room, while a leads the lobby; a is killed. The new leader
    (b, ann's node) gets them back from the nodes of their owners (its own, and c): bob accepts
    the old challenge, ann joins carl's old room and dan ann's by their codes, ann cancels her
    other room, all under the ids and codes they had."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=2000) as (a, b, c):
            await _on_bus(a, b, c)
            ann = await Client.hello(b.port, "ann", bot=True)
            bob = await Client.hello(c.port, "bob")
            carl = await Client.hello(c.port, "carl")
            room = await ann.request({"type": "room_create", "pacing": "free"})
            other = await ann.request({"type": "room_create", "pacing": "free"})
            croom = await carl.request({"type": "room_create", "pacing": "free"})  # from c
            sent = await ann.request({"type": "challenge", "opponent": "bob", "pacing": "free"})
            offer = await bob.expect(lambda m: m.get("challenge_id") == sent["challenge_id"])
            # a held them: b learns what ann has open there (relayed, never shown to ann)
            assert all(m["type"] != "_lobby" for m in ann.seen)
            a.proc.kill()
            await a.proc.wait()
            await until(lambda: _leader_is(b, "b"), 15, "b to lead the lobby")
            await until(lambda: _leader_is(c, "b"), 15, "c to follow b")

            async def accept() -> dict[str, Any]:
                return await bob.request(
                    {"type": "accept", "challenge_id": offer["challenge_id"]}
                )

            # bob's presence reaches b from c: until then his accept may find him unknown
            async def accepted() -> bool:
                reply = await accept()
                if reply["type"] == "match":
                    accepted.reply = reply  # type: ignore[attr-defined]
                    return True
                assert reply["type"] == "error", reply
                return False

            await until(accepted, 15, "bob's accept of the old challenge")
            m = accepted.reply  # type: ignore[attr-defined]
            assert m["opponent"] == "ann"
            await ann.expect(lambda x: x.get("type") == "match" and x["match_id"] == m["match_id"])
            # carl's room comes back from c (the new leader is b)
            mine = await ann.request({"type": "room_join", "code": croom["code"]})
            assert mine["type"] == "match" and mine["opponent"] == "carl", mine
            dan = await Client.hello(c.port, "dan")
            joined = await dan.request({"type": "room_join", "code": room["code"]})
            assert joined["type"] == "match" and joined["opponent"] == "ann", joined
            cancelled = await ann.request({"type": "room_cancel", "code": other["code"]})
            assert cancelled == {"type": "room_closed", "code": other["code"],
                                 "reason": "cancelled", "ref": cancelled["ref"]}
            gone = await bob.request({"type": "room_join", "code": other["code"]})
            assert gone["type"] == "error" and gone["code"] == "unknown_room", gone
            # nobody was told anything twice
            assert sum(1 for x in bob.seen if x.get("type") == "challenge") == 1
            assert sum(1 for x in ann.seen if x.get("type") == "challenge_sent") == 1
            assert sum(1 for x in ann.seen if x.get("type") == "room") == 2
            assert sum(1 for x in carl.seen if x.get("type") == "room") == 1
            for p in (ann, bob, carl, dan):
                await p.close()
    finally:
        await broker.stop()


async def _room_on_b_and_ann_on_a(a: Node, b: Node) -> tuple[Client, dict[str, Any], Client]:
    """Nodes a (leading the lobby) and b on the bus; carl's room open on b, ann on a."""
    await _on_bus(a, b)
    await until(lambda: _leader_is(a, "a"), 15, "a to lead the lobby")
    await until(lambda: _leader_is(b, "a"), 15, "b to follow a")
    carl = await Client.hello(b.port, "carl", bot=True)
    room = await carl.request({"type": "room_create", "pacing": "free"})
    ann = await Client.hello(a.port, "ann")
    return carl, room, ann


async def test_a_join_whose_match_node_dies_with_the_request_is_still_answered(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """carl (on b) opens a room; b is paused, and ann joins from a, the lobby leader. The
    leader starts the match on b (the room owner's node) and b is killed before it could read
    that request. ann is still answered (every request is answered, docs/protocol.md): a
    ``not_available`` error naming b, and nothing else with that ref. Before the leader
    tracked its own clients' starts on other nodes, ann waited for ever (the fault harness's
    unanswered ``room_join``)."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=2000) as (a, b):
            _carl, room, ann = await _room_on_b_and_ann_on_a(a, b)
            os.kill(b.proc.pid, signal.SIGSTOP)
            ref = await ann.send({"type": "room_join", "code": room["code"]})
            # a client's requests are handled in order, and a room_create is answered by the
            # lobby at once: its answer means the join was handled (the match sent to b) ...
            mine = await ann.request({"type": "room_create", "pacing": "free"})
            assert mine["type"] == "room", mine
            b.proc.kill()  # ... and b dies without reading it (SIGKILL ends a stopped process)
            await b.proc.wait()
            reply = await ann.expect(lambda m: m.get("ref") == ref, 60)
            assert reply["type"] == "error" and reply["code"] == "not_available", reply
            assert "node b did not answer" in reply["message"], reply
            # the lobby goes on: dan joins ann's new room, on a
            dan = await Client.hello(a.port, "dan")
            joined = await dan.request({"type": "room_join", "code": mine["code"]})
            assert joined["type"] == "match" and joined["opponent"] == "ann", joined
            assert sum(1 for m in ann.seen if m.get("ref") == ref) == 1
            for p in (ann, dan):
                await p.close()
    finally:
        await broker.stop()


async def test_a_join_answered_try_again_whose_match_starts_late_is_answered_once(
    pg_url: str, broker: Broker
) -> None:
    """As above, but b is only paused, past the leader's patience with the match's start,
    and then wakes (its lease is long: it still owns what it runs). ann hears "try again";
    b then reads the request and starts the match after all. ann is told of the match, as
    of a match started for her (``match`` without ``ref``, her seat and the events from
    seq 1), not answered a second time; and sent again under its ``request_id``, her join
    is answered with that match. (Before, the late ``match`` came with the join's ``ref``:
    two answers to one request.)"""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=120_000) as (a, b):
            carl, room, ann = await _room_on_b_and_ann_on_a(a, b)
            os.kill(b.proc.pid, signal.SIGSTOP)
            try:
                join = {"type": "room_join", "code": room["code"], "request_id": "join-1"}
                ref = await ann.send(join)
                reply = await ann.expect(lambda m: m.get("ref") == ref, 60)
                assert reply["type"] == "error" and reply["code"] == "not_available", reply
            finally:
                os.kill(b.proc.pid, signal.SIGCONT)
            told = await ann.expect(lambda m: m.get("type") == "match", 60)
            assert "ref" not in told and told["opponent"] == "carl", told
            mid = told["match_id"]
            again = await ann.request(join)
            assert again["type"] == "match" and again["match_id"] == mid, again
            # one answer per request: the "try again", then the retry's own
            assert sum(1 for m in ann.seen if m.get("ref") == ref) == 1
            await ann.request({"type": "resign", "match_id": mid})
            fin = await carl.event(mid, "finished")
            assert fin["winner"] == 1 - told["seat"]  # ann resigned
            seqs = [e["seq"] for e in ann.events(mid)]
            assert seqs == sorted(set(seqs)) and seqs[0] == 1, seqs  # each event once
            for p in (ann, carl):
                await p.close()
    finally:
        await broker.stop()


async def test_a_restarted_leader_leads_for_everyone_at_once(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """a (the lobby leader) is killed, b leads; a is started again and ann opens a room on it
    at once; dan joins it from c. The join finds the room, at once or after the documented
    "try again" (``not_available``: nothing applied), never ``unknown_room``. Before, b and c
    kept a out of the leadership for 2 x the lease after its death notice whatever its new
    epoch, while a led at once in its own view: the room was made on a, the join went to b."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=5000) as (a, b, c):
            await _on_bus(a, b, c)
            await _follow("a", a, b, c)
            a.proc.kill()
            await a.proc.wait()
            await _follow("b", b, c)
            again = await start_node(pg_url, "a", bus=broker.url, lease_ms=5000)
            try:
                ann = await Client.hello(again.port, "ann")
                dan = await Client.hello(c.port, "dan")

                async def answered(c: Client, msg: dict[str, Any], want: str) -> dict[str, Any]:
                    async def ok() -> bool:
                        reply = await c.request(msg)
                        if reply["type"] == want:
                            ok.reply = reply  # type: ignore[attr-defined]
                            return True
                        # the only refusal allowed: "try again", nothing applied
                        assert reply["type"] == "error", reply
                        assert reply["code"] == "not_available", reply
                        return False

                    await until(ok, 30, f"{msg['type']} answered {want}")
                    return ok.reply  # type: ignore[attr-defined,no-any-return]

                room = await answered(ann, {"type": "room_create", "pacing": "free"}, "room")
                joined = await answered(dan, {"type": "room_join", "code": room["code"]},
                                        "match")
                assert joined["opponent"] == "ann", joined
                await ann.expect(
                    lambda x: x.get("type") == "match" and x["match_id"] == joined["match_id"]
                )
                await _follow("a", again, b, c)
                for p in (ann, dan):
                    await p.close()
            finally:
                await again.stop(signal.SIGKILL)
    finally:
        await broker.stop()


async def test_a_queue_pairing_whose_match_node_dies_with_the_request_is_queued_again(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """bob queues on b, then b is paused; ann queues on a, the lobby leader, which pairs them
    and asks b (the node of bob, who queued first) to start the match; b is killed before it
    could read that request. ann is put back in the queue and told so (``queued`` again,
    ``requeued: true``, no ``ref``): carl, queueing next, is paired with her. Before the
    leader watched its queue pairings, ann had her ``queued`` and then nothing, for ever."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=2000) as (a, b):
            await _on_bus(a, b)
            await until(lambda: _leader_is(a, "a"), 15, "a to lead the lobby")
            await until(lambda: _leader_is(b, "a"), 15, "b to follow a")
            bob = await Client.hello(b.port, "bob")
            queued = await bob.request({"type": "queue", "pacing": "free"})
            assert queued["type"] == "queued", queued
            ann = await Client.hello(a.port, "ann")
            os.kill(b.proc.pid, signal.SIGSTOP)
            mine = await ann.request({"type": "queue", "pacing": "free"})
            assert mine["type"] == "queued" and "requeued" not in mine, mine
            # the leader paired ann with bob as it answered her (the match sent to b) ...
            b.proc.kill()  # ... and b dies without reading it (SIGKILL ends a stopped process)
            await b.proc.wait()
            again = await ann.expect(lambda m: m.get("requeued") is True, 60)
            assert again == {"type": "queued", "pool": "any", "pacing": "free", "rated": True,
                             "rules": mine["rules"], "requeued": True}, again
            assert not any(m.get("type") in ("match", "unqueued") for m in ann.seen), ann.seen
            carl = await Client.hello(a.port, "carl")
            await carl.request({"type": "queue", "pacing": "free"})
            m = await carl.expect(lambda x: x.get("type") == "match", 30)
            assert m["opponent"] == "ann", m
            await ann.expect(lambda x: x.get("type") == "match" and x["match_id"] == m["match_id"])
            for p in (ann, carl):
                await p.close()
    finally:
        await broker.stop()


async def test_a_queue_pairing_whose_request_a_node_cut_from_the_broker_lost_is_sent_again(
    pg_url: str, broker: Broker
) -> None:
    """bob queues on b; then b's connection to the broker is cut (b lives: its database
    session is there, so nobody takes it for dead). ann queues on a, the lobby leader, which
    pairs them and asks b (bob queued first) to start the match: the broker has no session of
    b to give the request to, and drops it. Once b is back on the bus the leader's request
    comes again and the match starts: one ``match`` each, one match stored. Before, the two
    had their ``queued`` and then nothing, for ever."""
    await broker.start()
    relay = TcpCut(broker.port)
    await relay.up()
    started: list[Node] = []
    try:
        started.append(await start_node(pg_url, "a", bus=broker.url, lease_ms=2000))
        started.append(await start_node(pg_url, "b", bus=f"mqtt://127.0.0.1:{relay.port}",
                                        lease_ms=2000))
        a, b = started
        await following_a(a, b)
        bob = await Client.hello(b.port, "bob")
        queued = await bob.request({"type": "queue", "pacing": "free"})
        assert queued["type"] == "queued", queued
        ann = await Client.hello(a.port, "ann")
        async with bus_items_to(broker, "b", Create) as to_b:
            await relay.down()  # b off the bus

            async def b_gone() -> bool:
                return "lost its broker connection but is alive" in a.text()

            await until(b_gone, 15, "a to see b off the bus, alive")
            mine = await ann.request({"type": "queue", "pacing": "free"})
            assert mine["type"] == "queued", mine

            async def sent() -> bool:
                return bool(to_b)

            await until(sent, 15, "the leader's request to b on the broker")
            assert not to_b[0].again and to_b[0].requested, to_b
        await relay.up()
        m = await ann.expect(lambda x: x.get("type") == "match", 60)
        assert m["opponent"] == "bob", m
        mb = await bob.expect(lambda x: x.get("type") == "match", 60)
        assert mb["match_id"] == m["match_id"] == to_b[0].requested[0], (m, mb)
        for p in (ann, bob):
            await p.request({"type": "ping"})  # anything else that came is in seen by now
            assert [x["match_id"] for x in p.seen if x.get("type") == "match"] == [m["match_id"]]
        assert await matches_of(pg_url, "ann") == [m["match_id"]]
        for p in (ann, bob):
            await p.close()
    finally:
        for n in started:
            if n.proc.returncode is None:
                n.proc.kill()
                await n.proc.wait()
        if relay.is_up:
            await relay.down()
        await broker.stop()


@pytest.mark.slow(20)
async def test_a_challenge_right_after_the_targets_hello_on_another_node(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """The target's presence travels from its node to the leader while the challenge travels
    from a third node: the leader waits briefly for a registered player instead of refusing.
    A name nobody registered is still refused at once with unknown_player."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=4000) as (a, b, c):
            await _on_bus(a, b, c)
            carl = await Client.hello(c.port, "carl")
            for i in range(5):
                target = await Client.hello(b.port, f"t{i}")
                sent = await carl.request({"type": "challenge", "opponent": f"t{i}"})
                assert sent["type"] == "challenge_sent", sent
                offer = await target.of_type("challenge")
                assert offer["challenge_id"] == sent["challenge_id"], offer
                await target.close()
            err = await carl.request({"type": "challenge", "opponent": "nobody"})
            assert err["type"] == "error" and err["code"] == "unknown_player", err
            await carl.close()
    finally:
        await broker.stop()


class _Conn:
    def __init__(self, player: str) -> None:
        self.player = player
        self.closing = False
        self.sent: list[dict[str, Any]] = []

    def send(self, msg: dict[str, Any]) -> None:
        self.sent.append(msg)


class _Arena:
    """Just what the lobby's pairing asks of an arena."""

    def __init__(self) -> None:
        self.created: list[tuple[str, str]] = []

    def busy(self, player: str) -> None:
        return None

    def create(self, players: tuple[str, str], *args: Any, **kwargs: Any) -> None:
        self.created.append(players)


def test_entries_put_back_in_the_queue_are_paired_among_themselves() -> None:
    """After a leader change the new leader puts its own players' entries back in the queue
    at once; ``pair_waiting`` pairs them with each other (no third player needed), oldest
    first, and leaves an entry that pairs with nobody."""
    from moo.variants import CLASSIC_SPEC
    from server.lobby import Lobby, Waiting

    arena = _Arena()
    lobby = Lobby(arena, [])  # type: ignore[arg-type]
    names = ["ann", "bob", "cat", "dan", "eve"]
    conns = {n: _Conn(n) for n in names}
    for n in names:
        rated = n != "cat"  # cat wants an unrated match: nobody else does
        lobby.queue.append(Waiting(
            conns[n], n, False, "any", "free", rated, parse_rules_spec(CLASSIC_SPEC)  # type: ignore[arg-type]
        ))
    lobby.pair_waiting()
    assert arena.created == [("ann", "bob"), ("dan", "eve")]
    assert [w.player for w in lobby.queue] == ["cat"]


def _listed(reply: dict[str, Any], mid: str) -> dict[str, Any] | None:
    assert reply["type"] == "matches", reply
    return next((m for m in reply["matches"] if m["match_id"] == mid), None)


@pytest.mark.slow(20)
async def test_matches_listing_and_rematch_across_nodes(
    pg_url: str, broker: Broker, tmp_path: Path,
) -> None:
    """A match owned by b, played by ann (b) and bob (c), is in the ``matches`` listing of
    every node with its phase and counts; once finished it is listed nowhere. Then a rematch
    across nodes: ann asks (b), bob is offered it (c) and asks too, both get the new match
    with the seats swapped; errors are the single node's."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=4000) as (a, b, c):
            await _on_bus(a, b, c)
            ann = await Client.hello(b.port, "ann")
            bob = await Client.hello(c.port, "bob")
            carl = await Client.hello(c.port, "carl")
            dan = await Client.hello(a.port, "dan")
            mid, m = await _challenge(ann, bob, pacing="free")
            assert m["seat"] == 1  # the challenger sits first
            owner = await query(pg_url, "SELECT node FROM owners WHERE match_id = $1", mid)
            assert owner[0][0] == "b"
            await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
            await bob.request({"type": "secret", "match_id": mid, "secret": "4567"})
            await ann.event(mid, "started")
            await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
            entries = [_listed(await p.request({"type": "matches"}), mid) for p in (ann, carl, dan)]
            assert entries[0] is not None and entries[0] == entries[1] == entries[2], entries
            assert entries[0]["players"] == ["ann", "bob"] and entries[0]["counts"] == [1, 0]
            assert entries[0]["phase"] == "playing"

            await bob.request({"type": "resign", "match_id": mid})
            for p in (ann, bob):
                await p.event(mid, "finished")
            for p in (ann, carl, dan):
                assert _listed(await p.request({"type": "matches"}), mid) is None

            # rematch, the players on two nodes; the leader (a) runs it
            err = await carl.request({"type": "rematch", "match_id": mid})
            assert err["type"] == "error" and err["code"] == "not_your_seat", err
            err = await carl.request({"type": "rematch", "match_id": "nope"})
            assert err["type"] == "error" and err["code"] == "unknown_match", err
            sent = await ann.request({"type": "rematch", "match_id": mid})
            assert sent == {"type": "rematch_sent", "match_id": mid, "ref": sent["ref"]}
            offer = await bob.of_type("rematch_offer")
            assert offer["match_id"] == mid
            again = await bob.request({"type": "rematch", "match_id": mid})
            assert again["type"] == "match" and again["seat"] == 0, again  # seats swapped
            theirs = await ann.expect(
                lambda x: x.get("type") == "match" and x["match_id"] == again["match_id"]
            )
            assert theirs["seat"] == 1 and theirs["opponent"] == "bob"
            assert again["match_id"] != mid
            # the same match cannot be rematched twice
            err = await ann.request({"type": "rematch", "match_id": mid})
            assert err["type"] == "error" and err["code"] in ("unknown_match", "in_match"), err
            new_owner = await query(
                pg_url, "SELECT node FROM owners WHERE match_id = $1", again["match_id"]
            )
            assert new_owner[0][0] == "c"  # placed on the first seat's node (bob's)
            for p in (ann, bob, carl, dan):
                await p.close()
    finally:
        await broker.stop()


async def test_a_person_in_a_match_on_another_node_is_not_seated_twice(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """ann (b) and bob (c) play a match that b runs while a leads the lobby, which does not
    run it: both are still refused (in_match) when they queue, challenge or open a room, so
    the leader cannot pair them into a second match; once it is over they may."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=4000) as (a, b, c):
            await _on_bus(a, b, c)
            ann = await Client.hello(b.port, "ann")
            bob = await Client.hello(c.port, "bob")
            carl = await Client.hello(a.port, "carl")
            mid, _ = await _challenge(ann, bob, pacing="free")
            for p in (ann, bob):
                for msg in ({"type": "queue", "pacing": "free"},
                            {"type": "challenge", "opponent": "carl"},
                            {"type": "room_create"}):
                    err = await p.request(msg)
                    assert err["type"] == "error" and err["code"] == "in_match", (p.name, err)
                    assert err["match_id"] == mid
            sent = await carl.request({"type": "challenge", "opponent": "bob"})
            offer = await bob.expect(lambda m: m.get("challenge_id") == sent["challenge_id"])
            err = await bob.request({"type": "accept", "challenge_id": offer["challenge_id"]})
            assert err["type"] == "error" and err["code"] == "in_match", err
            await ann.request({"type": "resign", "match_id": mid})
            for p in (ann, bob):
                await p.event(mid, "finished")
            for p in (ann, bob):
                assert (await p.request({"type": "queue", "pacing": "free"}))["type"] == "queued"
            ma, mb = await ann.of_type("match"), await bob.of_type("match")
            assert ma["match_id"] == mb["match_id"] != mid
            for p in (ann, bob, carl):
                await p.close()
    finally:
        await broker.stop()


async def test_tournament_watchers_on_every_node_follow_the_next_leader(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """ann watches a tournament from b and carl from c while a leads (and so runs the
    tournaments); a is killed. Each node sends its clients' watches to the new leader (b) while
    b still reads the tournaments back: those watches are held and answered, not refused into
    the void, so both hear the next change (a bot joining) on the connections they have."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=2000) as (a, b, c):
            await _on_bus(a, b, c)
            ann = await Client.hello(b.port, "ann")
            carl = await Client.hello(c.port, "carl")
            made: list[dict[str, Any]] = []

            async def created() -> bool:  # "try again" while a reads the tournaments
                reply = await ann.request({"type": "tournament_create", "name": "cup",
                                           "format": "round-robin", "pool": "bots",
                                           "start_in_s": 3600})
                made.append(reply)
                return bool(reply["type"] == "tournament")

            await until(created, 15, "the tournaments to run at a")
            tid = made[-1]["tournament"]["tournament_id"]
            for watcher in (ann, carl):
                w = await watcher.request({"type": "tournament_watch", "tournament_id": tid})
                assert w["type"] == "tournament" and w["tournament"]["players"] == [], w
            a.proc.kill()
            await a.proc.wait()
            await until(lambda: _leader_is(b, "b"), 15, "b to lead the lobby")
            await until(lambda: _leader_is(c, "b"), 15, "c to follow b")
            bot = await Client.hello(c.port, "bot-1", bot=True)

            async def joined() -> bool:  # "try again" while b reads the tournaments
                reply = await bot.request({"type": "tournament_join", "tournament_id": tid})
                if reply["type"] == "error":
                    assert reply["code"] == "not_available" and "try again" in reply["message"]
                    return False
                assert reply["type"] == "tournament_joined", reply
                return True

            await until(joined, 15, "the bot's join at the new leader")
            for watcher in (ann, carl):
                update = await watcher.expect(
                    lambda m: m.get("type") == "tournament"
                    and m["tournament"]["players"] == ["bot-1"])
                assert update["tournament"]["tournament_id"] == tid and "ref" not in update
                # no watch was refused: no error without a request of the client's own
                assert not [m for m in watcher.seen
                            if m.get("type") == "error" and "ref" not in m], watcher.seen
            for p in (ann, carl, bot):
                await p.close()
    finally:
        await broker.stop()
