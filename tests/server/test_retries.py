"""Numbered guesses make a retry safe (docs/protocol.md, "Retrying safely").

The case every test here builds: the guess is committed, its answer never reaches the client
(the connection is gone before it reads it), the client comes back and sends the same guess
under the same number. The log must hold one guess, and the retry must get the original event
(same ``seq``, same fields) with its own ``ref``. Lockstep and free pacing, JSON and
MessagePack, through a real server on a real SQLite file.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest

from bench.rawbot import logged_guesses
from moo.rules import score
from server.app import App
from tests.server_support import (
    ENCODINGS,
    Client,
    break_store,
    read_only,
    running,
    server_settings,
)

PACINGS = ["lockstep", "free"]


async def _match(app: App, pacing: str, enc: str) -> tuple[Client, Client, str]:
    """ann (``enc``) and bob (JSON) in a started match of ``pacing``: ann's secret 0123, bob's
    4567."""
    ann = await Client.hello(app.port, "ann", enc)
    bob = await Client.hello(app.port, "bob")
    sent = await ann.request({"type": "challenge", "opponent": "bob", "pacing": pacing})
    reply = await bob.request({"type": "accept", "challenge_id": sent["challenge_id"]})
    assert reply["type"] == "match", reply
    mid = reply["match_id"]
    await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
    await bob.request({"type": "secret", "match_id": mid, "secret": "4567"})
    await ann.event(mid, "started")
    return ann, bob, mid


def _answers(ref: Any, msg: dict[str, Any]) -> bool:
    return bool(msg.get("ref") == ref)


async def _logged(app: App, mid: str, seat: int) -> list[dict[str, Any]]:
    events = await app.store.match_events(mid)
    assert events is not None
    return [e for e in events if e["kind"] == "guess" and e["seat"] == seat]


async def _lost_answer(app: App, ann: Client, bob: Client, mid: str, guess: str, n: int,
                       enc: str) -> tuple[Client, dict[str, Any]]:
    """ann's guess ``n`` is committed (bob sees it) but ann's connection is gone before she
    reads the answer; she comes back with her token. Her new client, and the event bob saw."""
    await ann.send({"type": "guess", "match_id": mid, "guess": guess, "n": n})
    seen = await bob.event(mid, "guess", seat=0, n=n)
    await ann.close()  # the answer is in the dropped connection's buffer, never read
    back = await Client.hello(app.port, "ann", enc, token=ann.token)
    return back, seen


@pytest.mark.parametrize("enc", ENCODINGS)
@pytest.mark.parametrize("pacing", PACINGS)
async def test_a_retried_guess_is_answered_with_the_original_event(
    tmp_path: Any, pacing: str, enc: str
) -> None:
    async with running(server_settings(tmp_path)) as app:
        ann, bob, mid = await _match(app, pacing, enc)
        ann, seen = await _lost_answer(app, ann, bob, mid, "5678", 1, enc)
        reply = await ann.request({"type": "guess", "match_id": mid, "guess": "5678", "n": 1})
        assert reply["type"] == "event" and reply["kind"] == "guess", reply
        (logged,) = await _logged(app, mid, 0)  # one guess in the log, not two
        assert reply["seq"] == seen["seq"] == logged["seq"]
        assert reply["at"] == logged["at"] and reply["n"] == 1 and reply["guess"] == "5678"
        if pacing == "free":  # the outcome itself: bulls and cows as first answered
            expected = tuple(score("4567", "5678"))
            assert (reply["bulls"], reply["cows"]) == (logged["bulls"], logged["cows"]) == expected
        else:  # lockstep: as ann first saw it, the response comes with the round
            assert "bulls" not in reply and "cows" not in reply
        # a different guess under the taken number: refused, nothing changes
        taken = await ann.request({"type": "guess", "match_id": mid, "guess": "5679", "n": 1})
        assert taken["type"] == "error" and taken["code"] == "guess_taken", taken
        assert taken["expected"] == 2 and taken["match_id"] == mid
        assert "guess 1 was 5678" in taken["message"]
        # a number that skips ahead: refused, and says which number comes next
        ahead = await ann.request({"type": "guess", "match_id": mid, "guess": "5679", "n": 3})
        assert ahead["type"] == "error" and ahead["code"] == "guess_ahead", ahead
        assert ahead["expected"] == 2 and "expected guess number 2, got 3" in ahead["message"]
        assert len(await _logged(app, mid, 0)) == 1
        if pacing == "lockstep":  # the round goes on with bob's guess
            await bob.request({"type": "guess", "match_id": mid, "guess": "0129", "n": 1})
        second = await ann.request({"type": "guess", "match_id": mid, "guess": "5679", "n": 2})
        assert second["type"] == "event" and second["n"] == 2, second
        assert [e["n"] for e in await _logged(app, mid, 0)] == [1, 2]


@pytest.mark.parametrize("enc", ENCODINGS)
@pytest.mark.parametrize("pacing", PACINGS)
async def test_a_retry_sent_before_the_commit_waits_for_it(
    tmp_path: Any, pacing: str, enc: str
) -> None:
    """The same numbered guess twice in a row, the second before the first is durable: one
    guess, both answered with its event (the second only once the log holds it)."""
    async with running(server_settings(tmp_path)) as app:
        ann, _, mid = await _match(app, pacing, enc)
        msg = {"type": "guess", "match_id": mid, "guess": "5678", "n": 1}
        first, second = await ann.send(msg), await ann.send(msg)
        one = await ann.expect(lambda m: m.get("ref") == first)
        two = await ann.expect(lambda m: m.get("ref") == second)
        assert one["type"] == two["type"] == "event", (one, two)
        assert {**one, "ref": None} == {**two, "ref": None}
        assert len(await _logged(app, mid, 0)) == 1


@pytest.mark.parametrize("enc", ENCODINGS)
async def test_the_guess_that_ended_the_match_can_be_retried(tmp_path: Any, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        ann, bob, mid = await _match(app, "lockstep", enc)
        await bob.request({"type": "guess", "match_id": mid, "guess": "9876", "n": 1})
        ann, seen = await _lost_answer(app, ann, bob, mid, "4567", 1, enc)
        await bob.event(mid, "finished")
        reply = await ann.request({"type": "guess", "match_id": mid, "guess": "4567", "n": 1})
        assert reply["type"] == "event" and reply["seq"] == seen["seq"], reply
        late = await ann.request({"type": "guess", "match_id": mid, "guess": "4568", "n": 2})
        assert late["code"] == "match_finished", late
        assert len(await _logged(app, mid, 0)) == 1


async def test_unnumbered_guesses_keep_todays_behaviour(tmp_path: Any) -> None:
    async with running(server_settings(tmp_path)) as app:
        ann, _, mid = await _match(app, "free", "moo.v1.json")
        for _ in range(2):
            reply = await ann.request({"type": "guess", "match_id": mid, "guess": "5678"})
            assert reply["type"] == "event", reply
        assert [e["n"] for e in await _logged(app, mid, 0)] == [1, 2]


@pytest.mark.parametrize("enc", ENCODINGS)
async def test_the_final_guess_can_be_retried_after_a_restart(tmp_path: Any, enc: str) -> None:
    """The server restarted after the guess that ended the match (it no longer remembers the
    match as recently finished): the retry is checked against the log and answered with the
    original event, not ``unknown_match``; a different guess there is ``guess_taken``, a new
    number ``match_finished``."""
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        ann, bob, mid = await _match(app, "lockstep", enc)
        await bob.request({"type": "guess", "match_id": mid, "guess": "9876", "n": 1})
        ann, seen = await _lost_answer(app, ann, bob, mid, "4567", 1, enc)
        await bob.event(mid, "finished")
        token = ann.token
    async with running(settings) as app:
        assert mid not in app.arena.recent
        ann = await Client.hello(app.port, "ann", enc, token=token)
        reply = await ann.request({"type": "guess", "match_id": mid, "guess": "4567", "n": 1})
        assert reply["type"] == "event" and reply["seq"] == seen["seq"], reply
        (logged,) = await _logged(app, mid, 0)
        shown = {k: v for k, v in reply.items() if k not in ("type", "match_id", "ref")}
        # lockstep: the guesser's own view of its guess event, the response comes with round
        assert shown == {k: v for k, v in logged.items() if k not in ("bulls", "cows")}
        taken = await ann.request({"type": "guess", "match_id": mid, "guess": "4568", "n": 1})
        assert taken["code"] == "guess_taken" and taken["match_id"] == mid, taken
        late = await ann.request({"type": "guess", "match_id": mid, "guess": "4568", "n": 2})
        assert late["code"] == "match_finished" and late["match_id"] == mid, late
        unknown = await ann.request(
            {"type": "guess", "match_id": "m000000000000", "guess": "4568", "n": 1}
        )
        assert unknown["code"] == "unknown_match", unknown


async def test_a_retry_shares_the_fate_of_a_commit_that_fails(tmp_path: Any) -> None:
    """The store refuses the guess: the original and its retry (sent before the refusal is
    known) each get one ``storage_unavailable``, and nothing is in the log."""
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        ann, _, mid = await _match(app, "free", "moo.v1.json")
        await break_store(app, read_only)
        msg = {"type": "guess", "match_id": mid, "guess": "5678", "n": 1}
        first, second = await ann.send(msg), await ann.send(msg)
        for ref in (first, second):
            reply = await ann.expect(partial(_answers, ref))
            assert reply["code"] == "storage_unavailable" and reply["match_id"] == mid, reply
        pong = await ann.request({"type": "ping"})  # nothing more was sent for either
        assert pong["type"] == "pong"
        assert [m for m in ann.inbox if m.get("ref") in (first, second)] == []
    assert not any(m == mid for m, *_ in logged_guesses(Path(settings.db)))
