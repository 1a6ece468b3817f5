"""The lobby leader's watch over the queue pairings whose match another node was asked to start.

Two players paired from the queue were answered ``queued`` long before their match exists:
no request of theirs is left for anyone to answer, so nothing would ever tell them if the
node asked to start the match never did. Two ways its :class:`~server.cluster.wire.Create`
can be lost, each handled here until the match is in the database:

- the node dies with the request (the ``Create`` never committed): if the database has no
  match of the two, both go back in the queue and are told so;
- the node lives but its connection to the broker dropped with the request in it (the broker
  keeps nothing for a node between two sessions): the leader sends the request again, with
  the match's id fixed in its first sending, to that node's epoch, after 2 s, then at doubling
  intervals; the node starts the match only if no request of that id reached it before, so a
  request sent again is never a second match (docs/cluster.md, "Status", item 6).

A pairing is forgotten once its match is stored, or after :data:`PAIRING_WATCH_S`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from moo.errors import MooError
from server.background import spawn
from server.cluster.directory import Directory
from server.cluster.wire import Create, Message
from server.lobby import Waiting

__all__ = ["PAIRING_WATCH_S", "Creates", "PairingWatch"]

log = logging.getLogger("moo.cluster")

#: a queue pairing whose match is not stored is sent again, then forgotten after this long
#: (a node cut from the broker longer than that gets no more; a paused one reads its
#: requests when it wakes)
PAIRING_WATCH_S = 300.0
#: the match ids of the requests to start a match that reached a node are kept this long: the
#: same request sent again is then known
CREATES_KEPT_S = PAIRING_WATCH_S + 60.0
#: the first sending again, after the first sending; then at doubling intervals up to the last
RESEND_FIRST_S, RESEND_LAST_S = 2.0, 30.0


@dataclass(eq=False)
class _Pairing:
    """Two queue entries the leader paired, whose match it asked ``node`` to start."""

    node: str
    asked: float
    entries: tuple[Waiting, Waiting]
    #: the request, to send again (only one with a fixed match id is)
    create: Create | None = None
    resend_at: float = 0.0
    wait: float = RESEND_FIRST_S

    @property
    def match_id(self) -> str | None:
        requested = None if self.create is None else self.create.requested
        return None if not requested else str(requested[0])


class PairingWatch:
    """The leader's queue pairings in flight to other nodes, and what happens to them when
    such a node dies: ``requeue`` (the lobby's) is given the two entries of a pairing whose
    match was never stored."""

    def __init__(self, node: str, directory: Directory,
                 requeue: Callable[[tuple[Waiting, Waiting], str], None],
                 send: Callable[[str, Message], None]) -> None:
        self.node = node
        self.directory = directory
        self.requeue = requeue
        self.send = send
        #: the queue entries paired last, until the router places their match
        self._just_paired: tuple[Waiting, Waiting] | None = None
        self.pairings: list[_Pairing] = []
        self._checking = False

    def paired(self, first: Waiting, second: Waiting) -> None:
        """The lobby paired two queue entries (its ``paired`` hook): the router places their
        match next (:meth:`creating`)."""
        self._just_paired = (first, second)

    def creating(self, players: tuple[str, str], node: str, create: Create | None) -> None:
        """The router starts an agreed match on ``node`` (sending it ``create``, when it is
        another node): watched if it is the queue pairing just made and ``node`` is another
        node."""
        pair, self._just_paired = self._just_paired, None
        if pair is None or node == self.node or (pair[0].player, pair[1].player) != players:
            return
        now = time.monotonic()
        self.pairings.append(_Pairing(node, now, pair, create, now + RESEND_FIRST_S))

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
        match of the two, the request died with it, and both go back in the queue. Those
        whose node lives and whose match is not stored yet: the request again, when due."""
        try:
            now = time.monotonic()
            for p in list(self.pairings):
                if self.directory.died_since(p.node, p.asked):
                    started = await self._started(p)
                    if p in self.pairings:  # (not cleared meanwhile: still leading)
                        self.pairings.remove(p)
                        if not started:
                            self.requeue(p.entries, p.node)
                elif now - p.asked > PAIRING_WATCH_S:
                    if p in self.pairings:
                        self.pairings.remove(p)
                elif p.match_id is not None and now >= p.resend_at:
                    await self._again(p)
        except MooError as exc:  # the database is away: asked again at the next check
            log.warning("lobby: cannot check the matches of queue pairings: %s", exc)
        finally:
            self._checking = False

    async def _again(self, p: _Pairing) -> None:
        """Send ``p``'s request again unless its match is stored (then its node seats the
        players, and anything else that happens to it is the match's business)."""
        assert p.create is not None and p.match_id is not None
        stored = await self.directory.store.match_end(p.match_id) is not None
        if p not in self.pairings:
            return
        if stored:
            self.pairings.remove(p)
            return
        epoch = self.directory.epochs.get(p.node)
        if epoch:
            log.info("lobby: the match of %s and %s (%s) is not stored yet: its request to "
                     "node %s again", p.entries[0].player, p.entries[1].player, p.match_id,
                     p.node)
            self.send(p.node, dataclasses.replace(p.create, again=epoch))
        p.wait = min(p.wait * 2, RESEND_LAST_S)
        p.resend_at = time.monotonic() + p.wait

    async def _started(self, p: _Pairing) -> bool:
        names = {e.player.casefold() for e in p.entries}
        for sm in await self.directory.store.unfinished_of(p.entries[0].player):
            if {str(x).casefold() for x in sm.meta.get("players", ())} == names:
                return True  # stored before its node died: the takeover seats its players
        return False


class Creates:
    """The node's side: the requests to start a match with a fixed id that reached it, so
    that one sent again (:attr:`~server.cluster.wire.Create.again`) starts the match only if
    its first sending was lost."""

    def __init__(self) -> None:
        #: match id -> when (monotonic) a request for it reached this node, oldest first
        self._seen: dict[str, float] = {}

    def fresh(self, item: Create, epoch: int, live: Callable[[str], bool]) -> bool:
        """Whether to act on ``item`` here (``epoch``: this node's; ``live``: whether a match
        runs here). A request sent again to another run of this node, or for a match whose
        request came before or that runs here, is not."""
        match_id = str(item.requested[0]) if item.requested else None
        if match_id is None:
            return True
        if item.again and (item.again != epoch or match_id in self._seen or live(match_id)):
            return False
        now = time.monotonic()
        self._seen[match_id] = now
        while self._seen and next(iter(self._seen.values())) < now - CREATES_KEPT_S:
            del self._seen[next(iter(self._seen))]
        return True
