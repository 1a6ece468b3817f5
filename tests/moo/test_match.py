"""The match state machine: every terminal condition, visibility, clocks and replay."""

from __future__ import annotations

from typing import Any

import pytest

from moo.commitment import commit, verify
from moo.errors import (
    AlreadySet,
    GuessAhead,
    GuessTaken,
    InvalidCode,
    MatchFinished,
    NotYourSeat,
    NotYourTurn,
    RepeatedSymbol,
    WrongPhase,
)
from moo.match import Match, MatchConfig
from moo.variants import rules_from_dict

SECRETS = ("0123", "4567")


def started(config: MatchConfig | None = None, now: int = 0) -> Match:
    m, _ = Match.create("m1", ("ann", "bob"), config or MatchConfig(), now)
    m.set_secret(0, SECRETS[0], "s0", now)
    m.set_secret(1, SECRETS[1], "s1", now)
    return m


def snapshot(m: Match) -> Any:
    return (m.seq, m.phase, m.summary("spectator"), m.summary(0), m.summary(1))


def test_secrets_phase_then_commitments_published() -> None:
    m, events = Match.create("m1", ("ann", "bob"), MatchConfig(), 0)
    assert [e["kind"] for e in events] == ["created"] and m.phase == "secrets"
    ev = m.set_secret(0, "0123", "salt0", 5)
    assert [e["kind"] for e in ev] == ["secret"] and m.phase == "secrets"
    ev = m.set_secret(1, "4567", "salt1", 6)
    assert [e["kind"] for e in ev] == ["secret", "started"]
    assert ev[1]["commitments"] == [commit("0123", "salt0"), commit("4567", "salt1")]
    assert m.phase == "playing"


def test_invalid_actions_raise_and_change_nothing() -> None:
    m, _ = Match.create("m1", ("ann", "bob"), MatchConfig(), 0)
    before = snapshot(m)
    for action, error in [
        (lambda: m.set_secret(0, "0012", "s", 1), RepeatedSymbol),
        (lambda: m.set_secret(2, "0123", "s", 1), NotYourSeat),
        (lambda: m.guess(0, "0123", 1), WrongPhase),
        (lambda: m.set_secret(0, "01234", "s", 1), InvalidCode),
    ]:
        with pytest.raises(error):
            action()
        assert snapshot(m) == before
    m.set_secret(0, "0123", "s", 1)
    before = snapshot(m)
    with pytest.raises(AlreadySet):
        m.set_secret(0, "4567", "s", 2)
    assert snapshot(m) == before
    m.set_secret(1, "4567", "s", 2)
    before = snapshot(m)
    with pytest.raises(InvalidCode):
        m.guess(0, "11", 3)
    with pytest.raises(AlreadySet):  # the doc's promise: already_set, also once play started
        m.set_secret(1, "0123", "s", 3)
    assert snapshot(m) == before


@pytest.mark.parametrize(
    ("a", "b", "winner"),
    [
        (["4567"], ["0123"], None),  # both solve in round 1: draw
        (["4567"], ["9876"], 0),
        (["9876", "8765", "4567"], ["9876", "0123"], 1),
    ],
)
def test_lockstep_race(a: list[str], b: list[str], winner: int | None) -> None:
    m = started()
    for i in range(max(len(a), len(b))):
        if m.finished:
            break
        m.guess(0, a[i], 10 + i)
        assert not m.finished
        m.guess(1, b[i], 10 + i)
    assert m.finished and m.result is not None
    assert m.result["winner"] == winner
    assert m.result["reason"] == "solved"
    last = m.events[-1]
    assert last["secrets"] == list(SECRETS)
    assert all(
        verify(c, s, t) for c, s, t in zip(last["commitments"], last["secrets"], last["salts"])
    )


def test_lockstep_one_guess_per_round_and_hidden_until_round() -> None:
    m = started()
    ev = m.guess(0, "0123", 1)
    assert [e["kind"] for e in ev] == ["guess"]
    with pytest.raises(NotYourTurn):
        m.guess(0, "0124", 2)
    own, opp, spec = m.view(ev[0], 0), m.view(ev[0], 1), m.view(ev[0], "spectator")
    assert own is not None and "bulls" not in own and own["guess"] == "0123"
    assert opp is not None and "guess" not in opp and "bulls" not in opp
    assert spec is not None and "guess" not in spec
    ev = m.guess(1, "0123", 3)
    assert [e["kind"] for e in ev] == ["guess", "round", "finished"]
    assert ev[1]["results"] == [["0123", 0, 0], ["0123", 4, 0]]
    assert m.finished and m.result is not None and m.result["winner"] == 1


def test_free_mode_ends_when_outcome_is_fixed() -> None:
    m = started(MatchConfig(pacing="free"))
    for g in ("0123", "4512", "4567"):
        m.guess(0, g, 1)  # ann solves on guess 3
    assert not m.finished
    m.guess(1, "9876", 2)
    m.guess(1, "5678", 3)
    assert not m.finished  # bob can still draw on guess 3
    with pytest.raises(NotYourTurn):
        m.guess(0, "0123", 3)
    m.guess(1, "8901", 4)
    assert m.finished and m.result == {
        "winner": 0,
        "reason": "solved",
        "counts": [3, 3],
        "solved": [True, False],
    }


def test_free_mode_faster_opponent_wins_after_catching_up() -> None:
    m = started(MatchConfig(pacing="free"))
    m.guess(1, "0123", 1)  # bob solves on guess 1, but ann could still draw with her first
    assert not m.finished
    m.guess(0, "9876", 2)
    assert m.finished and m.result is not None and m.result["winner"] == 1
    m = started(MatchConfig(pacing="free"))
    m.guess(0, "9876", 1)
    m.guess(0, "5678", 1)
    m.guess(1, "0123", 1)  # bob solves in 1 while ann has 2 guesses: decided at once
    assert m.finished and m.result is not None and m.result["winner"] == 1


def test_free_mode_visibility_respects_show_guesses() -> None:
    m = started(MatchConfig(pacing="free", show_guesses=False))
    ev = m.guess(0, "4561", 1)[0]
    assert m.view(ev, 0) == ev
    opp = m.view(ev, 1)
    assert opp is not None and "guess" not in opp and (opp["bulls"], opp["cows"]) == (3, 0)
    spec = m.view(ev, "spectator")
    assert spec is not None and spec["guess"] == "4561"


def test_no_view_leaks_a_secret_before_the_end() -> None:
    m = started(MatchConfig(pacing="free"))
    m.guess(0, "9876", 1)
    for event in m.events:
        for viewer in (0, 1, "spectator"):
            seen = m.view(event, viewer)
            assert seen is not None
            if event["kind"] == "secret" and viewer != event["seat"]:
                assert "secret" not in seen and "salt" not in seen
    assert m.summary(1)["seats"][0].get("secret") is None
    assert m.summary("spectator")["seats"][1].get("secret") is None


def test_guess_cap_draw_in_lockstep_and_free() -> None:
    for pacing in ("lockstep", "free"):
        m = started(MatchConfig(pacing=pacing, guess_cap=2))
        for _ in range(2):
            m.guess(0, "9876", 1)
            m.guess(1, "9876", 1)
        assert m.finished and m.result is not None
        assert (m.result["winner"], m.result["reason"]) == (None, "guess_cap")


def test_guess_cap_one_solves_other_capped() -> None:
    m = started(MatchConfig(pacing="free", guess_cap=2))
    m.guess(0, "9876", 1)
    m.guess(0, "8765", 1)  # ann capped
    assert not m.finished  # bob may still solve (win) or cap (draw)
    m.guess(1, "9876", 1)
    m.guess(1, "0123", 1)
    assert m.result is not None and (m.result["winner"], m.result["reason"]) == (1, "solved")


def test_resign_is_a_loss_and_finished_match_never_changes() -> None:
    m = started()
    m.resign(1, 5)
    assert m.result is not None and (m.result["winner"], m.result["reason"]) == (0, "resign")
    before = snapshot(m)
    for action in (
        lambda: m.guess(0, "4567", 6),
        lambda: m.resign(0, 6),
    ):
        with pytest.raises(MatchFinished):
            action()
    assert m.tick(10**9) == [] and m.disconnect(0, 7) == [] and m.resume_clocks(8) == []
    assert snapshot(m) == before


def test_per_guess_clock_timeout_forfeits() -> None:
    m = started(MatchConfig(clock_guess_ms=10_000), now=1000)
    assert m.next_deadline() == 11_000
    assert m.tick(10_999) == []
    m.guess(0, "9876", 5000)  # ann moves; bob still owes round 1
    assert m.next_deadline() == 11_000
    ev = m.tick(11_000)
    assert [e["kind"] for e in ev] == ["timeout", "finished"]
    assert ev[0]["seat"] == 1 and ev[0]["clock"] == "guess"
    assert m.result is not None and (m.result["winner"], m.result["reason"]) == (0, "timeout")


def test_total_clock_is_charged_only_while_owing_a_move() -> None:
    m = started(MatchConfig(clock_total_ms=30_000), now=0)
    m.guess(0, "9876", 10_000)  # ann owes nothing until bob's guess completes the round
    assert m.seats[0].clock_left == 20_000 and m.seats[0].running_since is None
    m.guess(1, "9876", 25_000)
    assert m.seats[0].clock_left == 20_000 and m.seats[1].clock_left == 5_000
    assert m.next_deadline() == 30_000  # bob has 5 s left from the round's reveal at 25 s
    ev = m.tick(30_000)
    assert ev[0]["seat"] == 1 and ev[0]["clock"] == "total"
    assert m.result is not None and m.result["winner"] == 0


def test_secret_timeout() -> None:
    m, _ = Match.create("m1", ("ann", "bob"), MatchConfig(secret_ms=5_000), 0)
    m.set_secret(0, "0123", "s", 100)
    ev = m.tick(5_000)
    assert ev[0]["seat"] == 1 and ev[0]["clock"] == "secret"
    assert m.result is not None and (m.result["winner"], m.result["reason"]) == (0, "timeout")
    m, _ = Match.create("m2", ("ann", "bob"), MatchConfig(secret_ms=5_000), 0)
    m.tick(5_000)
    assert m.result is not None and m.result["winner"] is None


def test_disconnect_grace_window() -> None:
    m = started(MatchConfig(grace_ms=60_000))
    assert [e["kind"] for e in m.disconnect(0, 1_000)] == ["away"]
    assert m.disconnect(0, 1_500) == []
    assert m.next_deadline() == 61_000
    assert [e["kind"] for e in m.reconnect(0, 30_000)] == ["back"]
    assert m.next_deadline() is None
    m.disconnect(1, 40_000)
    ev = m.tick(100_000)
    assert ev[-1]["reason"] == "disconnect" and ev[-1]["winner"] == 0


def test_restart_does_not_charge_downtime() -> None:
    m = started(MatchConfig(clock_total_ms=60_000, pacing="free", grace_ms=30_000), now=0)
    m.guess(0, "9876", 10_000)  # ann: 50 s left, running again from 10 s
    # The server dies at 12 s (last event at 10 s) and comes back at 500 s.
    log = list(m.events)
    again = Match.replay(log)
    again.resume_clocks(500_000)
    assert again.seats[0].clock_left == 50_000 and again.seats[0].running_since == 500_000
    assert again.seats[1].clock_left == 50_000  # bob was charged up to the last event only
    assert not again.seats[0].connected  # everyone must come back within the grace window
    assert again.next_deadline() == 530_000
    again.reconnect(0, 501_000)
    again.reconnect(1, 502_000)
    assert again.next_deadline() == 550_000


def test_replay_reproduces_state_exactly() -> None:
    m = started(MatchConfig(pacing="free", clock_total_ms=100_000))
    for i, g in enumerate(["9876", "4512", "4567"]):
        m.guess(0, g, 100 * i)
        m.guess(1, g, 100 * i + 50)
    m.disconnect(1, 900)
    again = Match.replay(m.events)
    assert snapshot(again) == snapshot(m)
    with pytest.raises(ValueError):
        Match.replay(m.events[1:])
    with pytest.raises(ValueError):
        Match.replay(m.events[:2] + m.events[3:])


def test_a_match_without_its_log_in_memory_is_the_same_match() -> None:
    """The server's matches forget events once applied; state, seq and views must not differ."""
    config = MatchConfig(pacing="free", clock_total_ms=100_000)
    kept, _ = Match.create("m1", ("ann", "bob"), config, 0)
    lean, _ = Match.create("m1", ("ann", "bob"), config, 0, keep_log=False)
    for m in (kept, lean):
        m.set_secret(0, SECRETS[0], "s0", 1)
        m.set_secret(1, SECRETS[1], "s1", 2)
        for i, g in enumerate(["9876", "4512", "4567"]):
            m.guess(0, g, 100 * i)
            m.guess(1, g, 100 * i + 50)
    assert lean.events == [] and lean.seq == kept.seq == len(kept.events)
    assert snapshot(lean) == snapshot(kept)
    assert lean.created_at == kept.created_at == 0 and lean.last_at == kept.last_at
    replayed = Match.replay(kept.events, keep_log=False)
    assert snapshot(replayed) == snapshot(kept) and replayed.events == []
    assert replayed.config is kept.config  # one shared config object per distinct config


def test_config_round_trips() -> None:
    c = MatchConfig(pacing="free", guess_cap=10, clock_guess_ms=10_000, show_guesses=False)
    assert MatchConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError):
        MatchConfig(pacing="turbo")


@pytest.mark.parametrize("pacing", ["lockstep", "free"])
def test_numbered_guesses_take_their_numbers_once(pacing: str) -> None:
    m = started(MatchConfig(pacing=pacing))
    assert not m.repeat_of(0, "5678", 1)  # not taken yet: a new guess
    m.guess(0, "5678", 1, n=1)
    before = snapshot(m)
    assert m.repeat_of(0, "5678", 1)  # the same guess again: a retry, answered, not played
    with pytest.raises(GuessTaken, match=r"guess 1 was 5678.*next guess is number 2") as taken:
        m.repeat_of(0, "5679", 1)
    assert taken.value.expected == 2
    with pytest.raises(GuessTaken, match="guess 1 is already made") as again:
        m.guess(0, "5678", 2, n=1)  # guess() itself never plays a taken number, even the same
    assert again.value.expected == 2
    with pytest.raises(GuessTaken):
        m.repeat_of(0, "x", 1)  # not even a code: not the guess that was made
    assert snapshot(m) == before
    m.guess(1, "0129", 3, n=1)  # the other seat numbers its own guesses
    with pytest.raises(GuessAhead, match="expected guess number 2, got 3") as ahead:
        m.guess(0, "8901", 4, n=3)
    assert ahead.value.expected == 2
    assert not m.repeat_of(0, "8901", 3)  # ahead is not taken: guess() refuses it
    m.guess(0, "8901", 5, n=2)
    assert [len(s.guesses) for s in m.seats] == [2, 1]


def test_without_a_number_guesses_are_played_as_before() -> None:
    m = started(MatchConfig(pacing="free"))
    m.guess(0, "5678", 1)
    m.guess(0, "5678", 2)  # the same code twice, unnumbered: two guesses, as ever
    assert m.seats[0].count == 2


def test_the_guess_that_ended_a_match_can_be_retried() -> None:
    m = started()
    m.guess(0, "4567", 1, n=1)
    m.guess(1, "8901", 2, n=1)
    assert m.finished
    assert m.repeat_of(0, "4567", 1) and m.repeat_of(1, "8901", 1)
    with pytest.raises(GuessTaken):
        m.repeat_of(0, "4568", 1)
    with pytest.raises(MatchFinished):
        m.guess(0, "4568", 3, n=2)


def test_a_retry_is_recognised_as_the_rules_write_it() -> None:
    rules = {"game": "moo", "length": 4, "alphabet": "0123456789ABCDEF",
             "repeats_in_guess": False}
    m = started(MatchConfig(rules=rules_from_dict(rules)))
    m.guess(0, "abcd", 1, n=1)
    assert m.seats[0].guesses[0][0] == "ABCD"
    assert m.repeat_of(0, "aBcD", 1)
