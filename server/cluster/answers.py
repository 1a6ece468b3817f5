"""What owners send back to this node's clients: events, markers, follow answers, bounces.

The half of :mod:`server.cluster.forwarding` that reads: each
:class:`~server.cluster.wire.Deliver` passes through its client's
:class:`~server.cluster.subscription.Subscription` (delivered once, in order; a gap
re-attaches; a marker ends a re-attachment; a replayed event acknowledges a pending move), a
:class:`~server.cluster.wire.Followed` settles the moves the owner never received, and a
:class:`~server.cluster.wire.NotHere` sends the request again where the directory says. The
subscriptions and the sending are the forwarding's, given at construction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from moo.errors import MatchFinished, NotAvailable
from moo.match import Viewer
from server.cluster.subscription import DELIVER, GAP, Subscription
from server.cluster.wire import Act, Follow, Followed, Message, NotHere, WireError, item_of
from server.connection import Connection, error_message
from server.matches import SPECTATOR

__all__ = ["Answers"]

log = logging.getLogger("moo.cluster")

#: a move that an owner's answer to a follow proves it never received is sent to it again
#: this many times before the client is told "try again" (docs/cluster.md, "Delivery")
RESEND_MAX = 2


class Answers:
    """Reads what owners send back for this node's subscriptions."""

    def __init__(
        self,
        local: dict[str, Connection],
        subs: dict[str, dict[str, Subscription]],
        sub: Callable[[Connection, str, Viewer | None, int | None], Subscription],
        follow: Callable[[Subscription], None],
        request: Callable[[Subscription, Message], None],
        acknowledged: Callable[[Subscription, Any], None],
        forward: Callable[[Subscription, str, Message], None],
    ) -> None:
        #: the forwarding's connections and subscriptions (shared, not copied)
        self.local = local
        self.subs = subs
        #: the forwarding's subscription of a connection to a match (made if new)
        self._sub = sub
        #: re-attach a subscription from its cursor
        self._follow = follow
        #: send a request to the subscription's owner (or wait for one)
        self._request = request
        #: a pending move got its answer
        self._acknowledged = acknowledged
        #: send a request to a given node
        self._forward = forward
        #: gaps noticed (each re-attached)
        self.gaps = 0

    def deliver(self, sender: str, epoch: int, cid: str, msg: dict[str, Any]) -> None:
        conn = self.local.get(cid)
        if conn is None or conn.closing:
            return
        match_id = msg.get("match_id")
        kind = msg.get("type")
        sub = self.subs.get(cid, {}).get(match_id) if isinstance(match_id, str) else None
        if sub is None:
            if kind == "event" or "_gen" in msg:
                # the replay of a follow of a subscription that has ended since (its match
                # finished and the client had every event): nothing to deliver twice
                return
            if kind == "match" and isinstance(match_id, str):
                if conn.has_seen_end(match_id):
                    # not a new match: a late answer to a follow of one this connection was
                    # sent to its end (its subscription ended with it); following it again
                    # would send the whole match a second time
                    return
                # a match the lobby started on another node: this client follows it from now
                sub = self._sub(conn, match_id, msg.get("seat"), 0)
                sub.owner = (sender, epoch)
            conn.send(msg)
            return
        if kind == "error":  # a reply (from the owner, or from the lobby leader)
            if sub.stale_refusal(sender, msg):
                return  # a second answer to a move, from a node it is no longer with
            ref = msg.get("ref")
            if ref is not None:
                self._acknowledged(sub, ref)
            if sub.viewer is None and sub.joining is None and not sub.acts:
                # a move on a match this client never followed (finished, unknown): refused,
                # and nothing to follow
                self.subs.get(cid, {}).pop(sub.match_id, None)
            conn.send(msg)
            return
        if kind not in ("event", "match", "watching"):
            conn.send(msg)
            return
        if sub.owner is None:
            sub.owner = (sender, epoch)
            sub.orphaned = 0.0
        elif sub.owner != (sender, epoch):
            return  # from a former owner (or a restarted one): the subscription moved on
        if kind == "event":
            self._event(sub, msg)
        elif kind in ("match", "watching"):
            gen = msg.get("_gen")
            if gen is not None:
                msg = {k: v for k, v in msg.items() if k != "_gen"}
            # the client's own request: its reply; a request carried on after a move: the reply
            # if the client has not had one yet
            owed = sub.owed is not None and msg.get("ref") == sub.owed[0]
            client_asked = gen in sub.announced or (gen in sub.carried and owed)
            sub.announced.discard(gen)
            sub.carried.discard(gen)
            if client_asked and owed:
                assert sub.owed is not None
                # answered: the request's own follow may still be answered after a carried one
                # that overtook it (it waited for the directory): that is not a second reply
                sub.announced.discard(sub.owed[1])
                sub.owed = None
            if sub.joining is not None and gen == sub.joining:
                # the marker: the owner's replay of the events after join_cursor follows
                sub.joining = None
                sub.cursor = sub.join_cursor
                if kind == "match":
                    sub.viewer = msg.get("seat")
                elif sub.viewer is None:
                    sub.viewer = SPECTATOR
            # A marker the client asked for is its reply, even that of an older follow (whose
            # replay is dropped: the newest follow replays from what the client has).
            if gen is None or client_asked:
                conn.send(msg)

    def _event(self, sub: Subscription, msg: dict[str, Any]) -> None:
        verdict = sub.admit(msg["seq"])
        if verdict == GAP:
            self.gaps += 1
            log.warning("bus: %s missed %s after seq %s; re-attaching", sub.conn.player,
                        sub.match_id, sub.cursor)
            self._follow(sub)
            return
        if verdict != DELIVER:
            return  # a repeat, or (joining) what the pending follow's replay covers
        ref = msg.get("ref")
        if ref is not None and ref in sub.settled and all(a.ref != ref for a in sub.acts):
            # the move was answered already (its event replayed from the log, then this one
            # live): one answer per request, the event itself is delivered all the same
            msg = {k: v for k, v in msg.items() if k != "ref"}
            ref = None
        if ref is None:
            ref = sub.replayed_ack(msg)
            if ref is not None:
                msg = msg | {"ref": ref}  # an acknowledgement replayed from the log
        if ref is not None:
            self._acknowledged(sub, ref)
        sub.cursor = msg["seq"]
        sub.conn.send(msg)
        if msg.get("kind") == "finished":
            self.subs.get(sub.cid, {}).pop(sub.match_id, None)
            sub.conn.saw_end(sub.match_id)  # the subscription is gone: remember the end
            for act in sub.acts:
                # its answer was lost on the way (the owner's link broke) and the match is
                # over: the request is answered all the same (a move that counted came in
                # the log before ``finished``)
                sub.conn.send(error_message(MatchFinished("the match is over"), act.ref)
                              | {"match_id": sub.match_id})
            sub.acts.clear()
            if sub.match_id in sub.conn.spectating:  # finished matches are not watched
                sub.conn.spectating.remove(sub.match_id)

    def followed(self, sender: str, epoch: int, item: Followed) -> None:
        sub = self.subs.get(item.conn, {}).get(item.match_id)
        if sub is None or item.gen != sub.gen or sub.owner != (sender, epoch):
            return
        sub.joining = None
        if item.error is not None:
            sub.owed = None  # (the client heard the error if it had asked)
            if item.error in ("storage_unavailable", "not_available"):
                sub.owner = None  # it runs nowhere right now: ask again where it does
                sub.orphaned = time.monotonic()
            else:  # not followable at all (e.g. not your seat): the client heard why
                self.subs.get(sub.cid, {}).pop(sub.match_id, None)
            return
        unsent = {i.msg.get("id") for i in sub.waiting if isinstance(i, Act)}
        now = time.monotonic()
        for act in sub.unapplied(item.gen, item.seen, unsent):
            # sent before this follow and never received by the owner, nor acknowledged in
            # its replay: it was not applied. The owner that answered runs the match from its
            # whole log (a former owner's commits are in it, or fenced for good), so the move
            # goes to it now, as the client's own retry would, without the client's wait
            if act.msg is not None and act.resent < RESEND_MAX and not sub.conn.closing:
                sub.resend(act, now)
                self._forward(sub, sender, Act(sub.cid, sub.conn.player or "", act.msg))
                continue
            sub.settled.append(act.ref)
            sub.conn.send(error_message(
                NotAvailable("the match moved to another node; try again"), act.ref
            ) | {"match_id": sub.match_id})

    def not_here(self, sender: str, item: NotHere) -> None:
        sub = self.subs.get(item.conn, {}).get(item.match_id)
        if sub is None:
            return
        if sub.owner is not None and sub.owner[0] == sender:
            sub.owner = None
            sub.orphaned = time.monotonic()
        try:
            request = item_of(item.request)
        except WireError:
            return
        if isinstance(request, Follow) and request.gen != sub.gen:
            return  # a newer follow is on its way
        self._request(sub, request)
