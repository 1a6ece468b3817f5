"""Stateful property tests of the match state machine against an independent oracle.

Hypothesis drives both seats through any interleaving of valid and invalid secrets, guesses,
resignations, clock ticks, disconnects, reconnects and server restarts (``replay`` of the log
followed by ``resume_clocks``). After every step we check the promises the server relies on:

* a command either returns events that extend the log, or raises a specific ``MooError``
  having changed nothing (any other exception is a bug);
* guess counts and ``seq`` only grow, the log is append-only and ``at`` never runs backwards;
* the result follows the race rule, judged by an oracle written here from the rule's definition
  ("the match ends as soon as no continuation can change the outcome"), not from the code;
* a finished match never changes again;
* ``Match.replay(events)`` reproduces the state exactly;
* no event as ``view``-ed by a seat or a spectator, and no ``summary``, shows the opponent's
  secret or any salt before ``finished``.

The CI profile is bounded and derandomized so a red run is reproducible and never flaky.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import event as note_event
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from moo.errors import (
    AlreadySet,
    InvalidCode,
    MatchFinished,
    MooError,
    NotYourSeat,
    NotYourTurn,
    WrongPhase,
)
from moo.match import Event, Match, MatchConfig

#: Codes a seat picks secrets and guesses from: small, so solving and collisions happen often.
VALID = ("0123", "4567", "8901", "3210", "9876")
#: Strings the rules must refuse, each for a different reason.
INVALID = (
    "0012", "012", "01234", "abcd", "", " 0 1", " 3210", "0123\t", "١٢٣٤", "0123\x00", "😀123",
)
SEATS = st.sampled_from([0, 1, 0, 1, 2, -1])
NEVER = float("inf")


def oracle_score(secret: str, guess: str) -> tuple[int, int]:
    """Bulls and cows by the textbook multiset definition (distinct symbols)."""
    bulls = sum(a == b for a, b in zip(secret, guess))
    return bulls, len(set(secret) & set(guess)) - bulls


def oracle_valid(code: str) -> bool:
    text = code  # nothing is stripped: whitespace is a symbol outside the alphabet
    return len(text) == 4 and all(c in "0123456789" for c in text) and len(set(text)) == 4


def race_outcome(
    guesses: list[list[str]], secrets: list[str], cap: int
) -> tuple[bool, int | None, str]:
    """(decided, winner, reason) by brute force over every possible future.

    Each seat's final solve count is one of: already fixed (solved, or capped = never), or any
    of count+1..cap, or never. The outcome is decided when every combination of futures gives
    the same result; a result compares solve counts (lower wins, equal draws).
    """
    futures: list[list[float]] = []
    for seat in (0, 1):
        mine, target = guesses[seat], secrets[1 - seat]
        hit = next((i + 1 for i, g in enumerate(mine) if g == target), None)
        if hit is not None:
            futures.append([hit])
        elif len(mine) >= cap:
            futures.append([NEVER])
        else:
            futures.append([*range(len(mine) + 1, cap + 1), NEVER])
    results: set[tuple[int | None, str]] = set()
    for f0, f1 in itertools.product(*futures):
        if f0 == f1:
            results.add((None, "guess_cap" if f0 == NEVER else "solved"))
        else:
            results.add((0 if f0 < f1 else 1, "solved"))
    if len(results) == 1:
        winner, reason = results.pop()
        return True, winner, reason
    return False, None, ""


configs = st.builds(
    MatchConfig,
    pacing=st.sampled_from(["lockstep", "free"]),
    guess_cap=st.integers(1, 6),
    clock_total_ms=st.one_of(st.none(), st.none(), st.integers(50, 900)),
    clock_guess_ms=st.one_of(st.none(), st.none(), st.integers(20, 300)),
    secret_ms=st.one_of(st.none(), st.integers(50, 400)),
    grace_ms=st.one_of(st.integers(0, 400), st.integers(1000, 5000)),
    show_guesses=st.booleans(),
)


class MatchMachine(RuleBasedStateMachine):
    """One match, both seats and the server's clock, against the oracle's own bookkeeping."""

    def __init__(self) -> None:
        super().__init__()
        self.match: Match
        self.now = 0
        self.log: list[Event] = []
        self.secrets: list[str | None] = [None, None]
        self.salts: list[str] = []
        self.guesses: list[list[str]] = [[], []]
        self.away_since: list[int | None] = [None, None]
        self.frozen: Any = None
        self.restarts = 0

    # -- helpers ----------------------------------------------------------------------------
    def snapshot(self) -> Any:
        m = self.match
        return (
            m.seq,
            m.phase,
            m.result,
            m.summary(0),
            m.summary(1),
            m.summary("spectator"),
            m.next_deadline(),
            [json.dumps(e, sort_keys=True) for e in m.events],
        )

    def run(self, command: Any, *args: Any) -> list[Event] | MooError:
        """Run one command; a refusal must be a MooError that left everything as it was."""
        before = self.snapshot()
        try:
            events: list[Event] = command(*args)
        except MooError as exc:
            assert type(exc).code not in ("error", "match_error", "bad_message"), exc
            assert self.snapshot() == before, f"{exc!r} changed the match"
            return exc
        if self.frozen is not None:
            assert events == [], "a finished match produced events"
        self.check_new_events(events)
        return events

    def check_new_events(self, events: list[Event]) -> None:
        m = self.match
        assert m.events[: len(self.log)] == self.log, "the log was rewritten"
        assert m.events[len(self.log) :] == events, "returned events are not the new log tail"
        for event in events:
            assert event["seq"] == len(self.log) + 1
            assert not self.log or event["at"] >= self.log[-1]["at"], "time ran backwards"
            if event["kind"] != "finished":
                self.check_no_leak(event)
            self.log.append(event)
        if m.finished and self.frozen is None:
            assert events and events[-1]["kind"] == "finished"
            assert m.result is not None
            note_event(f"finished: {m.result['reason']}")
            assert sum(e["kind"] == "finished" for e in m.events) == 1
            self.frozen = self.snapshot()

    def check_no_leak(self, event: Event) -> None:
        """Before ``finished``: no salt anywhere, the opponent's secret only as a guess text."""
        for viewer in (0, 1, "spectator"):
            seen = self.match.view(event, viewer)
            if seen is None:
                continue
            text = json.dumps(seen)
            for salt in self.salts:
                assert salt not in text, f"salt leaked to {viewer} in {seen}"
            if event["kind"] == "secret" and viewer != event["seat"]:
                assert "secret" not in seen, f"secret shown to {viewer}: {seen}"
            hidden = [s for i, s in enumerate(self.secrets) if s is not None and viewer != i]
            own = self.secrets[viewer] if isinstance(viewer, int) else None
            allowed = _guess_texts(seen)
            if event["kind"] == "secret" and viewer == event["seat"]:
                allowed.add(seen.get("secret"))
            for secret in hidden:
                if secret == own:
                    continue  # same code on both sides: showing your own is not a leak
                for value in _strings(seen):
                    assert secret not in value or value in allowed, (
                        f"{viewer} sees secret {secret} in {seen}"
                    )
            if self.match.config.pacing == "lockstep" and event["kind"] == "guess":
                assert "bulls" not in seen and "cows" not in seen, "lockstep response early"

    def when(self, delta: int) -> int:
        self.now += delta
        return self.now

    # -- setup ------------------------------------------------------------------------------
    @initialize(config=configs, start=st.integers(0, 10**6))
    def create(self, config: MatchConfig, start: int) -> None:
        self.now = start
        self.match, events = Match.create("m", ("ann", "bob"), config, start)
        self.check_new_events(events)

    # -- both seats' actions ----------------------------------------------------------------
    @rule(
        seat=SEATS,
        code=st.sampled_from(VALID + INVALID),
        delta=st.integers(-20, 120),
    )
    def set_secret(self, seat: int, code: str, delta: int) -> None:
        m = self.match
        salt = f"salt-{len(self.salts)}-{seat}-q"
        self.salts.append(salt)  # known before the call, so a leak of it is caught at once
        was_finished = self.frozen is not None
        outcome = self.run(m.set_secret, seat, code, salt, self.when(delta))
        if seat not in (0, 1):
            assert isinstance(outcome, NotYourSeat)
            return
        if was_finished:
            assert isinstance(outcome, MatchFinished)
        elif self.secrets[seat] is not None:  # before or after play started
            assert isinstance(outcome, AlreadySet)
        elif not oracle_valid(code):
            assert isinstance(outcome, InvalidCode)
        else:
            assert isinstance(outcome, list), outcome
            self.secrets[seat] = code
            kinds = [e["kind"] for e in outcome]
            assert kinds == (["secret", "started"] if all(self.secrets) else ["secret"])

    @rule(
        seat=SEATS,
        pick=st.sampled_from(["opponent", "own", "valid", "invalid"]),
        index=st.integers(0, 20),
        delta=st.integers(-20, 120),
    )
    def guess(self, seat: int, pick: str, index: int, delta: int) -> None:
        m = self.match
        if pick == "opponent" and seat in (0, 1) and self.secrets[1 - seat]:
            code = str(self.secrets[1 - seat])
        elif pick == "own" and seat in (0, 1) and self.secrets[seat]:
            code = str(self.secrets[seat])
        elif pick == "invalid":
            code = INVALID[index % len(INVALID)]
        else:
            code = VALID[index % len(VALID)]
        counts = [len(g) for g in self.guesses]
        expected = self.expected_guess_refusal(seat, code)
        outcome = self.run(m.guess, seat, code, self.when(delta))
        if expected is not None:
            assert isinstance(outcome, expected), (outcome, expected)
            return
        assert isinstance(outcome, list), outcome
        self.guesses[seat].append(code)
        event = outcome[0]
        assert event["kind"] == "guess" and event["seat"] == seat
        assert event["n"] == counts[seat] + 1 == len(self.guesses[seat])
        opp_secret = self.secrets[1 - seat]
        assert opp_secret is not None
        assert (event["bulls"], event["cows"]) == oracle_score(opp_secret, code)
        known = [s for s in self.secrets if s is not None]
        decided, winner, reason = race_outcome(self.guesses, known, m.config.guess_cap)
        if decided:
            assert m.finished, f"outcome fixed ({winner}, {reason}) but match goes on"
            assert m.result is not None
            assert (m.result["winner"], m.result["reason"]) == (winner, reason)
            assert m.result["counts"] == [len(g) for g in self.guesses]
        else:
            assert not m.finished, f"finished too early: {m.result}"

    @rule(seat=st.sampled_from([0, 1]), code=st.sampled_from(VALID), delta=st.integers(0, 40))
    def set_secret_valid(self, seat: int, code: str, delta: int) -> None:
        """A well-formed secret (the noisy rule above rarely produces one)."""
        self.set_secret(seat, code, delta)

    @rule(
        seat=st.sampled_from([0, 1]),
        pick=st.sampled_from(["opponent", "valid", "valid"]),
        index=st.integers(0, 20),
        delta=st.integers(0, 40),
    )
    def guess_valid(self, seat: int, pick: str, index: int, delta: int) -> None:
        """A well-formed guess by a real seat, solving about a third of the time."""
        self.guess(seat, pick, index, delta)

    def expected_guess_refusal(self, seat: int, code: str) -> type[MooError] | None:
        if seat not in (0, 1):
            return NotYourSeat
        if self.frozen is not None:
            return MatchFinished
        if not all(self.secrets):
            return WrongPhase
        mine = self.guesses[seat]
        if self.secrets[1 - seat] in mine or len(mine) >= self.match.config.guess_cap:
            return NotYourTurn
        lockstep = self.match.config.pacing == "lockstep"
        if lockstep and len(mine) > min(len(g) for g in self.guesses):
            return NotYourTurn
        if not oracle_valid(code):
            return InvalidCode
        return None

    @rule(seat=SEATS, delta=st.integers(0, 120), really=st.integers(0, 5))
    def resign(self, seat: int, delta: int, really: int) -> None:
        """Mostly a refused resign (bad seat), so matches also get to end by the race."""
        if really and seat in (0, 1):
            seat = 2
        was_finished = self.frozen is not None
        outcome = self.run(self.match.resign, seat, self.when(delta))
        if seat not in (0, 1):
            assert isinstance(outcome, NotYourSeat)
        elif was_finished:
            assert isinstance(outcome, MatchFinished)
        else:
            assert isinstance(outcome, list), outcome
            assert [e["kind"] for e in outcome] == ["resign", "finished"]
            assert outcome[-1]["winner"] == 1 - seat and outcome[-1]["reason"] == "resign"

    @rule(seat=st.sampled_from([0, 1]), delta=st.integers(0, 120))
    def disconnect(self, seat: int, delta: int) -> None:
        was_away, was_finished = self.away_since[seat] is not None, self.frozen is not None
        outcome = self.run(self.match.disconnect, seat, self.when(delta))
        assert isinstance(outcome, list)
        if was_finished or was_away:
            assert outcome == []
        else:
            assert [e["kind"] for e in outcome] == ["away"]
            self.away_since[seat] = outcome[0]["at"]

    @rule(seat=st.sampled_from([0, 1]), delta=st.integers(0, 120))
    def reconnect(self, seat: int, delta: int) -> None:
        was_away, was_finished = self.away_since[seat] is not None, self.frozen is not None
        outcome = self.run(self.match.reconnect, seat, self.when(delta))
        assert isinstance(outcome, list)
        if was_finished or not was_away:
            assert outcome == []
        else:
            assert [e["kind"] for e in outcome] == ["back"]
            self.away_since[seat] = None

    @rule(delta=st.one_of(st.integers(0, 40), st.integers(0, 700)))
    def tick(self, delta: int) -> None:
        m = self.match
        deadline = m.next_deadline()
        now = self.when(delta)
        outcome = self.run(m.tick, now)
        assert isinstance(outcome, list)
        if deadline is None or now < deadline:
            assert outcome == [], f"tick before the deadline {deadline} did {outcome}"
            return
        assert self.frozen is not None and outcome, "a due deadline did not end the match"
        timeouts = [e for e in outcome if e["kind"] == "timeout"]
        final = outcome[-1]
        assert timeouts and final["kind"] == "finished"
        losers = [e["seat"] for e in timeouts]
        assert len(set(losers)) == len(losers)
        assert final["winner"] == (1 - losers[0] if len(losers) == 1 else None)
        for e in timeouts:
            seat, clock = e["seat"], e["clock"]
            if clock == "grace":
                since = self.away_since[seat]
                assert since is not None, "grace timeout for a connected seat"
                assert now >= since + m.config.grace_ms, "grace window cut short"
                assert final["reason"] == "disconnect"
            elif clock == "secret":
                assert self.secrets[seat] is None, "secret timeout for a seat that set one"
            else:
                assert final["reason"] == "timeout"
                assert self.secrets[1 - seat] not in self.guesses[seat], "solved seat timed out"

    @rule(downtime=st.integers(0, 10_000))
    def restart(self, downtime: int) -> None:
        """The process dies and comes back: the log is all that survives."""
        stored = json.loads(json.dumps(self.log))  # what the database would hand back
        before = self.snapshot()
        last = self.log[-1]["at"]
        owed = [_left_at(s, last) for s in self.match.seats]
        self.match = Match.replay(stored)
        assert self.snapshot() == before, "replay of the stored log differs from the live match"
        was_finished = self.frozen is not None
        outcome = self.run(self.match.resume_clocks, self.when(downtime))
        self.restarts += 1
        if was_finished:
            assert outcome == []
            return
        assert isinstance(outcome, list) and [e["kind"] for e in outcome] == ["resumed"]
        at = outcome[0]["at"]
        self.away_since = [at, at]
        for seat, left in zip(self.match.seats, owed):
            # Downtime is not charged: the clock stands where the last logged event left it.
            assert _left_at(seat, at) == left, (seat, left)
            assert not seat.connected

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def replay_reproduces_state(self) -> None:
        m = self.match
        again = Match.replay(m.events)
        assert again.seats == m.seats
        assert (again.phase, again.result, again.rounds_done) == (m.phase, m.result, m.rounds_done)
        assert (again.secret_deadline, again.last_at) == (m.secret_deadline, m.last_at)
        assert again.next_deadline() == m.next_deadline()

    @invariant()
    def counts_match_oracle(self) -> None:
        assert [s.count for s in self.match.seats] == [len(g) for g in self.guesses]

    @invariant()
    def finished_never_changes(self) -> None:
        if self.frozen is not None:
            assert self.snapshot() == self.frozen

    @invariant()
    def summaries_hide_secrets(self) -> None:
        m = self.match
        if m.finished:
            return
        for viewer in (0, 1, "spectator"):
            text = json.dumps(m.summary(viewer))
            for salt in self.salts:
                assert salt not in text
            for i, seat in enumerate(m.summary(viewer)["seats"]):
                if viewer != i:
                    assert seat.get("secret") is None, f"{viewer} sees seat {i}'s secret"


def _left_at(seat: Any, at: int) -> int | None:
    """A seat's total clock at ``at``: what it had, less the time it has owed a move since."""
    if seat.clock_left is None:
        return None
    if seat.running_since is None:
        return int(seat.clock_left)
    return int(seat.clock_left - max(0, at - seat.running_since))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def _guess_texts(seen: Event) -> set[Any]:
    """Where a secret may legitimately appear: as somebody's guess text."""
    if seen["kind"] == "guess":
        return {seen.get("guess")}
    if seen["kind"] == "round":
        return {row[0] for row in seen["results"]}
    return set()


MatchMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=50,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMatchMachine = MatchMachine.TestCase


def test_oracle_itself() -> None:
    """The oracle must be able to say both "decided" and "not yet", or it proves nothing."""
    secrets = ["0123", "4567"]
    assert race_outcome([["4567"], []], secrets, 6)[0] is False  # seat 1 may still draw
    assert race_outcome([["4567"], ["9876"]], secrets, 6) == (True, 0, "solved")
    assert race_outcome([["4567"], ["0123"]], secrets, 6) == (True, None, "solved")
    assert race_outcome([["9876"], ["9876"]], secrets, 1) == (True, None, "guess_cap")
    assert race_outcome([["9876"], []], secrets, 1)[0] is False
    assert race_outcome([["9876", "8765"], ["0123"]], secrets, 6) == (True, 1, "solved")
    assert oracle_score("0123", "3210") == (0, 4)
    assert oracle_valid("0123") and not oracle_valid(" 0123") and not oracle_valid("0012")


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    pacing=st.sampled_from(["lockstep", "free"]),
    cap=st.integers(1, 8),
    secrets=st.permutations(VALID).map(lambda p: [p[0].strip(), p[1].strip()]),
    steps=st.lists(
        st.tuples(st.sampled_from([0, 1]), st.sampled_from(["opponent", "other", "miss"])),
        max_size=40,
    ),
)
def test_race_rule_matches_oracle(
    pacing: str, cap: int, secrets: list[str], steps: list[tuple[int, str]]
) -> None:
    """Only guesses, no clocks: every finish (and every non-finish) is the oracle's call."""
    m, _ = Match.create("m", ("ann", "bob"), MatchConfig(pacing=pacing, guess_cap=cap), 0)
    m.set_secret(0, secrets[0], "s0", 0)
    m.set_secret(1, secrets[1], "s1", 0)
    guesses: list[list[str]] = [[], []]
    for t, (seat, pick) in enumerate(steps, start=1):
        code = {"opponent": secrets[1 - seat], "other": secrets[seat], "miss": "9876"}[pick]
        if code == secrets[1 - seat] and pick != "opponent":
            code = "5432"
        before = m.seq
        try:
            m.guess(seat, code, t)
        except (NotYourTurn, MatchFinished):
            assert m.seq == before
            mine = guesses[seat]
            assert (
                m.finished
                or secrets[1 - seat] in mine
                or len(mine) >= cap
                or (pacing == "lockstep" and len(mine) > len(guesses[1 - seat]))
            )
            continue
        guesses[seat].append(code)
        decided, winner, reason = race_outcome(guesses, secrets, cap)
        assert m.finished == decided, (guesses, m.result)
        if decided:
            assert m.result is not None
            assert (m.result["winner"], m.result["reason"]) == (winner, reason)
            note_event(f"race: {reason} winner={winner}")
