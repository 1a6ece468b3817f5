"""Cross-node play over the MQTT bus (server/cluster/): real nodes, a real Mosquitto.

The players of one match sit on different nodes and a spectator on a third; every request for
the match is forwarded to its owner and every event relayed back, so each client sees what it
would see from a single node: its acknowledgements, the same seq numbers in order, no repeats.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from tests.cluster_support import Node, nodes, query, until
from tests.mqtt_support import Broker
from tests.pg_support import pg_url
from tests.server.test_server_http import http_get
from tests.server_support import ENCODINGS, Client, free_match

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here


def _seqs(client: Client, mid: str) -> list[int]:
    return [e["seq"] for e in client.events(mid)]


def _check_stream(client: Client, mid: str) -> None:
    """What a client applies under docs/protocol.md's rule (drop any event at or below the
    highest seq applied) misses nothing it was sent: every seq arrived in order the first time.

    A reconnecting player may legitimately see a prefix twice (``hello`` rejoins its seats with
    the events from seq 1, and an explicit ``resume`` repeats them); an event that first
    arrived after a higher one would be dropped by that rule, and fails here.
    """
    seqs = _seqs(client, mid)
    applied: list[int] = []
    for seq in seqs:
        if not applied or seq > applied[-1]:
            applied.append(seq)
    assert applied == sorted(set(seqs)), seqs


@pytest.mark.parametrize("enc", ENCODINGS)
async def test_players_on_two_nodes_and_a_spectator_on_a_third(
    pg_url: str, broker: Broker, tmp_path: Path, enc: str
) -> None:
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=4000) as (a, b, c):
            ann = await Client.hello(a.port, "ann", enc)
            bob0 = await Client.hello(a.port, "bob", enc)
            sent = await ann.request({"type": "challenge", "opponent": "bob", "pacing": "free"})
            offer = await bob0.expect(lambda m: m.get("challenge_id") == sent["challenge_id"])
            mid = (await bob0.request({"type": "accept", "challenge_id": offer["challenge_id"]}))[
                "match_id"
            ]
            await ann.expect(lambda m: m.get("type") == "match")
            await bob0.close()

            # bob comes back through node b: resume, secret and guesses are forwarded to a
            bob = await Client.hello(b.port, "x", enc, token=bob0.token)
            # welcome lists the match although node a runs it
            listed = bob.seen[-1]["matches"]
            assert [(m["match_id"], m["seat"]) for m in listed] == [(mid, 1)], listed
            resumed = await bob.request({"type": "resume", "match_id": mid, "last_seq": 0})
            assert resumed["type"] == "match" and resumed["match_id"] == mid, resumed
            await bob.event(mid, "back", seat=1)
            # carl watches from node c
            carl = await Client.hello(c.port, "carl", enc)
            watching = await carl.request({"type": "watch", "match_id": mid})
            assert watching["type"] == "watching" and watching["players"] == ["ann", "bob"]

            await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
            r = await bob.request({"type": "secret", "match_id": mid, "secret": "4567"})
            assert r["kind"] == "secret" and r["secret"] == "4567"  # acknowledged via the bus
            await ann.event(mid, "started")
            await bob.event(mid, "started")
            g = await bob.request({"type": "guess", "match_id": mid, "guess": "9876"})
            assert g["kind"] == "guess" and g["guess"] == "9876" and "ref" in g
            seen = await ann.event(mid, "guess", seat=1)
            assert seen["seq"] == g["seq"]  # one log, one numbering
            # a refused request gets its specific error back through the bus, changing nothing
            bad = await bob.request({"type": "guess", "match_id": mid, "guess": "1123"})
            assert bad["type"] == "error" and bad["code"] == "repeated_symbol", bad
            await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
            await ann.request({"type": "guess", "match_id": mid, "guess": "4567"})
            await bob.request({"type": "guess", "match_id": mid, "guess": "1234"})
            fins = [await p.event(mid, "finished") for p in (ann, bob, carl)]
            assert {f["seq"] for f in fins} == {fins[0]["seq"]}
            assert all(f["winner"] == 0 for f in fins)
            for p in (ann, bob, carl):
                _check_stream(p, mid)
            # the spectator saw every move, in the same numbering as the players
            carl_guesses = [e["seq"] for e in carl.events(mid) if e["kind"] == "guess"]
            ann_guesses = [e["seq"] for e in ann.events(mid) if e["kind"] == "guess"]
            assert carl_guesses == ann_guesses and len(ann_guesses) == 4
            rows = await query(
                pg_url,
                "SELECT o.node, m.finished FROM owners o JOIN matches m USING (match_id)"
                " WHERE match_id = $1",
                mid,
            )
            assert [tuple(r) for r in rows] == [("a", 1)]  # owned and run by a only
            for p in (ann, bob, carl):
                await p.close()
            for n in (a, b, c):
                assert await n.stop(signal.SIGTERM) == 0, n.text()
    finally:
        await broker.stop()


async def test_broker_down_gives_a_retryable_error_and_heals(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=4000) as (a, b):
            ann = await Client.hello(a.port, "ann")
            bob0 = await Client.hello(a.port, "bob")
            sent = await ann.request({"type": "challenge", "opponent": "bob", "pacing": "free"})
            offer = await bob0.expect(lambda m: m.get("challenge_id") == sent["challenge_id"])
            mid = (await bob0.request({"type": "accept", "challenge_id": offer["challenge_id"]}))[
                "match_id"
            ]
            await bob0.request({"type": "secret", "match_id": mid, "secret": "4567"})
            await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
            await bob0.close()
            bob = await Client.hello(b.port, "x", token=bob0.token)
            await bob.request({"type": "resume", "match_id": mid, "last_seq": 0})

            await broker.stop()
            await until(lambda: _bus(b, "down"), 15, "node b to see the broker gone")
            # ann plays on: her match runs on her node and needs no bus
            ok = await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
            assert ok["kind"] == "guess"
            # bob's forward cannot go anywhere: a clear, retryable refusal, nothing applied
            refused = await bob.request({"type": "guess", "match_id": mid, "guess": "9876"})
            assert refused["type"] == "error" and refused["code"] == "not_available", refused

            await broker.start()  # same port: the nodes reconnect by themselves
            await until(lambda: _bus(b, "ok"), 15, "node b to reconnect")
            await until(lambda: _bus(a, "ok"), 15, "node a to reconnect")
            guess = {"type": "guess", "match_id": mid, "guess": "9876"}
            try:
                again = await bob.request(guess)
                assert again["kind"] == "guess" and again["guess"] == "9876", again
                seq = again["seq"]
            except ConnectionClosed as closed:
                # documented (docs/cluster.md, Failures): ann's guess was relayed while the
                # broker was down and lost, and the next relay shows the gap: bob is closed
                # with 1012 and resumes; whether his guess was applied, the log says
                assert closed.rcvd is not None and closed.rcvd.code == 1012, closed
                bob = await Client.hello(b.port, "x", token=bob0.token)
                await bob.request({"type": "resume", "match_id": mid, "last_seq": 0})
                logged = await query(
                    pg_url, "SELECT seq FROM events WHERE match_id = $1 AND body LIKE $2",
                    mid, '%"guess":"9876"%',
                )
                if logged:
                    seq = logged[0][0]
                else:
                    again = await bob.request(guess)
                    assert again["kind"] == "guess" and again["guess"] == "9876", again
                    seq = again["seq"]
            seen = await ann.event(mid, "guess", seat=1)
            assert seen["seq"] == seq
            rows = await query(
                pg_url, "SELECT count(*) FROM events WHERE match_id = $1 AND body LIKE $2",
                mid, '%"guess":"9876"%',
            )
            assert rows[0][0] == 1  # the refused attempt left nothing behind
            for p in (ann, bob):
                await p.close()
    finally:
        await broker.stop()


async def _bus(node: Node, state: str) -> bool:
    _, _, body = await http_get(node.port, "/healthz")
    return bool(json.loads(body)["bus"] == state)


@pytest.mark.parametrize("enc", ENCODINGS)
async def test_the_lobby_is_cluster_wide(
    pg_url: str, broker: Broker, tmp_path: Path, enc: str,
) -> None:
    """Quick pairing, a challenge and a room code between players on different nodes."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=4000) as (_a, b, c):
            await until(lambda: _bus(b, "ok"), 15, "b on the bus")
            await until(lambda: _bus(c, "ok"), 15, "c on the bus")
            ann = await Client.hello(b.port, "ann", enc)
            bob = await Client.hello(c.port, "bob", "moo.v1.msgpack")
            # quick pairing: ann queues on b, bob on c; the leader (a) pairs them
            q = await ann.request({"type": "queue", "pacing": "free"})
            assert q["type"] == "queued", q
            await bob.request({"type": "queue", "pacing": "free"})
            ma, mb = await ann.of_type("match"), await bob.of_type("match")
            mid = ma["match_id"]
            assert mb["match_id"] == mid and {ma["seat"], mb["seat"]} == {0, 1}
            p0, p1 = (ann, bob) if ma["seat"] == 0 else (bob, ann)
            await p0.request({"type": "secret", "match_id": mid, "secret": "0123"})
            await p1.request({"type": "secret", "match_id": mid, "secret": "4567"})
            await p0.event(mid, "started")
            g = await p0.request({"type": "guess", "match_id": mid, "guess": "4567"})
            assert g["kind"] == "guess" and "ref" in g
            await p1.request({"type": "guess", "match_id": mid, "guess": "9876"})
            for p in (ann, bob):
                fin = await p.event(mid, "finished")
                assert fin["winner"] == 0
                _check_stream(p, mid)

            # a challenge from c to b, and a room created on b joined from c
            sent = await bob.request({"type": "challenge", "opponent": "ann"})
            assert sent["type"] == "challenge_sent", sent
            offer = await ann.expect(lambda m: m.get("challenge_id") == sent["challenge_id"])
            m = await ann.request({"type": "accept", "challenge_id": offer["challenge_id"]})
            assert m["type"] == "match" and m["opponent"] == "bob"
            await bob.expect(lambda x: x.get("type") == "match" and x["match_id"] == m["match_id"])
            # one match at a time per person, as on one node (the match runs on c, not on the
            # lobby leader a): ann resigns it before she opens a room
            busy = await ann.request({"type": "room_create", "pacing": "free"})
            assert busy["type"] == "error" and busy["code"] == "in_match", busy
            await ann.request({"type": "resign", "match_id": m["match_id"]})
            await ann.event(m["match_id"], "finished")
            room = await ann.request({"type": "room_create", "pacing": "free"})
            carl = await Client.hello(c.port, "carl", enc)
            joined = await carl.request({"type": "room_join", "code": room["code"]})
            assert joined["type"] == "match" and joined["opponent"] == "ann", joined
            # an unknown player is still a specific error
            err = await bob.request({"type": "challenge", "opponent": "nobody"})
            assert err["type"] == "error" and err["code"] == "unknown_player"
            # one player, one connection, cluster-wide: ann again on c replaces ann on b
            ann_c = await Client.hello(c.port, "x", enc, token=ann.token)
            assert ann_c.name == "ann"
            assert await ann.closed() == 4001
            for p in (bob, carl, ann_c):
                await p.close()
    finally:
        await broker.stop()


async def test_sigkill_of_the_owner_mid_match_loses_nothing(
    pg_url: str, broker: Broker, tmp_path: Path,
) -> None:
    """ann on b and bob on c play a match; it runs on b (the challenger's node); b is killed
    with SIGKILL mid-match. a or c takes the match over by replay at once (b's will, and no
    database session of b's left); bob, relayed to b from c, keeps his connection and is
    re-attached at the new owner from the last event he had (no gap, no repeat); ann
    reconnects and resumes: every acknowledged guess is in the log, nobody forfeits."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=10000) as (a, b, c):
            await until(lambda: _bus(b, "ok"), 15, "b on the bus")
            await until(lambda: _bus(c, "ok"), 15, "c on the bus")
            ann = await Client.hello(b.port, "ann")
            bob = await Client.hello(c.port, "bob", "moo.v1.msgpack")
            sent = await ann.request({"type": "challenge", "opponent": "bob", "pacing": "free"})
            offer = await bob.expect(lambda m: m.get("challenge_id") == sent["challenge_id"])
            mid = (await bob.request({"type": "accept", "challenge_id": offer["challenge_id"]}))[
                "match_id"
            ]
            # the lobby leader (a) paired them; the match runs on the challenger's node
            assert (await query(pg_url, "SELECT node FROM owners"))[0][0] == "b"
            await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
            await bob.request({"type": "secret", "match_id": mid, "secret": "4567"})
            acked = []
            for guess in ("5678", "6789"):
                r = await ann.request({"type": "guess", "match_id": mid, "guess": guess})
                acked.append((r["seq"], r["guess"]))
            await bob.event(mid, "guess", seq=acked[-1][0])
            b.proc.kill()
            await b.proc.wait()
            assert await ann.closed(timeout=20) == 1006  # her node died under her
            # bob's connection stays: the match comes back under him, well within the lease
            await bob.event(mid, "resumed")
            new_owner = (await query(pg_url, "SELECT node FROM owners"))[0][0]
            assert new_owner in ("a", "c")
            assert bob.ws.close_code is None  # never closed
            ann2 = await Client.hello(a.port, "x", token=ann.token)
            await ann2.event(mid, "resumed")  # back in her seat after hello, no resume needed
            logged = {(e["seq"], e["guess"]) for e in ann2.events(mid) if e["kind"] == "guess"}
            assert set(acked) <= logged  # 0 acknowledged guesses lost
            await ann2.request({"type": "guess", "match_id": mid, "guess": "4567"})
            for guess in ("9876", "8765", "7654"):  # ann solved in 3: bob cannot catch up
                r = await bob.request({"type": "guess", "match_id": mid, "guess": guess})
                assert r.get("kind") == "guess", r
            fins = [await p.event(mid, "finished") for p in (ann2, bob)]
            assert fins[0]["seq"] == fins[1]["seq"]
            assert fins[0]["reason"] == "solved" and fins[0]["winner"] == 0  # no forfeit
            for p in (ann2, bob):
                _check_stream(p, mid)
            # bob saw every event of the match exactly once, in order, on one connection
            seqs = [e["seq"] for e in bob.events(mid)]
            assert seqs == list(range(1, fins[1]["seq"] + 1)), seqs
            for p in (ann2, bob):
                await p.close()
    finally:
        await broker.stop()


async def test_a_queued_player_survives_the_lobby_leaders_death(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """ann queues on b while a leads the lobby; a is killed; the new leader (b) gets ann's
    queue entry from her node and pairs her with bob, who queues on c afterwards."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=2000) as (a, b, c):
            await until(lambda: _bus(b, "ok"), 15, "b on the bus")
            await until(lambda: _bus(c, "ok"), 15, "c on the bus")
            ann = await Client.hello(b.port, "ann")
            q = await ann.request({"type": "queue", "pacing": "free"})
            assert q["type"] == "queued"
            a.proc.kill()
            await a.proc.wait()
            await until(lambda: _leader_is(b, "b"), 15, "b to lead the lobby")
            await until(lambda: _leader_is(c, "b"), 15, "c to follow b")
            bob = await Client.hello(c.port, "bob", "moo.v1.msgpack")
            await bob.request({"type": "queue", "pacing": "free"})
            ma, mb = await ann.of_type("match"), await bob.of_type("match")
            assert ma["match_id"] == mb["match_id"] and ma["opponent"] == "bob"
            # ann heard "queued" once, for her own request: the re-queue was silent
            assert sum(1 for m in ann.seen if m.get("type") == "queued") == 1
            for p in (ann, bob):
                await p.close()
    finally:
        await broker.stop()


async def _leader_is(node: Node, leader: str) -> bool:
    """The node's log says, last, that ``leader`` leads the lobby."""
    lines = [ln for ln in node.text().splitlines() if "lobby leader is" in ln]
    return bool(lines) and lines[-1].split("lobby leader is ", 1)[1].startswith(f"{leader} ")


async def test_a_silent_leader_times_out_and_a_dead_one_is_replaced_at_once(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """Leases are 30 s here, so nothing below waits for one. A paused lobby leader (SIGSTOP:
    its connections stay open) cannot answer: a forwarded request is refused with
    not_available after 5 s instead of hanging. Killed (SIGKILL), its broker connection drops
    and its MQTT will tells the others at once: the next request goes to the new leader."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=30_000) as (a, b):
            await until(lambda: _bus(b, "ok"), 15, "b on the bus")
            ann = await Client.hello(b.port, "ann")
            os.kill(a.proc.pid, signal.SIGSTOP)
            reply = await ann.request({"type": "queue", "pacing": "free"})
            assert reply["type"] == "error" and reply["code"] == "not_available", reply
            assert "did not answer" in reply["message"]
            a.proc.kill()
            await a.proc.wait()
            await until(lambda: _leader_is(b, "b"), 10, "b to lead at once")
            queued = await ann.request({"type": "queue", "pacing": "free"})
            assert queued["type"] == "queued", queued
            await ann.close()
    finally:
        await broker.stop()


async def test_a_player_who_never_heard_of_a_match_is_told_by_its_new_owner(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """A node may die between storing a new match and relaying its ``match`` message to a
    player connected elsewhere: nothing the player's node holds names the match, so only the
    node that takes it over can tell them. Made here on purpose: a match of ann's on a is
    rewritten in the database to seat dan, connected to c, who never heard of it; a is
    killed. dan gets the ``match`` message and the events from seq 1, as for a new match,
    and plays it; his seat is not lost to the grace window."""
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=2000) as (a, b, c):
            await until(lambda: _bus(a, "ok"), 15, "a on the bus")
            await until(lambda: _bus(b, "ok"), 15, "b on the bus")
            await until(lambda: _bus(c, "ok"), 15, "c on the bus")
            dan = await Client.hello(c.port, "dan")
            ann, _bob, mid = await free_match(a.port)
            for table, column in (("events", "body"), ("matches", "meta")):
                await query(pg_url, f"UPDATE {table} SET {column} = replace({column},"
                            " '\"bob\"', '\"dan\"') WHERE match_id = $1", mid)
            a.proc.kill()
            await a.proc.wait()
            told = await dan.expect(lambda m: m.get("type") == "match")
            assert told["match_id"] == mid and told["seat"] == 1 and told["opponent"] == "ann"
            assert "ref" not in told or told["ref"] is None
            await dan.event(mid, "started")
            assert _seqs(dan, mid)[0] == 1
            _check_stream(dan, mid)
            reply = await dan.request({"type": "guess", "match_id": mid, "guess": "0123"})
            assert reply["type"] == "event" and reply["kind"] == "guess", reply
            assert reply["bulls"] == 4 and reply["seat"] == 1
            for p in (dan, ann):
                await p.close()
    finally:
        await broker.stop()
