"""Seating requests that a node sends again to a new lobby leader.

The old leader may have started the request's match (committed on some node) and died
before answering. Done again, the request would be refused (the room or challenge it used is
gone) or, for a program, start a second match. So one with a ``request_id`` is looked up in
the database first (server/requests.py) and answered from there if it was done; a refusal
that its first sending would explain is "try again" (:func:`after_move`), so that the client
sends it again under its ``request_id`` and is answered from the database once the match is
there, instead of being told that what happened did not (docs/protocol.md, "Retrying
safely"; docs/cluster.md, "Status", item 6).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from moo.errors import InMatch, MooError, NotAvailable, UnknownMatch, UnknownRoom
from server.cluster.wire import Deliver, LobbyCall, Message
from server.connection import Connection, error_message
from server.requests import MATCH_REQUESTS

__all__ = ["Resent", "after_move", "may_be_done", "refusal"]


class Resent:
    """Runs or sends on, unless the database shows them done, the requests a lobby's
    leader change left unanswered (the lobby's own steps are given as callables)."""

    def __init__(
        self,
        node: str,
        leader: Callable[[], str | None],
        answered: Callable[[Connection, dict[str, Any]], Awaitable[bool]],
        run: Callable[[Connection, str, dict[str, Any]], None],
        forward: Callable[[Connection, str, dict[str, Any]], None],
        sync: Callable[[], None],
        sent: Callable[[LobbyCall, float], None],
        send: Callable[[str, Message], None],
    ) -> None:
        self.node = node
        #: the lobby's leader as this node sees it now (None: not known yet)
        self._leader = leader
        #: answers a request from the database if its match started; True if it did
        self._answered = answered
        #: runs a request in this node's lobby (it leads), raising its refusal
        self._run = run
        #: forwards a request to the leader as one sent again
        self._forward = forward
        self._sync = sync
        #: tracks a forwarded request (with when it was first sent) until it is answered
        self._sent = sent
        self._send = send

    def _leading(self) -> bool:
        return self._leader() in (None, self.node)

    async def run_unless_done(self, conn: Connection, call: LobbyCall) -> None:
        """As this node takes the leadership over: run ``call`` here unless it was done."""
        try:
            if await self._answered(conn, call.msg) or conn.closing:
                return
            if self._leading():
                try:
                    self._run(conn, call.op, call.msg)
                except MooError as exc:
                    raise after_move(exc) from None
                finally:
                    self._sync()
            else:
                self._forward(conn, call.op, call.msg)
        except MooError as exc:
            conn.send(error_message(exc, call.msg.get("id")))

    async def send_unless_done(self, conn: Connection, call: LobbyCall, first: float) -> None:
        """After a leader change: send ``call`` to the leader unless it was done."""
        try:
            if await self._answered(conn, call.msg) or conn.closing:
                return
        except MooError as exc:
            conn.send(error_message(exc, call.msg.get("id")))
            return
        leader = self._leader()
        if leader is None or leader == self.node:
            await self.run_unless_done(conn, call)
            return
        call = dataclasses.replace(call, resent=True)
        if call.msg.get("id") is not None:
            self._sent(call, first)
        self._send(leader, call)


def may_be_done(call: LobbyCall) -> bool:
    """A request that may have started its match already, and can be found by its
    ``request_id`` (server/requests.py)."""
    return call.msg.get("request_id") is not None and call.msg.get("type") in MATCH_REQUESTS


def after_move(exc: MooError) -> MooError:
    """A refusal of a seating request sent again to a new leader that its first sending,
    done by the old leader, would explain (the room or challenge it used is gone, the match it
    rematched is taken, its player now sits in that match): "try again", so that the client
    sends it again under its ``request_id`` and is answered from the database once the match
    is there, instead of being told that what happened did not."""
    if isinstance(exc, UnknownRoom | InMatch | UnknownMatch | NotAvailable) and (
        "try again" not in exc.message
    ):
        return NotAvailable(
            f"the lobby moved to another node while this request was being done ({exc.message});"
            " try again")
    return exc


def refusal(call: LobbyCall) -> Message:
    """The answer of a node that does not lead (any more) to a request sent to it as leader:
    the caller's node sends it again once it learns who leads."""
    return Deliver(call.conn, error_message(
        NotAvailable("the lobby is moving to another node; try again"), call.msg.get("id")
    ))
