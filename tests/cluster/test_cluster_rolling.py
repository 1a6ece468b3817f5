"""A rolling restart of a three-node cluster during ``moo tournament`` (issue #11).

Three real nodes on one PostgreSQL database and one broker; ``moo tournament`` plays through
them with the list of the three URLs. Each node in turn (at least once) gets SIGTERM (it
drains: its matches move to the other nodes before its clients are told to reconnect), is
started again on its port, and must be back on the bus before the next one goes. The
tournament plays on through all of it (it is sized never to end by itself, so that no machine
is too slow for it to outlast the restarts), and once it has finished more matches on the
restarted cluster it is stopped. Every match it finished, those in flight at a drain first,
must have ended normally (no ``disconnect``, ``resign`` or ``timeout`` in the database, not
only in the tournament's records: a resigned and replayed match would hide there), and every
guess it recorded must be in the log, in order.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from functools import partial
from pathlib import Path

import pytest

from tests.clients.test_client_failover import FORFEITS, _lines, _live_matches, _moo
from tests.cluster_support import Node, nodes, query, start_node, until
from tests.mqtt_support import Broker
from tests.patience import patience
from tests.pg_support import pg_url
from tests.server.test_server_http import http_get

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

LEASE_MS = 3000


async def _on_bus(node: Node) -> bool:
    try:
        _, _, body = await http_get(node.port, "/healthz")
    except OSError:
        return False
    return bool(json.loads(body).get("bus") == "ok")


@pytest.mark.slow(45)
async def test_rolling_restart_during_a_tournament(
    pg_url: str, broker: Broker, tmp_path: Path,
) -> None:
    await broker.start()
    out = tmp_path / "t.jsonl"
    proc: asyncio.subprocess.Process | None = None
    try:
        async with nodes(pg_url, "a", "b", "c", bus=broker.url, lease_ms=LEASE_MS) as started:
            for node in started:
                await until(partial(_on_bus, node), 20, f"{node.name} on the bus")
            urls = ",".join(f"ws://127.0.0.1:{n.port}/" for n in started)
            # 10000 matches, minutes more than the restarts take: it is stopped below
            proc = await _moo("tournament", "minimum", "random", "--url", urls, "--rounds",
                              "5000", "--seed", "11", "--concurrency", "4", "--out",
                              str(out), "--no-progress", "--name-prefix", "roll-")
            await _records_at_least(out, 2, proc)
            drains: list[tuple[str, int]] = []
            left = list(range(len(started)))
            chosen: list[int] = []

            # each node drained at least once, each drain with a match of the tournament live
            # on the node (waited for, not hoped for: the client may be between matches at
            # any moment). The client's connections all start on the first URL and move on to
            # the next at each drain; a reconnect that fails on a loaded machine moves one
            # further, and can land back on a node already restarted; and a match seen live
            # may end before its node's SIGTERM, so that the drain hands nothing over and the
            # node stays left while its clients move on. Then no match comes to the nodes left
            # until the clients are moved again (the flakes of stops 26 and 28; waiting 20 s
            # for one first cost 20-120 s a run, stop 50). So a node left is drained when it
            # has a live match, and otherwise, at once, a node already restarted that has one:
            # its clients move on, towards the nodes left.
            async def live_on(candidates: list[int]) -> bool:
                for k in candidates:
                    if await _live_matches(started[k].port):
                        chosen.append(k)
                        return True
                return False

            while left:
                # each drain moves the clients on by one node: a dozen leave none unvisited
                assert len(drains) < 12, ("no match came to the nodes left", left, drains)
                again_ok = [k for k in range(len(started)) if k not in left]
                await until(partial(live_on, left + again_ok), 60, "a match live on a node")
                i = chosen[-1]
                node = started[i]
                node.proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(node.proc.wait(), patience(60))
                if node._drain is not None:
                    await asyncio.wait_for(node._drain, patience(10))
                text = node.text()
                assert "0 matches not yet taken over" in text and "stopped" in text, text
                # The match seen live may have ended between the look and the SIGTERM (they
                # are short): the drain counts only if it had a match to hand over, by the
                # node's own word (a client's record and this test's clock could disagree
                # by the time between the two: the flake of stop 39's fresh clone)
                moved = re.findall(r"draining; (\d+) matches to hand over", text)
                assert moved, text
                drains.append((node.name, int(moved[-1])))
                if int(moved[-1]) > 0 and i in left:
                    left.remove(i)
                again = await start_node(pg_url, node.name, bus=broker.url, lease_ms=LEASE_MS,
                                         extra=("--port", str(node.port)))
                started[i] = again
                await until(partial(_on_bus, again), 20, f"{node.name} back on the bus")
            # the restarted cluster plays on: a few more matches finish, then the client stops
            await _records_at_least(out, len(await _lines(out)) + 8, proc)
            proc.kill()
            await proc.wait()
            records = [json.loads(line) for line in await _lines(out)]
            assert len({r["key"] for r in records}) == len(records)  # each match once
            assert [r for r in records if r["reason"] in FORFEITS] == []
            # each node was drained with matches in flight (the loop above), and every match
            # ended normally
            assert {name for name, moved in drains if moved} == {"a", "b", "c"}, drains
            # the database agrees: each of them finished, and no match finished by a forfeit
            # (a match resigned and then replayed would not show in the records; those the
            # stopped client left open are unfinished, not forfeited, within the grace period)
            ids = [r["match_id"] for r in records]
            rows = await query(pg_url, "SELECT match_id, finished FROM matches"
                                       " WHERE match_id = ANY($1::text[])", ids)
            assert len(rows) == len(records) and all(r[1] == 1 for r in rows), rows
            fins = await query(
                pg_url, "SELECT body FROM events WHERE body::jsonb ->> 'kind' = 'finished'"
            )
            reasons = [json.loads(r[0])["reason"] for r in fins]
            assert len(reasons) >= len(records)
            assert not [r for r in reasons if r in FORFEITS], reasons
            # 0 lost guesses: each seat's guesses, as the tournament recorded them, are the log's
            logged = await query(
                pg_url,
                "SELECT match_id, body FROM events WHERE body::jsonb ->> 'kind' = 'guess'"
                " AND match_id = ANY($1::text[]) ORDER BY match_id, seq", ids,
            )
            by_seat: dict[tuple[str, int], list[str]] = {}
            for match_id, body in logged:
                e = json.loads(body)
                by_seat.setdefault((match_id, int(e["seat"])), []).append(e["guess"])
            for r in records:
                for seat in (0, 1):
                    assert by_seat.get((r["match_id"], seat), []) == r["guesses"][seat], r
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await broker.stop()


async def _records_at_least(out: Path, n: int, proc: asyncio.subprocess.Process) -> None:
    """Wait until the tournament has written ``n`` records; it must not end meanwhile."""
    async def enough() -> bool:
        if proc.returncode is not None:
            _, err = await proc.communicate()
            raise AssertionError(
                f"the tournament ended ({proc.returncode}): {err.decode()[-2000:]}"
            )
        return len(await _lines(out)) >= n

    await until(enough, 120, f"{n} tournament records")


async def test_an_owner_restarted_at_once_takes_its_relayed_players_back(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """ann on b and bob on c play a match run by b (ann's room); b is killed and started again
    at once under the same name (a supervisor restarting it). The new b adopts the match by replay
    (new epoch: its predecessor's lease is not waited for) and announces it: c sees the owner
    change although the node's name did not, and re-attaches bob there from the last event he
    had, on his open connection; the match ends normally, nothing lost."""
    from tests.server_support import Client
    await broker.start()
    try:
        async with nodes(pg_url, "b", "c", bus=broker.url, lease_ms=30_000) as started:
            b, c = started
            for node in (b, c):
                await until(partial(_on_bus, node), 20, f"{node.name} on the bus")
            ann = await Client.hello(b.port, "ann")
            bob = await Client.hello(c.port, "bob", "moo.v1.msgpack")
            room = await ann.request({"type": "room_create", "pacing": "free"})
            mid = (await bob.request({"type": "room_join", "code": room["code"]}))["match_id"]
            assert (await query(pg_url, "SELECT node FROM owners"))[0][0] == "b"
            await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
            await bob.request({"type": "secret", "match_id": mid, "secret": "4567"})
            acked = []
            r = await bob.request({"type": "guess", "match_id": mid, "guess": "5678"})
            acked.append((r["seq"], r["guess"]))
            b.proc.kill()
            await b.proc.wait()
            b2 = await start_node(pg_url, "b", bus=broker.url, lease_ms=30_000)
            started.append(b2)  # killed at the end with the others
            # the lease (30 s) has not run out: the match moved by its epoch alone
            try:
                await bob.event(mid, "resumed")
            except TimeoutError:
                raise AssertionError("bob was not re-attached:\n" + c.text()) from None
            rows = await query(pg_url, "SELECT o.node, o.epoch, n.epoch FROM owners o"
                                       " JOIN nodes n ON n.name = o.node")
            # a live owner runs it: the new b (its start claims its predecessor's matches) or c
            # (b's will came before the new b had a database session: b was dead)
            assert rows[0][1] == rows[0][2] and (rows[0][0] == "c" or rows[0][1] >= 2), rows
            bob2 = bob
            ann2 = await Client.hello(b2.port, "x", token=ann.token)
            await ann2.event(mid, "resumed")  # back in her seat after hello
            logged = {(e["seq"], e["guess"]) for e in bob2.events(mid) if e["kind"] == "guess"}
            assert set(acked) <= logged
            await ann2.request({"type": "guess", "match_id": mid, "guess": "4567"})
            fins = [await p.event(mid, "finished") for p in (ann2, bob2)]
            assert fins[0]["reason"] == fins[1]["reason"] == "solved"
            seqs = [e["seq"] for e in bob2.events(mid)]
            assert seqs == list(range(1, fins[1]["seq"] + 1)), seqs  # no gap, no repeat
            for p in (ann2, bob2):
                await p.close()
    finally:
        await broker.stop()


async def test_players_of_a_node_that_lost_the_lease_follow_the_match(
    pg_url: str, broker: Broker, tmp_path: Path
) -> None:
    """ann plays on a, which runs the match (her room); bob on b. a is paused (SIGSTOP) past its
    lease, so b takes the match over; a wakes up, finds it no longer owns the match and lets
    go. ann, still connected to a and waiting for bob's move, is re-attached at b from the last
    event she had: she gets ``resumed`` and then bob's moves, without reconnecting, and her
    stream has no gap and no repeat."""
    from tests.server_support import Client
    await broker.start()
    try:
        async with nodes(pg_url, "a", "b", bus=broker.url, lease_ms=2000) as (a, b):
            for node in (a, b):
                await until(partial(_on_bus, node), 20, f"{node.name} on the bus")
            ann = await Client.hello(a.port, "ann")
            bob = await Client.hello(b.port, "bob")
            room = await ann.request({"type": "room_create", "pacing": "free"})
            mid = (await bob.request({"type": "room_join", "code": room["code"]}))["match_id"]
            await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
            await bob.request({"type": "secret", "match_id": mid, "secret": "4567"})
            await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
            # ann's first announcement of the match, out of the way
            await ann.expect(lambda m: m.get("type") == "match" and m.get("match_id") == mid)
            os.kill(a.proc.pid, signal.SIGSTOP)
            owner = "SELECT node FROM owners WHERE match_id = $1"
            await until(lambda: _owner_is(pg_url, owner, mid, "b"), 20, "b to take over")
            os.kill(a.proc.pid, signal.SIGCONT)
            # a lets go (b's announcement, or its next heartbeat) and re-attaches ann at b
            await ann.event(mid, "resumed")
            # bob, on b, plays on without reconnecting; ann sees his move
            bob2 = bob
            g = await bob2.request({"type": "guess", "match_id": mid, "guess": "9876"})
            assert g["kind"] == "guess", g
            seen = await ann.event(mid, "guess", seat=1)
            assert seen["seq"] == g["seq"]
            solved = await ann.request({"type": "guess", "match_id": mid, "guess": "4567"})
            assert solved["kind"] == "guess" and solved["bulls"] == 4, solved
            await bob2.request({"type": "guess", "match_id": mid, "guess": "8765"})  # last try
            fin = await ann.event(mid, "finished")
            assert fin["reason"] == "solved" and fin["winner"] == 0
            await bob2.event(mid, "finished")
            for p in (ann, bob2):
                seqs = [e["seq"] for e in p.events(mid)]
                assert seqs == list(range(1, fin["seq"] + 1)), seqs  # no gap, no repeat
                await p.close()
    finally:
        await broker.stop()


async def _owner_is(db: str, sql: str, mid: str, node: str) -> bool:
    rows = await query(db, sql, mid)
    return bool(rows) and rows[0][0] == node
