"""A cluster node's side of matches changing owners: deaths, adoptions, matches lost.

The leases (server/cluster/leases.py) decide who owns a match; this part acts on it, so that
every follower of a match follows it wherever it runs now:

* a node whose will the broker published, and whose process is dead, has its matches claimed
  at once (:meth:`Takeover.gone`);
* matches the leases claimed here run here, every node is told, and this node's followers
  are re-seated (:meth:`Takeover.adopt`); another node's adoption moves this node's
  subscriptions there (:meth:`Takeover.adopted_elsewhere`);
* a match this node lost (its lease passed, a commit was fenced) has its followers here
  follow it at its new owner (:meth:`Takeover.let_go`);
* a watchdog checks now and then what no message reports: dead nodes, owners that changed
  under a subscription, matches dropped here that another node took over meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from moo.errors import MooError
from server.arena import Arena, FollowerAt
from server.background import spawn
from server.cluster.directory import Directory
from server.cluster.forwarding import Forwarding
from server.cluster.leadership import ClusterLobby
from server.cluster.leases import Leases
from server.cluster.serving import Serving
from server.cluster.wire import Adopted, Message, Seated
from server.connection import Connection
from server.matches import SPECTATOR
from server.storage import StoredMatch
from server.storage_cluster import ClusterStore

__all__ = ["Takeover"]

log = logging.getLogger("moo.cluster")

#: a node whose will the broker published is dead once PostgreSQL holds no session of it:
#: asked this many times, this far apart, before it counts as alive (cut from the broker only)
DEATH_CHECKS = 5
DEATH_CHECK_S = 0.1


class Takeover:
    """What one node does when matches change owners, and the watchdog that notices."""

    def __init__(
        self, node: str, arena: Arena, store: ClusterStore, directory: Directory,
        serving: Serving, forwarding: Forwarding, lobby: ClusterLobby, leases: Leases,
        broadcast: Callable[[Message], None], check_s: float,
    ) -> None:
        self.node = node
        self.arena = arena
        self.store = store
        self.directory = directory
        self.serving = serving
        self.forwarding = forwarding
        self.lobby = lobby
        self.leases = leases
        self.broadcast = broadcast
        self.check_s = check_s
        arena.movers.append(self._moved)
        arena.recallers.append(forwarding.recall)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    def start(self) -> None:
        self._tasks = [asyncio.get_running_loop().create_task(self._watchdog())]

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- deaths ----------------------------------------------------------------------------------
    def gone(self, node: str, epoch: int | None) -> None:
        """The broker published ``node``'s will: its connection to the broker dropped."""
        if node != self.node:
            spawn(self._gone(node, epoch))

    async def _gone(self, node: str, epoch: int | None) -> None:
        """If ``node``'s process is dead (it holds no database session any more), take its
        matches now, fenced by its epoch: its clients' seats here start their grace, this
        node's subscriptions wait for the new owner. A node that only lost the broker (or a
        broker that shut down and published everyone's will) keeps its matches; a paused
        one is left to its lease."""
        started = time.perf_counter()
        checks = 0
        try:
            # PostgreSQL ends a dead process's sessions as soon as it sees their sockets
            # close, which may be a few ms after the broker did: ask a few times
            while await self.store.node_connected(node):
                checks += 1
                if checks == DEATH_CHECKS:
                    log.warning("bus: node %s lost its broker connection but is alive", node)
                    return
                await asyncio.sleep(DEATH_CHECK_S)
            checks += 1
        except MooError as exc:
            log.warning("bus: cannot tell whether node %s is alive: %s", node, exc)
            return
        # the first phase of a takeover (docs/cluster.md, "Failover"): will -> no session
        log.warning("bus: node %s (epoch %s) is dead: no database session after %d checks, "
                    "%.3f s after its will", node, epoch, checks, time.perf_counter() - started)
        self.directory.gone(node, epoch)
        self.forwarding.owner_gone(node, epoch)
        for s in self.serving.origin_gone(node):
            self.lobby.left(s)
        self.lobby.elect()
        if epoch is not None:
            try:
                await self.leases.claim_from(node, epoch)
            except MooError as exc:
                log.warning("bus: cannot take over %s's matches now: %s", node, exc)

    # -- ownership changes -----------------------------------------------------------------------
    def claiming(self, match_ids: list[str]) -> None:
        self.serving.claiming(match_ids)

    def adopt(self, match_ids: list[str], stored: list[StoredMatch]) -> list[str]:
        """Leases took these matches: run them here, tell every node, re-seat followers."""
        adopted = self.arena.restore(stored)
        self.serving.claimed(match_ids)
        if adopted:
            owner = (self.node, self.leases.epoch)
            self.broadcast(Adopted(self.node, owner[1], adopted))
            seats = {m: p for m in adopted if (p := self._seated(m))}
            self.directory.adopted(adopted)
            for match_id in adopted:
                # this node's clients, via loopback
                self.forwarding.moved(match_id, owner, adopted=True)
            if seats:
                told = Seated(self.node, owner[1], seats)
                self.broadcast(told)
                self.seated(told)  # and this node's own clients
        return adopted

    def _seated(self, match_id: str) -> list[str | None]:
        """The players of an adopted match a client may sit for (None: a hosted bot)."""
        lm = self.arena.live.get(match_id)
        if lm is None or lm.match.finished:
            return []
        return [None if bot is not None else name
                for name, bot in zip(lm.match.players, lm.bots, strict=True)]

    def seated(self, item: Seated) -> None:
        """Matches were adopted (here or elsewhere): their players connected here are
        attached."""
        for match_id, players in item.matches.items():
            spawn(self._attach(match_id, players))

    async def _attach(self, match_id: str, players: list[str | None]) -> None:
        """Attach each of ``players`` connected here that does not follow ``match_id`` (its
        ``match`` message and events from seq 1, as for a new match): without it, a player
        whose announcement died with the node that started the match would never hear of it,
        and lose it by its grace window."""
        for seat, player in enumerate(players):
            if player is None:
                continue
            conn = self.lobby.local(player)
            if conn is None:
                continue
            await conn.welcome_done()  # a welcome that lists the match gives it back itself
            if conn.closing:
                continue
            if self.forwarding.following(conn, match_id) is not None:
                continue  # it heard of the match: its subscription follows it to its owner
            if conn.has_seen_end(match_id):
                # announced before it ended, heard after: this connection was sent the whole
                # match already (the subscription or seat that did it ended with the match)
                continue
            if self.arena.is_live(match_id):
                await self.arena.rejoin(conn, player, [{"match_id": match_id, "seat": seat}])
                # A match that moved to another node while the rejoin read its log is given
                # up by the rejoin (nothing was sent): followed at its new owner instead, as
                # the router's rejoin does. Attached here, or sent to its end, it is left be.
                if (
                    self.arena.is_live(match_id) or conn.closing
                    or self.forwarding.following(conn, match_id) is not None
                    or conn.has_seen_end(match_id)
                ):
                    continue
            self.forwarding.follow(conn, match_id, seat, 0, announce=True)

    def let_go(self, match_id: str) -> None:
        """Another node owns ``match_id`` now: this node's followers re-attach there."""
        self._reseat(match_id, self.arena.let_go(match_id))

    def _moved(self, match_id: str) -> None:
        """A commit found the match owned elsewhere (its lease passed): re-seat followers."""
        self._reseat(match_id, self.arena.unpark(match_id))

    def _reseat(self, match_id: str, followers: list[FollowerAt]) -> None:
        for f in followers:
            if isinstance(f.conn, Connection) and not f.conn.closing:
                if f.viewer == SPECTATOR and match_id not in f.conn.spectating:
                    f.conn.spectating.append(match_id)
                # its moves still unanswered here (a commit in flight as the match left) go
                # with it: the new owner's replay or its own answer answers them
                self.forwarding.follow(f.conn, match_id, f.viewer, f.cursor, announce=False,
                                       pending=self.arena.hand_over(f))

    def adopted_elsewhere(self, item: Adopted) -> None:
        owner = (item.node, item.epoch)
        self.directory.adopted(item.match_ids)
        for match_id in item.match_ids:
            if self.arena.is_live(match_id) or self.arena.moved_away(match_id) or (
                match_id in self.arena.parked
            ):
                self.let_go(match_id)  # (this node lost it: its commits would be fenced)
            self.forwarding.moved(match_id, owner, adopted=True)

    # -- periodic checks -------------------------------------------------------------------------
    async def _watchdog(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.check_s)
            try:
                await self._check()
            except MooError as exc:
                log.warning("bus: check failed: %s", exc)
            except Exception:
                log.exception("bus: check failed unexpectedly")

    async def _check(self) -> None:
        self.lobby.expire()
        alive = await self.directory.refresh()
        self.lobby.elect()
        for node in {k[0] for k in self.serving.standins if k[0] not in alive}:
            for s in self.serving.origin_gone(node):
                self.lobby.left(s)
        followed = self.forwarding.matches()
        owners = await self.store.owners_of(list(followed))
        self.forwarding.check(
            {m: o for m, o in owners.items() if not self.directory.is_dead(o)}
        )
        for match_id in self.arena.moved_parked():
            self._moved(match_id)
        # A match dropped here by a failed write comes back here by replay only while this
        # node still owns it. Paused past its lease (its transaction cut), this node finds
        # on waking that another node took it over meanwhile: its followers here follow it
        # there, from their cursors, instead of waiting for a replay that never comes.
        dropped = self.arena.restoring_parked()
        if dropped:
            me = (self.node, self.leases.epoch)
            for match_id, owner in (await self.store.owners_of(dropped)).items():
                if owner != me and self.arena.restoring(match_id):
                    log.warning("node %s: match %s, dropped here, is run by %s now; its "
                                "followers here follow it there", self.node, match_id, owner[0])
                    self.let_go(match_id)
