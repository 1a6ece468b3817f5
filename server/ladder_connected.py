"""Connected bots on the ladder: a client that said ``hello`` with ``bot: true`` opts in with
``ladder_join`` and is paired like a hosted bot while its connection is open
(docs/ladder.md, "Connected bots"; docs/protocol.md, "Ladder").

A connected bot is a ladder bot of kind ``connected``: its name and its owner are its own
player, it has no program (its ``version`` is :data:`CONNECTED_VERSION`, in its row and in its
games' rows), and it learns of its games as a bot learns of any match (``match_started``). A
pairing with a hosted bot is played by a worker on the hosted side only (its play job carries
one program); two connected bots need no worker (their matches start at once). Its
connection closed for longer than the match grace (``grace_ms``), or ``ladder_leave``, makes
it ``offline``: no longer paired, still listed with its games and rating; ``ladder_join``
makes it ``active`` again.

On a cluster the lobby leader runs this, as the rest of the ladder: ``ladder_join`` and
``ladder_leave`` come from any node with their sender (the leader's stand-in for that node's
connection, whose player is the bot), the leader's lobby tells whether the bot's connection is
open anywhere in the cluster (every node reports its clients' arrivals and departures there,
and a dead node's clients are gone with it), and its games start through the cluster's
``Create``, on the node of a seated bot. A new leader reads the bots from the store and counts
an absence from when it first saw it.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from moo.errors import MooError, NameTaken, NotAvailable
from moo.variants import rules_spec
from server.ladder_records import (
    CONNECTED_VERSION,
    LadderBot,
    exact_status,
    player_of,
)
from server.ladder_workers import LadderWorkers
from server.matches import Follower

__all__ = ["NO_PROGRAM", "LadderConnected"]

log = logging.getLogger("moo.ladder")

#: a connected bot's ``exact`` reason: it has no program to evaluate
NO_PROGRAM = "a connected bot: the server has no program of it to evaluate"


class LadderConnected(LadderWorkers):
    """The scheduler and its workers, with the bots that connect themselves."""

    async def connected_request(self, conn: Follower, msg: dict[str, Any]) -> dict[str, Any]:
        """``ladder_join`` and ``ladder_leave``: the reply (``ladder_status``)."""
        if msg["type"] == "ladder_join":
            bot = await self.join(conn, msg)
            return {"type": "ladder_status", "bot": bot.public()}
        bot = await self.leave(conn)
        # the games paired before it left, still to be played (a hosted opponent's start
        # when a worker takes them): the client plays them out before it goes
        owed = [g.match_id for g in self.games_of(bot.bot_id) if not g.finished and not g.void]
        return {"type": "ladder_status", "bot": bot.public(), "games": sorted(owed)}

    def bot_named(self, name: str) -> LadderBot | None:
        """The ladder bot (hosted or connected) that plays under the player ``name``."""
        key = name.casefold()
        return next((b for b in self.bots.values() if b.name.casefold() == key), None)

    async def join(self, conn: Follower, msg: dict[str, Any]) -> LadderBot:
        player = player_of(conn)
        if not self.lobby.is_bot(player):
            raise NotAvailable("only a bot joins the ladder: say hello with 'bot': true (a "
                               "person plays in the lobby)")
        rules = self.arena.rules_of(msg)
        family = rules_spec(rules)
        bot = self.bot_named(player)
        if bot is not None and bot.kind == "hosted":
            raise NotAvailable(f"{player} is a hosted bot: the ladder runs it already")
        if bot is None:
            bot = LadderBot("b" + secrets.token_hex(6), player, player, family,
                            rules.to_dict(), "active", "", CONNECTED_VERSION, None,
                            self.clock(), exact_status("not_computed", NO_PROGRAM))
            try:
                await self.store.ladder_new_connected(bot.row())
            except NameTaken:
                raise NotAvailable(f"{player} is on the ladder already") from None
            self.bots[bot.bot_id] = bot
            log.info("ladder %s: connected bot %s (%s) joined", family, player, bot.bot_id)
        else:
            if bot.family != family:
                raise NotAvailable(f"{player} plays on the ladder {bot.family}: a connected "
                                   "bot plays on one ladder only")
            # on it already (a retry whose answer was lost, a bot back after a restart):
            # answered as a join, nothing changed
            if bot.status != "active":
                await self._set(bot, "active")
        self.away.pop(bot.bot_id, None)
        return bot

    async def leave(self, conn: Follower) -> LadderBot:
        player = player_of(conn)
        bot = self.bot_named(player)
        if bot is None or bot.kind != "connected" or bot.status != "active":
            raise NotAvailable(f"{player} is not on the ladder (ladder_join puts a connected "
                               "bot on it)")
        await self._set(bot, "offline")
        return bot

    async def _set(self, bot: LadderBot, status: str) -> None:
        before, bot.status = bot.status, status
        try:
            await self.store.ladder_update_bot(bot.update_row())
        except MooError:
            bot.status = before
            raise
        log.info("ladder %s: connected bot %s is %s", bot.family, bot.name, status)

    async def tick(self) -> None:
        await self.expire_away()
        await super().tick()

    async def expire_away(self) -> None:
        """An active connected bot whose connection has been gone for longer than the match
        grace (counted from when this server first saw it gone: on a cluster, from when the
        leader's lobby lost it, or from the leader's reading if it was never there) is
        ``offline``."""
        now = time.monotonic()
        grace_s = self.arena.settings.grace_ms / 1000
        for bot in list(self.bots.values()):
            if bot.kind != "connected" or bot.status != "active" or self.present(bot):
                self.away.pop(bot.bot_id, None)
                continue
            since = self.away.setdefault(bot.bot_id, now)
            if now - since >= grace_s:
                await self._set(bot, "offline")
                self.away.pop(bot.bot_id, None)

    def refuse_program_request(self, bot: LadderBot) -> None:
        """The requests about a program (a new version, pause, resume, withdraw) are not for a
        connected bot."""
        if bot.kind == "connected":
            raise NotAvailable(f"{bot.name} is a connected bot: it has no program, and it "
                               "joins and leaves the ladder itself (ladder_join, ladder_leave)")
