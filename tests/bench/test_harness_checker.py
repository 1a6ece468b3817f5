"""bench/harness/checker.py's rules that need no cluster: a guess played twice."""

from __future__ import annotations

from typing import Any

from bench.harness.checker import check


def _log(*guesses: tuple[int, str]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"seq": 1, "kind": "started"}]
    for seat, guess in guesses:
        events.append({"seq": len(events) + 1, "kind": "guess", "seat": seat, "guess": guess,
                       "n": 1 + sum(1 for e in events if e.get("seat") == seat)})
    events.append({"seq": len(events) + 1, "kind": "finished", "reason": "solved"})
    return events


def test_a_guess_in_the_log_twice_for_one_seat_is_doubled() -> None:
    logs = {
        "m1": _log((0, "0123"), (1, "0123"), (0, "4567")),  # the same guess, two seats: fine
        "m2": _log((0, "0123"), (0, "0123"), (1, "4567")),  # seat 0 played it twice
    }
    v = check([], logs, [])
    assert v.doubled == ["m2: seat 0 guessed 0123 twice (seq 3)"]
    assert v.counts()["doubled"] == 1 and not v.ok()


def test_a_repeat_is_counted_once_per_event_and_told_once_per_connection() -> None:
    from bench.harness.player import Conn, Follower, Received

    log = [{**e, "at": 100_000} for e in _log((0, "0123"), (1, "4567"))]
    conn = Conn(node="b", opened=100.0, welcomed=100.01, following_since=100.02)
    for t, seq in ((100.1, 1), (100.2, 2), (100.3, 1), (100.4, 2), (100.5, 3), (100.6, 4)):
        conn.events.append(Received(seq, log[seq - 1]["kind"], t))
    conn.notes.append((100.25, "match", "m1", None))
    follower = Follower("p1", 0, "m1", [conn], applied=[1, 2, 3, 4])
    v = check([follower], {"m1": log}, [])
    assert v.counts()["repeats"] == 2  # seqs 1 and 2, each a second time
    assert len(v.repeat_stories) == 1 and not v.ok()
    story = v.repeat_stories[0]
    # in order of arrival, in seconds since the connection opened: the match announced again
    # between the two copies
    assert "welcomed 0.010, following 0.020" in story
    assert "0.100:1 0.200:2 0.250:<match m1 ref=None> 0.300:1 0.400:2" in story
