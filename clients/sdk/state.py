"""Per-match state as one viewer sees it, folded from the events it receives.

The server may send an event twice (a ``resume`` after a reconnect replays everything after the
``last_seq`` we *sent*, and events in flight when the connection dropped may already have been
applied), so :meth:`MatchState.apply` ignores any ``seq`` at or below the highest applied one.
That single rule makes reconnects idempotent for every consumer: the bot runner, the terminal
and anything built on the SDK see each event exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clients.sdk.messages import (
    Away,
    Back,
    Created,
    Finished,
    GuessMade,
    MatchEvent,
    Resumed,
    RoundRevealed,
    SecretSet,
    Started,
)
from moo.commitment import verify
from moo.rules import DEFAULT_RULES, Response
from moo.variants import GameRules

__all__ = ["MatchState", "Turn"]


@dataclass
class Turn:
    """One guess of one seat; unknown parts are None (hidden, or not revealed yet)."""

    guess: str | None = None
    bulls: int | None = None
    cows: int | None = None

    @property
    def response(self) -> Response | None:
        if self.bulls is None or self.cows is None:
            return None
        return Response(self.bulls, self.cows)


@dataclass
class MatchState:
    """What a seat (``seat`` 0/1) or a spectator (``seat`` None) knows about one match."""

    match_id: str
    seat: int | None = None
    players: tuple[str, str] = ("", "")
    config: dict[str, Any] = field(default_factory=dict)
    rules: GameRules = DEFAULT_RULES
    last_seq: int = 0
    phase: str = "secrets"
    secret: str | None = None
    secrets_set: list[bool] = field(default_factory=lambda: [False, False])
    history: tuple[list[Turn], list[Turn]] = field(default_factory=lambda: ([], []))
    rounds_done: int = 0
    commitments: tuple[str, ...] = ()
    connected: list[bool] = field(default_factory=lambda: [True, True])
    result: Finished | None = None

    # -- folding ---------------------------------------------------------------------------
    def apply(self, event: MatchEvent) -> bool:
        """Fold ``event`` in; False (and no change) if it was already applied."""
        if event.seq <= self.last_seq:
            return False
        self.last_seq = event.seq
        if isinstance(event, Created):
            self.players = event.players
            self.config = event.config
            self.rules = event.rules
        elif isinstance(event, SecretSet):
            if 0 <= event.seat <= 1:
                self.secrets_set[event.seat] = True
            if event.secret is not None and event.seat == self.seat:
                self.secret = event.secret
        elif isinstance(event, Started):
            self.phase = "playing"
            self.commitments = event.commitments
        elif isinstance(event, GuessMade):
            turn = self._turn(event.seat, event.n)
            if event.guess is not None:
                turn.guess = event.guess
            if event.bulls is not None and event.cows is not None:
                turn.bulls, turn.cows = event.bulls, event.cows
        elif isinstance(event, RoundRevealed):
            self.rounds_done = max(self.rounds_done, event.n)
            for seat, (guess, bulls, cows) in enumerate(event.results[:2]):
                turn = self._turn(seat, event.n)
                if guess is not None:
                    turn.guess = guess
                turn.bulls, turn.cows = bulls, cows
        elif isinstance(event, Away):
            if 0 <= event.seat <= 1:
                self.connected[event.seat] = False
        elif isinstance(event, Back):
            if 0 <= event.seat <= 1:
                self.connected[event.seat] = True
        elif isinstance(event, Resumed):
            self.connected = [False, False]
        elif isinstance(event, Finished):
            self.phase = "finished"
            self.result = event
            if self.seat is not None and len(event.secrets) > self.seat:
                self.secret = event.secrets[self.seat] or self.secret
        return True

    def _turn(self, seat: int, n: int) -> Turn:
        turns = self.history[seat]
        while len(turns) < n:
            turns.append(Turn())
        return turns[n - 1]

    # -- queries ---------------------------------------------------------------------------
    @property
    def pacing(self) -> str:
        return str(self.config.get("pacing", "lockstep"))

    @property
    def guess_cap(self) -> int:
        return int(self.config.get("guess_cap", 64) or 64)

    @property
    def finished(self) -> bool:
        return self.phase == "finished"

    @property
    def counts(self) -> tuple[int, int]:
        return (len(self.history[0]), len(self.history[1]))

    @property
    def opponent_seat(self) -> int | None:
        return None if self.seat is None else 1 - self.seat

    @property
    def opponent(self) -> str:
        return "" if self.seat is None else self.players[1 - self.seat]

    def mine(self) -> list[Turn]:
        """Our own guesses (empty for a spectator)."""
        return [] if self.seat is None else self.history[self.seat]

    def theirs(self) -> list[Turn]:
        return [] if self.seat is None else self.history[1 - self.seat]

    def solved(self, seat: int) -> bool:
        return any(t.bulls == self.rules.length for t in self.history[seat])

    @property
    def needs_secret(self) -> bool:
        return self.seat is not None and self.phase == "secrets" and not self.secrets_set[self.seat]

    @property
    def owes_guess(self) -> bool:
        """Whether the server expects a guess from us now (mirrors ``Match.owes_move``)."""
        if self.seat is None or self.phase != "playing":
            return False
        turns = self.history[self.seat]
        if self.solved(self.seat) or len(turns) >= self.guess_cap:
            return False
        if self.pacing == "lockstep":
            return len(turns) == self.rounds_done
        # Free pacing: wait for the response to our last guess before the next one.
        return not turns or turns[-1].response is not None

    @property
    def outcome(self) -> str | None:
        """``win``, ``loss`` or ``draw`` for a seat once finished; None otherwise."""
        if self.result is None or self.seat is None:
            return None
        if self.result.winner is None:
            return "draw"
        return "win" if self.result.winner == self.seat else "loss"

    def fairness(self) -> list[bool] | None:
        """Re-check both commitments published at ``started`` against the revealed secrets.

        Uses the commitments *we* saw before the first guess, not the copy in ``finished``:
        that is the point of committing in advance. None if there is nothing to check yet.
        """
        result = self.result
        if result is None or not self.commitments:
            return None
        out = []
        for i in range(2):
            secret = result.secrets[i] if i < len(result.secrets) else None
            salt = result.salts[i] if i < len(result.salts) else None
            committed = self.commitments[i] if i < len(self.commitments) else None
            out.append(
                secret is not None
                and salt is not None
                and committed is not None
                and verify(committed, secret, salt)
            )
        return out
