"""The lobby leader's requests that finish later: rematches and held challenges.

Most lobby requests run at once against the leader's :class:`~server.lobby.Lobby`
(server/cluster/leadership.py). Two kinds wait:

* a rematch reads the finished match from the database first. Meanwhile the match its
  requester's own node says they sit in (the ``busy`` of a :class:`~server.cluster.wire.
  LobbyCall`) must still count, so the hints of the requests being run are kept here;
* a challenge to a registered player the leader does not see online yet (their node's
  presence may still be on its way) is held for a few seconds and tried again as players
  arrive, before it is refused with unknown_player.

Each ends as any request at the leader does: an error to the client, or the open entries sent
to their nodes (``sync``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from moo.errors import MooError, UnknownPlayer
from server.arena import Arena
from server.background import spawn
from server.cluster.wire import LobbyCall
from server.connection import error_message
from server.lobby import Lobby
from server.matches import Follower

__all__ = ["CHALLENGE_HOLD_S", "DeferredRequests"]

#: how long the leader keeps a challenge to a registered player it does not see online yet
#: (their node's presence may still be on its way), before refusing it with unknown_player
CHALLENGE_HOLD_S = 3.0


class DeferredRequests:
    """The leader's rematches and held challenges, and the busy hints requests run with."""

    def __init__(self, arena: Arena, lobby: Lobby, sync: Callable[[], None]) -> None:
        self.arena = arena
        self.lobby = lobby
        self.sync = sync
        #: player (casefolded) -> the match their own node says they sit in, while a request
        #: of theirs forwarded to this leader runs
        self._busy: dict[str, str] = {}
        #: challenges to a registered player not (yet) seen online
        self._held: list[tuple[Follower, dict[str, Any]]] = []

    # -- busy hints ------------------------------------------------------------------------------
    def busy(self, player: str) -> str | None:
        return self._busy.get(player.casefold())

    def note_busy(self, player: str, busy: str | None) -> None:
        if busy is not None:
            self._busy[player.casefold()] = busy

    def forget_busy(self, player: str) -> None:
        self._busy.pop(player.casefold(), None)

    # -- rematches -------------------------------------------------------------------------------
    async def forwarded_rematch(self, conn: Follower, item: LobbyCall) -> None:
        """A rematch another node forwarded, run with its busy hint."""
        self.note_busy(item.player, item.busy)
        try:
            await self.lobby.rematch(conn, item.msg)
        except MooError as exc:
            conn.send(error_message(exc, item.msg.get("id")))
        finally:
            self.forget_busy(item.player)
            self.sync()

    async def rematch(self, conn: Follower, msg: dict[str, Any]) -> None:
        try:
            await self.lobby.rematch(conn, msg)
        except MooError as exc:
            conn.send(error_message(exc, msg.get("id")))
        finally:
            self.sync()

    # -- held challenges -------------------------------------------------------------------------
    def challenge(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A challenge whose target's presence may still be on its way from the target's
        node: a target that is a registered player is waited for, briefly."""
        try:
            self.lobby.challenge(conn, msg)
        except UnknownPlayer as exc:
            spawn(self._hold(conn, msg, exc))

    async def _hold(self, conn: Follower, msg: dict[str, Any], exc: MooError) -> None:
        try:
            known = await self.arena.store.account(msg["opponent"])
        except MooError:
            known = None
        if known is None:
            conn.send(error_message(exc, msg.get("id")))
            return
        entry = (conn, msg)
        self._held.append(entry)
        asyncio.get_running_loop().call_later(CHALLENGE_HOLD_S, self._give_up, entry, exc)
        self.retry_held(msg["opponent"])  # they may have arrived during the read

    def _give_up(self, entry: tuple[Follower, dict[str, Any]], exc: MooError) -> None:
        if entry in self._held:
            self._held.remove(entry)
            if not entry[0].closing:
                entry[0].send(error_message(exc, entry[1].get("id")))

    def retry_held(self, player: str | None) -> None:
        """``player`` arrived (None: anyone may have): their held challenges are tried again."""
        folded = None if player is None else player.casefold()
        for entry in list(self._held):
            conn, msg = entry
            if folded is not None and msg["opponent"].casefold() != folded:
                continue
            if conn.closing:
                self._held.remove(entry)
                continue
            try:
                self.lobby.challenge(conn, msg)
            except UnknownPlayer:
                continue  # still not here: keep waiting
            except MooError as exc:
                conn.send(error_message(exc, msg.get("id")))
            self._held.remove(entry)
        self.sync()

    def drop_held(self) -> None:
        """This node stops leading: what it held goes (as the rest of the lobby's state)."""
        self._held.clear()
