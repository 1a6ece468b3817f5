"""A node's lobby requests that some other node is to answer, and the answer when none comes.

Every request gets exactly one reply (docs/protocol.md). A client's lobby request may be
answered far from the node it is connected to: by the lobby leader (a forwarded
:class:`~server.cluster.wire.LobbyCall`), or, for a request that starts a match, by the node
that starts it (its ``match``). Either can die or be cut off with the request, so the client's
node keeps each such request until its reply passes through, and answers it itself ("try
again") when none came in time. A reply that comes after that is not a second answer: a late
``match`` is passed on without its ``ref`` (the client hears of a match started for it, as
after a takeover), and the client's retry under its ``request_id`` is answered with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from moo.errors import NotAvailable
from server.cluster.wire import LobbyCall
from server.connection import Connection, error_message

__all__ = ["GAVE_UP_S", "LOBBY_PATIENCE_S", "START_PATIENCE_S", "PendingRequests"]

log = logging.getLogger("moo.cluster")

#: a forwarded lobby request unanswered this long gets not_available ("try again")
LOBBY_PATIENCE_S = 5.0
#: a match the leader asked another node to start, unconfirmed this long: not_available
START_PATIENCE_S = 3 * LOBBY_PATIENCE_S
#: how long a request answered "try again" for want of an answer is remembered, so that its
#: late answer is not passed on as a second one
GAVE_UP_S = 600.0

#: a request: (the client's connection id, the request's ``id``)
Key = tuple[str, Any]


class PendingRequests:
    """The requests of this node's clients that another node is to answer."""

    def __init__(self, local: Callable[[str], Connection | None]) -> None:
        #: the local connection of a connection id (None: it is gone)
        self.local = local
        #: forwarded to the leader, not answered yet: the call, when it was last sent, when
        #: first (monotonic times)
        self.forwarded: dict[Key, tuple[LobbyCall, float, float]] = {}
        #: this node leads, and the request started a match on another node, whose ``match``
        #: answers it: that node, and when it was asked
        self.starting: dict[Key, tuple[str, float]] = {}
        #: answered "try again" here (nobody answered in time): when
        self.gave_up: dict[Key, float] = {}

    def sent(self, call: LobbyCall, first: float | None = None) -> None:
        """``call`` (with an ``id``) goes to the leader now; ``first``: when it first did,
        if this is a sending again."""
        key = (call.conn, call.msg.get("id"))
        now = time.monotonic()
        self.forwarded[key] = (call, now, now if first is None else first)
        if first is None:
            self.gave_up.pop(key, None)  # the same id again: a new request

    def awaiting_start(self, key: Key, node: str) -> None:
        """The request ``key`` of a local client started a match on ``node`` (this node
        leads): that node's ``match`` or error answers it, or :meth:`expire` does."""
        self.starting[key] = (node, time.monotonic())
        self.gave_up.pop(key, None)

    def forget(self, cid: str) -> None:
        """The client ``cid`` is gone: nobody is to be answered."""
        for book in (self.forwarded, self.starting):
            for key in [k for k in book if k[0] == cid]:
                del book[key]

    def reply(self, cid: str, msg: dict[str, Any]) -> dict[str, Any]:
        """A message from another node for the local client ``cid``: a reply ends a pending
        request. Returns what the client is to be sent: ``msg``, but a ``match`` started by a
        request answered "try again" here already (its node was paused past the patience,
        and woke) without its ``ref``. (A follow's marker carries ``_gen`` and is the
        forwarding's business; nothing else is touched: ids may be used again, and an event
        or error with the same ``ref`` may be the answer of a later request.)"""
        ref = msg.get("ref")
        if ref is None:
            return msg
        key = (cid, ref)
        self.forwarded.pop(key, None)
        self.starting.pop(key, None)
        if msg.get("type") != "match" or "_gen" in msg or self.gave_up.pop(key, None) is None:
            return msg
        log.info("lobby: match %s started after its request was answered 'try again'; its "
                 "player is told of it", msg.get("match_id"))
        return {k: v for k, v in msg.items() if k != "ref"}

    def expire(self, leader: str | None) -> None:
        """Answer "try again" what was not answered in time (``leader``: who leads now)."""
        now = time.monotonic()
        for key, (_call, sent, first) in list(self.forwarded.items()):
            # sent again after a leader change or a reconnect, a request gets a new wait,
            # but never more than three in all: a lobby that keeps moving still answers
            if now - sent > LOBBY_PATIENCE_S or now - first > 3 * LOBBY_PATIENCE_S:
                del self.forwarded[key]
                self._unanswered(key, f"the lobby (node {leader}) did not answer")
        for key, (node, asked) in list(self.starting.items()):
            # the match's node persists the match before it answers: more patience than for
            # the lobby's own answers, so that a slow commit does not read as a lost request
            if now - asked > START_PATIENCE_S:
                del self.starting[key]
                self._unanswered(key, f"the match could not start: node {node} did not answer")

    def _unanswered(self, key: Key, why: str) -> None:
        now = time.monotonic()
        for old in [k for k, when in self.gave_up.items() if now - when > GAVE_UP_S]:
            del self.gave_up[old]
        self.gave_up[key] = now
        conn = self.local(key[0])
        if conn is not None and not conn.closing:
            conn.send(error_message(NotAvailable(f"{why}; try again"), key[1]))
