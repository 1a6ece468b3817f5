"""A hosted bot plays a match: docs/bot-protocol.md over the sandbox, refereed in-process.

The protocol is :class:`bots.external.ExternalBot`'s, unchanged; only its transport is the
sandbox (:class:`clients.hosted.sandbox.SandboxedProgram`). Each match runs in a fresh
sandbox that is killed at its end, so a process left running, a file written or a CPU second
spent never carries into the next match. The referee is :class:`moo.match.Match`, the same
state machine the server plays on (lockstep pacing, the race rule, the guess cap), so a game
here is scored exactly as on the arena, without a server.

Whatever the program does wrong ends the match as a loss by resignation, with a reason its
author can read (:attr:`MatchReport.failure`): ``crash: ...``, ``timeout: ...``,
``garbage: ...``, ``output: ...``, ``memory: ...``, ``processes: ...`` or ``cpu: ...``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from bots.base import Strategy
from bots.external import BotFailure, ExternalBot
from moo.match import Match, MatchConfig
from moo.rules import DEFAULT_RULES, Response
from moo.variants import GameRules

from .cpu_cap import CpuCap
from .sandbox import PROGRAM, Limits, SandboxedProgram

__all__ = ["MatchReport", "hosted_bot", "play_match"]

#: Guesses each side may make in one match (the arena's default cap).
GUESS_CAP = 64


@dataclass
class MatchReport:
    """One match of a hosted bot, from its side."""

    #: ``win``, ``loss`` or ``draw``
    outcome: str
    #: why it ended: ``solved``, ``guess_cap`` or ``resign`` (the bot failed)
    reason: str
    #: the bot's guesses, in order
    guesses: list[str]
    #: ``REASON: DETAIL`` when the bot failed (BotFailure), else None
    failure: str | None = None
    #: the end of its standard error, for its author's error log
    stderr: str = ""


def hosted_bot(program: bytes, limits: Limits | None = None,
               cap: CpuCap | None = None) -> ExternalBot:
    """An :class:`ExternalBot` whose program runs in the sandbox with ``limits`` (in the
    worker's CPU cap ``cap``, if any)."""
    limits = limits or Limits()
    return ExternalBot([PROGRAM], move_timeout=limits.move_wall,
                       transport=SandboxedProgram(program, limits, cap))


async def play_match(bot: ExternalBot, opponent: Any, rng: random.Random, *,
                     rules: GameRules = DEFAULT_RULES, bot_seat: int = 0,
                     guess_cap: int = GUESS_CAP) -> MatchReport:
    """Play one match of ``bot`` against an in-process ``opponent`` (a strategy for ``rules``,
    as :func:`bots.variants.create_for` makes: typed ``Any`` because only classic MOO's
    strategies share the :class:`~bots.base.Strategy` base); the bot's program is
    closed (its sandbox killed) when the match ends, however it ends."""
    config = MatchConfig(rules=rules, pacing="lockstep", guess_cap=guess_cap,
                         secret_ms=None, rated=False)
    names = ["bot", "bot"]
    names[1 - bot_seat] = f"{opponent.name}"
    if names[0] == names[1]:
        names[1 - bot_seat] += "-opponent"
    match, _ = Match.create("hosted", (names[0], names[1]), config, 0)
    for seat in (0, 1):
        match.set_secret(seat, rng.choice(rules.secrets), f"salt{rng.random()}", 0)
    guesses: list[str] = []
    failure: str | None = None
    try:
        try:
            await bot.new_match(rules, rng)
            opponent.new_match(rules, rng)
            while not match.finished:
                # lockstep: both sides owe each round's guess until the race rule ends it
                mine = await bot.next_guess()
                theirs = opponent.next_guess()
                guesses.append(mine)
                match.guess(bot_seat, mine, 0)
                match.guess(1 - bot_seat, theirs, 0)
                await _tell(bot, opponent, match, bot_seat)
        except BotFailure as exc:
            failure = f"{exc.reason}: {exc.detail}" if exc.detail else exc.reason
            if not match.finished:
                match.resign(bot_seat, 0)
        result = match.result
        assert result is not None
        winner = result["winner"]
        outcome = "draw" if winner is None else ("win" if winner == bot_seat else "loss")
        if failure is None:
            await bot.end(outcome)
    finally:
        stderr = bot.transport.stderr_tail() if isinstance(bot.transport,
                                                           SandboxedProgram) else ""
        await bot.close()
    return MatchReport(outcome, result["reason"], guesses, failure, stderr)


async def _tell(bot: ExternalBot, opponent: Strategy, match: Match, bot_seat: int) -> None:
    """After a round, each side learns its own response and the other's count and response
    (the bot through ``result`` and ``opponent`` lines, docs/bot-protocol.md)."""
    me, them = match.seats[bot_seat], match.seats[1 - bot_seat]
    mine, theirs = me.guesses[-1], them.guesses[-1]
    await bot.observe(mine[0], Response(mine[1], mine[2]))
    opponent.observe(theirs[0], Response(theirs[1], theirs[2]))
    await bot.observe_opponent(them.count, Response(theirs[1], theirs[2]))
    opponent.observe_opponent(me.count, Response(mine[1], mine[2]))
