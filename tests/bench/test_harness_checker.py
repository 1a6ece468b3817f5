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
