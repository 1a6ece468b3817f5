"""Leases with epochs (server/cluster/leases.py): one owner per match, fenced appends, takeover.

Real ``moo serve`` nodes on one fresh PostgreSQL database (short leases so the tests are quick);
clients speak the raw protocol. The bus is not used by anything here but the last two tests
(a match a node takes back is followed there through it, from that node and from another).
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from moo.rules import DEFAULT_RULES
from tests.cluster_support import Node, database_relay, following_a, nodes, query, until
from tests.mqtt_support import Broker
from tests.pg_support import pg_url
from tests.server.test_server_http import http_get
from tests.server_support import Client, free_match

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

LEASE_MS = 2000


async def _owner(db: str, mid: str) -> Any:
    rows = await query(db, "SELECT node FROM owners WHERE match_id = $1", mid)
    return rows[0][0] if rows else None


async def _log(db: str, mid: str) -> list[dict[str, Any]]:
    rows = await query(db, "SELECT body FROM events WHERE match_id = $1 ORDER BY seq", mid)
    return [json.loads(r[0]) for r in rows]


async def _resume_on(node: Node, token: str | None, mid: str, enc: str = "moo.v1.json") -> Client:
    client = await Client.hello(node.port, "x", enc, token=token)
    assert [m["match_id"] for m in client.seen[-1]["matches"]] == [mid]
    await client.request({"type": "resume", "match_id": mid, "last_seq": 0})
    await client.event(mid, "resumed")
    return client


async def test_a_paused_owner_is_fenced_off_and_lets_go(pg_url: str) -> None:
    async with nodes(pg_url, "a", "b", lease_ms=LEASE_MS) as (a, b):
        _PORTS.update(a=a.port, b=b.port)
        ann, bob, mid = await free_match(a.port)
        assert await _owner(pg_url, mid) == "a"
        ok = await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
        assert ok["kind"] == "guess"

        os.kill(a.proc.pid, signal.SIGSTOP)
        took = await until(lambda: _is(pg_url, mid, "b"), 30, "node b to take the match over")
        print(f"takeover after SIGSTOP: {took:.2f}s")
        ann_b = await _resume_on(b, ann.token, mid)
        moved = await ann_b.request({"type": "guess", "match_id": mid, "guess": "6789"})
        assert moved["kind"] == "guess" and moved["guess"] == "6789"

        # a stale write, queued on the paused owner's socket, goes through when it wakes
        stale_ref = await ann.send({"type": "guess", "match_id": mid, "guess": "7890"})
        os.kill(a.proc.pid, signal.SIGCONT)
        try:
            refused = await ann.expect(lambda m: m.get("ref") == stale_ref)
        except TimeoutError:  # (once in a fresh clone's run, 2026-11-30: a let the match go
            # while the guess's commit was in flight, and the guess, handed over with ann's
            # seat, could not reach b without a broker; test_cluster_moving.py now shows the fix)
            raise AssertionError(
                f"no answer to the stale guess; node a said:\n{a.text()[-6000:]}\n"
                f"node b said:\n{b.text()[-3000:]}"
            ) from None
        assert refused["type"] == "error", refused
        # fenced at a's commit (storage_unavailable, also when a let go while that commit was
        # in flight), or a let go first and then could not forward it to b (no broker in these
        # tests: not_available); never applied on a
        assert refused["code"] in ("storage_unavailable", "not_available"), refused
        await until(
            lambda: _logged(a, "no longer owns", "letting go"), 30, "node a to let go"
        )
        # the log never forked: one writer per seq, the stale guess is not in it
        log = await _log(pg_url, mid)
        assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
        assert [e["guess"] for e in log if e["kind"] == "guess"] == ["5678", "6789"]
        assert await _owner(pg_url, mid) == "b"

        # the match goes on and ends on b
        done = await ann_b.request({"type": "guess", "match_id": mid, "guess": "4567"})
        assert done["kind"] == "guess"
        bob_b = await _resume_on(b, bob.token, mid, "moo.v1.msgpack")
        await bob_b.request({"type": "resign", "match_id": mid})
        fin = await ann_b.event(mid, "finished")
        assert fin["winner"] == 0
        assert (await query(pg_url, "SELECT finished FROM matches WHERE match_id = $1", mid))[
            0
        ][0] == 1
        for c in (ann, bob, ann_b, bob_b):
            await c.close()
        assert await a.stop() == 0 and await b.stop() == 0


async def test_a_killed_owner_is_taken_over(pg_url: str) -> None:
    async with nodes(pg_url, "a", "b", lease_ms=LEASE_MS) as (a, b):
        _PORTS.update(a=a.port, b=b.port)
        ann, bob, mid = await free_match(a.port)
        acked = []
        for guess in ("5678", "6789", "7890"):
            r = await ann.request({"type": "guess", "match_id": mid, "guess": guess})
            acked.append((r["seq"], r["guess"]))
        a.proc.kill()
        await a.proc.wait()
        # how soon is a timing figure (bench/cluster_faults.py); here: that it happens
        took = await until(lambda: _is(pg_url, mid, "b"), 30, "takeover")
        print(f"takeover after SIGKILL: {took:.2f}s (lease {LEASE_MS} ms)")
        ann_b = await _resume_on(b, ann.token, mid)
        bob_b = await _resume_on(b, bob.token, mid, "moo.v1.msgpack")
        logged = [(e["seq"], e["guess"]) for e in ann_b.events(mid) if e["kind"] == "guess"]
        assert set(acked) <= set(logged)  # nothing acknowledged was lost
        await bob_b.request({"type": "guess", "match_id": mid, "guess": "0123"})
        fin = await bob_b.event(mid, "finished")
        assert fin["reason"] == "solved" and fin["winner"] == 1
        # operations: /healthz names the node, /metrics counts the takeover and the guesses
        status, _, body = await http_get(b.port, "/healthz")
        health = json.loads(body)
        assert status == 200 and health["node"] == "b" and health["db"] == "ok"
        assert health["takeovers"] == 1
        status, headers, body = await http_get(b.port, "/metrics")
        text = body.decode()
        assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
        assert 'moo_lease_takeovers_total{node="b"} 1.0' in text
        assert 'moo_acknowledged_guesses_total{node="b"} 1.0' in text  # bob's, on b
        assert 'moo_db_up{node="b"} 1.0' in text
        assert 'moo_ack_latency_seconds_bucket{le="+Inf",node="b"}' in text
        for c in (ann_b, bob_b):
            await c.close()
        assert await b.stop() == 0


async def test_sigterm_hands_matches_over_at_once(pg_url: str) -> None:
    async with nodes(pg_url, "a", "b", lease_ms=60_000) as (a, b):
        _PORTS.update(a=a.port, b=b.port)
        ann, _bob, mid = await free_match(a.port)
        a.proc.send_signal(signal.SIGTERM)
        # the lease is a minute; the drain ends it and waits until b (scanning every 3 s) has
        # taken the match over, and only then tells its clients to reconnect: when ann hears
        # 1012 the match is b's already, and live there
        assert await ann.closed(timeout=30) == 1012
        assert await _owner(pg_url, mid) == "b"
        assert await _is(pg_url, mid, "b")
        await a.stop()  # (its exit status can be lost to asyncio's child watcher: see the log)
        assert "0 matches not yet taken over" in a.text() and "stopped" in a.text(), a.text()
        ann_b = await _resume_on(b, ann.token, mid)
        r = await ann_b.request({"type": "guess", "match_id": mid, "guess": "4567"})
        assert r["kind"] == "guess"
        await ann_b.close()
        assert await b.stop() == 0


async def _is(db: str, mid: str, node: str) -> bool:
    """``node`` owns ``mid`` and has it live (claimed, then replayed)."""
    if await _owner(db, mid) != node:
        return False
    _, _, body = await http_get(_PORTS[node], "/healthz")
    return bool(json.loads(body)["live_matches"] >= 1)


#: node name -> port, filled by the tests (for _is)
_PORTS: dict[str, int] = {}


async def _logged(node: Node, *needles: str) -> bool:
    return any(n in node.text() for n in needles)


async def test_database_away_longer_than_the_lease(pg_url: str) -> None:
    """The database vanishes (a TCP relay is cut) for longer than the lease: the node refuses
    with storage_unavailable meanwhile, then renews and re-adopts its match: nothing stuck."""
    async with database_relay(pg_url) as (cut, via), nodes(via, "a", lease_ms=LEASE_MS) as (a,):
        _PORTS.update(a=a.port)
        ann, bob, mid = await free_match(a.port)
        await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
        await cut.down()
        refused = await ann.request({"type": "guess", "match_id": mid, "guess": "6789"})
        assert refused["type"] == "error" and refused["code"] == "storage_unavailable"
        # away for longer than the lease: the node's renewals fail
        await until(lambda: _failed(a, 4), 20, "renewals failing for longer than the lease")
        await cut.up()
        await until(lambda: _is(pg_url, mid, "a"), 20, "the match live on a again")
        # live again only once the node has replayed it (the old instance is dropped first)
        await until(lambda: _readopted(a), 20, "the node re-adopting its match")
        ann2 = await _resume_after_outage(a, ann.token, mid)
        ok = await ann2.request({"type": "guess", "match_id": mid, "guess": "7890"})
        assert ok["kind"] == "guess" and ok["guess"] == "7890"
        log = await _log(pg_url, mid)
        assert [e["guess"] for e in log if e["kind"] == "guess"] == ["5678", "7890"]
        for c in (ann, bob, ann2):
            await c.close()
        assert await a.stop() == 0


async def _resume_after_outage(node: Node, token: str | None, mid: str) -> Client:
    """Resume as a client would right after the database came back: a refusal then is
    ``storage_unavailable`` (documented as retryable: the node's writer may still be
    reconnecting, and the match is re-adopted again at the next recovery), so reconnect and
    retry, within a bound; the match must accept moves again in the end (nothing stuck)."""
    seen: list[Any] = []
    clients: list[Client] = []

    async def attempt() -> bool:
        client = await Client.hello(node.port, "x", token=token)
        clients.append(client)
        try:
            reply = await client.request({"type": "resume", "match_id": mid, "last_seq": 0})
        except (TimeoutError, AssertionError) as exc:  # no reply in time: try again
            seen.append(str(exc)[:200])
            return False
        seen.append(reply)
        if reply.get("type") == "error":
            assert reply["code"] == "storage_unavailable", reply  # only the transient refusal
            return False
        try:
            await client.expect(
                lambda m: m.get("type") == "event" and m.get("match_id") == mid
                and m.get("kind") == "resumed", timeout=5,
            )
        except (TimeoutError, AssertionError):
            seen.append([m for m in client.seen if m.get("type") != "event"])
            return False
        return True

    try:
        await until(attempt, 30, f"match {mid} resumed after the outage ({seen})", poll=0.2)
    finally:
        for old in clients[:-1]:
            await old.close()
    return clients[-1]


async def _readopted(node: Node) -> bool:
    """The node has logged that it replayed the matches it dropped during the outage."""
    return "re-adopted 1 match" in node.text()


async def _failed(node: Node, times: int) -> bool:
    """The node has logged ``times`` failed renewals (one every lease/5)."""
    return node.text().count("heartbeat failed") >= times


async def test_json_logs_name_the_node(pg_url: str) -> None:
    async with nodes(pg_url, "a", lease_ms=LEASE_MS, extra=("--log-format", "json")) as (a,):
        assert await a.stop() == 0
    lines = [json.loads(line) for line in a.text().splitlines() if line.strip()]
    assert lines and all(set(ln) >= {"at", "level", "logger", "msg", "node"} for ln in lines)
    assert {ln["node"] for ln in lines} == {"a"}
    assert any(ln["msg"].startswith("listening on ws://") for ln in lines)
    assert lines[-1]["msg"] == "stopped" and lines[-1]["level"] == "INFO"


def _nth(n: int) -> str:
    """A valid guess for ann's ``n``-th (distinct digits, never bob's secret 4567)."""
    return DEFAULT_RULES.secrets[100 + n]


async def _fenced_and_back(db: str, ann: Client, mid: str) -> tuple[int, dict[str, Any]]:
    """Node a's lease set into the past in the database (as slow renewals over a slow
    database link would leave it) and ann's numbered guesses sent until one is fenced off,
    then sent on until the match is back on a and one is answered: how many ann numbered,
    and the answer."""
    n = 2
    refused: dict[str, Any] = {}

    async def fenced() -> bool:
        nonlocal n
        # the lease out now, and a guess at once (before the next renewal, 0.4 s away)
        await query(db, "UPDATE nodes SET expires_ms = 0 WHERE name = 'a'")
        reply = await ann.request({"type": "guess", "match_id": mid, "guess": _nth(n), "n": n})
        if reply.get("type") == "error":
            refused.update(reply)
            return True
        n += 1
        return False

    await until(fenced, 30, "a guess fenced off by the lapsed lease")
    assert refused["code"] in ("storage_unavailable", "not_available"), refused
    answer: dict[str, Any] = {}

    async def answered() -> bool:
        reply = await ann.request({"type": "guess", "match_id": mid, "guess": _nth(n), "n": n})
        answer.update(reply)
        return reply.get("kind") == "guess"

    await until(answered, 30, "the match back on a, answering the guess")
    return n, answer


async def test_a_lone_node_whose_lease_lapsed_takes_its_fenced_match_back(
    pg_url: str, broker: Broker
) -> None:
    """A node alone (no other node to take anything over) whose lease lapses: its next
    commit is fenced, and the match is dropped there as moved. Nobody else claims it, and
    the scan leaves a live lease's matches alone; so once the node has renewed it takes the
    match back by replay, and the player's numbered guess, sent again until it is answered,
    lands once. (Before, the match was left with no one running it.)"""
    await broker.start()
    async with nodes(pg_url, "a", bus=broker.url, lease_ms=LEASE_MS) as (a,):
        ann, bob, mid = await free_match(a.port)
        ok = await ann.request({"type": "guess", "match_id": mid, "guess": "5678", "n": 1})
        assert ok["kind"] == "guess"
        n, _ = await _fenced_and_back(pg_url, ann, mid)
        log = await _log(pg_url, mid)
        numbered = [e for e in log if e["kind"] == "guess" and e["seat"] == 0]
        assert len(numbered) == n  # each number once: the fenced one never landed
        assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
        assert await _owner(pg_url, mid) == "a"
        await bob.request({"type": "resign", "match_id": mid})
        fin = await ann.event(mid, "finished")
        assert fin["winner"] == 0
        for c in (ann, bob):
            await c.close()
        assert await a.stop() == 0


async def test_a_spectator_elsewhere_follows_a_match_its_owner_took_back(
    pg_url: str, broker: Broker
) -> None:
    """carl watches from node c a match that node a runs; a's lease lapses, its commit is
    fenced and the match dropped there, and a takes it back under the same epoch before
    anyone else claims it (c's lease is so long that it scans for orphans once an hour).
    What served carl on a went with the dropped match, and the owner c knows of is the same
    as before; carl is sent the events of the match's new run all the same. (Before, the
    adoption's notice named the owner c already followed, nothing re-attached carl, and he
    heard nothing more of the match: a fault harness run's 75 s silence, issue 31.)"""
    await broker.start()
    async with nodes(pg_url, "a", bus=broker.url, lease_ms=LEASE_MS) as (a,), nodes(
        pg_url, "c", bus=broker.url, lease_ms=3_600_000
    ) as (c,):
        await following_a(a, c)
        ann, bob, mid = await free_match(a.port)
        carl = await Client.hello(c.port, "carl")
        watching = await carl.request({"type": "watch", "match_id": mid})
        assert watching["type"] == "watching", watching
        ok = await ann.request({"type": "guess", "match_id": mid, "guess": "5678", "n": 1})
        await carl.event(mid, "guess", seq=ok["seq"])
        _, answer = await _fenced_and_back(pg_url, ann, mid)
        assert await _owner(pg_url, mid) == "a"  # taken back by a, not claimed by c
        seen = await carl.event(mid, "guess", seq=answer["seq"])
        assert seen["guess"] == answer["guess"]
        await bob.request({"type": "resign", "match_id": mid})
        fin = await carl.event(mid, "finished")
        seqs = [e["seq"] for e in carl.events(mid)]
        assert seqs == sorted(set(seqs)) and seqs[-1] == fin["seq"]  # each event once, in order
        for client in (ann, bob, carl):
            await client.close()
        assert await a.stop() == 0
