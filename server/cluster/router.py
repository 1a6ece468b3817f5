"""A cluster node's :class:`~server.matches.MatchService`: local matches here, the rest forwarded.

The router composes the cluster's parts, each with one job, passed to each other at
construction (nothing replaces anything's methods):

* :class:`~server.arena.Arena` runs the matches this node owns;
* :class:`~server.cluster.transport.Transport` is the MQTT session (ordered, numbered
  envelopes; losses and deaths reported);
* :class:`~server.cluster.directory.Directory` says where a match runs and which nodes live;
* :class:`~server.cluster.forwarding.Forwarding` keeps this node's clients' subscriptions to
  matches run elsewhere (cursors, re-attachment, acknowledgements);
* :class:`~server.cluster.serving.Serving` runs other nodes' clients' requests here;
* :class:`~server.cluster.leases.Leases` decides ownership (leases, takeovers);
* :class:`~server.cluster.takeover.Takeover` acts on ownership changes (a dead node's
  matches claimed, adoptions, matches lost) and runs the periodic checks;
* :class:`~server.cluster.leadership.ClusterLobby` is the cluster's lobby.

A guess from a client of this node reads one way: :meth:`Router.act` -> the arena, if the
match runs here; else :meth:`Forwarding.act` -> the transport -> the owner's
:meth:`Serving.handle` -> its arena, which commits and fans out to the client's stand-in ->
the transport -> :meth:`Forwarding.received` -> the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from moo.errors import InMatch, MooError, Moving, NotAvailable
from moo.match import Match, MatchConfig, Viewer
from moo.variants import GameRules, rules_from_dict
from server.arena import MAX_WATCHING, Arena, match_summary
from server.cluster.directory import Directory
from server.cluster.forwarding import Forwarding
from server.cluster.leadership import ClusterLobby
from server.cluster.leases import Leases
from server.cluster.pairings import Creates
from server.cluster.serving import Serving, StandIn
from server.cluster.takeover import Takeover
from server.cluster.transport import Transport
from server.cluster.wire import (
    Act,
    Adopted,
    Close,
    Create,
    Deliver,
    Detach,
    Dropped,
    Follow,
    Followed,
    LobbyCall,
    LobbyState,
    Message,
    NotHere,
    Seated,
    Unwatch,
)
from server.connection import Connection, error_message
from server.matches import SPECTATOR, Follower, Requested, TournamentGame
from server.settings import Settings
from server.storage import StoredMatch
from server.storage_cluster import ClusterStore

__all__ = ["Router"]

log = logging.getLogger("moo.cluster")


class Router:
    """One cluster node's match operations and the parts behind them."""

    def __init__(
        self, settings: Settings, arena: Arena, store: ClusterStore, node: str,
        strategies: list[str],
    ) -> None:
        assert settings.cluster_url
        self.node = node
        self.arena = arena
        self.store = store
        self.transport = Transport(settings.cluster_url, node, self, self._epoch)
        self.directory = Directory(store, node, settings.lease_ms)
        self.leases = Leases(store, node, self, lease_ms=settings.lease_ms)
        self.serving = Serving(node, arena, self._send)
        self.forwarding = Forwarding(
            node, self.transport.run, self._epoch, self._send, self.directory.locate,
            self.transport.up.is_set,
        )
        self.lobby = ClusterLobby(
            node, arena, strategies, self, self.directory, self.serving, self.forwarding,
            self._send, self.transport.up.is_set,
        )
        #: the requests to start a match that reached this node (one sent again is known)
        self.creates = Creates()
        self.takeover = Takeover(
            node, arena, store, self.directory, self.serving, self.forwarding, self.lobby,
            self.leases, self.transport.broadcast, settings.lease_ms / 10000,
        )

    def _epoch(self) -> int:
        return self.leases.epoch

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Lease and adopt first (so this node knows what it runs), then join the bus."""
        await self.leases.start()
        self.directory.leased()
        with contextlib.suppress(MooError):
            await self.directory.refresh()
        self.lobby.elect()
        self.transport.start()
        self.takeover.start()

    async def stop(self) -> None:
        await self.takeover.stop()
        await self.transport.stop()

    @property
    def state(self) -> str:
        return self.transport.state

    def _send(self, node: str, item: Message) -> None:
        """To a node; to this very node without the broker (in order, on the next turn)."""
        if node == self.node:
            asyncio.get_running_loop().call_soon(self._dispatch, node, self._epoch(), item)
        else:
            self.transport.send(node, item)

    # -- the MatchService seam -----------------------------------------------------------------
    def _here(self, conn: Follower, match_id: str) -> bool:
        """Whether a request of ``conn`` about ``match_id`` goes straight to this arena: the
        match runs here, or is being restored here after a failed write (the arena answers
        "try again"; asking the directory would attach the client a second time), and the
        client does not follow it through a subscription."""
        if not (self.arena.is_live(match_id) or self.arena.restoring(match_id)):
            return False
        return not isinstance(conn, Connection) or (
            self.forwarding.following(conn, match_id) is None
        )

    def act(self, conn: Follower, msg: dict[str, Any], received: float | None = None) -> None:
        match_id = msg["match_id"]
        if self._here(conn, match_id) or not isinstance(conn, Connection) or (
            conn.player is None
        ):
            self.arena.act(conn, msg, received)
            return
        if match_id in self.arena.recent and self.forwarding.following(conn, match_id) is None:
            self.arena.act(conn, msg, received)  # finished here: refused by the arena
            return
        if self.arena.stopping:
            # draining: this connection is about to be closed and its client will resume from
            # another node; a move sent now on its behalf could overtake that resume
            raise NotAvailable("the server is shutting down; try again in a moment")
        self.forwarding.act(conn, msg)

    async def follow(
        self, conn: Follower, match_id: str, viewer: Viewer | None, cursor: int,
        *, announce: bool, ref: Any = None,
    ) -> None:
        if self._here(conn, match_id) or not isinstance(conn, Connection):
            try:
                await self.arena.follow(
                    conn, match_id, viewer, cursor, announce=announce, ref=ref
                )
                return
            except Moving:
                # The match left this node while its log was read (another node took it
                # over, nothing was sent yet): a client of this node follows it there, as if
                # it had asked a moment later. (A stand-in's node is told NotHere instead.)
                if not isinstance(conn, Connection) or conn.closing or self._here(
                    conn, match_id
                ):
                    raise
        if self.arena.stopping:
            raise NotAvailable("the server is shutting down; try again in a moment")
        if viewer == SPECTATOR and announce and match_id not in conn.spectating:
            if len(conn.spectating) >= MAX_WATCHING:
                raise NotAvailable(
                    f"watching {MAX_WATCHING} matches already; unwatch one first"
                )
            conn.spectating.append(match_id)
        self.forwarding.follow(conn, match_id, viewer, cursor, announce=announce, ref=ref)

    async def resume(self, conn: Follower, match_id: str, last_seq: int, ref: Any) -> None:
        await self.follow(conn, match_id, None, last_seq, announce=True, ref=ref)

    async def watch(self, conn: Follower, match_id: str, last_seq: int, ref: Any) -> None:
        await self.follow(conn, match_id, SPECTATOR, last_seq, announce=True, ref=ref)

    def unwatch(self, conn: Follower, match_id: str) -> None:
        if isinstance(conn, Connection) and self.forwarding.unwatch(conn, match_id):
            if match_id in conn.spectating:
                conn.spectating.remove(match_id)
            return
        self.arena.unwatch(conn, match_id)

    def detach(self, conn: Follower) -> None:
        if isinstance(conn, Connection):
            spectating = [m for m in conn.spectating if not self.arena.is_live(m)]
            for match_id in spectating:
                conn.spectating.remove(match_id)
            self.forwarding.detach(conn)
        self.arena.detach(conn)

    def release(self, conn: Follower) -> None:
        if isinstance(conn, Connection):
            self.forwarding.detach(conn, replaced=True)
        self.arena.release(conn)

    async def rejoin(
        self, conn: Follower, player: str, listed: Sequence[Mapping[str, Any]]
    ) -> None:
        """The seats ``welcome.matches`` listed: those running here now from the arena, the
        others followed at their owners, each from ``seq`` 1 (wherever it runs by now)."""
        await self.arena.rejoin(conn, player, listed)
        if not isinstance(conn, Connection):
            return
        for item in sorted(listed, key=lambda m: str(m["match_id"])):
            match_id = str(item["match_id"])
            if self.arena.is_live(match_id) or conn.closing:
                continue
            if self.forwarding.following(conn, match_id) is not None:
                # its `match` came while the welcome was made (the match had just started):
                # it follows the match already, from what it was sent
                continue
            self.forwarding.follow(conn, match_id, int(item["seat"]), 0, announce=True)

    async def player_matches(self, player: str) -> list[dict[str, Any]]:
        """``welcome.matches``: the player's unfinished matches anywhere in the cluster."""
        here = self.arena.live_player_matches(player)
        known = {m["match_id"] for m in here}
        try:
            stored = [sm for sm in await self.store.unfinished_of(player)
                      if sm.match_id not in known]
        except MooError:
            return here  # the database is away: what runs here
        out = list(here)
        for sm in stored:
            seat = _seat(sm, player)
            if seat is None:
                continue
            match = _replay(sm)
            if match is not None and not match.finished:
                out.append(
                    {"match_id": sm.match_id, "seat": seat, "seq": match.seq,
                     "phase": match.phase}
                )
        return sorted(out, key=lambda m: str(m["match_id"]))

    async def list_matches(self) -> list[dict[str, Any]]:
        """This node's live matches, then those other live nodes own (rebuilt from their
        logs for phase and counts); without the database, this node's only."""
        limit = 100
        here = self.arena.listing(limit)
        if len(here) >= limit:
            return here
        try:
            stored = await self.store.live_elsewhere(self.node, limit)
        except MooError:
            return here
        out = list(here)
        for sm in stored:
            if len(out) >= limit:
                break
            match = _replay(sm)
            if match is not None and not match.finished and not self.arena.is_live(sm.match_id):
                out.append(match_summary(match))
        return out

    def create(
        self,
        players: tuple[str, str],
        conns: tuple[Follower | None, Follower | None],
        pacing: str | None,
        bots: tuple[str | None, str | None] = (None, None),
        refs: tuple[Any, Any] = (None, None),
        rated: bool = True,
        rules: GameRules | None = None,
        assist: bool = False,
        tournament: TournamentGame | None = None,
        requested: Requested | None = None,
    ) -> None:
        """A match the lobby agreed on starts on the node of its first seated player, so
        matches spread over the nodes like their players."""
        first = next((c for c in conns if c is not None), None)
        target = first.origin if isinstance(first, StandIn) else self.node
        if not self.transport.up.is_set():
            target = self.node
        if target == self.node:
            self.lobby.creating(players, target, None)
            self._create_here(players, conns, pacing, bots, refs, rated, rules, assist,
                              tournament, requested)
            return
        if requested is None and tournament is None:
            # the id fixed here, so that the request can be sent again (a queue pairing's:
            # server/cluster/pairings.py) and never start a second match
            requested = Requested(self.arena.new_match_id(), ())
        seats: list[Any] = []
        for c in conns:
            if c is None:
                seats.append(None)
            elif isinstance(c, StandIn):
                seats.append([c.origin, c.cid, c.player])
            else:
                assert isinstance(c, Connection)
                seats.append([self.node, self.forwarding.cid(c), c.player])
        create = Create(
            list(players), seats, pacing, list(bots), list(refs), rated,
            None if rules is None else rules.to_dict(), assist,
            None if tournament is None else [
                tournament.tournament_id, tournament.match_id,
                None if tournament.secrets is None else list(tournament.secrets),
                tournament.ladder],
            None if requested is None else [requested.match_id, list(requested.records)],
        )
        self.lobby.creating(players, target, create)
        self._send(target, create)
        for conn, ref in zip(conns, refs, strict=True):
            if isinstance(conn, Connection) and ref is not None:
                # a request of this node's own client: no other node tracks its answer
                self.lobby.awaiting_start(conn, ref, target)

    def _create_here(
        self, players: tuple[str, str], conns: tuple[Follower | None, Follower | None],
        pacing: str | None, bots: tuple[str | None, str | None], refs: tuple[Any, Any],
        rated: bool, rules: GameRules | None, assist: bool,
        tournament: TournamentGame | None = None, requested: Requested | None = None,
    ) -> None:
        """Start the match here, after checking once more that none of this node's people
        already sits in an unfinished match (the lobby leader may not have known)."""
        try:
            for conn, bot in zip(conns, bots, strict=True):
                if (
                    isinstance(conn, Connection) and bot is None and conn.player is not None
                    and not self.lobby.is_bot(conn.player)
                ):
                    busy = self.arena.busy(conn.player) or next(
                        iter(self.forwarding.seated(conn)), None
                    )
                    if busy is not None:
                        raise InMatch(
                            f"{conn.player} is playing match {busy}: finish or resign it first",
                            match_id=busy,
                        )
            self.arena.create(players, conns, pacing, bots, refs, rated, rules, assist,
                              tournament, requested)
        except MooError as exc:
            for conn, ref in zip(conns, refs, strict=True):
                if conn is not None and not conn.closing:
                    conn.send(error_message(
                        NotAvailable(f"the match could not start: {exc.message}")
                        if isinstance(exc, InMatch) else exc, ref,
                    ))

    def busy(self, player: str) -> str | None:
        return self.lobby.busy(player)

    def is_live(self, match_id: str) -> bool:
        return self.arena.is_live(match_id) or match_id in self.forwarding.matches()

    def follows(self, conn: Follower, match_id: str) -> bool:
        return self.arena.follows(conn, match_id) or (
            isinstance(conn, Connection) and self.forwarding.following(conn, match_id) is not None
        )

    async def finished_terms(
        self, match_id: str, player: str
    ) -> tuple[list[str], list[str | None], MatchConfig]:
        return await self.arena.finished_terms(match_id, player)

    # -- the transport's receiver ----------------------------------------------------------------
    def received(self, sender: str, epoch: int, items: list[Message]) -> None:
        for item in items:
            try:
                self._dispatch(sender, epoch, item)
            except Exception:  # one bad item does not cost the others theirs
                log.exception("bus: cannot handle %s from %s", type(item).__name__, sender)

    def _dispatch(self, sender: str, epoch: int, item: Message) -> None:
        if isinstance(item, Deliver):
            msg = self.lobby.note_reply(item.conn, item.msg)
            self.forwarding.received(
                sender, epoch, item if msg is item.msg else Deliver(item.conn, msg))
        elif isinstance(item, Followed | Close | NotHere | Dropped):
            self.forwarding.received(sender, epoch, item)
        elif isinstance(item, Act | Follow | Unwatch | Detach):
            if isinstance(item, Detach) and not item.replaced:
                s = self.serving.standins.get((sender, item.conn))
                if s is not None:
                    self.lobby.left(s)
            self.serving.handle(sender, item)
        elif isinstance(item, LobbyCall | LobbyState):
            self.lobby.received(sender, item)
        elif isinstance(item, Create):
            self._create_from(sender, item)
        elif isinstance(item, Adopted):
            self.takeover.adopted_elsewhere(item)
        elif isinstance(item, Seated):
            self.takeover.seated(item)

    def _create_from(self, sender: str, item: Create) -> None:
        if not self.creates.fresh(item, self._epoch(), self.arena.is_live):
            return  # sent again, and its first sending reached this node (or an earlier run)
        conns: list[Follower | None] = []
        for seat in item.seats:
            if seat is None:
                conns.append(None)
            elif seat[0] == self.node:
                conns.append(self.forwarding.local.get(seat[1]))
            else:
                conns.append(self.serving.standin(seat[0], seat[1], seat[2]))
        rules = None if item.rules is None else rules_from_dict(item.rules)
        self._create_here(
            (item.players[0], item.players[1]), (conns[0], conns[1]), item.pacing,
            (item.bots[0], item.bots[1]), (item.refs[0], item.refs[1]), item.rated, rules,
            item.assist, _tournament_game(item.tournament),
            None if item.requested is None else Requested(
                str(item.requested[0]), tuple(item.requested[1])),
        )

    def lost(self, sender: str | None) -> None:
        self.forwarding.lost(sender)

    def connected(self) -> None:
        """On the bus (the broker has this node's announcement): from the first time on, this
        node counts itself for the lobby's leadership, as the others count it now."""
        was = self.lobby.leader
        self.directory.joined = True
        self.lobby.elect()
        if self.lobby.leader == was:  # (a change announces, or takes over, by itself)
            self.lobby.announce()

    def heard(self, sender: str, epoch: int) -> None:
        if self.directory.heard(sender, epoch):
            self.lobby.elect()

    def back(self, sender: str) -> None:
        self.forwarding.retry_pending(sender)

    def gone(self, node: str, run: str, epoch: int | None) -> None:
        """The broker published ``node``'s will: :class:`Takeover` decides what it means."""
        self.takeover.gone(node, epoch)

    # -- the leases' host ------------------------------------------------------------------------
    # (the router, not the takeover: the leases are built first, and the takeover claims a dead
    # node's matches through them)
    def claiming(self, match_ids: list[str]) -> None:
        self.takeover.claiming(match_ids)

    def adopt(self, match_ids: list[str], stored: list[StoredMatch]) -> list[str]:
        return self.takeover.adopt(match_ids, stored)

    def live_seqs(self) -> dict[str, int]:
        return {i: lm.durable_seq for i, lm in self.arena.live.items() if not lm.broken}

    def let_go(self, match_id: str) -> None:
        self.takeover.let_go(match_id)


def _seat(sm: StoredMatch, player: str) -> int | None:
    players = [str(p) for p in sm.meta.get("players", ())]
    bots = list(sm.meta.get("bots") or [None, None])
    folded = player.casefold()
    for seat, name in enumerate(players[:2]):
        if name.casefold() == folded and (seat >= len(bots) or bots[seat] is None):
            return seat
    return None


def _replay(sm: StoredMatch) -> Match | None:
    try:
        return Match.replay(sm.events, keep_log=False)
    except (ValueError, KeyError, TypeError):
        return None


def _tournament_game(raw: list[Any] | None) -> TournamentGame | None:
    """The tournament part of a forwarded :class:`Create` (see :meth:`Router.create`)."""
    if raw is None:
        return None
    secrets = raw[2]
    return TournamentGame(raw[0], raw[1], None if secrets is None else (secrets[0], secrets[1]),
                          raw[3] if len(raw) > 3 else None)
