"""Hosted tournaments over real sockets (docs/protocol.md, "Tournaments"): the requests, the
validation, server secrets played both ways, no-shows, standings and the export."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from moo.tourney import Tournament
from server.app import App
from server.export import records
from tests.cluster_support import until
from tests.server_support import (
    Client,
    break_store,
    read_only,
    running,
    server_settings,
)


def _start_now(app: App, tid: str) -> None:
    """The start time comes: the service's next tick starts the tournament."""
    t: Tournament = app.tournaments.tournaments[tid]
    t.starts_at = app.arena.clock()


async def _update(client: Client, tid: str, pred: Any) -> dict[str, Any]:
    """The first ``tournament`` update for ``tid`` that satisfies ``pred``."""
    msg = await client.expect(lambda m: m.get("type") == "tournament"
                              and m["tournament"]["tournament_id"] == tid
                              and pred(m["tournament"]))
    return dict(msg["tournament"])


async def _create(client: Client, **fields: Any) -> dict[str, Any]:
    reply = await client.request({"type": "tournament_create", "name": "cup",
                                  "format": "round-robin", "start_in_s": 3600, **fields})
    assert reply["type"] == "tournament", reply
    return dict(reply["tournament"])


async def test_create_list_join_leave_watch(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann")
        bot = await Client.hello(app.port, "b1", bot=True)
        t = await _create(ann, name="  Friday  ", pool="bots")
        tid = t["tournament_id"]
        assert t["name"] == "Friday" and t["creator"] == "ann" and t["status"] == "upcoming"
        assert t["format"] == "round-robin" and t["rounds"] == 1 and t["duration_s"] is None
        assert t["secrets"] == "server" and t["pacing"] == "lockstep" and t["rated"] is True
        assert t["rules"]["game"] == "moo" and t["players"] == [] and t["games"] == []
        assert t["standings"] == [] and t["round"] == 0 and t["tiebreak"] == "sonneborn-berger"
        assert t["starts_at"] >= app.arena.clock() + 3500_000
        listed = await ann.request({"type": "tournaments"})
        assert [s["tournament_id"] for s in listed["tournaments"]] == [tid]
        assert listed["tournaments"][0]["player_count"] == 0
        assert "standings" not in listed["tournaments"][0]
        # a person cannot join the bots pool
        refused = await ann.request({"type": "tournament_join", "tournament_id": tid})
        assert refused["code"] == "wrong_pool"
        joined = await bot.request({"type": "tournament_join", "tournament_id": tid})
        assert joined == {"type": "tournament_joined", "tournament_id": tid,
                          "ref": joined["ref"]}
        update = await _update(bot, tid, lambda o: o["players"] == ["b1"])
        assert update["standings"][0]["name"] == "b1" and update["standings"][0]["games"] == 0
        again = await bot.request({"type": "tournament_join", "tournament_id": tid})
        assert again["type"] == "tournament_joined"
        # watching: the object now, then every change
        w = await ann.request({"type": "tournament_watch", "tournament_id": tid})
        assert w["type"] == "tournament" and w["tournament"]["players"] == ["b1"]
        left = await bot.request({"type": "tournament_leave", "tournament_id": tid})
        assert left["type"] == "tournament_left"
        await _update(ann, tid, lambda o: o["players"] == [])
        un = await ann.request({"type": "tournament_unwatch", "tournament_id": tid})
        assert un == {"type": "tournament_unwatched", "tournament_id": tid, "ref": un["ref"]}
        # stored: the row holds the state
        stored = await app.store.tournament(tid)
        assert stored is not None and stored["tournament_id"] == tid


@pytest.mark.parametrize(("fields", "code", "words"), [
    ({"name": "   "}, "bad_field", "must not be empty"),
    ({"format": "knockout"}, "bad_field", "format"),
    ({"rounds": 0}, "bad_field", "rounds"),
    ({"rounds": 51}, "bad_field", "rounds"),
    ({"duration_s": 60}, "bad_field", "for an arena"),
    ({"format": "arena"}, "bad_field", "duration_s"),
    ({"format": "arena", "duration_s": 5}, "bad_field", "duration_s"),
    ({"pool": "robots"}, "bad_field", "pool"),
    ({"secrets": "mine"}, "bad_field", "secrets"),
    ({"start_in_s": -1}, "bad_field", "start_in_s"),
    ({"assist": True}, "bad_field", "assist"),
    ({"rules": {"game": "chess"}}, "bad_rules", ""),
    ({"rules": {"game": "moo", "length": 6}}, "rules_not_offered", ""),
    ({"name": "x" * 65}, "bad_field", "longer than 64"),
])
async def test_create_is_validated(tmp_path: Path, fields: dict[str, Any], code: str,
                                   words: str) -> None:
    async with running(server_settings(tmp_path, variants=["moo:4:0123456789"])) as app:
        ann = await Client.hello(app.port, "ann")
        reply = await ann.request({"type": "tournament_create", "name": "cup",
                                   "format": "round-robin", **fields})
        assert reply["type"] == "error" and reply["code"] == code, reply
        assert words in reply["message"]
        assert app.tournaments.tournaments == {}


async def test_unknown_tournament_and_closed_membership(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann")
        for kind in ("tournament_join", "tournament_leave", "tournament_watch",
                     "tournament_unwatch"):
            reply = await ann.request({"type": kind, "tournament_id": "t000000000000"})
            assert reply["code"] == "unknown_tournament", reply
        long = await ann.request({"type": "tournament_join", "tournament_id": "t" * 41})
        assert long["code"] == "bad_field"
        t = await _create(ann, pool="humans")
        bot = await Client.hello(app.port, "b1", bot=True)
        refused = await bot.request({"type": "tournament_join",
                                     "tournament_id": t["tournament_id"]})
        assert refused["code"] == "wrong_pool"
        for _ in range(4):
            await _create(ann)
        over = await ann.request({"type": "tournament_create", "name": "sixth",
                                  "format": "swiss"})
        assert over["code"] == "not_available" and "too many open tournaments" in over["message"]
        # a running round-robin takes nobody
        bob = await Client.hello(app.port, "bob")
        cat = await Client.hello(app.port, "cat")
        for c in (ann, bob):
            await c.request({"type": "tournament_join", "tournament_id": t["tournament_id"]})
        _start_now(app, t["tournament_id"])
        await _update(bob, t["tournament_id"], lambda o: o["status"] == "running")
        late = await cat.request({"type": "tournament_join", "tournament_id": t["tournament_id"]})
        assert late["code"] == "not_available" and "has started" in late["message"]
        leave = await bob.request({"type": "tournament_leave",
                                   "tournament_id": t["tournament_id"]})
        assert leave["code"] == "not_available" and "has started" in leave["message"]


async def test_fewer_than_two_players_finish_at_once(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann")
        t = await _create(ann)
        tid = t["tournament_id"]
        await ann.request({"type": "tournament_join", "tournament_id": tid})
        _start_now(app, tid)
        done = await _update(ann, tid, lambda o: o["status"] == "finished")
        assert done["games"] == [] and done["ends_at"] is not None


async def test_server_secrets_both_ways_standings_and_export(tmp_path: Path) -> None:
    settings = server_settings(tmp_path, pacing="free")
    async with running(settings) as app:
        creator = await Client.hello(app.port, "boss", bot=True)
        a = await Client.hello(app.port, "ba", bot=True)
        b = await Client.hello(app.port, "bb", bot=True)
        t = await _create(creator, pool="bots", rated=False)
        tid = t["tournament_id"]
        for c in (a, b):
            await c.request({"type": "tournament_join", "tournament_id": tid})
        _start_now(app, tid)
        announced = [await a.of_type("match"), await a.of_type("match")]
        assert all(m["tournament_id"] == tid for m in announced)
        assert all(m["config"]["tournament_id"] == tid and m["config"]["server_secrets"]
                   for m in announced)
        assert sorted(m["seat"] for m in announced) == [0, 1]
        secrets: dict[str, str] = {}
        for m in announced:
            mid = m["match_id"]
            own = await a.event(mid, "secret", seat=m["seat"])
            secrets[mid] = own["secret"]
            await a.event(mid, "started")
            refused = await a.request({"type": "secret", "match_id": mid, "secret": "0123"})
            assert refused["code"] == "already_set"
            assert refused["message"] == "the server set the secrets of this tournament match"
        # a holds the same secret in both games, each time in its own seat's slot: so b
        # guesses that code once, and a guesses b's code once (the same pair both ways)
        ids = [m["match_id"] for m in announced]
        by_seat = {m["seat"]: m["match_id"] for m in announced}
        # play: a resigns the game in which it sits first, wins the other by solving it
        await a.request({"type": "resign", "match_id": by_seat[0]})
        other = by_seat[1]
        b_secret = (await b.event(other, "secret", seat=0))["secret"]
        await a.request({"type": "guess", "match_id": other, "guess": b_secret})
        await b.request({"type": "resign", "match_id": other})
        done = await _update(a, tid, lambda o: o["status"] == "finished")
        assert sorted(g["match_id"] for g in done["games"]) == sorted(ids)
        assert all(g["round"] == 1 for g in done["games"])
        results = {g["match_id"]: g["result"] for g in done["games"]}
        assert results[by_seat[0]] == "0-1" and results[by_seat[1]] == "0-1"
        rows = {r["name"]: r for r in done["standings"]}
        assert rows["ba"]["games"] == rows["bb"]["games"] == 2
        assert (rows["ba"]["wins"], rows["ba"]["losses"]) == (1, 1)
        assert (rows["bb"]["wins"], rows["bb"]["losses"]) == (1, 1)
        assert rows["ba"]["score"] == rows["bb"]["score"] == 1.0
        # both games used one pair of secrets, swapped with the seats
        first = await app.store.stored_match(by_seat[0])
        second = await app.store.stored_match(by_seat[1])
        assert first is not None and second is not None
        fin = [first.events[-1]["secrets"], second.events[-1]["secrets"]]
        assert fin[0] == fin[1]
        assert secrets[by_seat[0]] == fin[0][0] and secrets[by_seat[1]] == fin[1][1]
    exported = [r for r in records(settings.db) if r["match_id"] in ids]
    assert len(exported) == 2 and all(r["tournament_id"] == tid for r in exported)
    assert all(r["config"]["server_secrets"] is True for r in exported)
    others = [r for r in records(settings.db) if r["match_id"] not in ids]
    assert all(r["tournament_id"] is None for r in others)


async def test_a_no_show_forfeits_that_game_only(tmp_path: Path) -> None:
    settings = server_settings(tmp_path, grace_ms=300)
    async with running(settings) as app:
        boss = await Client.hello(app.port, "boss")
        ann = await Client.hello(app.port, "ann")
        bob = await Client.hello(app.port, "bob")
        t = await _create(boss, rounds=1, secrets="server")
        tid = t["tournament_id"]
        for c in (ann, bob):
            await c.request({"type": "tournament_join", "tournament_id": tid})
        await bob.close()  # bob is not there when the games start
        _start_now(app, tid)
        first = await ann.of_type("match")
        assert first["tournament_id"] == tid
        mid = first["match_id"]
        away = await ann.event(mid, "away")
        assert away["seat"] == 1 - first["seat"]
        finished = await ann.event(mid, "finished")
        assert finished["reason"] == "disconnect" and finished["winner"] == first["seat"]
        # ann (a person) plays the second game after the first; bob forfeits it too
        second = await ann.expect(lambda m: m.get("type") == "match" and m["match_id"] != mid)
        end = await ann.event(second["match_id"], "finished")
        assert end["reason"] == "disconnect" and end["winner"] == second["seat"]
        done = await _update(ann, tid, lambda o: o["status"] == "finished")
        rows = {r["name"]: r for r in done["standings"]}
        assert (rows["ann"]["wins"], rows["ann"]["games"]) == (2, 2)
        assert (rows["bob"]["losses"], rows["bob"]["games"]) == (2, 2)
        assert done["players"] == ["ann", "bob"]  # bob is still in the tournament


async def test_a_person_plays_one_game_at_a_time(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann")
        bob = await Client.hello(app.port, "bob")
        t = await _create(ann, secrets="server")
        tid = t["tournament_id"]
        for c in (ann, bob):
            await c.request({"type": "tournament_join", "tournament_id": tid})
        _start_now(app, tid)
        m = await ann.of_type("match")
        running_ = await _update(ann, tid, lambda o: len(o["games"]) == 1)
        assert running_["status"] == "running" and running_["games"][0]["result"] is None
        # the second game waits for the first: none was announced meanwhile
        assert [x for x in ann.inbox if x.get("type") == "match"] == []
        await ann.request({"type": "resign", "match_id": m["match_id"]})
        second = await ann.expect(lambda x: x.get("type") == "match"
                                  and x["match_id"] != m["match_id"])
        assert second["seat"] != m["seat"]


async def test_arena_pairs_players_as_they_free_up(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        boss = await Client.hello(app.port, "boss", bot=True)
        bots = [await Client.hello(app.port, f"x{i}", bot=True) for i in range(3)]
        t = await _create(boss, format="arena", duration_s=3600, pool="bots")
        tid = t["tournament_id"]
        assert t["rounds"] is None and t["ends_at"] == t["starts_at"] + 3600_000
        for c in bots[:2]:
            await c.request({"type": "tournament_join", "tournament_id": tid})
        _start_now(app, tid)
        first = await _update(bots[0], tid, lambda o: len(o["games"]) == 2)
        assert {tuple(g["players"]) for g in first["games"]} == {("x0", "x1"), ("x1", "x0")}
        # a third joins the running arena: nobody is free yet, so nothing is paired
        joined = await bots[2].request({"type": "tournament_join", "tournament_id": tid})
        assert joined["type"] == "tournament_joined"
        for g in first["games"]:  # x0 resigns both: both free again
            await bots[0].request({"type": "resign", "match_id": g["match_id"]})
        nxt = await _update(bots[2], tid, lambda o: len(o["games"]) == 4)
        newest = {tuple(g["players"]) for g in nxt["games"][2:]}
        # x0 freed first (fewest games among the free ones ties; join order): its last
        # opponent x1 is avoided for x2
        assert all("x2" in pair for pair in newest)
        # leaving a running arena: no further pairing, finished games stay in the standings
        await bots[0].request({"type": "tournament_leave", "tournament_id": tid})
        after = await _update(bots[2], tid, lambda o: "x0" not in o["players"])
        assert any(r["name"] == "x0" and r["games"] == 2 for r in after["standings"])


async def test_a_tournament_survives_a_restart(tmp_path: Path) -> None:
    """Stored after every change: a restarted server goes on with a running round-robin, its
    unfinished game resumed like any match, and counts both games."""
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann")
        s = await _create(ann, format="swiss", rounds=3)
        await ann.request({"type": "tournament_join", "tournament_id": s["tournament_id"]})
        a = await Client.hello(app.port, "ra", bot=True)
        b = await Client.hello(app.port, "rb", bot=True)
        t = await _create(ann, pool="bots")
        tid = t["tournament_id"]
        for c in (a, b):
            await c.request({"type": "tournament_join", "tournament_id": tid})
        _start_now(app, tid)
        games = [await a.of_type("match"), await a.of_type("match")]
        await a.request({"type": "resign", "match_id": games[0]["match_id"]})
        await _update(a, tid, lambda o: sum(g["result"] is not None for g in o["games"]) == 1)
        tokens = (a.token, b.token)
    async with running(dataclasses.replace(settings)) as app:
        watcher = await Client.hello(app.port, "ann2")
        w = await watcher.request({"type": "tournament_watch",
                                   "tournament_id": s["tournament_id"]})
        assert w["tournament"]["players"] == ["ann"] and w["tournament"]["format"] == "swiss"
        a = await Client.hello(app.port, "ra", token=tokens[0])
        await Client.hello(app.port, "rb", token=tokens[1])
        back = await a.expect(lambda m: m.get("type") == "match"
                              and m["match_id"] == games[1]["match_id"])
        await a.request({"type": "resign", "match_id": back["match_id"]})
        done = await _finished(watcher, tid)
        assert [g["result"] for g in done["games"]] == [
            "0-1" if games[0]["seat"] == 0 else "1-0", "0-1" if games[1]["seat"] == 0 else "1-0"]
        rows = {r["name"]: r for r in done["standings"]}
        assert (rows["rb"]["wins"], rows["ra"]["losses"]) == (2, 2)


async def _finished(client: Client, tid: str) -> dict[str, Any]:
    """Watch ``tid`` until it is finished."""
    first = await client.request({"type": "tournament_watch", "tournament_id": tid})
    if first["tournament"]["status"] == "finished":
        return dict(first["tournament"])
    return await _update(client, tid, lambda o: o["status"] == "finished")


async def _resign_when_seat_0(client: Client, tid: str) -> dict[str, Any]:
    """Play a tournament by resigning every game in which one sits first (seat 1 wins):
    returns the final object."""
    while True:
        msg = await client.expect(lambda m: m.get("type") in ("match", "tournament"), 60)
        if msg["type"] == "match" and msg["seat"] == 0:
            await client.send({"type": "resign", "match_id": msg["match_id"]})
        elif msg["type"] == "tournament" and msg["tournament"]["status"] == "finished":
            return dict(msg["tournament"])


async def test_swiss_rounds_never_repeat_a_pairing(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        boss = await Client.hello(app.port, "boss", bot=True)
        players = [await Client.hello(app.port, f"s{i}", bot=True) for i in range(4)]
        t = await _create(boss, format="swiss", rounds=3, pool="bots")
        tid = t["tournament_id"]
        for c in players:
            await c.request({"type": "tournament_join", "tournament_id": tid})
        _start_now(app, tid)
        finals = await asyncio.gather(*(_resign_when_seat_0(c, tid) for c in players))
        done = finals[0]
        assert done["rounds"] == 3 and done["round"] == 3 and done["tiebreak"] == "buchholz"
        by_round: dict[int, set[frozenset[str]]] = {}
        for g in done["games"]:
            by_round.setdefault(g["round"], set()).add(frozenset(g["players"]))
        assert sorted(by_round) == [1, 2, 3]
        meetings = [pair for pairs in by_round.values() for pair in pairs]
        assert len(meetings) == 6 == len(set(meetings))  # 2 pairings a round, no repeat
        for pairs in by_round.values():  # everyone plays once a round
            assert sorted(p for pair in pairs for p in pair) == ["s0", "s1", "s2", "s3"]
        # round 1: join order, first half against second half
        assert by_round[1] == {frozenset(("s0", "s2")), frozenset(("s1", "s3"))}
        # every game a win for seat 1: each player 1 point per pairing
        for r in done["standings"]:
            assert (r["games"], r["wins"], r["losses"], r["score"]) == (6, 3, 3, 3.0)
            assert r["tiebreak"] == 3 * 2 * 3.0  # Buchholz: 6 games against 3-pointers


async def test_a_write_over_another_nodes_write_is_refused_and_the_state_read_again(
        tmp_path: Path) -> None:
    """Each write names the version it replaces: a node that no longer leads (here: another
    writer came in between) writes nothing and reads the stored state again."""
    async with running(server_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann")
        t = await _create(ann)
        tid = t["tournament_id"]
        await _update_stored(app, tid, lambda d: d["version"] >= 1)
        stored = await app.store.tournament(tid)
        assert stored is not None
        # another node's write: version + 1, with another name
        newer = {**stored, "name": "theirs", "version": stored["version"] + 1}
        assert await app.store.save_tournament(tid, "upcoming", newer, 0, newer["version"])
        # a stale write is refused
        assert not await app.store.save_tournament(tid, "upcoming", stored, 0,
                                                   stored["version"] + 1)
        # this node changes it (a join): its write is refused, it reads the stored state
        # and tells the watchers what it holds
        await ann.request({"type": "tournament_watch", "tournament_id": tid})
        await ann.request({"type": "tournament_join", "tournament_id": tid})
        got = await _update(ann, tid, lambda o: o["name"] == "theirs")
        assert got["players"] == []  # the stored state, without the refused join
        assert (await app.store.tournament(tid) or {})["version"] == newer["version"]


async def _update_stored(app: App, tid: str, pred: Any) -> None:
    """Until the stored state satisfies ``pred`` (the project's poll with a deadline)."""

    async def check() -> bool:
        data = await app.store.tournament(tid)
        return data is not None and bool(pred(data))

    await until(check, 30, f"tournament {tid} stored")


async def test_create_join_and_leave_are_answered_once_stored(tmp_path: Path) -> None:
    """The next leader or a restarted server reads the tournaments from the store, so their
    answers wait for the write: each answer finds its change on disk, and when the store
    refuses it, the client hears ``storage_unavailable`` (a creation is then undone; a join or
    leave, both idempotent, is written with the next flush and answered when sent again)."""
    async with running(server_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann")
        bot = await Client.hello(app.port, "b1", bot=True)
        tid = (await _create(ann, pool="bots"))["tournament_id"]
        stored = await app.store.tournament(tid)
        assert stored is not None and stored["players"] == []
        joined = await bot.request({"type": "tournament_join", "tournament_id": tid})
        assert joined["type"] == "tournament_joined"
        stored = await app.store.tournament(tid)
        assert stored is not None and stored["players"] == ["b1"]
        await break_store(app, read_only)
        refused = await ann.request({"type": "tournament_create", "name": "cup",
                                     "format": "round-robin", "start_in_s": 3600})
        assert refused["type"] == "error" and refused["code"] == "storage_unavailable", refused
        listed = await ann.request({"type": "tournaments"})
        assert [row["tournament_id"] for row in listed["tournaments"]] == [tid]
        left = await bot.request({"type": "tournament_leave", "tournament_id": tid})
        assert left["type"] == "error" and left["code"] == "storage_unavailable", left


async def test_its_creator_starts_it_early_and_only_its_creator(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann")
        b1 = await Client.hello(app.port, "b1", bot=True)
        b2 = await Client.hello(app.port, "b2", bot=True)
        t = await _create(ann, pool="bots", format="arena", duration_s=60)
        tid = t["tournament_id"]
        for bot in (b1, b2):
            await bot.request({"type": "tournament_join", "tournament_id": tid})
        refused = await b1.request({"type": "tournament_start", "tournament_id": tid})
        assert refused["type"] == "error" and refused["code"] == "not_available", refused
        assert "creator" in refused["message"]
        before = app.arena.clock()
        started = await ann.request({"type": "tournament_start", "tournament_id": tid})
        assert started["type"] == "tournament", started
        obj = started["tournament"]
        assert obj["status"] == "upcoming" and before <= obj["starts_at"] <= app.arena.clock()
        assert obj["ends_at"] == obj["starts_at"] + 60_000
        stored = await app.store.tournament(tid)
        assert stored is not None and stored["starts_at"] == obj["starts_at"]
        # the start follows as at its time: the bots hear it running, and paired
        begun = await _update(b1, tid, lambda o: o["status"] == "running" and o["games"])
        assert {p for g in begun["games"] for p in g["players"]} == {"b1", "b2"}
        again = await ann.request({"type": "tournament_start", "tournament_id": tid})
        assert again["type"] == "tournament" and again["tournament"]["status"] == "running"
        assert again["tournament"]["starts_at"] == obj["starts_at"]
        unknown = await ann.request({"type": "tournament_start", "tournament_id": "tnope"})
        assert unknown["code"] == "unknown_tournament"
        bad = await ann.request({"type": "tournament_start"})
        assert bad["code"] == "bad_field"
