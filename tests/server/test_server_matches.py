"""The match server over real sockets, in both encodings: matches, lobby, spectators, errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from moo.protocol import TRANSPORT_FACTOR
from moo.rules import DEFAULT_RULES
from server.app import App
from server.lobby import Lobby
from tests.server_support import ENCODINGS, Client, running, server_settings

pytestmark = pytest.mark.parametrize("enc", ENCODINGS)


async def _pair_by_queue(
    app: App, enc: str, pacing: str = "lockstep"
) -> tuple[Client, Client, str]:
    a = await Client.hello(app.port, "ann", enc)
    b = await Client.hello(app.port, "bob", enc)
    q = await a.request({"type": "queue", "pacing": pacing})
    assert q["type"] == "queued" and q["pacing"] == pacing
    await b.request({"type": "queue", "pacing": pacing})
    ma = await a.of_type("match")
    mb = await b.of_type("match")
    assert ma["match_id"] == mb["match_id"]
    assert {ma["seat"], mb["seat"]} == {0, 1}
    assert ma["opponent"] == "bob" and mb["opponent"] == "ann"
    # seat 0 first
    return (a, b, ma["match_id"]) if ma["seat"] == 0 else (b, a, ma["match_id"])


async def _secrets(p0: Client, p1: Client, mid: str) -> None:
    r = await p0.request({"type": "secret", "match_id": mid, "secret": "0123"})
    assert r["kind"] == "secret" and r["secret"] == "0123"
    r = await p1.request({"type": "secret", "match_id": mid, "secret": "4567"})
    assert r["kind"] == "secret" and r["secret"] == "4567"
    for p in (p0, p1):
        started = await p.event(mid, "started")
        assert len(started["commitments"]) == 2


async def test_lockstep_match_by_quick_pairing(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        p0, p1, mid = await _pair_by_queue(app, enc)
        await _secrets(p0, p1, mid)
        # round 1: the guesser sees its own guess, no response before the round completes
        g = await p0.request({"type": "guess", "match_id": mid, "guess": "9876"})
        assert g["kind"] == "guess" and g["guess"] == "9876" and "bulls" not in g
        other = await p1.event(mid, "guess", seat=0)
        assert "guess" not in other and "bulls" not in other
        await p1.request({"type": "guess", "match_id": mid, "guess": "5678"})
        r1 = await p0.event(mid, "round", n=1)
        assert r1["results"] == [["9876", 0, 2], ["5678", 0, 0]]
        # round 2: seat 0 solves, seat 1 does not
        await p0.request({"type": "guess", "match_id": mid, "guess": "4567"})
        # lockstep: the same seat cannot guess twice in one round, and nothing changes
        err = await p0.request({"type": "guess", "match_id": mid, "guess": "4567"})
        assert err["type"] == "error" and err["code"] == "not_your_turn"
        assert err["match_id"] == mid
        await p1.request({"type": "guess", "match_id": mid, "guess": "1023"})
        for p in (p0, p1):
            fin = await p.event(mid, "finished")
            assert fin["winner"] == 0 and fin["reason"] == "solved"
            assert fin["secrets"] == ["0123", "4567"] and fin["counts"] == [2, 2]
        seqs = [e["seq"] for e in p0.events(mid)]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        err = await p1.request({"type": "guess", "match_id": mid, "guess": "0123"})
        assert err["code"] == "match_finished"
        board = await p0.request({"type": "leaderboard"})
        names = {row["name"]: row for row in board["players"]}
        assert names["ann"]["games"] == 1 and names["bob"]["games"] == 1


async def test_free_match_in_a_private_room(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        b = await Client.hello(app.port, "bob", enc)
        room = await a.request({"type": "room_create", "pacing": "free"})
        code = room["code"]
        assert room["type"] == "room" and len(code) == 6
        err = await b.request({"type": "room_join", "code": "NOPE42"})
        assert err["code"] == "unknown_room"
        mb = await b.request({"type": "room_join", "code": code.lower()})
        assert mb["type"] == "match" and mb["seat"] == 1 and mb["config"]["pacing"] == "free"
        ma = await a.of_type("match")
        mid = ma["match_id"]
        await _secrets(a, b, mid)
        # free pacing: responses at once, several guesses in a row are fine
        g = await b.request({"type": "guess", "match_id": mid, "guess": "1230"})
        assert (g["bulls"], g["cows"]) == (0, 4)
        seen = await a.event(mid, "guess", seat=1)
        assert seen["guess"] == "1230" and seen["bulls"] == 0
        g = await b.request({"type": "guess", "match_id": mid, "guess": "0123"})
        assert g["bulls"] == 4
        # b solved in 2; a can still tie with 2 guesses
        await a.request({"type": "guess", "match_id": mid, "guess": "5678"})
        await a.request({"type": "guess", "match_id": mid, "guess": "4567"})
        fin = await a.event(mid, "finished")
        assert fin["winner"] is None and fin["reason"] == "solved"
        await b.event(mid, "finished")
        # the room is gone once used
        err = await a.request({"type": "room_join", "code": code})
        assert err["code"] == "unknown_room"


async def test_challenge_accept_and_decline(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        b = await Client.hello(app.port, "bob", enc)
        err = await a.request({"type": "challenge", "opponent": "carol"})
        assert err["code"] == "unknown_player"
        err = await a.request({"type": "challenge", "opponent": "ANN"})
        assert err["code"] == "not_available"
        sent = await a.request({"type": "challenge", "opponent": "BOB"})
        assert sent["type"] == "challenge_sent" and sent["to"] == "bob"
        offer = await b.of_type("challenge")
        assert offer["from"] == "ann" and offer["challenge_id"] == sent["challenge_id"]
        await b.send({"type": "decline", "challenge_id": offer["challenge_id"]})
        declined = await a.of_type("declined")
        assert declined["challenge_id"] == sent["challenge_id"]
        err = await b.request({"type": "accept", "challenge_id": offer["challenge_id"]})
        assert err["code"] == "not_available"
        sent = await a.request({"type": "challenge", "opponent": "bob", "pacing": "free"})
        offer = await b.of_type("challenge")
        # only the challenged player may accept
        err = await a.request({"type": "accept", "challenge_id": sent["challenge_id"]})
        assert err["code"] == "not_available"
        mb = await b.request({"type": "accept", "challenge_id": offer["challenge_id"]})
        assert mb["type"] == "match" and mb["seat"] == 1 and mb["opponent"] == "ann"
        ma = await a.of_type("match")
        assert ma["seat"] == 0 and ma["config"]["pacing"] == "free"


async def test_full_match_against_a_hosted_bot(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        err = await a.request({"type": "play_bot", "strategy": "os:system"})
        assert err["code"] == "unknown_strategy"
        m = await a.request({"type": "play_bot", "strategy": "random", "pacing": "lockstep"})
        mid = m["match_id"]
        assert m["opponent"] == "random-bot" and m["seat"] == 0
        await a.event(mid, "secret", seat=1)
        await a.request({"type": "secret", "match_id": mid, "secret": "0123"})
        await a.event(mid, "started")
        # play a fixed, legal but poor sequence; the bot must finish the match (its secret is
        # drawn at random: one of these four once in 1260 draws, and then ann may solve too)
        guesses = ("5678", "6789", "7890", "8901")
        for n in range(1, 65):
            r = await a.request({"type": "guess", "match_id": mid, "guess": guesses[n % 4]})
            if r["type"] == "error":
                assert r["code"] == "match_finished"
                break
            assert r["kind"] == "guess", r
            # the bot's first move may build its response table (seconds on a busy machine)
            want = n
            await a.expect(
                lambda m: m.get("kind") == "round" and m.get("n") == want,  # noqa: B023
                timeout=60 if n == 1 else 10,
            )
        finished = await a.event(mid, "finished")
        assert finished["reason"] == "solved" and finished["secrets"][0] == "0123"
        if finished["solved"][0]:  # ann hit the bot's secret: who won is the bot's luck
            assert finished["secrets"][1] in guesses
            return
        assert finished["winner"] == 1
        board = await a.request({"type": "leaderboard", "by": "average"})
        assert any(p["name"] == "random-bot" and p["wins"] == 1 for p in board["players"])


async def test_spectator_sees_no_secret_before_the_end(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        p0, p1, mid = await _pair_by_queue(app, "moo.v1.json")
        await p0.request({"type": "secret", "match_id": mid, "secret": "0123"})
        watcher = await Client.hello(app.port, "eve", enc)
        listing = await watcher.request({"type": "matches"})
        assert [m["match_id"] for m in listing["matches"]] == [mid]
        w = await watcher.request({"type": "watch", "match_id": mid})
        assert w["type"] == "watching" and sorted(w["players"]) == ["ann", "bob"]
        # replay of the past, then live events
        await watcher.event(mid, "secret", seat=0)
        await p1.request({"type": "secret", "match_id": mid, "secret": "4567"})
        await watcher.event(mid, "started")
        # a spectator cannot act
        err = await watcher.request({"type": "guess", "match_id": mid, "guess": "0123"})
        assert err["code"] == "not_your_seat"
        await p0.request({"type": "guess", "match_id": mid, "guess": "4567"})
        await p1.request({"type": "guess", "match_id": mid, "guess": "0123"})
        fin = await watcher.event(mid, "finished")
        assert fin["winner"] is None
        before = [e for e in watcher.events(mid) if e["seq"] < fin["seq"]]
        for e in before:
            assert "secret" not in e and "salt" not in e and "secrets" not in e, e
            if e["kind"] == "guess":
                assert "bulls" not in e  # lockstep: nothing before the round reveal
        # seats never see the opponent's secret before the end either
        for p, own in ((p0, "0123"), (p1, "4567")):
            for e in p.events(mid):
                if e["seq"] < fin["seq"] and e["kind"] == "secret":
                    assert e.get("secret") in (None, own)
                    assert e.get("secret") is None or e["seat"] == (0 if own == "0123" else 1)


async def test_bad_messages_get_specific_errors_and_change_nothing(
    tmp_path: Path, enc: str
) -> None:
    async with running(server_settings(tmp_path)) as app:
        p0, p1, mid = await _pair_by_queue(app, enc)
        bad: list[tuple[dict[str, Any], str]] = [
            ({"type": "nope"}, "unknown_type"),
            ({"type": "guess", "match_id": mid}, "bad_field"),
            ({"type": "guess", "match_id": mid, "guess": 1234}, "bad_field"),
            ({"type": "guess", "match_id": mid, "guess": "1234", "extra": 1}, "bad_field"),
            ({"type": "guess", "match_id": mid, "guess": "1234"}, "wrong_phase"),
            ({"type": "secret", "match_id": mid, "secret": "0012"}, "repeated_symbol"),
            ({"type": "secret", "match_id": mid, "secret": "012"}, "wrong_length"),
            ({"type": "secret", "match_id": mid, "secret": "01a2"}, "unknown_symbol"),
            ({"type": "secret", "match_id": "m-nope", "secret": "0123"}, "unknown_match"),
            ({"type": "resume", "match_id": "m-nope"}, "unknown_match"),
            ({"type": "hello", "name": "again"}, "not_available"),
        ]
        seq_before = app.arena.live[mid].match.seq
        for msg, code in bad:
            err = await p0.request(msg)
            assert err["type"] == "error" and err["code"] == code, (msg, err)
            assert err["message"]
        assert app.arena.live[mid].match.seq == seq_before
        # garbage frames: wrong frame type / undecodable, no ref possible
        await p0.send_raw("{not json" if enc == "moo.v1.json" else b"\xc1\xc1")
        err = await p0.of_type("error")
        assert err["code"] == "undecodable"
        await p0.send_raw(b"\x00\x01" if enc == "moo.v1.json" else "text")
        assert (await p0.of_type("error"))["code"] == "undecodable"
        # a stranger cannot act in the match
        eve = await Client.hello(app.port, "eve", enc)
        err = await eve.request({"type": "secret", "match_id": mid, "secret": "0123"})
        assert err["code"] == "not_your_seat"
        assert app.arena.live[mid].match.seq == seq_before
        # and the match still works
        await _secrets(p0, p1, mid)


async def test_hello_rules(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        c = await Client.open(app.port, enc)
        pong = await c.request({"type": "ping"})  # "any time": before hello too
        assert pong["type"] == "pong"
        err = await c.request({"type": "queue"})
        assert err["code"] == "not_hello"
        err = await c.request({"type": "hello", "name": "no spaces"})
        assert err["code"] == "invalid_name"
        err = await c.request({"type": "hello", "name": "random-bot"})
        assert err["code"] == "name_taken"
        err = await c.request({"type": "hello", "name": "x", "token": "forged"})
        assert err["code"] == "bad_token"
        w = await c.request({"type": "hello", "name": "ann"})
        assert w["type"] == "welcome" and w["token"] and w["protocol"] == 1
        d = await Client.open(app.port, enc)
        err = await d.request({"type": "hello", "name": "ANN"})
        assert err["code"] == "bad_token"  # owned: only its token or password gets it
        pong = await c.request({"type": "ping"})
        assert pong["type"] == "pong"


async def test_reconnect_with_token_replays_missed_events(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        p0, p1, mid = await _pair_by_queue(app, enc)
        await _secrets(p0, p1, mid)
        last = max(e["seq"] for e in p0.events(mid))
        await p0.close()
        away = await p1.event(mid, "away", seat=0)
        await p1.request({"type": "guess", "match_id": mid, "guess": "1230"})
        back = await Client.hello(app.port, "ignored", enc, token=p0.token)
        assert back.name == "ann"
        welcome = back.seen[-1]
        assert welcome["matches"] == [
            {"match_id": mid, "seat": 0, "seq": welcome["matches"][0]["seq"], "phase": "playing"}
        ]
        assert "token" not in welcome
        # hello alone puts the player back into the seat: match, the events so far, back
        again = await back.expect(lambda m: m.get("type") == "match")
        assert again["match_id"] == mid and again["seat"] == 0 and "ref" not in again
        await back.event(mid, "back", seat=0)
        await p1.event(mid, "back", seat=0)
        auto = [e["seq"] for e in back.events(mid)]
        assert auto == list(range(1, len(auto) + 1))
        m = await back.request({"type": "resume", "match_id": mid, "last_seq": last})
        assert m["type"] == "match" and m["seat"] == 0
        replayed = [await back.event(mid, "away"), await back.event(mid, "guess", seat=1)]
        assert replayed[0]["seq"] == away["seq"] == last + 1
        assert "guess" not in replayed[1]  # lockstep: the opponent's guess stays hidden
        await back.request({"type": "guess", "match_id": mid, "guess": "4567"})
        fin = await back.event(mid, "finished")
        assert fin["winner"] == 0
        got = [e["seq"] for e in back.events(mid)]
        assert got[: len(auto)] == auto and got[-1] == fin["seq"]


async def test_second_connection_with_same_token_replaces_the_first(
    tmp_path: Path, enc: str
) -> None:
    async with running(server_settings(tmp_path)) as app:
        first = await Client.hello(app.port, "ann", enc)
        second = await Client.hello(app.port, "x", enc, token=first.token)
        assert await first.closed() == 4001
        assert (await second.request({"type": "ping"}))["type"] == "pong"


async def test_flooding_closes_with_1008(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path, rate_per_s=5.0, rate_burst=5)) as app:
        c = await Client.hello(app.port, "ann", enc)
        for _ in range(40):
            try:
                await c.send({"type": "ping"})
            except Exception:
                break
        assert await c.closed() == 1008
        assert any(m.get("code") == "rate_limited" for m in c.seen)


async def test_oversized_message_is_refused_and_a_huge_frame_closes_with_1009(
    tmp_path: Path, enc: str
) -> None:
    async with running(server_settings(tmp_path)) as app:
        c = await Client.hello(app.port, "ann", enc)
        limit = app.settings.max_message_bytes * TRANSPORT_FACTOR
        over: str | bytes = "x" * 5000 if enc == "moo.v1.json" else b"x" * 5000
        await c.send_raw(over)  # over the message limit, under the transport's: refused
        assert (await c.of_type("error"))["code"] == "too_large"
        assert (await c.request({"type": "ping"}))["type"] == "pong"
        big: str | bytes = "x" * (limit + 1) if enc == "moo.v1.json" else b"x" * (limit + 1)
        await c.send_raw(big)
        assert await c.closed() == 1009


async def test_pools_pair_humans_and_bots_as_asked(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        ann = await Client.hello(app.port, "ann", enc)
        bob = await Client.hello(app.port, "bob", enc)
        prog = await Client.hello(app.port, "prog", enc, bot=True)
        err = await ann.request({"type": "queue", "pool": "bots"})  # programs only
        assert err["code"] == "wrong_pool" and not cast(Lobby, app.lobby).queue
        await ann.request({"type": "queue", "pool": "any"})
        await prog.request({"type": "queue", "pool": "any"})
        m = await prog.of_type("match")
        assert m["opponent"] == "ann"
        assert (await ann.of_type("match"))["opponent"] == "prog"
        await prog.request({"type": "queue", "pool": "humans"})
        await bob.request({"type": "queue", "pool": "any"})
        assert (await bob.of_type("match"))["opponent"] == "prog"


async def test_rematch_swaps_seats(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        p0, p1, mid = await _pair_by_queue(app, enc)
        err = await p0.request({"type": "rematch", "match_id": mid})
        assert err["code"] == "in_match" and err["match_id"] == mid  # still being played
        await p0.request({"type": "resign", "match_id": mid})
        fin = await p1.event(mid, "finished")
        assert fin["winner"] == 1 and fin["reason"] == "resign"
        sent = await p0.request({"type": "rematch", "match_id": mid})
        assert sent["type"] == "rematch_sent"
        assert (await p1.of_type("rematch_offer"))["match_id"] == mid
        m1 = await p1.request({"type": "rematch", "match_id": mid})
        assert m1["type"] == "match" and m1["seat"] == 0
        m0 = await p0.of_type("match")
        assert m0["seat"] == 1 and m0["match_id"] == m1["match_id"] != mid


async def test_a_player_who_does_not_come_back_forfeits(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path, grace_ms=200)) as app:
        p0, p1, mid = await _pair_by_queue(app, enc)
        await _secrets(p0, p1, mid)
        await p1.close()
        await p0.event(mid, "away", seat=1)
        timeout = await p0.event(mid, "timeout", seat=1)
        assert timeout["clock"] == "grace"
        fin = await p0.event(mid, "finished")
        assert fin["winner"] == 0 and fin["reason"] == "disconnect"
        assert mid not in app.arena.live


async def test_finished_match_can_still_be_resumed_and_watched(tmp_path: Path, enc: str) -> None:
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        p0, p1, mid = await _pair_by_queue(app, enc)
        await _secrets(p0, p1, mid)
        await p0.close()
        await p1.request({"type": "resign", "match_id": mid})
        await p1.event(mid, "finished")
        back = await Client.hello(app.port, "x", enc, token=p0.token)
        m = await back.request({"type": "resume", "match_id": mid, "last_seq": 0})
        assert m["type"] == "match" and m["seat"] == 0
        fin = await back.event(mid, "finished")
        assert fin["winner"] == 0 and fin["reason"] == "resign"
        token = p0.token
    async with running(settings) as app:  # after a restart: read back from the log
        again = await Client.hello(app.port, "x", enc, token=token)
        await again.request({"type": "resume", "match_id": mid, "last_seq": 0})
        assert (await again.event(mid, "finished"))["winner"] == 0
        eve = await Client.hello(app.port, "eve", enc)
        w = await eve.request({"type": "watch", "match_id": mid})
        assert w["type"] == "watching"
        fin = await eve.event(mid, "finished")
        assert fin["secrets"] == ["0123", "4567"]  # the end reveals them to everyone
        secret_events = [e for e in eve.events(mid) if e["kind"] == "secret"]
        assert secret_events and all("secret" not in e for e in secret_events)
        err = await eve.request({"type": "resume", "match_id": mid})
        assert err["code"] == "not_your_seat"
        err = await eve.request({"type": "watch", "match_id": "m-none"})
        assert err["code"] == "unknown_match"


async def test_watchers_joining_mid_match_see_every_event_exactly_once(
    tmp_path: Path, enc: str
) -> None:
    """Live matches keep no log in memory: a replay is read back from the store while moves
    keep being committed, and must still splice into the live fan-out without gap or repeat."""
    async with running(server_settings(tmp_path)) as app:
        p0, p1, mid = await _pair_by_queue(app, enc, pacing="free")
        await _secrets(p0, p1, mid)
        codes = [c for c in DEFAULT_RULES.secrets if c not in ("0123", "4567")][:: 97][:30]

        async def play(p: Client) -> None:
            for code in codes:
                reply = await p.request({"type": "guess", "match_id": mid, "guess": code})
                assert reply["kind"] == "guess", reply

        moves = asyncio.gather(play(p0), play(p1))
        watchers = []
        for i in range(6):  # joining one after another while the guesses are committed
            w = await Client.hello(app.port, f"w{i}", enc)
            await w.request({"type": "watch", "match_id": mid, "last_seq": 0})
            watchers.append(w)
        await moves
        assert app.arena.live[mid].durable_seq > 60  # nothing ended the match early
        for w in watchers:
            for seat in (0, 1):
                await w.event(mid, "guess", seat=seat, n=len(codes))
            seqs = [e["seq"] for e in w.events(mid)]
            assert seqs == list(range(1, len(seqs) + 1))
            assert len(seqs) >= 2 * len(codes)
