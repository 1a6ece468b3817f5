"""Where each match runs and which nodes are alive, as this node knows it.

The truth is in PostgreSQL (``owners`` and ``nodes``, read through the store's public
methods); the directory adds what the bus tells sooner: a node whose MQTT will the broker
published is dead *in that epoch* (its lease may still run for seconds), and a node that
announced :class:`~server.cluster.wire.Adopted` runs those matches now. A lookup for a match
between two owners (its owner died, nobody has claimed it yet) waits for the takeover rather
than failing, up to about a lease.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from moo.errors import MooError
from server.background import spawn
from server.storage_cluster import ClusterStore, Owner

__all__ = ["MOVING", "Directory", "Placement"]

log = logging.getLogger("moo.cluster")

#: a match between owners for longer than a lookup waits: "try again"
MOVING = "moving"
#: how often a lookup of a match whose owner is known dead asks the database again (its
#: takeover's Adopted wakes it sooner)
DEAD_OWNER_POLL_S = 1.0
#: where a match runs: its owner; None: nowhere (finished or unknown: any node answers from
#: the log); MOVING
Placement = Owner | None | str


class Directory:
    def __init__(self, store: ClusterStore, node: str, lease_ms: int) -> None:
        self.store = store
        self.node = node
        self.lease_s = lease_ms / 1000
        #: nodes whose will the broker published -> (the dead epoch, until when it counts)
        self.dead: dict[str, tuple[int | None, float]] = {}
        #: node -> when (monotonic) its death was last confirmed (its will, no session left)
        self.deaths: dict[str, float] = {}
        #: nodes with a live lease as of the last check, or heard on the bus since
        self.alive: set[str] = set()
        #: the newest epoch known of each node (its lease, its envelopes)
        self.epochs: dict[str, int] = {}
        #: this node counts itself for the leadership: it has announced itself on the bus (and
        #: the broker has the announcement), the others have read its lease (:meth:`leased`),
        #: or it was alone; until then it does not lead in its own view, since nobody else
        #: may know it is back
        self.joined = False
        self._leased_at = float("inf")
        #: match id -> lookups waiting for its owner to be known
        self._lookups: dict[str, list[Callable[[Placement], None]]] = {}
        #: match id -> an event set when an Adopted names it (wakes a waiting lookup at once)
        self._adopted: dict[str, asyncio.Event] = {}

    # -- what the bus says ------------------------------------------------------------------------
    def gone(self, node: str, epoch: int | None) -> None:
        now = time.monotonic()
        self.dead[node] = (epoch, now + self.lease_s * 2)
        self.deaths[node] = now

    def died_since(self, node: str, when: float) -> bool:
        """Whether a process of ``node`` was confirmed dead after ``when`` (monotonic): what
        it was sent before and had not read is lost."""
        return self.deaths.get(node, float("-inf")) > when

    def is_dead(self, owner: Owner) -> bool:
        """Whether ``owner``'s process is known dead (its will, for that very epoch)."""
        entry = self.dead.get(owner[0])
        if entry is None:
            return False
        epoch, until = entry
        if until < time.monotonic():
            del self.dead[owner[0]]
            return False
        return epoch is None or epoch == owner[1]

    def adopted(self, match_ids: list[str]) -> None:
        for match_id in match_ids:
            event = self._adopted.get(match_id)
            if event is not None:
                event.set()

    def leased(self) -> None:
        """This node's lease (its new epoch) is in the database from now on."""
        self._leased_at = time.monotonic()

    def heard(self, node: str, epoch: int) -> bool:
        """An envelope from ``node`` in ``epoch``: whether that epoch is new here (a restarted
        node is alive again, whatever will its former process left)."""
        if epoch <= self.epochs.get(node, 0):
            return False
        self.epochs[node] = epoch
        self.alive.add(node)
        return True

    def leader(self) -> str:
        """The lobby leader: the alive node with the smallest name not known dead in the
        epoch it has now (a restarted node counts at once, under its new epoch). This node
        counts itself once it has joined the bus, or (no bus) once every node has read its
        lease (three of their checks, each lease/10): a node that leads in its own view
        before the others can know it is back would split the lobby."""
        now = time.monotonic()
        dead = {
            n for n, (epoch, until) in self.dead.items()
            if until > now and (epoch is None or self.epochs.get(n, 0) <= epoch)
        }
        candidates = (self.alive - dead) - {self.node}
        if not candidates or now - self._leased_at > 0.3 * self.lease_s:
            # alone (nobody to agree with), or everybody has read its lease: for good, so
            # that a node starting next to it does not make it step back for a moment
            self.joined = True
        if self.joined:
            candidates.add(self.node)
        return min(candidates)

    async def refresh(self) -> set[str]:
        leases = await self.store.alive_nodes()
        for node, epoch in leases.items():
            if epoch > self.epochs.get(node, 0):
                self.epochs[node] = epoch
        self.alive = set(leases)
        return self.alive

    # -- lookups ----------------------------------------------------------------------------------
    def locate(self, match_id: str, then: Callable[[Placement], None]) -> None:
        """Call ``then(placement)`` once it is known; lookups of one match share one read."""
        waiting = self._lookups.get(match_id)
        if waiting is not None:
            waiting.append(then)
            return
        self._lookups[match_id] = [then]
        spawn(self._locate(match_id))

    async def _locate(self, match_id: str) -> None:
        try:
            placement = await self.resolve(match_id)
        except MooError as exc:  # the database is away: nothing can be placed
            log.warning("bus: cannot locate %s: %s", match_id, exc)
            placement = MOVING
        self._adopted.pop(match_id, None)
        for then in self._lookups.pop(match_id, []):
            then(placement)

    async def resolve(self, match_id: str) -> Placement:
        deadline = time.monotonic() + self.lease_s + 2.0
        event = self._adopted.setdefault(match_id, asyncio.Event())
        while True:
            event.clear()
            owner = await self.store.owner_of(match_id)
            if owner is not None and not self.is_dead(owner):
                return owner
            if owner is None and await self.store.match_state(match_id) is not True:
                return None  # finished or unknown: answered from the log
            if time.monotonic() > deadline:
                return MOVING
            # its owner died and no node has claimed it yet: wait for the takeover. Its
            # Adopted wakes this at once; the database is asked again only now and then in
            # case that was lost, rarely while a will said the owner died (a survivor is
            # claiming: every lookup asking often would crowd the pool its claim needs)
            try:
                async with asyncio.timeout(DEAD_OWNER_POLL_S if owner is not None else 0.25):
                    await event.wait()
            except TimeoutError:
                pass
