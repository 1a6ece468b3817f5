"""The lobby leader's watch over the queue pairings whose match another node was asked to start.

Two players paired from the queue were answered ``queued`` long before their match exists:
no request of theirs is left for anyone to answer. If the node asked to start the match dies
with the request (the :class:`~server.cluster.wire.Create` never committed), nothing would
ever tell them, and they would wait for ever. The leader keeps each such pairing until the
node has lived :data:`PAIRING_WATCH_S` past the request (a live node reads its requests; a
paused one when it wakes); if the node dies first and the database has no match of the two,
both go back in the queue and are told so (docs/cluster.md, "Status", item 6).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from moo.errors import MooError
from server.background import spawn
from server.cluster.directory import Directory
from server.lobby import Waiting

__all__ = ["PAIRING_WATCH_S", "PairingWatch"]

log = logging.getLogger("moo.cluster")

#: a queue pairing sent to a node that has not died since is forgotten after this long (a
#: live node reads its requests: a paused one when it wakes)
PAIRING_WATCH_S = 60.0


@dataclass(eq=False)
class _Pairing:
    """Two queue entries the leader paired, whose match it asked ``node`` to start."""

    node: str
    asked: float
    entries: tuple[Waiting, Waiting]


class PairingWatch:
    """The leader's queue pairings in flight to other nodes, and what happens to them when
    such a node dies: ``requeue`` (the lobby's) is given the two entries of a pairing whose
    match was never stored."""

    def __init__(self, node: str, directory: Directory,
                 requeue: Callable[[tuple[Waiting, Waiting], str], None]) -> None:
        self.node = node
        self.directory = directory
        self.requeue = requeue
        #: the queue entries paired last, until the router places their match
        self._just_paired: tuple[Waiting, Waiting] | None = None
        self.pairings: list[_Pairing] = []
        self._checking = False

    def paired(self, first: Waiting, second: Waiting) -> None:
        """The lobby paired two queue entries (its ``paired`` hook): the router places their
        match next (:meth:`creating`)."""
        self._just_paired = (first, second)

    def creating(self, players: tuple[str, str], node: str) -> None:
        """The router starts an agreed match on ``node``: watched if it is the queue pairing
        just made and ``node`` is another node."""
        pair, self._just_paired = self._just_paired, None
        if pair is None or node == self.node or (pair[0].player, pair[1].player) != players:
            return
        self.pairings.append(_Pairing(node, time.monotonic(), pair))

    def check(self) -> None:
        """Look at the pairings whose node died (one look at a time, in the background)."""
        if self.pairings and not self._checking:
            self._checking = True
            spawn(self._check())

    def clear(self) -> None:
        """This node stops leading: the next leader's lobby has the queue."""
        self.pairings.clear()
        self._just_paired = None

    async def _check(self) -> None:
        """Queue pairings whose match node died after it was asked: if the database has no
        match of the two, the request died with it, and both go back in the queue."""
        try:
            now = time.monotonic()
            for p in list(self.pairings):
                if self.directory.died_since(p.node, p.asked):
                    started = await self._started(p)
                    self.pairings.remove(p)
                    if not started:
                        self.requeue(p.entries, p.node)
                elif now - p.asked > PAIRING_WATCH_S:
                    self.pairings.remove(p)
        except MooError as exc:  # the database is away: asked again at the next check
            log.warning("lobby: cannot check the matches of queue pairings: %s", exc)
        finally:
            self._checking = False

    async def _started(self, p: _Pairing) -> bool:
        names = {e.player.casefold() for e in p.entries}
        for sm in await self.directory.store.unfinished_of(p.entries[0].player):
            if {str(x).casefold() for x in sm.meta.get("players", ())} == names:
                return True  # stored before its node died: the takeover seats its players
        return False
