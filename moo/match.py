"""The sans-I/O match state machine: the race to four bulls between two seats.

A match is an append-only log of events; its state is the replay of that log. Commands
(:meth:`Match.set_secret`, :meth:`Match.guess`, ...) validate an action against the current state,
and either raise a :class:`~moo.errors.MooError` having changed nothing, or return the new events,
already applied. The caller (the server) makes those events durable, then fans out
:meth:`Match.view` of each event to whoever may see it. Time is always passed in (``now`` in
milliseconds), never read, so tests drive clocks without sleeping and a replay after a restart
reproduces the exact state.

Nothing here holds a connection, a task or a lock: a match serialises to its events, which is
what lets matches survive restarts today and move between server nodes later.

Event kinds (every event has ``seq``, ``kind`` and ``at``):

=========== ============================================ ==========================================
kind        fields                                        who sees what
=========== ============================================ ==========================================
created     players, config                               everyone
secret      seat, secret, salt, commitment                owner sees its secret; others only seat
started     commitments                                   everyone (published once both are set)
guess       seat, n, guess, bulls, cows                   free: everyone (the opponent sees the
                                                          guess text only if ``show_guesses``);
                                                          lockstep: the guesser sees its guess,
                                                          others see the seat and n, nobody sees
                                                          the response before ``round``
round       n, results [[guess, bulls, cows] x2]          everyone (lockstep reveal)
away / back seat                                          everyone
resumed     (nothing)                                     everyone: the server restarted
resign      seat                                          everyone
timeout     seat, clock ("guess", "total", "secret",      everyone
            "grace")
finished    winner, reason, counts, solved, secrets,      everyone: secrets and salts are revealed
            salts, commitments
=========== ============================================ ==========================================
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from moo.commitment import commit
from moo.errors import (
    AlreadySet,
    GuessAhead,
    GuessTaken,
    InvalidCode,
    MatchFinished,
    NotYourSeat,
    NotYourTurn,
    WrongPhase,
)
from moo.mastermind import MastermindRules, mastermind_score
from moo.rules import DEFAULT_RULES, Response, Rules, score
from moo.variants import rules_from_dict
from moo.words import WordRules

__all__ = [
    "PACINGS",
    "REASONS",
    "Event",
    "Match",
    "MatchConfig",
    "Viewer",
]

Event = dict[str, Any]
Viewer = int | Literal["spectator"]
Phase = Literal["secrets", "playing", "finished"]

PACINGS = ("lockstep", "free")
#: Why a match ended. ``solved``: the race rule decided it; ``guess_cap``: nobody solved within
#: the cap (a draw, or a loss for the side that did not solve when the other did).
REASONS = ("solved", "resign", "timeout", "disconnect", "guess_cap")

_NEVER = 1 << 62  # a guess count larger than any cap: "did not solve"


@dataclass(frozen=True)
class MatchConfig:
    """Everything that fixes how one match is played; stored in its ``created`` event."""

    #: MOO rules, Mastermind's (repeats in secrets, black/white pegs as bulls/cows) or word
    #: MOO's (a dictionary word; hits and misses, if so scored, in bulls and cows)
    rules: Rules | MastermindRules | WordRules = DEFAULT_RULES
    pacing: str = "lockstep"
    guess_cap: int = 64
    #: Per-player total thinking time (chess-style clock), or None for no total limit.
    clock_total_ms: int | None = None
    #: Per-guess limit (POTM used 10 s a guess), or None.
    clock_guess_ms: int | None = None
    #: Time each player has to set a secret once the match is created, or None.
    secret_ms: int | None = 120_000
    #: How long a dropped player may take to come back before forfeiting.
    grace_ms: int = 60_000
    #: Whether a player sees the opponent's guesses (responses and counts are always visible).
    show_guesses: bool = True
    rated: bool = True
    #: a practice match with the assistant (codes still possible, a suggested guess) allowed to
    #: both players; never rated
    assist: bool = False
    #: the hosted tournament this match is a game of (docs/protocol.md, "Tournaments")
    tournament_id: str | None = None
    #: the server set both secrets (a tournament with ``secrets: server``): no ``secret``
    server_secrets: bool = False
    #: the permanent ladder this match is a game of: its variant family as a rules spec
    #: (docs/protocol.md, "Ladder")
    ladder: str | None = None

    def __post_init__(self) -> None:
        if self.pacing not in PACINGS:
            raise ValueError(f"pacing must be one of {PACINGS}, got {self.pacing!r}")
        if not 1 <= self.guess_cap <= 10_000:
            raise ValueError("guess_cap must be 1-10000")
        for name in ("clock_total_ms", "clock_guess_ms", "secret_ms"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None")
        if self.grace_ms < 0:
            raise ValueError("grace_ms must be >= 0")
        if self.assist and self.rated:
            raise ValueError("an assisted match is a practice match: rated must be false")

    @cached_property
    def scorer(self) -> Callable[[str, str], Response]:
        """The game's scoring function, chosen once per config (no per-guess dispatch)."""
        if isinstance(self.rules, WordRules):
            return self.rules.scorer
        return mastermind_score if isinstance(self.rules, MastermindRules) else score

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["rules"] = self.rules.to_dict()
        # only a tournament's (or the ladder's) matches carry these (older clients and logs
        # never saw them)
        if self.tournament_id is None:
            del data["tournament_id"]
        if not self.server_secrets:
            del data["server_secrets"]
        if self.ladder is None:
            del data["ladder"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MatchConfig:
        fields = dict(data)
        raw = dict(fields.get("rules") or {})
        fields["rules"] = rules_from_dict(raw)
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in fields.items() if k in known})


@dataclass(slots=True)
class Seat:
    """One side of the match, as the replay of the log leaves it."""

    name: str
    secret: str | None = None
    salt: str | None = None
    commitment: str | None = None
    #: (guess, bulls, cows) in order.
    guesses: list[tuple[str, int, int]] = field(default_factory=list)
    solved_at: int | None = None
    connected: bool = True
    away_since: int | None = None
    clock_left: int | None = None
    #: When this seat's clock started running, or None while it owes no move.
    running_since: int | None = None

    @property
    def count(self) -> int:
        return len(self.guesses)


_CONFIGS: dict[str, MatchConfig] = {}


def _shared_config(data: dict[str, Any]) -> MatchConfig:
    """One :class:`MatchConfig` object per distinct configuration, however many matches use it.

    A server holds thousands of live matches with a handful of configurations between them;
    sharing the (frozen) value saves each match its own config and rules objects.
    """
    key = repr(sorted(data.items()))
    config = _CONFIGS.get(key)
    if config is None:
        config = MatchConfig.from_dict(data)
        if len(_CONFIGS) < 1000:
            _CONFIGS[key] = config
    return config


_RESULTS: dict[tuple[str, int, int], tuple[str, int, int]] = {}


def _shared_result(guess: str, bulls: int, cows: int) -> tuple[str, int, int]:
    """One tuple object per distinct (guess, bulls, cows) across all matches.

    Every live match keeps each seat's guesses; players and bots repeat the same openings and
    the same answers, so sharing the (immutable) entries saves most of a long match's
    memory. The table is bounded (about 70 000 pairs exist for 4 of 10; past the bound new
    entries are simply not shared).
    """
    key = (guess, bulls, cows)
    shared = _RESULTS.get(key)
    if shared is not None:
        return shared
    if len(_RESULTS) < 200_000:
        _RESULTS[key] = key
    return key


class Match:
    """State and rules of one match. Build with :meth:`create` or :meth:`replay`.

    With ``keep_log=False`` the match folds each event into its state and forgets it: the
    server keeps the log on disk (the store is the source of truth) and reads it back for the
    rare replay, so a long match costs memory for its state only. ``events`` is then empty.
    """

    __slots__ = (
        "_score",
        "_seq",
        "config",
        "created_at",
        "events",
        "keep_log",
        "last_at",
        "match_id",
        "phase",
        "result",
        "rounds_done",
        "seats",
        "secret_deadline",
    )

    def __init__(self, match_id: str, *, keep_log: bool = True) -> None:
        self.match_id = match_id
        self.keep_log = keep_log
        self.config = MatchConfig()
        self.seats: list[Seat] = []
        self.phase: Phase = "secrets"
        self.events: list[Event] = []
        self.result: dict[str, Any] | None = None
        self.rounds_done = 0
        self.secret_deadline: int | None = None
        self.last_at = 0
        self.created_at = 0
        self._seq = 0
        #: the game's scoring, fixed by the ``created`` event (MOO's score unless Mastermind)
        self._score: Callable[[str, str], Response] = score

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        match_id: str,
        players: tuple[str, str],
        config: MatchConfig,
        now: int,
        *,
        keep_log: bool = True,
    ) -> tuple[Match, list[Event]]:
        match = cls(match_id, keep_log=keep_log)
        event = match._emit(
            "created", now, players=list(players), config=config.to_dict(), match_id=match_id
        )
        return match, [event]

    @classmethod
    def replay(cls, events: list[Event], *, keep_log: bool = True) -> Match:
        """Rebuild a match from its log; the log is trusted (it was validated when written)."""
        if not events or events[0].get("kind") != "created":
            raise ValueError("a match log starts with a 'created' event")
        match = cls(str(events[0].get("match_id", "")), keep_log=keep_log)
        for event in events:
            if event["seq"] != match._seq + 1:
                raise ValueError(f"log gap: expected seq {match._seq + 1}, got {event['seq']}")
            match._apply(event)
        return match

    # -- queries ----------------------------------------------------------------------------
    @property
    def seq(self) -> int:
        return self._seq

    @property
    def finished(self) -> bool:
        return self.phase == "finished"

    @property
    def players(self) -> tuple[str, str]:
        return (self.seats[0].name, self.seats[1].name)

    def seat_of(self, name: str) -> int | None:
        for i, seat in enumerate(self.seats):
            if seat.name == name:
                return i
        return None

    def owes_move(self, seat: int) -> bool:
        """Whether ``seat`` is expected to guess now (its clock runs exactly then)."""
        if self.phase != "playing":
            return False
        s = self.seats[seat]
        count = len(s.guesses)
        config = self.config
        if s.solved_at is not None or count >= config.guess_cap:
            return False
        if config.pacing == "lockstep":
            return count == self.rounds_done
        return True

    def next_deadline(self) -> int | None:
        """The earliest time at which :meth:`tick` may change something."""
        deadlines = [d for d, _, _ in self._deadlines()]
        return min(deadlines) if deadlines else None

    # -- commands ---------------------------------------------------------------------------
    def set_secret(self, seat: int, secret: str, salt: str, now: int) -> list[Event]:
        self._check_seat(seat)
        self._check_live()
        if self.seats[seat].secret is not None and self.config.server_secrets:
            raise AlreadySet("the server set the secrets of this tournament match")
        if self.seats[seat].secret is not None:  # also once play has started
            raise AlreadySet("your secret is already set and cannot be changed")
        if self.phase != "secrets":
            raise WrongPhase("secrets can only be set before play starts")
        code = self.config.rules.check_secret(secret)
        if not isinstance(salt, str) or not salt:
            raise ValueError("a non-empty salt is required")
        out = [
            self._emit(
                "secret", now, seat=seat, secret=code, salt=salt, commitment=commit(code, salt)
            )
        ]
        if all(s.secret is not None for s in self.seats):
            out.append(self._emit("started", now, commitments=[s.commitment for s in self.seats]))
        return out

    def guess(self, seat: int, code: str, now: int, n: int | None = None) -> list[Event]:
        """Play ``code`` as the seat's next guess.

        ``n``, when given, is the number the client gives this guess (1 for its first): it
        must be exactly the next one. A taken number is :class:`GuessTaken`, even with the
        same code, so that nothing can make a guess count twice (a retry is recognised by
        :meth:`repeat_of` before this is called); a number past the next is
        :class:`GuessAhead`.
        """
        self._check_seat(seat)
        if self.phase == "secrets":
            raise WrongPhase("play has not started: both secrets must be set first")
        if self.phase == "finished":
            raise MatchFinished("the match is over")
        me = self.seats[seat]
        config = self.config
        count = len(me.guesses)
        if n is not None and n != count + 1:
            if n <= count:
                raise GuessTaken(
                    f"guess {n} is already made ({me.guesses[n - 1][0]}); "
                    f"your next guess is number {count + 1}",
                    expected=count + 1,
                )
            raise GuessAhead(
                f"expected guess number {count + 1}, got {n}: guess {count + 1} was never "
                "made", expected=count + 1,
            )
        lockstep = config.pacing == "lockstep"
        if me.solved_at is not None:
            raise NotYourTurn("you have already solved; waiting for your opponent")
        if count >= config.guess_cap:
            raise NotYourTurn(f"you have used all {config.guess_cap} guesses")
        if lockstep and count > self.rounds_done:
            raise NotYourTurn(f"round {count} is in: waiting for your opponent's guess")
        guess = config.rules.check_guess(code)
        opponent = self.seats[1 - seat]
        assert opponent.secret is not None
        bulls, cows = self._score(opponent.secret, guess)
        out = [
            self._emit("guess", now, seat=seat, n=count + 1, guess=guess, bulls=bulls, cows=cows)
        ]
        if lockstep and len(me.guesses) == len(opponent.guesses):
            n = self.rounds_done + 1
            results = [list(s.guesses[n - 1]) for s in self.seats]
            out.append(self._emit("round", now, n=n, results=results))
        out.extend(self._settle(now))
        return out

    def repeat_of(self, seat: int, code: str, n: int) -> bool:
        """Whether a ``guess`` numbered ``n`` is a retry of one the seat already made.

        True when guess ``n`` of ``seat`` was ``code`` (compared as the rules write it, so a
        hex guess retried in lower case is the same guess): the caller answers with that
        guess's event from the log and changes nothing. A different code under a taken
        number raises :class:`GuessTaken`. False when ``n`` is not taken yet: the request is
        a new guess for :meth:`guess`, which checks the number against the next one. Works on
        a finished match too, so that the guess that ended it can be retried.
        """
        self._check_seat(seat)
        made = self.seats[seat].guesses if self.seats else []
        if not 1 <= n <= len(made):
            return False
        taken = made[n - 1][0]
        try:
            same = self.config.rules.check_guess(code) == taken
        except InvalidCode:
            same = False
        if same:
            return True
        raise GuessTaken(
            f"guess {n} was {taken}, a different guess: a number is one guess; your next "
            f"guess is number {len(made) + 1}", expected=len(made) + 1,
        )

    def resign(self, seat: int, now: int) -> list[Event]:
        self._check_seat(seat)
        self._check_live()
        out = [self._emit("resign", now, seat=seat)]
        out.append(self._finish(now, winner=1 - seat, reason="resign"))
        return out

    def disconnect(self, seat: int, now: int) -> list[Event]:
        """The seat's connection dropped: its grace window starts (no-op if already away)."""
        self._check_seat(seat)
        if self.finished or not self.seats[seat].connected:
            return []
        return [self._emit("away", now, seat=seat)]

    def reconnect(self, seat: int, now: int) -> list[Event]:
        self._check_seat(seat)
        if self.finished or self.seats[seat].connected:
            return []
        return [self._emit("back", now, seat=seat)]

    def resume_clocks(self, now: int) -> list[Event]:
        """After a server restart: downtime is not charged and every seat starts away.

        Clocks are charged up to the last logged event, then restarted at ``now``; everyone's
        grace window starts at ``now`` because every connection was lost with the process.
        """
        if self.finished:
            return []
        return [self._emit("resumed", now)]

    def tick(self, now: int) -> list[Event]:
        """Apply every deadline that has passed by ``now``: timeouts and expired grace windows."""
        if self.finished:
            return []
        due = [(d, seat, clock) for d, seat, clock in self._deadlines() if d <= now]
        if not due:
            return []
        due.sort()
        first = due[0][0]
        losers = sorted({seat for d, seat, _ in due if d == first})
        clock = next(c for d, _, c in due if d == first)
        out = [self._emit("timeout", now, seat=s, clock=clock) for s in losers]
        reason = "disconnect" if clock == "grace" else "timeout"
        winner = 1 - losers[0] if len(losers) == 1 else None
        out.append(self._finish(now, winner=winner, reason=reason))
        return out

    # -- what a viewer may see --------------------------------------------------------------
    def view(self, event: Event, viewer: Viewer, head: Event | None = None) -> Event | None:
        """The part of ``event`` that ``viewer`` (seat 0, seat 1 or "spectator") may see.

        Secrets never leave the match before ``finished``; in lockstep no response is shown
        before its round is complete, so neither side can act on the other's progress early.
        ``head`` (a message's envelope, say) comes first in the returned dict, which is then
        the one copy made: the server sends three views per guess.
        """
        kind = event["kind"]
        out = event.copy() if head is None else {**head, **event}
        if kind == "secret":
            if viewer != event["seat"]:
                out.pop("secret", None)
            out.pop("salt", None)
            out.pop("commitment", None)
        elif kind == "guess":
            lockstep = self.config.pacing == "lockstep"
            own = viewer == event["seat"]
            if lockstep:
                out.pop("bulls", None)
                out.pop("cows", None)
            if not own and (lockstep or (viewer != "spectator" and not self.config.show_guesses)):
                out.pop("guess", None)
        elif kind == "round" and viewer != "spectator" and not self.config.show_guesses:
            results = copy.deepcopy(event["results"])
            assert isinstance(viewer, int)
            results[1 - viewer][0] = None
            out["results"] = results
        return out

    def summary(self, viewer: Viewer) -> dict[str, Any]:
        """A snapshot for a client that has no history: equal to replaying its views."""
        seats = []
        for i, s in enumerate(self.seats):
            visible = self._visible_guesses(i, viewer)
            seats.append(
                {
                    "name": s.name,
                    "count": s.count,
                    "guesses": visible,
                    "solved_at": s.solved_at,
                    "secret_set": s.secret is not None,
                    "connected": s.connected,
                    "clock_left": s.clock_left,
                }
            )
            if viewer == i or self.finished:
                seats[-1]["secret"] = s.secret
        return {
            "match_id": self.match_id,
            "seq": self.seq,
            "phase": self.phase,
            "config": self.config.to_dict(),
            "seats": seats,
            "result": self.result,
            "commitments": [s.commitment for s in self.seats] if self.phase != "secrets" else None,
        }

    def _visible_guesses(self, seat: int, viewer: Viewer) -> list[list[Any]]:
        s = self.seats[seat]
        out: list[list[Any]] = []
        for i, (g, b, c) in enumerate(s.guesses):
            revealed = self.config.pacing == "free" or i < self.rounds_done or self.finished
            shows_text = (viewer == seat or viewer == "spectator" or self.config.show_guesses) and (
                revealed or viewer == seat
            )
            out.append(
                [g if shows_text else None, b if revealed else None, c if revealed else None]
            )
        return out

    # -- internals --------------------------------------------------------------------------
    def _check_seat(self, seat: object) -> None:
        if seat not in (0, 1) or isinstance(seat, bool):
            raise NotYourSeat("a match has seats 0 and 1 only")

    def _check_live(self) -> None:
        if self.phase == "finished":
            raise MatchFinished("the match is over")

    def _emit(self, kind: str, now: int, **fields: Any) -> Event:
        at = max(int(now), self.last_at)  # time never runs backwards inside one log
        event: Event = {"seq": self._seq + 1, "kind": kind, "at": at, **fields}
        self._apply(event)
        return event

    def _apply(self, event: Event) -> None:
        """Fold one event into the state; the only place state changes."""
        kind, at = event["kind"], int(event["at"])
        previous_at = self.last_at
        self.last_at = at
        self._seq += 1
        if self.keep_log:
            self.events.append(event)
        if kind == "guess":
            seat = event["seat"]
            s = self.seats[seat]
            self._charge(s, at)
            s.guesses.append(_shared_result(event["guess"], event["bulls"], event["cows"]))
            if event["bulls"] == self.config.rules.length and s.solved_at is None:
                s.solved_at = s.count
            s.running_since = at if self.owes_move(seat) else None
        elif kind == "round":
            self.rounds_done = int(event["n"])
            for i, s in enumerate(self.seats):
                if self.owes_move(i):
                    s.running_since = at
        elif kind == "created":
            self.created_at = at
            self.config = _shared_config(event["config"])
            self._score = self.config.scorer
            self.seats = [
                Seat(name=str(n), clock_left=self.config.clock_total_ms) for n in event["players"]
            ]
            if self.config.secret_ms is not None:
                self.secret_deadline = at + self.config.secret_ms
        elif kind == "secret":
            s = self.seats[event["seat"]]
            s.secret, s.salt, s.commitment = event["secret"], event["salt"], event["commitment"]
        elif kind == "started":
            self.phase = "playing"
            self.secret_deadline = None
            for i, s in enumerate(self.seats):
                s.running_since = at if self.owes_move(i) else None
        elif kind == "away":
            s = self.seats[event["seat"]]
            s.connected, s.away_since = False, at
        elif kind == "back":
            s = self.seats[event["seat"]]
            s.connected, s.away_since = True, None
        elif kind == "resumed":
            for s in self.seats:
                if s.running_since is not None:
                    s.clock_left = self._left_at(s, previous_at)
                    s.running_since = at
                s.connected, s.away_since = False, at
            if self.secret_deadline is not None:
                self.secret_deadline += max(0, at - previous_at)
        elif kind == "finished":
            for s in self.seats:
                self._charge(s, at)
                s.running_since = None
            self.phase = "finished"
            self.result = {k: event[k] for k in ("winner", "reason", "counts", "solved")}

    def _left_at(self, s: Seat, at: int) -> int | None:
        if s.clock_left is None or s.running_since is None:
            return s.clock_left
        return s.clock_left - max(0, at - s.running_since)

    def _charge(self, s: Seat, at: int) -> None:
        s.clock_left = self._left_at(s, at)
        s.running_since = None

    def _deadlines(self) -> list[tuple[int, int, str]]:
        """(when, seat, which clock) for every pending deadline."""
        out: list[tuple[int, int, str]] = []
        if self.phase == "finished":
            return out
        if self.phase == "secrets" and self.secret_deadline is not None:
            out.extend(
                (self.secret_deadline, i, "secret")
                for i, s in enumerate(self.seats)
                if s.secret is None
            )
        for i, s in enumerate(self.seats):
            if s.running_since is not None:
                if self.config.clock_guess_ms is not None:
                    out.append((s.running_since + self.config.clock_guess_ms, i, "guess"))
                if s.clock_left is not None:
                    out.append((s.running_since + s.clock_left, i, "total"))
            if not s.connected and s.away_since is not None:
                out.append((s.away_since + self.config.grace_ms, i, "grace"))
        return out

    def _final_count(self, seat: int) -> int | None:
        """The seat's final guess count if already fixed (``_NEVER`` if it cannot solve)."""
        s = self.seats[seat]
        if s.solved_at is not None:
            return s.solved_at
        if s.count >= self.config.guess_cap:
            return _NEVER
        return None

    def _settle(self, now: int) -> list[Event]:
        """Finish the match as soon as its outcome can no longer change (the race rule)."""
        if self.phase != "playing":
            return []
        if self.config.pacing == "lockstep" and self.seats[0].count != self.seats[1].count:
            return []
        f = [self._final_count(0), self._final_count(1)]
        winner: int | None
        if f[0] is not None and f[1] is not None:
            if f[0] == f[1]:
                winner = None
                reason = "guess_cap" if f[0] == _NEVER else "solved"
            else:
                winner = 0 if f[0] < f[1] else 1
                reason = "solved"
            return [self._finish(now, winner=winner, reason=reason)]
        for i in (0, 1):
            fi, other = f[i], self.seats[1 - i]
            if fi is not None and fi != _NEVER and f[1 - i] is None and other.count + 1 > fi:
                # The other side cannot reach fi guesses any more: i wins outright.
                return [self._finish(now, winner=i, reason="solved")]
        return []

    def _finish(self, now: int, *, winner: int | None, reason: str) -> Event:
        counts = [s.count for s in self.seats]
        return self._emit(
            "finished",
            now,
            winner=winner,
            reason=reason,
            counts=counts,
            solved=[s.solved_at is not None for s in self.seats],
            secrets=[s.secret for s in self.seats],
            salts=[s.salt for s in self.seats],
            commitments=[s.commitment for s in self.seats],
        )
