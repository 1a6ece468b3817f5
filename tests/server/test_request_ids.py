"""Lobby and tournament requests with a ``request_id`` are safe to send again (issue 31;
docs/protocol.md, "Retrying safely").

The case every test here builds: the request is done (the match or tournament committed, the
room or challenge made), its answer never reaches the client (the connection is closed before
it reads it, or the server restarts), the client comes back and sends the same request under
the same ``request_id``. There must be one seat, one match, one queue entry, one tournament,
and the retry must get the first answer (the same match, room, challenge or tournament),
never a refusal of what happened. Through a real server on a real SQLite file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from server.app import App
from server.lobby import Lobby
from server.settings import Settings
from tests.cluster_support import until
from tests.server_support import (
    ENCODINGS,
    Client,
    break_store,
    read_only,
    running,
    server_settings,
)


def _matches_of(settings: Settings, name: str) -> list[str]:
    """The ids of every stored match ``name`` sits in."""
    with sqlite3.connect(settings.db) as db:
        rows = db.execute("SELECT match_id, meta FROM matches").fetchall()
    return [m for m, meta in rows if f'"{name}"' in meta]


def _lobby(app: App) -> Lobby:
    """The single node's lobby, whose rooms and challenges the tests count."""
    assert isinstance(app.lobby, Lobby)
    return app.lobby


def _tournaments(settings: Settings) -> list[str]:
    with sqlite3.connect(settings.db) as db:
        return [r[0] for r in db.execute("SELECT tournament_id FROM tournaments").fetchall()]


async def _lost(app: App, client: Client, msg: dict[str, Any], name: str,
                enc: str = "moo.v1.json") -> Client:
    """Send ``msg`` and close the connection without reading the answer, once the server
    has done the request (``done`` below is checked by the caller); back with the token."""
    await client.send(msg)
    await client.close()
    return await Client.hello(app.port, name, enc, token=client.token)


async def _seated(other: Client) -> dict[str, Any]:
    """The ``match`` message the other player gets once the match is stored."""
    return await other.of_type("match")


@pytest.mark.parametrize("enc", ENCODINGS)
async def test_a_retried_room_join_gets_its_match_not_unknown_room(
    tmp_path: Path, enc: str
) -> None:
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann")
        bob = await Client.hello(app.port, "bob", enc)
        room = await ann.request({"type": "room_create"})
        join = {"type": "room_join", "code": room["code"], "request_id": "join-1"}
        await bob.send(join)
        first = await _seated(ann)  # stored: the owner is told
        await bob.close()  # bob's answer is lost with his connection
        bob = await Client.hello(app.port, "bob", enc, token=bob.token)
        seated = await bob.of_type("match")  # welcome gave his seat back
        reply = await bob.request(join)
        assert reply["type"] == "match", reply
        assert reply["match_id"] == first["match_id"] == seated["match_id"]
        assert reply["seat"] == 1 and reply["opponent"] == "ann"
        assert reply["config"] == first["config"]
        assert _matches_of(settings, "bob") == [first["match_id"]]
        # seated by the welcome already: the retry replays nothing to this connection again
        await bob.request({"type": "ping"})
        assert [e["seq"] for e in bob.events(reply["match_id"])].count(1) == 1
        # a request id names one request: another request under it is refused
        other = await bob.request({"type": "room_join", "code": "ZZZZZZ", "request_id": "join-1"})
        assert other["type"] == "error" and other["code"] == "request_reused", other
        assert "join-1" in other["message"]
        # the match goes on for both: one seat each
        await bob.request({"type": "secret", "match_id": reply["match_id"], "secret": "0123"})
        await ann.event(reply["match_id"], "secret", seat=1)


async def test_a_retry_answered_after_its_match_ended_replays_nothing_again(
    tmp_path: Path,
) -> None:
    """The join's answer comes late (its first sending went unanswered, the lobby leader
    gone), and bob plays the match he was told of, to its end, on the same connection; then
    the retry of the join is answered: with its ``match`` and ``ref``, and not with the whole
    match a second time (the 2-hour fault harness run of 2026-11-30: one connection got a
    finished match's seqs 1-25 twice)."""
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann")
        bob = await Client.hello(app.port, "bob")
        room = await ann.request({"type": "room_create"})
        join = {"type": "room_join", "code": room["code"], "request_id": "join-9"}
        first = await bob.request(join)
        mid = first["match_id"]
        await ann.request({"type": "resign", "match_id": mid})
        await bob.event(mid, "finished")
        played = [e["seq"] for e in bob.events(mid)]
        reply = await bob.request(join)
        assert reply["type"] == "match" and reply["match_id"] == mid, reply
        await bob.request({"type": "ping"})  # anything the retry sent has come before this
        assert [e["seq"] for e in bob.events(mid)] == played  # nothing twice


async def test_a_retried_accept_after_a_restart_gets_its_match(tmp_path: Path) -> None:
    """The server restarts after the accept was stored (the lobby's memory is gone): the
    retry is answered from the match's log, events from seq 1 included."""
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann")
        bob = await Client.hello(app.port, "bob")
        sent = await ann.request({"type": "challenge", "opponent": "bob"})
        accept = {"type": "accept", "challenge_id": sent["challenge_id"], "request_id": "a1"}
        await bob.send(accept)
        first = await _seated(ann)
        token = bob.token
    async with running(settings) as app:
        bob = await Client.hello(app.port, "bob", token=token)
        await bob.of_type("match")
        reply = await bob.request(accept)
        assert reply["type"] == "match" and reply["match_id"] == first["match_id"], reply
        assert _matches_of(settings, "bob") == [first["match_id"]]
        # a connection that does not follow the match (it has ended: welcome lists nothing)
        # gets its events too, as the first answer's connection did
        await bob.request({"type": "resign", "match_id": first["match_id"]})
        fresh = await Client.hello(app.port, "bob", token=token)
        again = await fresh.request(accept)
        assert again["type"] == "match" and again["match_id"] == first["match_id"], again
        end = await fresh.event(first["match_id"], "finished")
        seqs = [e["seq"] for e in fresh.events(first["match_id"])]
        assert seqs == list(range(1, end["seq"] + 1)), seqs
        assert _matches_of(settings, "bob") == [first["match_id"]]


async def test_a_retried_play_bot_of_a_program_starts_no_second_match(tmp_path: Path) -> None:
    """A program may play any number of matches: without a request id a second play_bot is
    a second match; with one, the retry gets the first."""
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        bot = await Client.hello(app.port, "prog", bot=True)
        ask = {"type": "play_bot", "strategy": "random", "request_id": "pb-1"}
        reply = await bot.request(ask)
        assert reply["type"] == "match", reply
        await bot.close()
        bot = await Client.hello(app.port, "prog", token=bot.token)
        await bot.of_type("match")
        again = await bot.request(ask)
        assert again["type"] == "match" and again["match_id"] == reply["match_id"], again
        assert _matches_of(settings, "prog") == [reply["match_id"]]
        other = await bot.request({"type": "play_bot", "strategy": "random",
                                   "request_id": "pb-2"})
        assert other["match_id"] != reply["match_id"]
        assert sorted(_matches_of(settings, "prog")) == sorted(
            [reply["match_id"], other["match_id"]])


async def test_a_retried_queue_makes_no_second_entry_nor_match(tmp_path: Path) -> None:
    """Two programs paired by the queue; each one's ``queue`` sent again (the one that
    waited, and the one whose queue paired them, its answer lost with its connection): each
    gets ``queued`` again, nobody is queued again, no second match."""
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        p1 = await Client.hello(app.port, "p1", bot=True)
        p2 = await Client.hello(app.port, "p2", bot=True)
        q1 = {"type": "queue", "pool": "bots", "request_id": "q-p1"}
        q2 = {"type": "queue", "pool": "bots", "request_id": "q-p2"}
        first = await p1.request(q1)
        assert first["type"] == "queued"
        again = await p1.request(q1)  # still waiting: the same answer, the same entry
        assert again["type"] == "queued" and app.lobby.queue_length() == 1
        await p2.send(q2)
        match = await p1.of_type("match")
        await p2.close()
        p2 = await Client.hello(app.port, "p2", token=p2.token)
        await p2.of_type("match")
        reply = await p2.request(q2)
        assert {k: v for k, v in reply.items() if k != "ref"} == {
            k: v for k, v in first.items() if k != "ref"}
        late = await p1.request(q1)
        assert late["type"] == "queued", late
        assert app.lobby.queue_length() == 0
        assert _matches_of(settings, "p1") == _matches_of(settings, "p2") == [match["match_id"]]


async def test_a_retried_queue_of_a_person_is_not_refused_in_match(tmp_path: Path) -> None:
    """ann waited in the queue, bob's queue paired them; the server restarts (the lobby's
    memory is gone) and ann sends her queue again: ``queued``, not ``in_match``."""
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann")
        bob = await Client.hello(app.port, "bob")
        qa = {"type": "queue", "request_id": "qa"}
        await ann.request(qa)
        await bob.request({"type": "queue", "request_id": "qb"})
        match = await ann.of_type("match")
        token = ann.token
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann", token=token)
        await ann.of_type("match")
        reply = await ann.request(qa)
        assert reply["type"] == "queued", reply
        assert app.lobby.queue_length() == 0
        assert _matches_of(settings, "ann") == [match["match_id"]]


async def test_a_retried_room_create_and_challenge_make_one_each(tmp_path: Path) -> None:
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann")
        bob = await Client.hello(app.port, "bob")
        make = {"type": "room_create", "pacing": "free", "request_id": "r1"}
        room = await ann.request(make)
        again = await ann.request(make)
        assert again["type"] == "room" and again["code"] == room["code"], again
        assert list(_lobby(app).rooms) == [room["code"]]
        challenge = {"type": "challenge", "opponent": "bob", "request_id": "c1"}
        sent = await ann.request(challenge)
        resent = await ann.request(challenge)
        assert resent["challenge_id"] == sent["challenge_id"], resent
        assert list(_lobby(app).challenges) == [sent["challenge_id"]]
        await bob.request({"type": "ping"})  # what bob was sent before is in his inbox
        offers = [m for m in bob.inbox if m.get("type") == "challenge"]
        assert len(offers) == 1  # bob was challenged once
        # once the room was used, the retry still gets the room it made
        await bob.request({"type": "room_join", "code": room["code"]})
        used = await ann.request(make)
        assert used["type"] == "room" and used["code"] == room["code"], used
        assert _lobby(app).rooms == {}
        reused = await ann.request({"type": "room_create", "request_id": "r1"})
        assert reused["code"] == "request_reused", reused


async def test_a_room_gone_with_its_connection_is_made_again_under_its_code(
    tmp_path: Path
) -> None:
    """A room belongs to its connection: after a reconnect the same request makes it again,
    under the same code, so the code already shared still works."""
    async with running(server_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann")
        make = {"type": "room_create", "request_id": "r-lost"}
        room = await ann.request(make)
        ann = await _lost(app, ann, {"type": "ping"}, "ann")
        assert _lobby(app).rooms == {}
        again = await ann.request(make)
        assert again["code"] == room["code"] and list(_lobby(app).rooms) == [room["code"]]


@pytest.mark.parametrize("restart", [False, True])
async def test_a_retried_tournament_create_makes_one_tournament(
    tmp_path: Path, restart: bool
) -> None:
    settings = server_settings(tmp_path)
    create = {"type": "tournament_create", "name": "Friday", "format": "round-robin",
              "pool": "bots", "request_id": "t-1"}
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann", bot=True)
        await ann.send(create)
        token = ann.token
        first = await ann.of_type("tournament")  # answered once stored
        tid = first["tournament"]["tournament_id"]
        if not restart:
            await ann.close()
            ann = await Client.hello(app.port, "ann", token=token)
            reply = await ann.request(create)
            assert reply["type"] == "tournament", reply
            assert reply["tournament"]["tournament_id"] == tid
    if restart:
        async with running(settings) as app:
            ann = await Client.hello(app.port, "ann", token=token)
            reply = await ann.request(create)
            assert reply["tournament"]["tournament_id"] == tid, reply
            other = await ann.request({**create, "name": "Saturday"})
            assert other["code"] == "request_reused", other
    assert _tournaments(settings) == [tid]


async def test_a_retried_tournament_join_after_the_start_is_not_refused(
    tmp_path: Path
) -> None:
    """The join was stored, its answer lost, and the round-robin started meanwhile: the
    retry is ``tournament_joined`` (a join without a request id is ``not_available``)."""
    async with running(server_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann", bot=True)
        bob = await Client.hello(app.port, "bob", bot=True)
        made = await ann.request({"type": "tournament_create", "name": "T",
                                  "format": "round-robin", "pool": "bots", "start_in_s": 3600})
        tid = made["tournament"]["tournament_id"]
        join = {"type": "tournament_join", "tournament_id": tid, "request_id": "j-ann"}
        assert (await ann.request(join))["type"] == "tournament_joined"
        assert (await bob.request({"type": "tournament_join", "tournament_id": tid}))[
            "type"] == "tournament_joined"
        await ann.request({"type": "tournament_start", "tournament_id": tid})
        await ann.expect(lambda m: m.get("type") == "tournament"
                         and m["tournament"]["status"] == "running")
        again = await ann.request(join)
        assert again["type"] == "tournament_joined" and again["tournament_id"] == tid, again
        plain = await ann.request({"type": "tournament_join", "tournament_id": tid})
        assert plain["code"] == "not_available", plain
        other = await ann.request({"type": "tournament_create", "name": "U",
                                   "format": "round-robin", "pool": "bots"})
        reused = await ann.request({"type": "tournament_join", "request_id": "j-ann",
                                    "tournament_id": other["tournament"]["tournament_id"]})
        assert reused["code"] == "request_reused", reused


async def test_a_request_id_is_checked(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann")
        empty = await ann.request({"type": "queue", "request_id": ""})
        assert empty["code"] == "bad_field" and "request_id" in empty["message"], empty
        long = await ann.request({"type": "queue", "request_id": "x" * 65})
        assert long["code"] == "bad_field", long
        number = await ann.request({"type": "queue", "request_id": 7})
        assert number["code"] == "bad_field", number
        nowhere = await ann.request({"type": "unqueue", "request_id": "u"})
        assert nowhere["code"] == "bad_field", nowhere
        assert app.lobby.queue_length() == 0


async def test_a_play_bot_refused_by_the_store_is_done_by_its_retry(tmp_path: Path) -> None:
    """The store refuses the new match (``storage_unavailable``: nothing was stored); sent
    again under the same request id once the store is back (here: the server restarted with
    its database writable), the request is done then: one match, and the next retry gets it."""
    settings = server_settings(tmp_path)
    ask = {"type": "play_bot", "strategy": "random", "request_id": "pb-store"}
    async with running(settings) as app:
        bot = await Client.hello(app.port, "prog", bot=True)
        await break_store(app, read_only)
        refused = await bot.request(ask)
        assert refused["code"] == "storage_unavailable", refused
        token = bot.token
    assert _matches_of(settings, "prog") == []
    async with running(settings) as app:
        bot = await Client.hello(app.port, "prog", token=token)
        reply = await bot.request(ask)
        assert reply["type"] == "match", reply
        assert _matches_of(settings, "prog") == [reply["match_id"]]
        again = await bot.request(ask)
        assert again["match_id"] == reply["match_id"], again
        assert _matches_of(settings, "prog") == [reply["match_id"]]


async def test_a_retried_rematch_gets_its_match_not_unknown_match(tmp_path: Path) -> None:
    """A rematch against a hosted bot starts at once; its answer is lost with the
    connection. Sent again: the rematch it started (a second one is ``unknown_match``: the
    finished match was rematched already)."""
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann")
        first = await ann.request({"type": "play_bot", "strategy": "random"})
        await ann.request({"type": "resign", "match_id": first["match_id"]})
        again = {"type": "rematch", "match_id": first["match_id"], "request_id": "rm-1"}
        await ann.send(again)
        await ann.close()

        async def started() -> bool:
            return len(_matches_of(settings, "ann")) == 2

        await until(started, 10, "the rematch to be stored")
        ann = await Client.hello(app.port, "ann", token=ann.token)
        seated = await ann.of_type("match")
        reply = await ann.request(again)
        assert reply["type"] == "match" and reply["match_id"] == seated["match_id"], reply
        assert reply["seat"] == 1  # seats swapped
        assert len(_matches_of(settings, "ann")) == 2
        plain = await ann.request({"type": "rematch", "match_id": first["match_id"]})
        assert plain["code"] in ("in_match", "unknown_match"), plain
