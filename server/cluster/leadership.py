"""The cluster's lobby: one node leads it, the others forward to it.

The lobby leader is the alive node with the smallest name (server/cluster/directory.py); it
runs the ordinary :class:`~server.lobby.Lobby` for the whole cluster: the queue, challenges,
rooms, rematch wishes and everyone's presence, with clients of other nodes represented by
stand-ins (server/cluster/serving.py). Every other node forwards its clients' lobby requests
there (:class:`~server.cluster.wire.LobbyCall`), with the match the client sits in as that
node knows it (``busy``: one unfinished match per person), and keeps two things per client so
that nothing is lost when the leadership changes (the leader died, or a node with a smaller
name came back):

* the leader's record of what the client has open (queue entry, challenges, rooms, rematch
  wishes), which the leader sends after every change (:class:`~server.cluster.wire.
  LobbyState`);
* its requests the leader has not answered yet.

A new leader is told both by every node (presence, the records, the unanswered requests sent
again), and a former leader hands its own clients' entries back the same way. Matches the
lobby agrees on start on the node of the first seated player (:class:`~server.cluster.wire.
Create`), which checks once more that none of its people already sits in a match. Beside
this module: the records (records.py), requests the leader answers later (deferred.py), those
other nodes answer (pending.py) or a new leader gets again (resent.py), queue pairings
(pairings.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from moo.errors import MooError, NotAvailable
from server.arena import Arena
from server.background import spawn
from server.cluster.deferred import DeferredRequests
from server.cluster.directory import Directory
from server.cluster.forwarding import Forwarding
from server.cluster.pairings import PairingWatch
from server.cluster.pending import PendingRequests
from server.cluster.records import Records, restore_entries
from server.cluster.resent import Resent, after_move, may_be_done, refusal
from server.cluster.serving import Serving
from server.cluster.wire import Create, LobbyCall, LobbyState, Message
from server.connection import CLOSE_REPLACED, Connection, error_message
from server.lobby import Lobby, Waiting
from server.matches import Follower, MatchService
from server.requests import answer_from_log
from server.tournaments import unanswered_watch

__all__ = ["ClusterLobby"]

log = logging.getLogger("moo.cluster")


class ClusterLobby:
    """The :class:`~server.matches.LobbyService` of a cluster node."""

    def __init__(
        self,
        node: str,
        arena: Arena,
        strategies: list[str],
        matches: MatchService,
        directory: Directory,
        serving: Serving,
        forwarding: Forwarding,
        send: Callable[[str, Message], None],
        connected: Callable[[], bool],
    ) -> None:
        self.node = node
        self.arena = arena
        self.matches = matches
        self.directory = directory
        self.serving = serving
        self.forwarding = forwarding
        self.send = send
        self.connected = connected
        #: leader side: queue pairings whose match another node was asked to start
        self.watch = PairingWatch(node, directory, self._requeue, send)
        #: the lobby this node runs while it leads (its own clients' presence always)
        self.lobby = Lobby(arena, strategies, matches=matches, busy=self.busy,
                           paired=self.watch.paired)
        #: leader side: rematches, held challenges, and the busy hints of forwarded requests
        self.deferred = DeferredRequests(arena, self.lobby, self.sync)
        self.leader: str | None = None
        #: the records of what clients have open at the leader (server/cluster/records.py)
        self.records = Records(node, self.lobby, forwarding.cid, send)
        #: (sender, call) of arrivals, departures and records sent here before this node led
        self._early: list[tuple[str, LobbyCall]] = []
        #: the requests of local clients that another node is to answer (the leader, or the
        #: node a match starts on), answered here if nobody does in time
        self.requests = PendingRequests(forwarding.local.get)
        #: seating requests sent again after a leader change unless done (resent.py)
        self.resent = Resent(
            node, lambda: self.leader,
            partial(answer_from_log, arena.store, matches, arena.match_message),
            self._run, partial(self._call, resent=True), self.sync, self.requests.sent, send,
        )
        #: hosted tournaments (server/tournaments.py), run where the lobby is: the leader's
        #: handler of a ``tournament_*`` request, and who is told when this node starts or
        #: stops leading (set by the app; None: no tournaments)
        self.on_tournament: Callable[[Follower, dict[str, Any]], None] | None = None
        self.on_leading: Callable[[bool], None] | None = None
        #: told when a client of another node is gone here (its watches end with it)
        self.on_gone: Callable[[Follower], None] | None = None
        #: the ladder (server/ladder.py), run where the lobby is: the leader's handler of a
        #: ``ladder_*`` request or a forwarded ``worker_*`` message (set by the app)
        self.on_ladder: Callable[[Follower, dict[str, Any]], None] | None = None
        #: client side: the tournaments each local client watches (conn id -> ids), watched
        #: again at the next leader
        self.watched: dict[str, set[str]] = {}

    # -- LobbyService -----------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self.lobby.closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self.lobby.closed = value

    def strategies(self) -> list[str]:
        return self.lobby.strategies()

    def is_bot(self, player: str) -> bool:
        return self.lobby.is_bot(player)

    def left(self, conn: Follower) -> None:
        """A client of another node is gone (its node said so, or died)."""
        self._gone(conn)
        self.sync()

    def _gone(self, conn: Follower) -> None:
        self.lobby.leave(conn)
        if self.on_gone is not None:
            self.on_gone(conn)

    def online_count(self) -> int:
        return self.lobby.online_count()

    def local(self, player: str) -> Connection | None:
        """``player``'s connection to this node, if they are connected here."""
        conn = self.lobby.online.get(player)
        return conn if isinstance(conn, Connection) else None

    def queue_length(self) -> int:
        return self.lobby.queue_length()

    def arrive(self, conn: Follower, player: str, bot: bool) -> Follower | None:
        old = self.lobby.arrive(conn, player, bot)
        if self.leading():
            self.deferred.retry_held(player)
        elif isinstance(conn, Connection):
            self._call(conn, "arrive", {"bot": bot}, track=False)
        return old

    def leave(self, conn: Follower) -> None:
        self.lobby.leave(conn)
        if isinstance(conn, Connection):
            cid = self.forwarding.cid(conn)
            self.records.mine.pop(cid, None)
            self.watched.pop(cid, None)
            self.requests.forget(cid)
            if not self.leading():
                self._call(conn, "leave", {}, track=False)

    def enqueue(self, conn: Follower, msg: dict[str, Any]) -> None:
        self._request(conn, "queue", msg)

    def unqueue(self, conn: Follower, ref: Any) -> None:
        self._request(conn, "unqueue", {"id": ref})

    def challenge(self, conn: Follower, msg: dict[str, Any]) -> None:
        self._request(conn, "challenge", msg)

    def answer(self, conn: Follower, msg: dict[str, Any]) -> None:
        self._request(conn, "answer", msg)

    def room_create(self, conn: Follower, msg: dict[str, Any]) -> None:
        self._request(conn, "room_create", msg)

    def room_cancel(self, conn: Follower, msg: dict[str, Any]) -> None:
        self._request(conn, "room_cancel", msg)

    def room_join(self, conn: Follower, msg: dict[str, Any]) -> None:
        self._request(conn, "room_join", msg)

    def play_bot(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A hosted bot's match starts here, on the player's own node (no leader needed)."""
        self.lobby.play_bot(conn, msg)

    async def rematch(self, conn: Follower, msg: dict[str, Any]) -> None:
        if self.leading():
            try:
                await self.lobby.rematch(conn, msg)
            finally:
                self.sync()
        else:
            self._request(conn, "rematch", msg)

    def host_tournaments(self, handler: Callable[[Follower, dict[str, Any]], None],
                         on_leading: Callable[[bool], None],
                         on_gone: Callable[[Follower], None]) -> None:
        """Run the hosted tournaments where the lobby runs: ``handler`` takes the
        ``tournament_*`` requests at the leader, ``on_leading`` is told when this node starts or
        stops leading, ``on_gone`` when another node's client is gone (server/tournaments.py)."""
        self.on_tournament = handler
        self.on_leading = on_leading
        self.on_gone = on_gone
        if self.leader == self.node:  # already leading: the service starts now
            on_leading(True)

    def tournament(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A ``tournament_*`` request of a local client: to the tournaments at the leader."""
        if isinstance(conn, Connection):
            kind, tid = msg["type"], msg.get("tournament_id")
            cid = self.forwarding.cid(conn)
            if kind == "tournament_watch" and tid is not None:
                self.watched.setdefault(cid, set()).add(tid)
            elif kind == "tournament_unwatch" and tid is not None:
                self.watched.get(cid, set()).discard(tid)
        self._request(conn, "tournament", msg)

    def host_ladder(self, handler: Callable[[Follower, dict[str, Any]], None]) -> None:
        """Run the ladder where the lobby runs: ``handler`` takes its requests at the leader
        (told of leadership and departures with the tournaments: :meth:`host_tournaments`)."""
        self.on_ladder = handler

    def ladder(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A ``ladder_*`` request or a bot worker's ``worker_*`` message of a local client: to
        the ladder at the leader."""
        self._request(conn, "ladder", msg)

    def _rewatch(self, conn: Connection, run_here: bool) -> None:
        """After a leader change: the new leader is told the client's watched tournaments
        again (each answers with the object, without ``ref``)."""
        for tid in sorted(self.watched.get(self.forwarding.cid(conn), ())):
            msg = {"type": "tournament_watch", "tournament_id": tid}
            if run_here:
                try:
                    self._run(conn, "tournament", msg)
                except MooError:
                    continue
            else:
                self._call(conn, "tournament", msg, track=False)

    # -- one match per person --------------------------------------------------------------------
    def busy(self, player: str) -> str | None:
        """The unfinished match ``player`` sits in: what their node said with this request,
        a match this node runs, or one another node runs for this node's client."""
        hint = self.deferred.busy(player)
        if hint is not None:
            return hint
        live = self.arena.busy(player)
        if live is not None:
            return live
        conn = self.lobby.online.get(player)
        if isinstance(conn, Connection):
            seated = self.forwarding.seated(conn)
            if seated:
                return seated[0]
        return None

    # -- requests from this node's clients -------------------------------------------------------
    def leading(self) -> bool:
        return self.leader in (None, self.node)

    def _request(self, conn: Follower, op: str, msg: dict[str, Any]) -> None:
        if self.leading():
            try:
                self._run(conn, op, msg)
            finally:
                self.sync()
            return
        assert isinstance(conn, Connection)
        self._call(conn, op, msg)

    def _call(self, conn: Connection, op: str, msg: dict[str, Any], track: bool = True,
              resent: bool = False) -> None:
        leader = self.leader
        if leader is None or leader == self.node:
            return
        if not self.connected():
            if track:
                raise NotAvailable("the lobby cannot be reached right now; try again")
            return
        busy = None
        if conn.player is not None and op in _SEATING and not self.lobby.is_bot(conn.player):
            busy = self.busy(conn.player)
        call = LobbyCall(self.forwarding.cid(conn), conn.player or "", op, msg, busy, resent)
        if track and msg.get("id") is not None:
            self.requests.sent(call)
        self.send(leader, call)

    def note_reply(self, cid: str, msg: dict[str, Any]) -> dict[str, Any]:
        """A message from another node for a local client: what the client is to be sent
        (server/cluster/pending.py)."""
        return self.requests.reply(cid, msg)

    def awaiting_start(self, conn: Connection, ref: Any, node: str) -> None:
        """This node leads, and a local client's request (``room_join``, ``accept``...) started
        a match on ``node``, whose ``match`` (or error) answers it. If ``node`` dies with the
        request, or its answer is lost, :meth:`expire` answers instead: every request is
        answered (docs/protocol.md)."""
        self.requests.awaiting_start((self.forwarding.cid(conn), ref), node)

    def creating(self, players: tuple[str, str], node: str, create: Create | None) -> None:
        """The router starts an agreed match on ``node`` (``create``: the request it sends
        there): a queue pairing's is watched (server/cluster/pairings.py)."""
        self.watch.creating(players, node, create)

    def _requeue(self, entries: tuple[Waiting, Waiting], node: str) -> None:
        """A queue pairing's match node died with the request: both back in the queue."""
        if not self.leading():
            return
        log.warning("lobby: the match of %s and %s was to start on node %s, which died with "
                    "the request: both back in the queue", entries[0].player,
                    entries[1].player, node)
        for entry in entries:
            self.lobby.requeue(entry)
        self.lobby.pair_waiting()
        self.sync()

    def expire(self) -> None:
        """Requests nobody answered in time: the client hears "try again"; queue pairings
        whose match is not stored: checked."""
        self.watch.check()
        self.requests.expire(self.leader)

    # -- the leader's side -----------------------------------------------------------------------
    def received(self, sender: str, item: Message) -> None:
        if isinstance(item, LobbyState):
            self.records.told(item)
            return
        if not isinstance(item, LobbyCall):
            return
        if not self.leading():
            if item.op in ("arrive", "restore", "leave") or (
                item.op == "tournament" and unanswered_watch(item.msg)
            ):
                # the sender takes this node for the leader before this node does (each node
                # sees the election at its own moment): kept, and applied if it comes to lead
                # (it announces only once, when it learns who leads)
                self._early.append((sender, item))
                del self._early[:-_EARLY_MAX]
            # not (or no longer) the leader: the caller's node re-sends when it learns who is
            elif item.msg.get("id") is not None:
                self.send(sender, refusal(item))
            return
        conn = self.serving.standin(sender, item.conn, item.player)
        if item.op == "leave":
            self._gone(conn)
            self.sync()
            return
        self.deferred.note_busy(item.player, item.busy)
        try:
            if item.op == "arrive":
                old = self.lobby.arrive(conn, item.player, bool(item.msg.get("bot")))
                if old is not None and old is not conn:
                    old.close(CLOSE_REPLACED, "replaced by a newer connection")
                self.deferred.retry_held(item.player)
            elif item.op == "restore":
                self._restore(conn, item.msg)
            elif item.op == "rematch":
                spawn(self.deferred.forwarded_rematch(conn, item))
                return
            else:
                self._run(conn, item.op, item.msg)
        except MooError as exc:
            conn.send(error_message(after_move(exc) if item.resent else exc,
                                    item.msg.get("id")))
        finally:
            self.deferred.forget_busy(item.player)
            self.sync()

    def _run(self, conn: Follower, op: str, msg: dict[str, Any]) -> None:
        lobby = self.lobby
        if op == "queue":
            lobby.enqueue(conn, msg)
        elif op == "unqueue":
            lobby.unqueue(conn, msg.get("id"))
        elif op == "challenge":
            self.deferred.challenge(conn, msg)
        elif op == "answer":
            lobby.answer(conn, msg)
        elif op == "room_create":
            lobby.room_create(conn, msg)
        elif op == "room_cancel":
            lobby.room_cancel(conn, msg)
        elif op == "room_join":
            lobby.room_join(conn, msg)
        elif op == "rematch":
            spawn(self.deferred.rematch(conn, msg))
        elif op == "tournament":
            if self.on_tournament is None:
                raise NotAvailable("this server runs no tournaments")
            self.on_tournament(conn, msg)
        elif op == "ladder":
            if self.on_ladder is None:
                raise NotAvailable("this server runs no ladder")
            self.on_ladder(conn, msg)

    # -- records of open entries -----------------------------------------------------------------
    def sync(self) -> None:
        """Leader: tell each node what its clients have open here, when it changed."""
        if self.leading():
            self.records.sync()

    def _restore(self, conn: Follower, state: dict[str, Any]) -> None:
        restore_entries(self.lobby, conn, state)

    # -- leadership ----------------------------------------------------------------------------
    def elect(self) -> None:
        leader = self.directory.leader()
        if leader == self.leader:
            return
        log.info("bus: lobby leader is %s (was %s)", leader, self.leader)
        was = self.leader
        self.leader = leader
        if was == self.node:
            self._hand_over()
        if self.on_leading is not None and (was == self.node) != (leader == self.node):
            self.on_leading(leader == self.node)
        early, self._early = self._early, []
        if leader == self.node:
            self._take_over()
            for sender, item in early:  # announced to this node before it led
                self.received(sender, item)
        else:
            self.announce()

    def _hand_over(self) -> None:
        """This node stops leading: its own clients' entries become records to re-announce;
        the state of other nodes' clients is dropped (their nodes re-announce it)."""
        self.records.keep()
        lobby = self.lobby
        lobby.queue.clear()
        lobby.challenges.clear()
        lobby.rooms.clear()
        lobby.wishes.clear()
        for conn in [c for c in lobby.online.values() if not isinstance(c, Connection)]:
            lobby.leave(conn)
        self.deferred.drop_held()
        self.watch.clear()

    def _take_over(self) -> None:
        """This node leads now: its own clients' entries at the former leader come back."""
        for cid, state in list(self.records.mine.items()):
            conn = self.forwarding.local.get(cid)
            if conn is not None and not conn.closing:
                self._restore(conn, state)
        for (cid, _), (call, _, _) in list(self.requests.forwarded.items()):
            conn = self.forwarding.local.get(cid)
            if conn is not None and not conn.closing:
                if may_be_done(call):
                    spawn(self.resent.run_unless_done(conn, call))
                    continue
                try:
                    self._run(conn, call.op, call.msg)
                except MooError as exc:
                    conn.send(error_message(exc, call.msg.get("id")))
        self.requests.forwarded.clear()
        for present in list(self.lobby.online.values()):
            if isinstance(present, Connection) and not present.closing:
                self._rewatch(present, run_here=True)
        self.deferred.retry_held(None)
        self.sync()

    def announce(self) -> None:
        """Tell the leader who is online here and what they had open (after a leader change
        or a reconnect), and send again the requests it has not answered."""
        leader = self.leader
        if leader is None or leader == self.node or not self.connected():
            return
        for conn in list(self.lobby.online.values()):
            if not isinstance(conn, Connection) or conn.player is None or conn.closing:
                continue
            self._call(conn, "arrive", {"bot": self.lobby.is_bot(conn.player)}, track=False)
            state = self.records.mine.get(self.forwarding.cid(conn))
            if state is not None:
                self._call(conn, "restore", state, track=False)
            self._rewatch(conn, run_here=False)
        for key, (call, _, first) in list(self.requests.forwarded.items()):
            client = self.forwarding.local.get(key[0])
            if client is not None and may_be_done(call):
                del self.requests.forwarded[key]  # answered by the check, or tracked again
                spawn(self.resent.send_unless_done(client, call, first))
                continue
            self.requests.sent(call, first)
            self.send(leader, call)


#: arrivals, departures and restored records kept while this node is not yet the leader
#: their senders take it for (bounded: the oldest go first)
_EARLY_MAX = 10_000

#: lobby requests that would seat the player in a match
_SEATING = frozenset({"queue", "challenge", "answer", "room_create", "room_join", "rematch"})
