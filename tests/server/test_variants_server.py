"""Variants per match through the protocol, in both encodings: rules in queue, room_create,
challenge and play_bot; bad and unoffered rules; Mastermind scoring; records, exports and the
per-variant ratings (docs/protocol.md, "Variants")."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import pytest

from moo.mastermind import mastermind_score
from moo.rules import score
from server.app import App
from server.export import records
from server.lobby import Lobby
from tests.patience import patience
from tests.server_support import ENCODINGS, Client, running, server_settings

pytestmark = pytest.mark.parametrize("enc", ENCODINGS)

MASTERMIND = {"game": "mastermind", "length": 4, "alphabet": "123456"}


async def _queue_pair(
    app: App, enc: str, rules: dict[str, Any]
) -> tuple[Client, Client, str, dict[str, Any]]:
    a = await Client.hello(app.port, "ann", enc)
    b = await Client.hello(app.port, "bob", enc)
    q = await a.request({"type": "queue", "rules": rules})
    assert q["type"] == "queued"
    await b.request({"type": "queue", "rules": rules})
    ma, mb = await a.of_type("match"), await b.of_type("match")
    assert ma["match_id"] == mb["match_id"]
    p0, p1 = (a, b) if ma["seat"] == 0 else (b, a)
    return p0, p1, ma["match_id"], ma


async def test_mastermind_match_end_to_end(tmp_path: Path, enc: str) -> None:
    """Mastermind 4 of 6 through the queue: repeated-symbol secrets, pegs as bulls/cows,
    and the result, match_record, export and the Mastermind leaderboard know the rules."""
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        p0, p1, mid, match = await _queue_pair(app, enc, MASTERMIND)
        assert match["config"]["rules"] == {**MASTERMIND, "repeats_in_guess": True}
        await p0.request({"type": "secret", "match_id": mid, "secret": "1122"})
        await p1.request({"type": "secret", "match_id": mid, "secret": "6543"})
        await p0.event(mid, "started")
        # "1111" against "1122": Mastermind says 2 black 0 white; MOO's rule would say 2B2C
        assert mastermind_score("1122", "1111") != score("1122", "1111")
        await p1.request({"type": "guess", "match_id": mid, "guess": "1111"})
        await p0.request({"type": "guess", "match_id": mid, "guess": "6544"})
        round1 = await p0.event(mid, "round", n=1)
        assert round1["results"] == [["6544", 3, 0], ["1111", 2, 0]]
        await p0.request({"type": "guess", "match_id": mid, "guess": "6543"})
        await p1.request({"type": "guess", "match_id": mid, "guess": "1122"})
        done = await p0.event(mid, "finished")
        assert done["winner"] is None and done["counts"] == [2, 2]  # both solved at guess 2
        rec = await p0.request({"type": "match_record", "match_id": mid})
        assert rec["config"]["rules"]["game"] == "mastermind"
        board = await p0.request({"type": "leaderboard", "variant": "mastermind:4:123456"})
        assert board["variant"] == "mastermind:4:123456"
        assert {row["name"] for row in board["players"]} == {"ann", "bob"}
        classic = await p0.request({"type": "leaderboard"})
        assert classic["variant"] == "moo:4:0123456789" and classic["players"] == []
    exported = [r for r in records(settings.db) if r["match_id"] == mid]
    assert exported[0]["variant"] == "mastermind:4:123456"
    assert exported[0]["secrets"] == ["1122", "6543"]


async def test_queue_pairs_only_same_rules(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        b = await Client.hello(app.port, "bob", enc)
        c = await Client.hello(app.port, "cy", enc)
        five = {"length": 5}
        q = await a.request({"type": "queue", "rules": five})
        assert q["rules"] == {"game": "moo", "length": 5, "alphabet": "0123456789",
                              "repeats_in_guess": False}
        classic = await b.request({"type": "queue"})  # no rules: the server's default
        assert classic["rules"]["length"] == 4
        assert len(cast(Lobby, app.lobby).queue) == 2  # different rules: not paired
        await c.request({"type": "queue", "rules": {"game": "moo", "length": 5,
                                                    "alphabet": "digits"}})
        m = await a.of_type("match")
        assert m["opponent"] == "cy" and m["config"]["rules"]["length"] == 5
        assert [w.player for w in cast(Lobby, app.lobby).queue] == ["bob"]


BAD = [
    ({"length": 9}, "length must be 3-6, got 9"),
    ({"alphabet": "01234567890"}, "alphabet repeats symbol '0'"),
    ({"alphabet": ["0", "1", "", "3"]}, "alphabet has an empty symbol"),
    ({"length": 5, "alphabet": "0123"}, "5 positions need at least 5 distinct symbols"),
    ({"game": "chess"}, "game must be 'moo', 'mastermind' or 'words'"),
    ({"colour": True}, "unknown rules field 'colour'"),
]


async def test_bad_rules_create_nothing(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        await Client.hello(app.port, "bob", enc)
        for rules, text in BAD:
            for msg in (
                {"type": "queue", "rules": rules},
                {"type": "room_create", "rules": rules},
                {"type": "challenge", "opponent": "bob", "rules": rules},
                {"type": "play_bot", "strategy": "random", "rules": rules},
            ):
                err = await a.request(msg)
                assert err["type"] == "error" and err["code"] == "bad_rules", err
                assert text in err["message"]
        # well-formed but not offered: a specific code naming what is offered
        err = await a.request({"type": "room_create", "rules": {"alphabet": "ABCDEFGH"}})
        assert err["code"] == "rules_not_offered" and "mastermind:4:123456" in err["message"]
        err = await a.request({"type": "queue", "rules": "mastermind"})
        assert err["code"] == "bad_field"  # rules must be an object
        lobby = cast(Lobby, app.lobby)
        assert not lobby.queue and not lobby.rooms and not lobby.challenges
        assert not app.arena.live


async def test_room_and_challenge_carry_rules(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        b = await Client.hello(app.port, "bob", enc)
        hexa = {"alphabet": "hex"}
        room = await a.request({"type": "room_create", "rules": hexa})
        assert room["rules"]["alphabet"] == "0123456789ABCDEF"
        await b.request({"type": "room_join", "code": room["code"]})
        m = await a.of_type("match")
        mid = m["match_id"]
        assert m["config"]["rules"]["alphabet"] == "0123456789ABCDEF"
        err = await a.request({"type": "secret", "match_id": mid, "secret": "0G12"})
        assert err["code"] == "unknown_symbol"
        ok = await a.request({"type": "secret", "match_id": mid, "secret": "fa09"})
        assert ok["secret"] == "FA09"
        await a.request({"type": "resign", "match_id": mid})
        await b.event(mid, "finished")
        sent = await a.request({"type": "challenge", "opponent": "bob",
                                "rules": {"length": 3}})
        notice = await b.of_type("challenge")
        assert notice["rules"]["length"] == 3
        m2 = await b.request({"type": "accept", "challenge_id": sent["challenge_id"]})
        assert m2["type"] == "match"
        assert m2["config"]["rules"]["length"] == 3


async def test_play_bot_with_rules(
    tmp_path: Path, enc: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOO_TREE_CACHE", str(tmp_path / "trees"))
    settings = dataclasses.replace(server_settings(tmp_path), pacing="free")
    async with running(settings) as app:
        a = await Client.hello(app.port, "ann", enc)
        err = await a.request({"type": "play_bot", "strategy": "adaptive",
                               "rules": {"length": 5}})
        assert err["code"] == "bot_unsupported" and "bots that can: " in err["message"]
        assert "entropy" in err["message"] and "minimum" in err["message"]
        assert not app.arena.live
        # Mastermind against the exact tree: it solves within 5 guesses whatever the secret
        m = await a.request({"type": "play_bot", "strategy": "minimum", "rules": MASTERMIND})
        assert m["type"] == "match"
        mid = m["match_id"]
        await a.request({"type": "secret", "match_id": mid, "secret": "6611"})
        bot_seat = 1 - m["seat"]
        solved = await a.event(mid, "guess", seat=bot_seat, bulls=4)
        assert solved["guess"] == "6611" and solved["n"] <= 5
        # the race rule ends the match once our count passes the bot's
        for _ in range(solved["n"]):
            reply = await a.request({"type": "guess", "match_id": mid, "guess": "1234"})
            assert reply.get("kind") == "guess", reply  # scored against the bot's secret
            if reply["bulls"] == 4:
                # the bot drew 1234 (1 secret in 1 296, a busy run's failure at stop 49): we
                # solved sooner, which ends the match as well
                assert reply["n"] <= solved["n"]
                break
        done = await a.event(mid, "finished")
        assert done["solved"][bot_seat] and done["counts"][bot_seat] == solved["n"]


async def test_play_bot_five_of_ten(tmp_path: Path, enc: str) -> None:
    settings = dataclasses.replace(server_settings(tmp_path), pacing="free")
    async with running(settings) as app:
        a = await Client.hello(app.port, "ann", enc)
        m = await a.request({"type": "play_bot", "strategy": "random", "rules": {"length": 5}})
        assert m["type"] == "match"
        mid = m["match_id"]
        await a.request({"type": "secret", "match_id": mid, "secret": "01234"})
        bot_seat = 1 - m["seat"]
        solved = await a.event(mid, "guess", seat=bot_seat, bulls=5)
        for _ in range(solved["n"]):
            reply = await a.request({"type": "guess", "match_id": mid, "guess": "98765"})
            assert reply.get("kind") == "guess", reply
        done = await a.event(mid, "finished")
        guesses = [e for e in a.events(mid) if e["kind"] == "guess" and e["seat"] == bot_seat]
        assert done["solved"][bot_seat] and guesses[-1]["guess"] == "01234"
        assert all(len(e["guess"]) == 5 for e in guesses)


async def test_welcome_lists_offered_variants_and_leaderboard_checks_spec(
    tmp_path: Path, enc: str
) -> None:
    settings = dataclasses.replace(
        server_settings(tmp_path), variants=["mastermind:4:123456", "moo:4:0123456789"]
    )
    async with running(settings) as app:
        a = await Client.hello(app.port, "ann", enc)
        welcome = next(m for m in a.seen if m.get("type") == "welcome")
        assert welcome["variants"] == [
            {**MASTERMIND, "repeats_in_guess": True},
            {"game": "moo", "length": 4, "alphabet": "0123456789", "repeats_in_guess": False},
        ]
        # the first offered variant is what a request without rules plays
        room = await a.request({"type": "room_create"})
        assert room["rules"]["game"] == "mastermind"
        err = await a.request({"type": "queue", "rules": {"length": 5}})
        assert err["code"] == "rules_not_offered"
        err = await a.request({"type": "leaderboard", "variant": "moo:9"})
        assert err["code"] == "bad_rules" and "length must be 3-6" in err["message"]


WORDS5 = {"game": "words", "length": 5}


async def test_word_match_end_to_end(tmp_path: Path, enc: str) -> None:
    """Word MOO through the queue: dictionary secrets (not_a_word otherwise, changing nothing),
    any five letters as a guess, hits and misses in bulls/cows, and the result, export and the
    word leaderboard know the rules."""
    settings = server_settings(tmp_path)
    rules = {**WORDS5, "scoring": "hits_misses"}
    async with running(settings) as app:
        welcome = next(m for m in (await Client.hello(app.port, "cy", enc)).seen
                       if m.get("type") == "welcome")
        assert {"game": "words", "length": 5, "scoring": "bulls_cows",
                "alphabet": "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "repeats_in_guess": True} in (
            welcome["variants"])
        p0, p1, mid, match = await _queue_pair(app, enc, rules)
        assert match["config"]["rules"]["scoring"] == "hits_misses"
        err = await p0.request({"type": "secret", "match_id": mid, "secret": "XQZZY"})
        assert err["code"] == "not_a_word" and "dictionary" in err["message"]
        err = await p0.request({"type": "secret", "match_id": mid, "secret": "SKUN"})
        assert err["code"] == "wrong_length"
        assert app.arena.live[mid].match.seats[0].secret is None  # p0 sits in seat 0
        ok = await p0.request({"type": "secret", "match_id": mid, "secret": "skunk"})
        assert ok["secret"] == "SKUNK"
        await p1.request({"type": "secret", "match_id": mid, "secret": "MOOSE"})
        await p0.event(mid, "started")
        err = await p1.request({"type": "guess", "match_id": mid, "guess": "SK8NK"})
        assert err["code"] == "unknown_symbol"
        await p1.request({"type": "guess", "match_id": mid, "guess": "shark"})  # the POTM table
        await p0.request({"type": "guess", "match_id": mid, "guess": "EEEEE"})  # not a word
        round1 = await p0.event(mid, "round", n=1)
        assert round1["results"] == [["EEEEE", 1, 0], ["SHARK", 2, 3]]
        await p0.request({"type": "guess", "match_id": mid, "guess": "MOOSE"})
        await p1.request({"type": "guess", "match_id": mid, "guess": "GUPPY"})
        done = await p0.event(mid, "finished")
        assert done["winner"] == 0 and done["secrets"] == ["SKUNK", "MOOSE"]
        board = await p0.request({"type": "leaderboard", "variant": "words:5:hits_misses"})
        assert board["variant"] == "words:5:hits_misses"
        assert {row["name"] for row in board["players"]} == {"ann", "bob"}
        other = await p0.request({"type": "leaderboard", "variant": "words:5"})
        assert other["variant"] == "words:5:bulls_cows" and other["players"] == []
        err = await p0.request({"type": "leaderboard", "variant": "words:12"})
        assert err["code"] == "bad_rules" and "4-9 letters" in err["message"]
        for bad, text in [({"game": "words", "length": 3}, "4-9 letters, got 3"),
                          ({"game": "words", "scoring": "points"}, "scoring must be")]:
            err = await p0.request({"type": "room_create", "rules": bad})
            assert err["code"] == "bad_rules" and text in err["message"]
        err = await p0.request({"type": "room_create", "rules": {"game": "words", "length": 7}})
        assert err["code"] == "rules_not_offered" and "words:5:bulls_cows" in err["message"]
        assert not cast(Lobby, app.lobby).rooms
    exported = [r for r in records(settings.db) if r["match_id"] == mid]
    assert exported[0]["variant"] == "words:5:hits_misses"
    assert exported[0]["config"]["rules"]["scoring"] == "hits_misses"


async def test_play_the_word_bot(tmp_path: Path, enc: str) -> None:
    """The hosted word bot: only it plays word MOO (bot_unsupported names it), its secret is
    one of the answers, it guesses answer words and solves."""
    from bots.dictionary import answers_of_length

    settings = dataclasses.replace(server_settings(tmp_path), pacing="free")
    async with running(settings) as app:
        a = await Client.hello(app.port, "ann", enc)
        err = await a.request({"type": "play_bot", "strategy": "random", "rules": WORDS5})
        assert err["code"] == "bot_unsupported" and "bots that can: words" in err["message"]
        err = await a.request({"type": "play_bot", "strategy": "words"})  # classic
        assert err["code"] == "bot_unsupported" and "bots that can: " in err["message"]
        assert "words" not in err["message"].split("bots that can: ")[1].split(", ")
        assert not app.arena.live
        m = await a.request({"type": "play_bot", "strategy": "words", "rules": WORDS5})
        assert m["type"] == "match" and m["opponent"] == "words-bot"
        mid = m["match_id"]
        await a.request({"type": "secret", "match_id": mid, "secret": "QUICK"})
        bot_seat = 1 - m["seat"]
        solved = await a.event(mid, "guess", seat=bot_seat, bulls=5)
        assert solved["guess"] == "QUICK"
        words = set(answers_of_length(5))
        guesses = [e["guess"] for e in a.events(mid) if e["kind"] == "guess"
                   and e["seat"] == bot_seat]
        assert all(g in words for g in guesses)
        for _ in range(solved["n"]):
            reply = await a.request({"type": "guess", "match_id": mid, "guess": "ZZZZZ"})
            assert reply.get("kind") == "guess", reply
        done = await a.event(mid, "finished")
        assert done["solved"][bot_seat] and done["secrets"][bot_seat] in words


async def test_secrets_drawn_by_the_server_are_answers(tmp_path: Path, enc: str) -> None:
    """Every secret the server draws (the hosted bot's, 24 matches) is one of the answers, and
    a person's secret must be one too, while any dictionary word is a guess (Wordle's rule)."""
    from bots.dictionary import answers_of_length, words_of_length

    answers = set(answers_of_length(5))
    outside = sorted(set(words_of_length(5)) - answers)
    assert len(outside) > 1000  # more than half the dictionary: the old draw would show it
    # 24 matches of 5 requests each, as fast as the server answers: not the rate limit's test
    settings = dataclasses.replace(server_settings(tmp_path), pacing="free", rate_per_s=1000.0,
                                   rate_burst=1000)
    drawn: list[str] = []
    async with running(settings) as app:
        a = await Client.hello(app.port, "ann", enc)
        for i in range(24):
            m = await a.request({"type": "play_bot", "strategy": "words", "rules": WORDS5})
            mid, seat = m["match_id"], m["seat"]
            if i == 0:
                err = await a.request({"type": "secret", "match_id": mid, "secret": outside[0]})
                assert err["code"] == "not_a_word", err
                assert f"{outside[0]} is not one of the 5-letter answer words" in err["message"]
            await a.request({"type": "secret", "match_id": mid, "secret": "HOUSE"})
            await a.event(mid, "started")
            reply = await a.request({"type": "guess", "match_id": mid, "guess": outside[i]})
            assert reply.get("kind") == "guess", reply  # a word that is no answer: a guess
            await a.request({"type": "resign", "match_id": mid})
            done = await a.event(mid, "finished")
            drawn.append(done["secrets"][1 - seat])
    assert all(w in answers for w in drawn), sorted(set(drawn) - answers)


async def test_word_variants_not_offered_without_dictionary(
    tmp_path: Path, enc: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No word list: the server starts, logs one line and offers everything else."""
    import bots.dictionary

    monkeypatch.setattr(bots.dictionary, "DEFAULT_SOURCE", tmp_path / "no-such-list")
    monkeypatch.setenv("MOO_WORDS_CACHE", str(tmp_path / "no-cache.txt"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "no-data"))
    with caplog.at_level("WARNING", logger="moo.arena"):
        async with running(server_settings(tmp_path)) as app:
            a = await Client.hello(app.port, "ann", enc)
            welcome = next(m for m in a.seen if m.get("type") == "welcome")
            assert all(v["game"] != "words" for v in welcome["variants"])
            assert len(welcome["variants"]) == 6
            err = await a.request({"type": "play_bot", "strategy": "words", "rules": WORDS5})
            assert err["code"] == "rules_not_offered"
    assert any("word MOO not offered" in r.getMessage() and "wamerican" in r.getMessage()
               for r in caplog.records)


async def test_a_word_list_installed_later_is_offered_without_restart(
    tmp_path: Path, enc: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started without the list, the server offers word MOO once the list appears: the next
    welcome lists the word variants and a word match can be played."""
    import bots.dictionary
    import server.arena

    monkeypatch.setattr(bots.dictionary, "DEFAULT_SOURCE", tmp_path / "no-such-list")
    monkeypatch.setenv("MOO_WORDS_CACHE", str(tmp_path / "cache.txt"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setattr(server.arena, "WORDS_RECHECK_S", 0.0)  # look at every request
    bots.dictionary.words_of_length.cache_clear()
    bots.dictionary.answers_of_length.cache_clear()
    try:
        await _installed_later(tmp_path, enc)
    finally:  # the small list must not stay cached for the other tests of this process
        bots.dictionary.words_of_length.cache_clear()
        bots.dictionary.answers_of_length.cache_clear()


async def _installed_later(tmp_path: Path, enc: str) -> None:
    import bots.dictionary

    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        welcome = next(m for m in a.seen if m.get("type") == "welcome")
        assert all(v["game"] != "words" for v in welcome["variants"])
        err = await a.request({"type": "play_bot", "strategy": "words", "rules": WORDS5})
        assert err["code"] == "rules_not_offered" and "wamerican" in err["message"]
        installed = bots.dictionary.user_source()  # where ./dev unpacks the package
        installed.parent.mkdir(parents=True)
        installed.write_text("skunk\nmoose\nFlynn\nhorse\n", encoding="utf-8")
        b = await Client.hello(app.port, "bob", enc)
        welcome = next(m for m in b.seen if m.get("type") == "welcome")
        assert any(v["game"] == "words" for v in welcome["variants"])
        started = await b.request({"type": "play_bot", "strategy": "words", "rules": WORDS5})
        assert started["type"] == "match", started
        err = await b.request({"type": "secret", "match_id": started["match_id"],
                               "secret": "FLYNN"})
        assert err["code"] == "not_a_word"  # a name of the list is no word of the game
        ok = await b.request({"type": "secret", "match_id": started["match_id"],
                              "secret": "SKUNK"})
        assert ok["type"] != "error", ok


async def test_only_word_variants_without_dictionary_refuse_to_start(
    tmp_path: Path, enc: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bots.dictionary
    from moo.errors import NotAvailable

    monkeypatch.setattr(bots.dictionary, "DEFAULT_SOURCE", tmp_path / "no-such-list")
    monkeypatch.setenv("MOO_WORDS_CACHE", str(tmp_path / "no-cache.txt"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "no-data"))
    settings = dataclasses.replace(server_settings(tmp_path), variants=["words:5"])
    with pytest.raises(NotAvailable, match="every configured variant is word MOO and no word"):
        App(settings)


async def test_word_match_against_the_bot_survives_a_restart(tmp_path: Path, enc: str) -> None:
    """The word match is replayed from its log after a restart (rules, hits and misses and
    all) and the hosted word bot carries on from what it had seen."""
    from bots.dictionary import words_of_length

    settings = server_settings(tmp_path)
    rules = {**WORDS5, "scoring": "hits_misses"}
    async with running(settings) as app:
        a = await Client.hello(app.port, "ann", enc)
        token = a.token
        m = await a.request({"type": "play_bot", "strategy": "words", "rules": rules})
        mid, seat = m["match_id"], m["seat"]
        await a.request({"type": "secret", "match_id": mid, "secret": "SKUNK"})
        await a.request({"type": "guess", "match_id": mid, "guess": "EEEEE"})
        first = await a.event(mid, "round", n=1)
    async with running(settings) as app:
        assert app.arena.live[mid].match.config.rules.to_dict()["scoring"] == "hits_misses"
        a = await Client.hello(app.port, "ann", enc, token=token)
        await a.request({"type": "resume", "match_id": mid, "last_seq": 0})
        assert (await a.event(mid, "round", n=1))["results"] == first["results"]
        for n in range(2, 40):
            reply = await a.request({"type": "guess", "match_id": mid, "guess": "QQQQQ"})
            if reply.get("code") == "match_finished":
                break
            assert reply.get("kind") == "guess", reply
            def settled(msg: dict[str, Any], n: int = n) -> bool:
                """Round ``n`` revealed, or the match over (the bot solved first)."""
                return msg.get("match_id") == mid and (
                    msg.get("kind") == "finished"
                    or (msg.get("kind") == "round" and msg.get("n") == n))

            await a.expect(settled)
            if any(e["kind"] == "finished" for e in a.events(mid)):
                break
        done = await a.event(mid, "finished")
        assert done["solved"][1 - seat] and done["secrets"][seat] == "SKUNK"
        words = set(words_of_length(5))
        assert done["secrets"][1 - seat] in words
        rounds = [e for e in a.events(mid) if e["kind"] == "round"]
        bot_guesses = {e["results"][1 - seat][0] for e in rounds}
        assert len(rounds) >= 2 and bot_guesses <= words  # lockstep: guesses shown by round
        mine = {e["results"][seat][0] for e in rounds}
        assert mine <= {"EEEEE", "QQQQQ"}  # QQQQQ is no word: never the bot's secret


async def test_tree_bot_on_three_of_ten_and_fallback_on_five(
    tmp_path: Path, enc: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3 of 10: the hosted minimum bot plays the exact tree, solved on first use into the
    cache, and solves within its depth; 5 of 10: it plays entropy and the match says so."""
    import asyncio

    from bots import variant_trees
    from bots.variant_trees import cache_file, tree_for
    from moo.rules import Rules

    monkeypatch.setenv("MOO_TREE_CACHE", str(tmp_path / "trees"))
    monkeypatch.setattr(variant_trees, "_TREES", {})  # the server runs in this process
    settings = dataclasses.replace(server_settings(tmp_path), pacing="free")
    async with running(settings) as app:
        a = await Client.hello(app.port, "ann", enc)
        m = await a.request({"type": "play_bot", "strategy": "minimum", "rules": {"length": 3}})
        assert m["type"] == "match" and "bot_note" not in m
        mid = m["match_id"]
        await a.request({"type": "secret", "match_id": mid, "secret": "907"})
        bot_seat = 1 - m["seat"]
        solved = await a.event(mid, "guess", seat=bot_seat, bulls=3)
        three = Rules(length=3, alphabet="0123456789")
        async with asyncio.timeout(patience(60)):  # solved by the server on first use: poll
            while not cache_file(three, "minimum").exists():
                await asyncio.sleep(0.1)
        tree = tree_for(three, "minimum")
        assert tree is not None and solved["n"] <= max(tree.counts.values())
        assert solved["guess"] == "907"
        for _ in range(solved["n"]):
            await a.request({"type": "guess", "match_id": mid, "guess": "123"})
        await a.event(mid, "finished")
        m5 = await a.request({"type": "play_bot", "strategy": "strongest",
                              "rules": {"length": 5}})
        assert m5["type"] == "match"
        assert "entropy" in m5["bot_note"] and "too large" in m5["bot_note"]
        mid5 = m5["match_id"]
        await a.request({"type": "secret", "match_id": mid5, "secret": "86420"})
        seat5 = 1 - m5["seat"]
        done5 = await a.event(mid5, "guess", seat=seat5, bulls=5)
        assert done5["guess"] == "86420" and done5["n"] <= 9
        for _ in range(done5["n"]):
            await a.request({"type": "guess", "match_id": mid5, "guess": "12345"})
        await a.event(mid5, "finished")
        e = await a.request({"type": "play_bot", "strategy": "entropy",
                             "rules": {"length": 4, "alphabet": "hex"}})
        assert e["type"] == "match" and "bot_note" not in e
