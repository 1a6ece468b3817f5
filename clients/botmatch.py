"""One match of a bot, played to its end over the SDK: the :class:`Player` contract (a
strategy, or an external program), and :func:`play_match`, driven by the match's state so that
a reconnect cannot confuse it (``moo bot``, the bot workers and the tests use it; moved out of
clients/botrunner.py, which re-exports it)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bots.base import Strategy
from bots.external import BotFailure
from clients.sdk import Client, ConnectionLost, MatchAnnounced, ServerError
from moo.rules import Response
from moo.variants import GameRules

__all__ = ["MatchOutcome", "Player", "StrategyPlayer", "play_match"]


class Player(Protocol):
    """What the runner drives: the Strategy contract, made async (external bots need I/O)."""

    name: str

    async def new_match(self, rules: GameRules, rng: random.Random) -> None: ...
    async def next_guess(self) -> str: ...
    async def observe(self, guess: str, response: Response) -> None: ...
    async def observe_opponent(
        self, count: int, response: Response | None, guess: str | None = None
    ) -> None: ...
    async def end(self, outcome: str) -> None: ...
    async def close(self) -> None: ...


class StrategyPlayer:
    """A registered in-process :class:`~bots.base.Strategy` as a :class:`Player`."""

    def __init__(self, strategy: Strategy | Any) -> None:
        #: a Strategy, or a Mastermind / variant bot with the same methods (bots/variants.py)
        self.strategy: Any = strategy
        self.name = getattr(strategy, "name", "") or type(strategy).__name__

    async def new_match(self, rules: GameRules, rng: random.Random) -> None:
        self.strategy.new_match(rules, rng)

    async def next_guess(self) -> str:
        return str(self.strategy.next_guess())

    async def observe(self, guess: str, response: Response) -> None:
        self.strategy.observe(guess, response)

    async def observe_opponent(
        self, count: int, response: Response | None, guess: str | None = None
    ) -> None:
        mover = getattr(self.strategy, "observe_opponent_move", None)
        if mover is not None:
            mover(count, guess, response)
            return
        observer = getattr(self.strategy, "observe_opponent", None)
        if observer is not None:
            observer(count, response)

    async def end(self, outcome: str) -> None:
        return None

    async def close(self) -> None:
        return None


@dataclass
class MatchOutcome:
    """One finished (or abandoned) match from the bot's side."""

    match_id: str
    player: str
    opponent: str
    outcome: str  # win / loss / draw / aborted
    reason: str
    guesses: int
    opponent_guesses: int
    solved: bool
    opponent_solved: bool
    secret: str
    opponent_secret: str | None
    fair: bool | None
    failure: str | None = None
    seconds: float = 0.0
    #: Left unfinished by an earlier run of this name and finished now (not in --games).
    resumed: bool = False

    def line(self) -> str:
        head = f"{self.match_id:<10} {self.player} vs {self.opponent}"
        tail = (
            f"{self.outcome.upper():<5} {self.reason:<9} guesses {self.guesses}"
            f"{' solved' if self.solved else ''}, opponent {self.opponent_guesses}"
            f"{' solved' if self.opponent_solved else ''}"
        )
        extra = f"  [bot {self.failure}]" if self.failure else ""
        if self.resumed:
            extra += "  [resumed from an earlier run]"
        if self.fair is False:
            extra += "  [COMMITMENT MISMATCH]"
        return f"{head}: {tail}{extra}"


async def play_match(
    client: Client, announced: MatchAnnounced, player: Player, rng: random.Random,
    *, timeout: float = 600.0, wait: Callable[[], Awaitable[object]] | None = None,
) -> MatchOutcome:
    """Play one match to its end with ``player``; the client must not be read by anyone else.

    Driven by :class:`~clients.sdk.MatchState` rather than by individual events, so that a
    reconnect (after which events are replayed or a reply is lost) cannot confuse it: at any
    moment it simply asks "does the server expect a guess from me now?".

    ``wait`` replaces reading the client (``client.receive``) as the way to wait for a change:
    several matches played at once on one connection share one reader that wakes them all
    (:class:`_Pump`, used by ``--tournament``).
    """
    mid = announced.match_id
    state = client.states[mid]
    rules = announced.rules
    started = time.monotonic()
    failure: str | None = None
    secret = rng.choice(rules.secrets)
    fed_mine = fed_theirs = 0
    asked_for: int | None = None  # our guess count when we last sent a guess

    async def give_up(why: str) -> None:
        nonlocal failure
        failure = why
        with contextlib.suppress(ServerError, ConnectionLost):
            await client.resign(mid)

    try:
        await player.new_match(rules, rng)
    except Exception as exc:  # a broken strategy or program loses this match, nothing more
        await give_up(f"{type(exc).__name__}: {exc}" if not isinstance(exc, BotFailure)
                      else str(exc))
    secret_tries = 0

    async with asyncio.timeout(timeout):
        while not state.finished:
            if state.needs_secret and secret_tries < 3:
                # Checked every time round, so a secret lost to a dropped connection is re-sent.
                secret_tries += 1
                with contextlib.suppress(ServerError, ConnectionLost, TimeoutError):
                    await client.set_secret(mid, secret)
                continue
            if failure is None:
                try:
                    # Tell the player what it has not heard yet (ours first: it's our move).
                    mine, theirs = state.mine(), state.theirs()
                    while fed_mine < len(mine) and mine[fed_mine].response is not None:
                        turn = mine[fed_mine]
                        assert turn.guess is not None and turn.response is not None
                        await player.observe(turn.guess, turn.response)
                        fed_mine += 1
                    while fed_theirs < len(theirs) and theirs[fed_theirs].response is not None:
                        turn = theirs[fed_theirs]
                        await player.observe_opponent(fed_theirs + 1, turn.response, turn.guess)
                        fed_theirs += 1
                    if state.owes_guess and asked_for != len(mine):
                        asked_for = len(mine)
                        guess = await player.next_guess()
                        try:
                            await client.guess(mid, guess)
                        except ServerError as exc:
                            if exc.code in ("wrong_length", "repeated_symbol", "unknown_symbol"):
                                await give_up(f"illegal guess {guess!r}: {exc.message}")
                            elif exc.code == "rate_limited":
                                asked_for = None  # refused before it counted: guess again
                            # not_your_turn and the like: our view was stale; wait for events.
                        except (ConnectionLost, TimeoutError):
                            asked_for = None  # ask again once resumed, if still owed
                        continue
                except BotFailure as exc:
                    await give_up(str(exc))
                    continue
                except Exception as exc:  # an in-process strategy that raised
                    await give_up(f"{type(exc).__name__}: {exc}")
                    continue
            try:
                await (wait() if wait is not None else client.receive())
            except ConnectionLost:
                break

    outcome = state.outcome or "aborted"
    with contextlib.suppress(BotFailure):
        await player.end(outcome)
    result = state.result
    seat = state.seat if state.seat is not None else 0
    fair = state.fairness()
    return MatchOutcome(
        match_id=mid,
        player=client.name,
        opponent=state.opponent or announced.opponent,
        outcome=outcome,
        reason=result.reason if result else "connection lost",
        guesses=state.counts[seat],
        opponent_guesses=state.counts[1 - seat],
        solved=state.solved(seat),
        opponent_solved=state.solved(1 - seat),
        secret=state.secret or secret,
        opponent_secret=(result.secrets[1 - seat] if result and len(result.secrets) == 2
                         else None),
        fair=None if fair is None else all(fair),
        failure=failure,
        seconds=round(time.monotonic() - started, 3),
    )
