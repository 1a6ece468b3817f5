"""Requests and followers of a match that is changing owners (or coming back to its own
node), or that ended as its owner died: never refused ``unknown_match``, every request
answered once, every event once per connection (issue 33: what the fault harness's one-round
form found; docs/cluster.md "Status", item 16).

Real ``moo serve`` nodes on one fresh PostgreSQL database and a Mosquitto broker, short
leases. Each test builds the one interleaving the harness met by chance:

* a spectator's ``watch`` on the node that owns the match, whose read of the log is still in
  flight when the match moves to another node (the owner's database link stalled past its
  lease: the other node takes the match over and announces it);
* a guess of a player sitting on the owner's node, whose commit is in flight when the owner
  lets the match go (another node took it over): it lands, but the owner hears so only
  after, or it is refused by the fence;
* a guess for a match that ended while the client's node still followed it, sent after the
  node that ran it died: no node runs the match any more, so the client's node answers from
  the log;
* a match dropped by its node's failed write and taken back by the same node once the
  database answers: its players there are attached again from their cursors, and the
  takeover's announcement (``Seated``) must not attach them a second time from seq 1.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bench.harness.services import TcpCut
from tests.cluster_support import Node, database_relay, following_a, nodes, query, until
from tests.mqtt_support import Broker
from tests.pg_support import pg_url
from tests.server.test_server_http import http_get
from tests.server_support import Client, free_match

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

LEASE_MS = 2000


async def _owner(db: str, mid: str) -> str | None:
    rows = await query(db, "SELECT node FROM owners WHERE match_id = $1", mid)
    return str(rows[0][0]) if rows else None


async def _live_matches(port: int) -> int:
    _, _, body = await http_get(port, "/healthz")
    return int(json.loads(body)["live_matches"])


async def test_a_watch_on_the_owner_whose_match_moves_during_its_read_follows_it_there(
    pg_url: str, broker: Broker
) -> None:
    """A ``watch`` sent to the node that runs the match reads the log before it attaches the
    spectator. If the match leaves that node meanwhile (another node took it over), the watch
    follows it to its new owner: ``watching``, then every event once, in order. Before, the
    read's end found the match gone and answered ``unknown_match`` (the harness's spectator
    counted it as a gap: it never watched again)."""
    async with _a_match_on_a(pg_url, broker) as (cut, a, ann, bob, mid):
        assert await _owner(pg_url, mid) == "a"
        carl = await Client.hello(a.port, "carl")
        cut.stall()  # a's database link delivers nothing from now on
        ref = await carl.send({"type": "watch", "match_id": mid, "last_seq": 0})
        # a's renewals hang: its lease runs out, b takes the match over and announces it,
        # and a lets it go while the watch's read of the log is still stalled
        await until(lambda: _owned_by(pg_url, mid, "b"), 30, "b to take the match over")
        await _let_go(a)
        cut.flow()
        reply = await carl.expect(lambda m: m.get("ref") == ref)
        assert reply["type"] == "watching" and reply["match_id"] == mid, reply
        # the match goes on at b; the spectator on a sees it, every event once, in order
        guess = await _retried(ann, {"type": "guess", "match_id": mid, "guess": "6789"})
        seen = await carl.event(mid, "guess", seq=guess["seq"])
        assert seen["guess"] == "6789"
        seqs = [e["seq"] for e in carl.events(mid)]
        assert seqs == list(range(1, guess["seq"] + 1)), seqs
        for c in (ann, bob, carl):
            await c.close()


@asynccontextmanager
async def _a_match_on_a(
    pg_url: str, broker: Broker
) -> AsyncIterator[tuple[TcpCut, Node, Client, Client, str]]:
    """Nodes a and b on the bus (a leading), a reaching the database through a relay the test
    cuts; a match run by a, both its players on a, one guess of ann's played. Yields the
    relay, node a, ann, bob and the match id."""
    await broker.start()
    async with (
        database_relay(pg_url) as (cut, via),
        nodes(via, "a", bus=broker.url, lease_ms=LEASE_MS) as (a,),
        nodes(pg_url, "b", bus=broker.url, lease_ms=LEASE_MS) as (b,),
    ):
        await following_a(a, b)
        ann, bob, mid = await free_match(a.port)  # run by a: both players are on a
        await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
        yield cut, a, ann, bob, mid


async def _let_go(a: Node) -> None:
    """Wait until node a runs no match any more (it let the match go to its new owner)."""

    async def let_go() -> bool:
        return await _live_matches(a.port) == 0

    await until(let_go, 30, "a to let the match go")


async def _owned_by(db: str, mid: str, node: str) -> bool:
    return await _owner(db, mid) == node


async def _retried(client: Client, msg: dict[str, Any]) -> dict[str, Any]:
    """``msg``'s acknowledgement, sent again after each "try again" (the match settling at its
    new owner: docs/protocol.md says to send it again)."""
    reply: dict[str, Any] = {}

    async def acknowledged() -> bool:
        nonlocal reply
        reply = await client.request(msg)
        if reply.get("type") == "error":
            assert reply["code"] in ("storage_unavailable", "not_available"), reply
            return False
        return True

    await until(acknowledged, 30, f"{msg} acknowledged", poll=0.2)
    return reply


@pytest.mark.parametrize("fate", ["lands", "fenced"])
async def test_a_move_in_flight_as_its_node_lets_the_match_go_is_answered_once(
    pg_url: str, broker: Broker, fate: str
) -> None:
    """ann plays on a, which runs the match, and guesses while a's link to the database
    misbehaves: a's lease runs out (its renewals get no answer), b takes the match over and
    a lets it go with ann's guess still in flight. ``lands``: the link holds only the
    database's answers, so the guess is committed, and a hears it only after letting the
    match go; ann's answer is the guess's event in b's replay. ``fenced``: the link holds
    everything, so the guess reaches the database after b's claim and is refused by the
    fence; ann's node sends it to b, which plays it. Either way ann gets one answer, the
    guess's event with her ``ref``, and the log holds the guess once. Before, a dropped the
    late commit's answer (the match had left) and nothing else carried the ``ref``: the
    harness's unanswered guess (``lands``); a fenced one was refused ``storage_unavailable``."""
    async with _a_match_on_a(pg_url, broker) as (cut, a, ann, bob, mid):
        if fate == "lands":
            cut.hold_replies()  # what a sends lands; what the database answers waits
        else:
            cut.stall()  # nothing a sends reaches the database
        ref = await ann.send({"type": "guess", "match_id": mid, "guess": "6789"})

        async def logged() -> int:
            rows = await query(pg_url, "SELECT body FROM events WHERE match_id = $1", mid)
            return sum(1 for r in rows if json.loads(r[0]).get("guess") == "6789")

        if fate == "lands":
            async def landed() -> bool:
                return await logged() == 1

            await until(landed, 30, "the guess to land in the log")
        await until(lambda: _owned_by(pg_url, mid, "b"), 30, "b to take the match over")
        await _let_go(a)
        cut.flow()  # a hears now what became of its commit
        reply = await ann.expect(lambda m: m.get("ref") == ref)
        assert reply["type"] == "event" and reply["kind"] == "guess", reply
        assert reply["guess"] == "6789" and reply["seat"] == 0, reply
        # the match goes on at b, on ann's connection, every event once
        more = await _retried(ann, {"type": "guess", "match_id": mid, "guess": "7890"})
        assert more["seq"] > reply["seq"]
        seqs = [e["seq"] for e in ann.events(mid)]
        assert len(seqs) == len(set(seqs)), seqs
        assert sum(1 for m in ann.seen if m.get("ref") == ref) == 1
        assert await logged() == 1
        for c in (ann, bob):
            await c.close()


async def test_a_move_for_a_match_that_ended_before_its_owner_died_is_match_finished(
    pg_url: str, broker: Broker
) -> None:
    """The owner finished the match and died. A move for it from a client of another node
    (sent as the match ended, before the client saw ``finished``) finds no owner: the client's
    node answers it from the log, as ``match_finished``, the answer the owner gave, and as
    docs/protocol.md says of a guess under a new number. Before, it was ``unknown_match``."""
    await broker.start()
    async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=LEASE_MS) as (a, b):
        await following_a(a, b)
        ann, bob0, mid = await free_match(a.port)
        await bob0.close()
        bob = await Client.hello(b.port, "x", token=bob0.token)  # bob follows it through b
        await bob.event(mid, "back", seat=1)
        await bob.request({"type": "guess", "match_id": mid, "guess": "9876", "n": 1})
        ann_won = await ann.request({"type": "guess", "match_id": mid, "guess": "4567", "n": 1})
        assert ann_won["bulls"] == 4, ann_won
        await bob.event(mid, "finished")
        a.proc.kill()
        await a.proc.wait()

        async def released() -> bool:
            # a's lease ended (b heard its death, or it ran out): no node runs the match
            rows = await query(
                pg_url, "SELECT expires_ms < CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000"
                " AS BIGINT) FROM nodes WHERE name = 'a'")
            return not rows or bool(rows[0][0])

        await until(released, 30, "node a's lease to end")
        late = await bob.request({"type": "guess", "match_id": mid, "guess": "5678"})
        assert late["type"] == "error" and late["code"] == "match_finished", late
        numbered = await bob.request(
            {"type": "guess", "match_id": mid, "guess": "5678", "n": 2})
        assert numbered["type"] == "error" and numbered["code"] == "match_finished", numbered
        retried = await bob.request(
            {"type": "guess", "match_id": mid, "guess": "9876", "n": 1})
        assert retried["type"] == "event" and retried["guess"] == "9876", retried
        resigned = await bob.request({"type": "resign", "match_id": mid})
        assert resigned["type"] == "error" and resigned["code"] == "match_finished", resigned
        for c in (ann, bob):
            await c.close()
        assert await b.stop() == 0


async def test_a_match_taken_back_after_a_failed_write_is_not_sent_twice_to_its_players(
    pg_url: str, broker: Broker
) -> None:
    """ann and bob play on a, which runs the match. a's database link is cut in the middle of
    ann's guess: the commit lands, but a cannot learn it, refuses the guess
    ``storage_unavailable`` and drops the match, its seats kept with the cursors they had
    (before the guess). When the database answers again, a takes the match back (its own, in
    its epoch): the seats are attached again from their cursors, reading the log (the guess,
    ``resumed``), and the takeover's announcement to the players that might not know of the
    match (``Seated``) must leave them alone. Before, it gave the seats back from seq 1 while
    their own re-attachment was still reading: every event twice on each player's connection
    (the harness: seqs 1-8 twice after a ``drop-db``)."""
    await broker.start()
    # a lease that outlasts the outage: the match stays a's (with the short one, a's own
    # renewals, slowed, let it lapse, and the first commit after was fenced)
    async with (
        database_relay(pg_url) as (cut, via),
        nodes(via, "a", bus=broker.url, lease_ms=10_000) as (a,),
    ):
        await following_a(a)
        ann, bob, mid = await free_match(a.port)
        await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
        cut.hold_replies()  # what a sends lands; what the database answers waits
        ref = await ann.send({"type": "guess", "match_id": mid, "guess": "6789"})

        async def landed() -> bool:
            rows = await query(pg_url, "SELECT body FROM events WHERE match_id = $1", mid)
            return any(json.loads(r[0]).get("guess") == "6789" for r in rows)

        await until(landed, 30, "the guess to land in the log")
        await cut.down()  # cut in the middle of the commit: a cannot know it landed
        cut.flow()
        refused = await ann.expect(lambda m: m.get("ref") == ref)
        assert refused["code"] == "storage_unavailable", refused
        # back, but slow: the seats' reads of the log, to attach them again from their
        # cursors, are still on their way when the announcement comes
        cut.slow(0.1)
        await cut.up()
        await ann.event(mid, "resumed")  # taken back, from the log
        cut.slow(0.0)
        more = await _retried(ann, {"type": "guess", "match_id": mid, "guess": "7890"})
        await bob.event(mid, "guess", seq=more["seq"])
        for client in (ann, bob):
            seqs = [e["seq"] for e in client.events(mid)]
            assert seqs == list(range(1, more["seq"] + 1)), seqs  # each once, in order
        for c in (ann, bob):
            await c.close()
