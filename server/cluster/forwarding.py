"""The client side of the bus: this node's clients following matches other nodes run.

For every (client, match) pair whose match runs elsewhere, a :class:`Subscription` lives here,
where the connection lives, with the one number that makes delivery checkable: its *cursor*,
the last ``seq`` this client was sent. Events relayed by the owner pass through it:

* ``seq == cursor + 1``: delivered, the cursor moves on;
* ``seq <= cursor``: a repeat (a replay overlapping what was sent), dropped;
* ``seq > cursor + 1``: a gap (the broker lost something): nothing is delivered out of order;
  the subscription is re-attached from its cursor instead (below).

A subscription belongs to one owner (node and epoch): messages about its match from any other
sender are stale and dropped. It is **re-attached** -- a :class:`~server.cluster.wire.Follow`
from its cursor -- whenever that owner may not have everything right: the owner changed (a
takeover, announced by :class:`~server.cluster.wire.Adopted`), messages from it were lost
(the transport noticed a gap, or this node's own broker session dropped), or a forwarded move
went unanswered too long. The owner answers a follow with a marker (``match``/``watching``),
the events after the cursor, then :class:`~server.cluster.wire.Followed`; events that arrive
between the follow and its marker are dropped, as the replay after the marker covers them.

Moves forwarded for a client are remembered until acknowledged, so the acknowledgement is
never lost either: an event of the client's own seat that matches the oldest pending move and
comes after the cursor it was sent at carries that move's ``ref`` (a replay from the log has
none), and :class:`~server.cluster.wire.Followed` says which moves the owner has received --
one it has not was never applied, and the client is told ``not_available`` "try again".
When nothing can be done for a client (no owner reachable for a long time), its connection is
closed with 1012 so that it reconnects and resumes: a client is never left in silence.

What owners send back is read by :class:`~server.cluster.answers.Answers`, which this composes.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from moo.errors import NotAvailable
from moo.match import Viewer
from server.cluster.answers import Answers
from server.cluster.directory import Placement
from server.cluster.subscription import Subscription
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
)
from server.connection import CLOSE_RESTART, Connection, error_message
from server.matches import SPECTATOR
from server.storage_cluster import Owner

__all__ = ["Forwarding", "Subscription"]

log = logging.getLogger("moo.cluster")

#: a forwarded move unanswered this long makes its subscription re-attach (which tells
#: whether the owner has it); each further re-attachment for the same move waits twice as
#: long as the one before, up to 8 times: over a slow link to the database a follow takes
#: longer than the periodic check, and re-attaching at every check only replays again
ACT_PATIENCE_S = 2.0
#: a subscription that has had no owner to follow for this long closes its client with 1012
#: (it reconnects and resumes: maybe through another node that reaches the owner)
ORPHAN_PATIENCE_S = 30.0
#: a follow unanswered this long is sent again (it or its answer was lost: a broker restart
#: can drop a follow sent before its owner was back); each further try of the same
#: subscription waits twice as long, up to 8 times, so an owner that is merely slow to replay
#: is not asked again and again
FOLLOW_PATIENCE_S = 1.5

class Forwarding:
    """Forwards this node's clients' requests to owners; delivers what owners send back."""

    def __init__(
        self,
        node: str,
        run: str,
        epoch: Callable[[], int],
        send: Callable[[str, Message], None],
        locate: Callable[[str, Callable[[Placement], None]], None],
        up: Callable[[], bool],
    ) -> None:
        self.node = node
        #: whether the bus is up: a client's request is refused at once ("try again") while it
        #: is not, rather than kept for an unknown time (re-attachments are kept and sent)
        self._up = up
        self.run = run
        self._epoch = epoch
        self._send = send
        #: ``locate(match_id, then)``: ask the directory; ``then(placement)`` once known
        #: (an owner; None: nobody runs it, it is answered from the log here; MOVING)
        self._locate = locate
        #: local connections by cluster-wide id, and their subscriptions by match
        self.local: dict[str, Connection] = {}
        self.subs: dict[str, dict[str, Subscription]] = {}
        #: nodes each connection has sent requests to (each keeps a stand-in for it)
        self.contacted: dict[str, set[str]] = {}
        #: counters for /metrics
        self.forwarded = 0
        self.reattached = 0
        #: seconds from a forwarded move to its acknowledgement here (recent ones)
        self.latency: deque[float] = deque(maxlen=5000)
        #: told every acknowledgement's latency (/metrics' cumulative histogram)
        self.latency_hooks: list[Callable[[float], None]] = []
        #: what owners send back for these subscriptions (server/cluster/answers.py)
        self.answers = Answers(
            self.local, self.subs, self._sub, self._follow, self._request, self._acknowledged,
            self._forward,
        )

    # -- identities ---------------------------------------------------------------------------
    def cid(self, conn: Connection) -> str:
        """A connection's id in the cluster: this process's run id and the object's id (which
        alone would repeat across restarts of this node)."""
        key = self._key(conn)
        self.local[key] = conn
        return key

    def _key(self, conn: object) -> str:
        return f"{self.run}.{id(conn):x}"

    def following(self, conn: Connection, match_id: str) -> Subscription | None:
        return self.subs.get(self.cid(conn), {}).get(match_id)

    def seated(self, conn: Connection) -> list[str]:
        """Matches run elsewhere in which ``conn`` holds a seat (unfinished as far as known)."""
        return [
            m for m, s in self.subs.get(self.cid(conn), {}).items()
            if s.viewer is not None and s.viewer != SPECTATOR
        ]

    # -- requests -----------------------------------------------------------------------------
    def act(self, conn: Connection, msg: dict[str, Any]) -> None:
        self._check_up()
        match_id = msg["match_id"]
        sub = self._sub(conn, match_id, None, None)
        sub.sent_act(msg, time.monotonic())
        self._request(sub, Act(sub.cid, conn.player or "", msg))

    def follow(
        self, conn: Connection, match_id: str, viewer: Viewer | None, cursor: int,
        *, announce: bool, ref: Any = None, pending: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Attach ``conn`` to a match run elsewhere from ``cursor`` (a client's ``resume`` or
        ``watch``, or its seats after ``hello``, or a seat whose match left this node).
        ``pending``: that seat's moves still unanswered, as if forwarded before this follow
        (their events in its replay answer them; the others go to the owner again)."""
        if ref is not None:
            self._check_up()
        sub = self._sub(conn, match_id, viewer, cursor)
        sub.cursor = cursor
        now = time.monotonic()
        for msg in pending:
            sub.sent_act(msg, now)
        self._follow(sub, announce=announce, ref=ref)

    def unwatch(self, conn: Connection, match_id: str) -> bool:
        """Stop following a match run elsewhere; False if ``conn`` does not follow it here."""
        cid = self.cid(conn)
        sub = self.subs.get(cid, {}).pop(match_id, None)
        if sub is None:
            return False
        if sub.owner is not None:
            self._send(sub.owner[0], Unwatch(cid, match_id))
        return True

    def detach(self, conn: Connection, *, replaced: bool = False) -> None:
        """The connection is gone (or ``replaced`` by a newer one of the same player): every
        owner it followed lets go of its stand-in."""
        cid = self.cid(conn)
        subs = self.subs.pop(cid, {})
        nodes = {s.owner[0] for s in subs.values() if s.owner is not None}
        for node in nodes | self.contacted.pop(cid, set()):
            self._send(node, Detach(cid, replaced))
        self.local.pop(cid, None)

    def recall(self, conn: Any, match_id: str, ref: Any) -> bool:
        """A move of ``conn``'s handed over to this subscription when its match left this
        node (:meth:`follow`'s ``pending``) was refused by the fence at this node's commit,
        so it was applied nowhere. While the bus is down it cannot reach the new owner (and
        with a broker that never comes back, the client would wait for ever): withdrawn here
        if it was not passed on yet, and the caller answers it with the refusal ("try
        again"). With the bus up it stays, and goes to the new owner once its answer to the
        follow shows that it does not have it."""
        if self._up():
            return False
        sub = self.subs.get(self._key(conn), {}).get(match_id)
        return sub is not None and sub.withdraw(ref)

    def _check_up(self) -> None:
        if not self._up():
            raise NotAvailable("the node running this match cannot be reached; try again")

    def _sub(
        self, conn: Connection, match_id: str, viewer: Viewer | None, cursor: int | None
    ) -> Subscription:
        cid = self.cid(conn)
        subs = self.subs.setdefault(cid, {})
        sub = subs.get(match_id)
        if sub is None:
            sub = subs[match_id] = Subscription(conn, cid, match_id, viewer, cursor)
        elif viewer is not None:
            sub.viewer = viewer
        return sub

    def _follow(self, sub: Subscription, *, announce: bool = False, ref: Any = None) -> None:
        carried = False
        if announce:
            sub.owed = (ref, sub.gen + 1)
        elif sub.owed is not None:  # the client's own follow is not answered yet: go on
            announce, ref, carried = True, sub.owed[0], True
        sub.tries = sub.tries + 1 if sub.joining is not None else 0
        sub.gen += 1
        sub.joining = sub.gen
        sub.join_cursor = sub.cursor or 0
        sub.join_sent = time.monotonic()
        sub.announce = announce
        if carried:
            sub.carried.add(sub.gen)
        elif announce:
            sub.announced.add(sub.gen)
        self._request(sub, Follow(
            sub.cid, sub.conn.player or "", sub.match_id, sub.viewer, sub.join_cursor,
            announce, ref, sub.gen,
        ))

    def _request(self, sub: Subscription, item: Message) -> None:
        """Send ``item`` to the subscription's owner, or wait for one to be known."""
        if sub.owner is not None:
            self._forward(sub, sub.owner[0], item)
            return
        sub.waiting.append(item)
        if len(sub.waiting) == 1:
            if not sub.orphaned:
                sub.orphaned = time.monotonic()
            self._locate(sub.match_id, lambda placement: self._placed(sub, placement))

    def _placed(self, sub: Subscription, placement: Placement) -> None:
        """The directory answered where the subscription's match runs."""
        if self.subs.get(sub.cid, {}).get(sub.match_id) is not sub or sub.conn.closing:
            return
        waiting, sub.waiting = sub.waiting, []
        if not waiting:
            return
        if sub.owner is None:
            if isinstance(placement, str):  # MOVING
                # between owners for too long (or the database is away): the requests were
                # not applied; the client hears "try again" for each that expects an answer
                for item in waiting:
                    self._refuse(sub, item)
                return
            # None: nobody runs it (finished or unknown): this node answers from the log
            sub.owner = (self.node, self._epoch()) if placement is None else placement
            sub.orphaned = 0.0
        for item in waiting:
            self._forward(sub, sub.owner[0], item)

    def _forward(self, sub: Subscription, node: str, item: Message) -> None:
        if isinstance(item, Act) and item.msg.get("id") is not None:
            sub.forwarded(item.msg["id"], node)
        self.forwarded += 1
        self.contacted.setdefault(sub.cid, set()).add(node)
        self._send(node, item)

    def _refuse(self, sub: Subscription, item: Message) -> None:
        ref = None
        if isinstance(item, Act):
            ref = item.msg.get("id")
            sub.acts = deque(a for a in sub.acts if a.ref != ref)
            sub.settled.append(ref)
        elif isinstance(item, Follow):
            ref = item.ref
            if sub.joining == item.gen:
                sub.joining = None
        if ref is not None:
            sub.conn.send(error_message(
                NotAvailable("the match is moving to another node; try again"), ref
            ) | {"match_id": sub.match_id})

    # -- what owners send back -------------------------------------------------------------------
    def received(self, sender: str, epoch: int, item: Message) -> None:
        if isinstance(item, Deliver):
            self.answers.deliver(sender, epoch, item.conn, item.msg)
        elif isinstance(item, Followed):
            self.answers.followed(sender, epoch, item)
        elif isinstance(item, Close):
            conn = self.local.get(item.conn)
            if conn is not None:
                conn.close(item.code, item.reason)
        elif isinstance(item, NotHere):
            self.answers.not_here(sender, item)
        elif isinstance(item, Dropped):
            for sub in list(self.subs.get(item.conn, {}).values()):
                if sub.owner is not None and sub.owner[0] == sender:
                    self.reattached += 1
                    self._follow(sub)

    def _acknowledged(self, sub: Subscription, ref: Any) -> None:
        act = sub.acknowledged(ref)
        if act is not None:
            latency = time.monotonic() - act.sent
            self.latency.append(latency)
            for hook in self.latency_hooks:
                hook(latency)

    # -- keeping subscriptions attached ----------------------------------------------------------
    def moved(self, match_id: str, owner: Owner, *, adopted: bool = False) -> None:
        """``owner`` runs ``match_id`` now: every subscription to it re-attaches there.

        ``adopted``: ``owner`` took the match by an adoption, a new run from the log. Then a
        subscription that was attached to that same owner re-attaches as well: the owner may
        have dropped the match in between (its commit fenced while its lease had lapsed)
        and taken it back under the same epoch, and what served the subscription there went
        with the match; nothing else would tell this node, and a spectator, who sends no
        moves that could go unanswered, would hear nothing of the match again.
        """
        for subs in self.subs.values():
            sub = subs.get(match_id)
            if sub is not None and (adopted or sub.owner != owner):
                sub.owner = owner
                sub.orphaned = 0.0
                self.reattached += 1
                self._follow(sub)
                waiting, sub.waiting = sub.waiting, []
                for item in waiting:
                    self._forward(sub, owner[0], item)

    def lost(self, sender: str | None) -> None:
        """Messages from ``sender`` (None: anyone) may have been lost: re-attach."""
        for subs in self.subs.values():
            for sub in subs.values():
                if sub.owner is not None and sender in (None, sub.owner[0]):
                    self.reattached += 1
                    self._follow(sub)

    def retry_pending(self, node: str) -> None:
        """``node`` is back on the bus after a cut: follows and moves sent to it meanwhile
        were lost, so those still unanswered go again now rather than after their patience
        (its followers here would otherwise wait seconds more for events it has)."""
        for subs in self.subs.values():
            for sub in subs.values():
                if sub.owner is not None and sub.owner[0] == node and not sub.conn.closing and (
                    sub.joining is not None or sub.acts
                ):
                    self.reattached += 1
                    self._follow(sub)

    def owner_gone(self, node: str, epoch: int | None) -> None:
        """``node``'s process died: its subscriptions wait for the takeover."""
        for subs in self.subs.values():
            for sub in subs.values():
                if sub.owner is not None and sub.owner[0] == node and (
                    epoch is None or sub.owner[1] == epoch
                ):
                    sub.owner = None
                    sub.orphaned = time.monotonic()

    def matches(self) -> dict[str, Owner | None]:
        """Every match followed from here, with the owner it is attached to."""
        out: dict[str, Owner | None] = {}
        for subs in self.subs.values():
            for match_id, sub in subs.items():
                if out.get(match_id) is None:
                    out[match_id] = sub.owner
        return out

    def check(self, owners: dict[str, Owner]) -> None:
        """Periodic: re-attach to owners that changed (an :class:`Adopted` may be lost),
        follows and moves that waited too long; close clients left without an owner."""
        now = time.monotonic()
        for subs in list(self.subs.values()):
            for sub in list(subs.values()):
                if sub.conn.closing:
                    continue
                current = owners.get(sub.match_id)
                if current is not None and current != sub.owner:
                    sub.owner = current
                    sub.orphaned = 0.0
                    self.reattached += 1
                    self._follow(sub)
                    continue
                if sub.owner is None:
                    if sub.orphaned and now - sub.orphaned > ORPHAN_PATIENCE_S:
                        log.warning("bus: no owner for %s for %.0f s; %s resumes",
                                    sub.match_id, now - sub.orphaned, sub.conn.player)
                        sub.conn.close(CLOSE_RESTART, "match unreachable; resume")
                    elif not sub.waiting:
                        self._request_owner(sub)
                    continue
                late_join = sub.joining is not None and (
                    now - sub.join_sent > FOLLOW_PATIENCE_S * 2 ** min(sub.tries, 3)
                )
                late_act = False
                if sub.joining is None and sub.acts:
                    head = sub.acts[0]
                    if now - head.asked > ACT_PATIENCE_S * 2 ** min(head.late, 3):
                        late_act = True
                        head.late += 1
                        head.asked = now
                if late_join or late_act:
                    log.info("bus: %s's %s of %s unanswered; following again from %s",
                             sub.conn.player, "follow" if late_join else "move",
                             sub.match_id, sub.cursor)
                    self.reattached += 1
                    self._follow(sub)

    def _request_owner(self, sub: Subscription) -> None:
        """An orphaned subscription with nothing to send asks where its match runs now."""
        self._locate(sub.match_id, lambda placement: self._found(sub, placement))

    def _found(self, sub: Subscription, placement: Placement) -> None:
        if isinstance(placement, str) or sub.owner is not None or (
            self.subs.get(sub.cid, {}).get(sub.match_id) is not sub
        ):
            return  # (MOVING: the next check asks again)
        self.moved(sub.match_id, (self.node, self._epoch()) if placement is None else placement)
