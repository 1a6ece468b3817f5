"""The cluster's delivery promise, end to end (docs/cluster.md, "Delivery, as an invariant").

Every connection that follows a match gets each event once, in order, or a 1012: never
silence with the connection open -- across a paused owner (spectators included), and for a
finished match asked of any node. And the lobby's state survives a leader change: rematch
wishes, and the one-match check of a challenger whose match runs on another node.
Real ``moo serve`` processes, a broker and PostgreSQL; the clients never resync on their own.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from tests.cluster_support import nodes, query, until
from tests.mqtt_support import Broker
from tests.pg_support import pg_url
from tests.server.test_server_http import http_get
from tests.server_support import Client

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here


async def _healthz(port: int) -> dict[str, Any]:
    _, _, body = await http_get(port, "/healthz")
    return dict(json.loads(body))


async def _on_bus(*ports: int) -> None:
    for port in ports:
        async def up(port: int = port) -> bool:
            return bool((await _healthz(port))["bus"] == "ok")

        await until(up, 20, f"node on port {port} on the bus")


def _exactly_once(client: Client, mid: str, last: int) -> None:
    seqs = [e["seq"] for e in client.events(mid)]
    assert seqs == list(range(1, last + 1)), seqs


async def test_a_finished_match_is_served_from_the_log_by_any_node(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """``resume`` and ``watch`` of a finished match: every node answers from the log at once
    (the node that ran it too), with no owner to wait for."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=10_000) as (a, b):
            await _on_bus(a.port, b.port)
            ann = await Client.hello(a.port, "ann")
            bob = await Client.hello(b.port, "bob")
            room = await ann.request({"type": "room_create", "pacing": "free"})
            mid = (await bob.request({"type": "room_join", "code": room["code"]}))["match_id"]
            await ann.request({"type": "resign", "match_id": mid})
            fin = await bob.event(mid, "finished")
            for port in (a.port, b.port):
                carl = await Client.hello(port, f"carl{port}")
                w = await carl.request({"type": "watch", "match_id": mid})
                assert w["type"] == "watching", w
                await carl.event(mid, "finished")
                _exactly_once(carl, mid, fin["seq"])
                r = await bob.request({"type": "resume", "match_id": mid, "last_seq": 1})
                assert r["type"] == "match", r
                await carl.close()
            for p in (ann, bob):
                await p.close()
    finally:
        await broker.stop()


async def test_a_spectator_of_a_paused_owner_follows_the_match(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """The owner (a) is paused past its lease; b takes the match over. carl, watching from c,
    and bob, playing from b, get ``resumed`` and every later event on their open connections,
    each event once; ann, whose connection is on the paused node itself, is re-attached when
    it wakes. The log never forks."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=2000) as (a, b, c):
            await _on_bus(a.port, b.port, c.port)
            ann = await Client.hello(a.port, "ann")
            bob = await Client.hello(b.port, "bob")
            carl = await Client.hello(c.port, "carl")
            room = await ann.request({"type": "room_create", "pacing": "free"})
            mid = (await bob.request({"type": "room_join", "code": room["code"]}))["match_id"]
            w = await carl.request({"type": "watch", "match_id": mid})
            assert w["type"] == "watching", w
            await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
            await bob.request({"type": "secret", "match_id": mid, "secret": "4567"})
            g = await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
            await carl.event(mid, "guess", seq=g["seq"])
            os.kill(a.proc.pid, signal.SIGSTOP)
            try:
                async def moved() -> bool:
                    rows = await query(pg_url, "SELECT node FROM owners WHERE match_id = $1",
                                       mid)
                    return bool(rows) and rows[0][0] != "a"

                await until(moved, 20, "the match to move off the paused node")
                await carl.event(mid, "resumed")
                await bob.event(mid, "resumed")
                g2 = await bob.request({"type": "guess", "match_id": mid, "guess": "9876"})
                assert g2["kind"] == "guess", g2
                await carl.event(mid, "guess", seq=g2["seq"])
            finally:
                os.kill(a.proc.pid, signal.SIGCONT)
            await ann.event(mid, "guess", seq=g2["seq"])  # re-attached once awake
            await ann.request({"type": "guess", "match_id": mid, "guess": "4567"})
            await bob.request({"type": "guess", "match_id": mid, "guess": "8765"})
            fins = [await p.event(mid, "finished") for p in (ann, bob, carl)]
            assert fins[0]["reason"] == "solved" and fins[0]["winner"] == 0
            for p in (ann, bob, carl):
                _exactly_once(p, mid, fins[0]["seq"])
                assert p.ws.close_code is None
            forks = await query(pg_url, "SELECT seq, count(*) FROM events WHERE match_id = $1"
                                        " GROUP BY seq HAVING count(*) > 1", mid)
            assert forks == []
            for p in (ann, bob, carl):
                await p.close()
    finally:
        await broker.stop()


async def test_rematch_wishes_survive_the_lobby_leaders_death(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """ann (on b) asks for a rematch while a leads the lobby; a is killed; bob (on c) asks
    at the new leader: the rematch starts, because b told the new leader ann's wish."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=2000) as (a, b, c):
            await _on_bus(a.port, b.port, c.port)
            ann = await Client.hello(b.port, "ann")
            bob = await Client.hello(c.port, "bob")
            room = await ann.request({"type": "room_create", "pacing": "free"})
            mid = (await bob.request({"type": "room_join", "code": room["code"]}))["match_id"]
            await ann.request({"type": "resign", "match_id": mid})
            for p in (ann, bob):
                await p.event(mid, "finished")
            sent = await ann.request({"type": "rematch", "match_id": mid})
            assert sent["type"] == "rematch_sent", sent
            await bob.of_type("rematch_offer")
            a.proc.kill()
            await a.proc.wait()

            async def leader_b(port: int) -> bool:
                return (await _healthz(port)).get("lobby_leader") == "b"

            await until(lambda: leader_b(b.port), 20, "b to lead the lobby")
            await until(lambda: leader_b(c.port), 20, "c to follow b")

            async def rematched() -> bool:
                reply = await bob.request({"type": "rematch", "match_id": mid})
                if reply["type"] == "match":
                    return True
                # bob's or ann's record may still be on its way to the new leader
                assert reply["type"] in ("rematch_sent", "error"), reply
                return False

            await until(rematched, 20, "the rematch to start at the new leader")
            new = await ann.expect(lambda m: m.get("type") == "match" and m["match_id"] != mid)
            assert new["seat"] == 1  # seats swapped
            for p in (ann, bob):
                await p.close()
    finally:
        await broker.stop()


async def test_a_challenger_in_a_match_on_another_node_is_not_seated_twice(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """ann (on b) challenges carl (on c), then starts a match against a hosted bot on b. The
    lobby leader (a) cannot see that match; when carl accepts, ann's node refuses to start a
    second one for her: both hear why, nothing starts, ann's bot match goes on."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=4000) as (a, b, c):
            await _on_bus(a.port, b.port, c.port)
            ann = await Client.hello(b.port, "ann")
            carl = await Client.hello(c.port, "carl")
            sent = await ann.request({"type": "challenge", "opponent": "carl"})
            offer = await carl.expect(lambda m: m.get("challenge_id") == sent["challenge_id"])
            bot = await ann.request({"type": "play_bot", "strategy": "random"})
            assert bot["type"] == "match", bot
            refused = await carl.request({"type": "accept",
                                          "challenge_id": offer["challenge_id"]})
            assert refused["type"] == "error" and refused["code"] == "not_available", refused
            assert "ann" in refused["message"] and bot["match_id"] in refused["message"]
            told = await ann.expect(lambda m: m.get("type") == "error"
                                    and "could not start" in m.get("message", ""))
            assert told["code"] == "not_available"
            rows = await query(pg_url, "SELECT count(*) FROM matches WHERE finished = 0")
            assert rows[0][0] == 1  # only ann's match against the bot
            for p in (ann, carl):
                await p.close()
    finally:
        await broker.stop()
