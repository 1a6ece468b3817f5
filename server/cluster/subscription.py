"""One client's subscription to a match another node runs: the rules of delivery, pure.

A subscription lives on the client's node. Its **cursor** is the last ``seq`` its client was
sent; :meth:`Subscription.admit` decides for each event the owner relays whether it is the next
one (deliver), one the client has (a repeat: drop), one past a hole (a gap: re-attach from the
cursor, deliver nothing out of order), or one the pending re-attachment's replay will bring
(drop while joining). The moves forwarded for the client wait here for their
acknowledgement: a replay from the log carries no ``ref``, so :meth:`replayed_ack` recognises
the client's own move in it; :meth:`unapplied` names the moves an owner's answer to a follow
proves were never applied. No I/O: :mod:`server.cluster.forwarding` does the sending.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from moo.match import Viewer
from server.cluster.wire import Message
from server.connection import Connection
from server.storage_cluster import Owner

__all__ = ["DELIVER", "DROP", "GAP", "PendingAct", "Subscription"]

DELIVER, DROP, GAP = "deliver", "drop", "gap"
#: moves' ids remembered as answered, per subscription
SETTLED_MAX = 64
#: what a former owner answers a move it can no longer apply (its commit fenced, the match
#: gone from it): from any node but the move's, a late second answer
LATE_REFUSALS = frozenset({"storage_unavailable", "not_available", "unknown_match"})


@dataclass(slots=True)
class PendingAct:
    """A move forwarded for a client and not yet acknowledged (or refused)."""

    ref: Any
    kind: str
    #: the guess, for a guess (what its event must show)
    value: str | None
    #: the cursor when it was sent: its event comes after it
    after: int
    #: the subscription's follow generation when it was sent
    gen: int
    sent: float
    #: the request itself, to send it again (a move an owner proves it never received)
    msg: dict[str, Any] | None = None
    #: how often it was sent again, and when it last went out (monotonic; 0: at ``sent``)
    resent: int = 0
    asked: float = 0.0
    #: the node it was last sent to (None: not sent yet): the one whose answer counts
    node: str | None = None
    #: how often its subscription re-attached because it was unanswered since ``asked``:
    #: each time the move waits twice as long before the next (an owner whose commits are
    #: slow has it and answers in time; asking again every second only re-sends the replay)
    late: int = 0


@dataclass(eq=False, slots=True)
class Subscription:
    conn: Connection
    cid: str
    match_id: str
    #: the seat, or "spectator"; None until the owner's ``match`` names the seat
    viewer: Viewer | None
    #: the last seq this client was sent (None: not known yet; the first event sets it)
    cursor: int | None
    #: where the subscription is attached (None: nowhere yet / owner gone)
    owner: Owner | None = None
    #: follows sent; the generation of the one in flight (events dropped until its marker)
    gen: int = 0
    joining: int | None = None
    join_cursor: int = 0
    join_sent: float = 0.0
    #: follows sent again in a row while one was unanswered (each waits longer)
    tries: int = 0
    #: the follow in flight was the client's own (resume/watch): its marker is passed on
    announce: bool = False
    #: generations of follows in flight that the client asked for (their markers are replies)
    announced: set[int] = field(default_factory=set)
    #: the client asked to follow (``resume``/``watch``, or its seats after ``hello``) and has
    #: not had its reply yet: ``(ref, gen)``, ``gen`` being the request's own follow. A
    #: re-attachment meanwhile carries the request on, so the reply comes from wherever the
    #: match runs now; whichever of the two markers comes first is the one reply
    owed: tuple[Any, int] | None = None
    #: generations of follows that carry such a request on
    carried: set[int] = field(default_factory=set)
    acts: deque[PendingAct] = field(default_factory=deque)
    #: moves answered lately (acknowledged or refused): a late second answer is not passed on
    settled: deque[Any] = field(default_factory=lambda: deque(maxlen=SETTLED_MAX))
    #: requests waiting for an owner (no live owner known)
    waiting: list[Message] = field(default_factory=list)
    #: since when it has had no owner to follow (monotonic), 0 while it has one
    orphaned: float = 0.0

    def admit(self, seq: int) -> str:
        """What to do with the relayed event ``seq``: :data:`DELIVER`, :data:`DROP` or
        :data:`GAP`."""
        if self.joining is not None:
            return DROP  # the replay after the pending follow's marker covers it
        if self.cursor is None or seq == self.cursor + 1:
            return DELIVER
        return DROP if seq <= self.cursor else GAP

    def sent_act(self, msg: dict[str, Any], now: float) -> None:
        """A ``secret`` / ``guess`` / ``resign`` of the client goes to the owner."""
        ref = msg.get("id")
        if ref is not None:
            if ref in self.settled:  # the client used the id again: a new request
                self.settled.remove(ref)
            kind = msg["type"]
            value = msg.get("guess") if kind == "guess" else None
            self.acts.append(
                PendingAct(ref, kind, value, self.cursor or 0, self.gen, now, msg, 0, now)
            )

    def replayed_ack(self, event: dict[str, Any]) -> Any:
        """The ``ref`` an event without one acknowledges: the client's oldest pending move,
        if the event is that move (its seat, kind and guess, after the cursor it was sent at);
        else None."""
        if not self.acts or event.get("seat") != self.viewer:
            return None
        head = self.acts[0]
        if (
            event.get("kind") == head.kind and event["seq"] > head.after
            and (head.value is None or event.get("guess") == head.value)
        ):
            return head.ref
        return None

    def acknowledged(self, ref: Any) -> PendingAct | None:
        """The move ``ref`` got its answer: no longer pending."""
        for act in self.acts:
            if act.ref == ref:
                self.acts.remove(act)
                self.settled.append(ref)
                return act
        return None

    def withdraw(self, ref: Any) -> bool:
        """The move ``ref``, not sent to any node yet, is no longer pending (it was refused
        where it came from): True if it was pending and unsent, and is withdrawn now."""
        for act in self.acts:
            if act.ref == ref and act.node is None:
                self.acts.remove(act)
                self.settled.append(ref)
                return True
        return False

    def forwarded(self, ref: Any, node: str) -> None:
        """The move ``ref`` goes out to ``node`` now: after every follow sent so far, so only
        a later follow's answer can tell whether it arrived; ``node``'s answer is its answer."""
        for act in self.acts:
            if act.ref == ref:
                act.gen = self.gen
                act.node = node

    def stale_refusal(self, sender: str, msg: dict[str, Any]) -> bool:
        """Whether the refusal ``msg`` from ``sender`` is a second answer to a move: a node the
        move is no longer with (a paused owner waking up after its match moved, refusing
        what it read meanwhile) answering a move that was answered already or went elsewhere
        since, whose answer comes from there."""
        ref = msg.get("ref")
        if ref is None or msg.get("code") not in LATE_REFUSALS or (
            self.owner is not None and self.owner[0] == sender
        ):
            return False
        if ref in self.settled:
            return True
        return any(a.ref == ref and a.node is not None and a.node != sender for a in self.acts)

    def unapplied(self, gen: int, seen: list[Any], unsent: set[Any]) -> list[PendingAct]:
        """The owner answered follow ``gen`` after its replay, listing the moves it received
        (``seen``): a pending move sent before that follow and not among them was never
        applied (and is no longer pending). A move still waiting for an owner (``unsent``)
        was not sent at all: it is neither judged nor answered here."""
        received = set(seen)
        out = [a for a in self.acts
               if a.gen < gen and a.ref not in received and a.ref not in unsent]
        for act in out:
            self.acts.remove(act)
        return out

    def resend(self, act: PendingAct, now: float) -> None:
        """``act`` (given by :meth:`unapplied`) goes to the owner again: pending once more,
        after the moves sent since (the owner gets it after them), judged only by a later
        follow."""
        act.resent += 1
        act.gen = self.gen
        act.asked = now
        act.late = 0
        self.acts.append(act)
        if act.ref in self.settled:
            self.settled.remove(act.ref)
