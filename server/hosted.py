"""Hosted bots: seats the server plays itself, driven by a :class:`~bots.base.Strategy`.

A hosted bot acts through the very same path as a remote player (the match validates the
move, the store makes it durable, the arena fans it out), so it is subject to the same rules
and the same durability. What is particular to it lives here: the strategy is built and
consulted on one worker thread, never on the event loop (a strong bot may spend seconds
building its tables and tens of milliseconds on a hard decision, and no match should wait for
another match's bot), and it is shown only what a connected client in its seat would have seen.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bots.variants import create_for
from moo.commitment import new_salt
from moo.errors import MooError
from moo.match import Event, Match
from moo.rules import Response
from moo.variants import GameRules

__all__ = ["HostedBot", "HostedBots", "bot_player_name"]

log = logging.getLogger("moo.arena")


def bot_player_name(strategy: str) -> str:
    """The reserved player name of a hosted bot (``random`` plays as ``random-bot``)."""
    return f"{strategy}-bot"


@dataclass(eq=False)
class HostedBot:
    """A server-side seat: the strategy plus how far it has followed its own results."""

    strategy_name: str
    rng: random.Random
    #: a :class:`~bots.base.Strategy`, or a Mastermind / variant bot with the same methods
    strategy: Any = None
    observed: int = 0
    #: how many of the opponent's moves the strategy has been shown
    opponent_observed: int = 0
    pending: asyncio.TimerHandle | None = None
    thinking: bool = False
    started: bool = False

    def cancel(self) -> None:
        if self.pending is not None:
            self.pending.cancel()
            self.pending = None


class HostedBots:
    """Schedules hosted bots' moves and hands them to the arena's one path (``persist``).

    ``persist(key, events)`` stores and fans out events of the match ``key`` stands for;
    ``alive(key)`` says whether that match is still run here (a bot's late answer for a match
    that ended, moved or failed is dropped).
    """

    def __init__(
        self,
        delay_ms: int,
        clock: Callable[[], int],
        persist: Callable[[Any, list[Event]], None],
        alive: Callable[[Any], bool],
    ) -> None:
        self.delay_s = delay_ms / 1000.0
        self.clock = clock
        self.persist = persist
        self.alive = alive
        self.stopping = False
        #: one thread for every hosted bot's thinking (strategies are not thread-safe)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="moo-bots")

    @staticmethod
    def new(strategy: str) -> HostedBot:
        return HostedBot(strategy, random.Random())

    def stop(self) -> None:
        self.stopping = True
        self._pool.shutdown(wait=False, cancel_futures=True)

    def poke(self, key: Any, match: Match, seat: int, bot: HostedBot) -> None:
        """After a change: schedule the bot's next move if it owes one."""
        if bot.pending is not None or bot.thinking or match.finished or self.stopping:
            return
        wants = (match.phase == "secrets" and match.seats[seat].secret is None) or (
            match.owes_move(seat)
        )
        if wants:
            bot.pending = asyncio.get_running_loop().call_later(
                self.delay_s, self._act, key, match, seat, bot
            )

    def _act(self, key: Any, match: Match, seat: int, bot: HostedBot) -> None:
        bot.pending = None
        if self.stopping or not self.alive(key):
            return
        if match.phase == "secrets" and match.seats[seat].secret is None:
            try:
                secret = bot.rng.choice(match.config.rules.secrets)
            except MooError as exc:  # word MOO without a readable dictionary: the bot resigns
                log.error("hosted bot %s in %s: %s", bot.strategy_name, match.match_id, exc)
                self.persist(key, match.resign(seat, self.clock()))
                return
            self.persist(key, match.set_secret(seat, secret, new_salt(), self.clock()))
        elif match.owes_move(seat):
            bot.thinking = True
            own = list(match.seats[seat].guesses)
            theirs = visible_to(match, seat)
            future = asyncio.get_running_loop().run_in_executor(
                self._pool, think, bot, match.config.rules, own, theirs
            )
            future.add_done_callback(lambda f: self._moved(key, match, seat, bot, f))

    def _moved(
        self, key: Any, match: Match, seat: int, bot: HostedBot, future: asyncio.Future[str]
    ) -> None:
        bot.thinking = False
        if self.stopping or match.finished or not self.alive(key):
            return
        now = self.clock()
        try:
            events = match.guess(seat, future.result(), now)
        except MooError as exc:
            log.warning("hosted bot %s in %s: %s", bot.strategy_name, match.match_id, exc)
            return
        except Exception:
            log.exception(
                "hosted bot %s failed in %s; it resigns", bot.strategy_name, match.match_id
            )
            events = match.resign(seat, now)
        self.persist(key, events)


def visible_to(match: Match, seat: int) -> list[tuple[str | None, int, int]]:
    """The opponent's moves a client in ``seat`` has seen when it owes a move: in lockstep the
    finished rounds only, in free pacing all of them; guess texts only with ``show_guesses``."""
    theirs = match.seats[1 - seat].guesses
    if match.config.pacing == "lockstep":
        theirs = theirs[: len(match.seats[seat].guesses)]
    shown = match.config.show_guesses
    return [(g if shown else None, b, c) for g, b, c in theirs]


def think(
    bot: HostedBot,
    rules: GameRules,
    own: list[tuple[str, int, int]],
    theirs: list[tuple[str | None, int, int]],
) -> str:
    """On the bot thread: catch the strategy up on its own results and on the opponent's
    visible progress (what a connected client would have seen), then ask for a guess."""
    if bot.strategy is None:
        bot.strategy = create_for(bot.strategy_name, rules)
    if not bot.started:
        bot.strategy.new_match(rules, bot.rng)
        bot.started = True
    for guess, bulls, cows in own[bot.observed :]:
        bot.strategy.observe(guess, Response(bulls, cows))
    bot.observed = len(own)
    mover = getattr(bot.strategy, "observe_opponent_move", None)
    if mover is not None:  # variant bots without the hook just play their own game
        for n, (guess_, bulls, cows) in enumerate(theirs[bot.opponent_observed :],
                                                  start=bot.opponent_observed + 1):
            mover(n, guess_, Response(bulls, cows))
    bot.opponent_observed = max(bot.opponent_observed, len(theirs))
    return str(bot.strategy.next_guess())
