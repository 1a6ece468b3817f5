"""The owner side of the bus: requests from clients of other nodes, run by this node's arena.

A client connected to another node is represented here by a :class:`StandIn`, which the arena
treats like any connection: it seats it, validates its moves, commits them and only then
"sends" it the acknowledgement and every later event of the match. A stand-in sends by handing
a :class:`~server.cluster.wire.Deliver` to the transport, addressed to the client's node, in
commit order. So a forwarded guess, once here, takes exactly the path of a local one.

A request for a match this node does not run is answered :class:`~server.cluster.wire.NotHere`
(nothing was done; the client's node asks the directory again and re-sends it), except while
the match is being adopted here (claimed, replay in progress): such requests wait for the
replay, in order, instead of bouncing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from moo.errors import MatchFinished, MooError, Moving
from moo.match import Viewer
from server.arena import Arena
from server.background import spawn
from server.cluster.wire import (
    Act,
    Close,
    Deliver,
    Detach,
    Dropped,
    Follow,
    Followed,
    Message,
    NotHere,
    Unwatch,
    item_list,
)
from server.connection import error_message

__all__ = ["Serving", "StandIn"]

log = logging.getLogger("moo.cluster")

#: a follow served slower than this is logged (its replay read the log over a slow link)
SLOW_FOLLOW_S = 1.0
#: moves' ids remembered per stand-in and match (a follow's ``Followed.seen``)
_SEEN_MAX = 64
#: stand-ins dropped because their node looked dead whose received moves are kept for the
#: client's return (oldest forgotten first)
_KEPT_MAX = 10_000


class _Turn:
    """The follows of one client for one match: served one at a time (``lock``), and how many
    are waiting or being served (``queued``)."""

    __slots__ = ("lock", "queued")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.queued = 0


class StandIn:
    """On the owner node: a client connected to another node, as the arena sees it."""

    #: spectator frames are "encoded" once per value of ``binary``: stand-ins share the map
    binary = "relay"

    __slots__ = ("acts", "cid", "closing", "following", "locks", "matches", "origin", "player",
                 "send_to", "spectating")

    def __init__(
        self, origin: str, cid: str, player: str | None,
        send_to: Callable[[str, Message], None],
    ) -> None:
        self.origin = origin
        self.cid = cid
        self.player = player
        self.send_to = send_to
        self.matches: list[str] = []
        self.spectating: list[str] = []
        self.closing = False
        #: match id -> ids of this client's moves received for it (newest last)
        self.acts: dict[str, deque[Any]] = {}
        #: match id -> the generation of the follow being served (tags its marker)
        self.following: dict[str, int] = {}
        #: match id -> the turn of its follows (served one after another)
        self.locks: dict[str, _Turn] = {}

    def send(self, msg: dict[str, Any]) -> None:
        if self.closing:
            return
        if msg.get("type") in ("match", "watching"):
            gen = self.following.pop(msg.get("match_id", ""), None)
            if gen is not None:
                msg = msg | {"_gen": gen}
        self.send_to(self.origin, Deliver(self.cid, msg))

    def encode(self, msg: dict[str, Any]) -> Any:
        return msg

    def send_frame(self, frame: Any) -> None:
        self.send(frame)

    def close(self, code: int, reason: str) -> None:
        """Close the client's real connection on its node (e.g. replaced by a newer one)."""
        if not self.closing:
            self.send_to(self.origin, Close(self.cid, code, reason))
            self.closing = True


class Serving:
    """Serves forwarded match requests with this node's arena."""

    def __init__(self, node: str, arena: Arena, send: Callable[[str, Message], None]) -> None:
        self.node = node
        self.arena = arena
        self.send = send
        self.standins: dict[tuple[str, str], StandIn] = {}
        #: matches claimed here whose replay is not done yet -> requests waiting for it
        self.adopting: dict[str, list[tuple[str, Message]]] = {}
        #: (node, client) -> (player, its moves received here) of stand-ins dropped because
        #: that node looked dead: a stand-in made again for the client takes them over
        self.kept: dict[tuple[str, str], tuple[str | None, dict[str, deque[Any]]]] = {}
        #: counters for /metrics
        self.served = 0

    def standin(self, origin: str, cid: str, player: str | None) -> StandIn:
        """The stand-in for client ``cid`` of ``origin``; a stale one of another player (its
        detach never came and the id came round again) is detached and replaced."""
        key = (origin, cid)
        s = self.standins.get(key)
        if s is not None and player not in (None, "", s.player):
            self.drop(key)
            s = None
        if s is None:
            s = self.standins[key] = StandIn(origin, cid, player or None, self.send)
            kept = self.kept.pop(key, None)
            if kept is not None and kept[0] == s.player:
                # The moves its predecessor received: the client's node, re-attaching, asks
                # which moves arrived here, and resends the others as never applied. A move
                # received but still committing (its event not yet durable, so in no replay)
                # would be played a second time (issue 33's test_cluster_moving, fenced).
                s.acts = kept[1]
        return s

    def drop(self, key: tuple[str, str], *, notify: bool = False) -> StandIn | None:
        """Let go of a stand-in: its seats start their grace window. With ``notify`` (its
        node only *looked* dead), that node is told, so a client still there re-attaches."""
        s = self.standins.pop(key, None)
        if s is not None:
            self.arena.detach(s)
            s.closing = True
            if notify:
                self._keep(key, s)
                self.send(key[0], Dropped(key[1]))
        return s

    def _keep(self, key: tuple[str, str], s: StandIn) -> None:
        """Remember what ``s`` received: its node only looked dead, and its client may come
        back through a new stand-in (:meth:`standin`)."""
        if not s.acts:
            return
        if len(self.kept) >= _KEPT_MAX:
            for old in list(self.kept)[: _KEPT_MAX // 2]:
                del self.kept[old]
        self.kept[key] = (s.player, s.acts)

    def origin_gone(self, node: str) -> list[StandIn]:
        """``node`` is dead (or its lease ran out): its clients' seats here start their
        grace window; if it was only paused, its clients re-attach when it wakes."""
        return [s for key in [k for k in self.standins if k[0] == node]
                if (s := self.drop(key, notify=True)) is not None]

    # -- adoption ----------------------------------------------------------------------------
    def claiming(self, match_ids: list[str]) -> None:
        for match_id in match_ids:
            self.adopting.setdefault(match_id, [])

    def claimed(self, match_ids: list[str]) -> None:
        """The replay of these matches is done (or failed): serve what waited, in order."""
        for match_id in match_ids:
            for sender, item in self.adopting.pop(match_id, []):
                self.handle(sender, item)

    # -- requests --------------------------------------------------------------------------------
    def handle(self, sender: str, item: Message) -> None:
        if isinstance(item, Detach):
            if item.replaced:  # its successor takes the seats: nobody sees it leave
                gone = self.standins.pop((sender, item.conn), None)
                if gone is not None:
                    self.arena.release(gone)
                    self.arena.detach(gone)  # (its watching; its seats are released)
                    gone.closing = True
            else:
                self.drop((sender, item.conn))
            self.kept.pop((sender, item.conn), None)  # the client is gone from its node
            return
        if isinstance(item, Unwatch):
            s = self.standins.get((sender, item.conn))
            if s is not None:
                self.arena.unwatch(s, item.match_id)
            return
        if not isinstance(item, Act | Follow):
            return
        match_id = item.msg["match_id"] if isinstance(item, Act) else item.match_id
        waiting = self.adopting.get(match_id)
        if waiting is not None:
            waiting.append((sender, item))
            return
        self.served += 1
        s = self.standin(sender, item.conn, item.player)
        if isinstance(item, Act):
            self._act(s, item)
        else:
            spawn(self._follow(s, item))

    def _elsewhere(self, s: StandIn, match_id: str, exc: MooError) -> bool:
        """Whether a refusal means "not run here" (another node may run it): the client's
        node is told so and asks the directory again. A request this node sent itself (the
        directory said nobody runs the match) gets the refusal: it is final."""
        if s.origin == self.node or self.arena.is_live(match_id):
            return False
        return (exc.code == "unknown_match" or isinstance(exc, Moving)
                or self.arena.moved_away(match_id))

    def _act(self, s: StandIn, item: Act) -> None:
        msg = item.msg
        match_id = msg["match_id"]
        ref = msg.get("id")
        if ref is not None:
            seen = s.acts.setdefault(match_id, deque(maxlen=_SEEN_MAX))
            seen.append(ref)
        try:
            self.arena.act(s, msg)
        except MooError as exc:
            if self._elsewhere(s, match_id, exc):
                self.send(s.origin, NotHere(s.cid, match_id, item_list(item)))
                return
            if exc.code == "unknown_match" and not self.arena.is_live(match_id):
                # the directory found no live owner: unknown, or between two owners (a
                # takeover under way): the log tells which
                spawn(self._refuse_unknown(s, msg, exc))
                return
            reply = error_message(exc, ref)
            reply.setdefault("match_id", match_id)
            s.send(reply)

    async def _refuse_unknown(self, s: StandIn, msg: dict[str, Any], exc: MooError) -> None:
        match_id = msg["match_id"]
        ref = msg.get("id")
        try:
            lm = await self.arena.finished_match(match_id)  # the log: finished, unfinished, none
        except Moving as moving:  # unfinished, and no node runs it: between two owners
            exc = moving
        except MooError:
            pass
        else:
            # it ended (and no node runs it any more: its last owner died or restarted): what
            # the node that ran it answers, the match is over (docs/protocol.md), except for a
            # numbered guess retried after the match ended (its node died with the answer):
            # the original event, as on the node that ran it ("Retrying safely")
            exc = MatchFinished("the match is over")
            if msg["type"] == "guess" and "n" in msg:
                try:
                    if self.arena.repeated_in(lm, s, msg):
                        return
                except MooError as refused:
                    exc = refused
        reply = error_message(exc, ref)
        reply.setdefault("match_id", match_id)
        s.send(reply)

    async def _follow(self, s: StandIn, item: Follow) -> None:
        """Serve a follow: marker, replay, :class:`Followed`; one at a time per client and
        match, so each marker is followed by its own replay and tagged with its own follow's
        generation. The turn is forgotten once no follow of the match waits for it: a lock
        released with a follow waiting reads as free until that follow runs, and forgetting
        it then let the next follow take a new one and run beside it, its marker untagged
        (issue 33: a whole match sent twice to one connection)."""
        turn = s.locks.get(item.match_id)
        if turn is None:
            turn = s.locks[item.match_id] = _Turn()
        turn.queued += 1
        try:
            async with turn.lock:
                await self._follow_now(s, item)
        finally:
            turn.queued -= 1
            if not turn.queued and s.locks.get(item.match_id) is turn:
                del s.locks[item.match_id]

    async def _follow_now(self, s: StandIn, item: Follow) -> None:
        if s.closing:
            return
        viewer: Viewer | None = item.viewer  # type: ignore[assignment]
        s.following[item.match_id] = item.gen
        started = time.monotonic()
        error = None
        try:
            await self.arena.follow(
                s, item.match_id, viewer, item.cursor, announce=True, ref=item.ref
            )
        except MooError as exc:
            s.following.pop(item.match_id, None)
            if self._elsewhere(s, item.match_id, exc):
                self.send(s.origin, NotHere(s.cid, item.match_id, item_list(item)))
                return
            error = exc.code
            if item.ref is not None:
                reply = error_message(exc, item.ref)
                reply.setdefault("match_id", item.match_id)
                s.send(reply)
        except Exception:
            log.exception("bus: follow of %s for %s failed", item.match_id, s.player)
            s.following.pop(item.match_id, None)
            error = "internal"
        took = time.monotonic() - started
        if took > SLOW_FOLLOW_S:
            log.warning("bus: follow of %s from %s for %s took %.1f s", item.match_id,
                        item.cursor, s.origin, took)
        lm = self.arena.live.get(item.match_id)
        upto = lm.durable_seq if lm is not None else -1
        seen = list(s.acts.get(item.match_id, ()))
        self.send(s.origin, Followed(s.cid, item.match_id, item.gen, upto, seen, error))
