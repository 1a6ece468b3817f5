"""Request ids: what makes a lobby or tournament request safe to send again.

A client may add ``request_id`` (1-64 characters) to the requests that make something
(``moo.protocol.REQUEST_ID_TYPES``). The answer to such a request can be lost although the
request was done: the connection drops, a cluster node dies right after its commit, or a node
cut from the database cannot tell whether its commit landed. Sent again under the same id,
the request must get the first answer, never a second room, match or tournament and never a
refusal of what already happened (docs/protocol.md, "Retrying safely").

The ids of what a request makes are **derived from the player and the request id**: the match
that a ``room_join``, ``accept``, ``play_bot``, ``rematch`` or completing ``queue`` starts, the
tournament a ``tournament_create`` makes, a challenge's id and a room's code. So the record
that the request was done is the thing itself, stored by the very commit that makes it: a
retry computes the same id and finds the match in the log, the tournament in its table, the
room or challenge in the lobby, on whichever node it arrives, after a restart or a leader
change, with no second write that could be lost apart from the first. The request's content
(:func:`fingerprint`) is stored beside it (the match's meta, the tournament's state), so the
same id sent with different content is refused (``request_reused``) instead of answered with
something the client did not ask for.

:class:`Answered` keeps, in memory, the answers the lobby gave to requests whose result is no
longer where a retry looks (a room that was joined, a challenge accepted, a queue entry that
was paired), for as long as a client plausibly retries.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from moo.errors import RequestReused
from server.matches import Follower, MatchService
from server.storage import Store, StoredMatch

__all__ = [
    "MATCH_REQUESTS", "Answered", "answer_from_log", "check_record", "derived", "fingerprint",
    "match_id_of", "record", "reused",
]

#: answers kept by :class:`Answered` (per lobby); the oldest go first
ANSWERED_MAX = 10_000
#: the requests a match answers (or ends with): sent again under their ``request_id``, they
#: are answered from the match's log (:func:`answer_from_log`)
MATCH_REQUESTS = frozenset(("queue", "accept", "room_join", "play_bot", "rematch"))


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


def derived(kind: str, player: str, request_id: str) -> str:
    """The hex digest naming what ``player``'s request ``request_id`` makes (``kind``:
    ``match``, ``tournament``, ``room``, ``challenge``). Names compare case-insensitively, as
    the server's players do; another player's same request id names something else."""
    return _digest(kind, player.casefold(), request_id)


def match_id_of(player: str, request_id: str) -> str:
    """The id of the match that answers ``player``'s request ``request_id``."""
    return "m" + derived("match", player, request_id)[:12]


def fingerprint(msg: dict[str, Any]) -> str:
    """The content of a request, without its ``id`` (a retry may carry a new one): two
    requests under one ``request_id`` are the same request when these are equal."""
    body = {k: v for k, v in msg.items() if k != "id"}
    return _digest(json.dumps(body, sort_keys=True, separators=(",", ":"), default=str))[:32]


def record(player: str, msg: dict[str, Any], answer: dict[str, Any] | None = None
           ) -> dict[str, Any]:
    """What a match's meta keeps of a request that it answers (``answer``: a reply sent
    before the ``match`` message, i.e. ``queued``)."""
    out: dict[str, Any] = {
        "player": player.casefold(), "request_id": msg["request_id"], "body": fingerprint(msg),
    }
    if answer is not None:
        out["answer"] = answer
    return out


def check_record(records: list[dict[str, Any]], player: str, msg: dict[str, Any]
                 ) -> dict[str, Any] | None:
    """The record of ``player``'s request ``msg`` among ``records``; None if it is not there.
    The same request id with different content is ``request_reused``."""
    folded, rid = player.casefold(), msg["request_id"]
    for r in records:
        if r.get("player") == folded and r.get("request_id") == rid:
            if r.get("body") != fingerprint(msg):
                raise reused(rid)
            return r
    return None


def reused(request_id: str) -> RequestReused:
    return RequestReused(
        f"request id {request_id!r} was used for a different request: a new request needs a"
        " new request id")


class Answered:
    """Recent answers by (player, request id), in memory: the replies a retry gets when what
    the first request made is gone from where a retry looks (a room joined, a challenge
    accepted or declined, a queue entry paired). Bounded: the oldest go first."""

    def __init__(self, limit: int = ANSWERED_MAX) -> None:
        self.limit = limit
        self.items: OrderedDict[tuple[str, str], tuple[str, list[dict[str, Any]]]] = (
            OrderedDict())

    def remember(self, request: dict[str, Any], replies: list[dict[str, Any]]) -> None:
        """Keep ``replies`` (without ``ref``) as the answer to the request of ``request``
        (a :func:`record`)."""
        clean = [{k: v for k, v in r.items() if k != "ref"} for r in replies]
        key = (request["player"], request["request_id"])
        self.items[key] = (request["body"], clean)
        self.items.move_to_end(key)
        while len(self.items) > self.limit:
            self.items.popitem(last=False)

    def forget(self, request: dict[str, Any] | None) -> None:
        """Drop the answer to ``request`` (what it made is gone without having been used:
        the same request sent again makes it anew)."""
        if request is not None:
            self.items.pop((request["player"], request["request_id"]), None)

    def recall(self, player: str, msg: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The replies first sent for this request, each a fresh copy; None if none are
        kept. Raises ``request_reused`` for the same id with different content."""
        rid = msg.get("request_id")
        if rid is None:
            return None
        found = self.items.get((player.casefold(), rid))
        if found is None:
            return None
        body, replies = found
        if body != fingerprint(msg):
            raise reused(rid)
        return [dict(r) for r in replies]


async def answer_from_log(
    store: Store, matches: MatchService,
    match_message: Callable[[StoredMatch, str, Any], dict[str, Any]],
    conn: Follower, msg: dict[str, Any],
) -> bool:
    """Answer a request sent again whose first sending started a match, from the database,
    on whichever node it arrives (docs/protocol.md, "Retrying safely"): its first reply
    (``queued``) if it had one before the match, then the ``match`` message with the retry's
    ``ref``, and the match's events from seq 1 unless ``conn`` follows the match already or
    was sent it to its end (:meth:`MatchService.follows`). False when no match answers it (the
    lobby then does the request, or answers it from what it remembers). A database that cannot
    be read is ``storage_unavailable``, which the client retries. Used for a client's request
    (server/session.py) and for one a cluster node sends again to a new lobby leader
    (server/cluster/leadership.py), whose first sending may have started its match as the old
    leader died.
    """
    player = conn.player
    if player is None or msg.get("request_id") is None or msg["type"] not in MATCH_REQUESTS:
        return False
    mid = match_id_of(player, msg["request_id"])
    stored = await store.stored_match(mid)
    found = None if stored is None else check_record(
        stored.meta.get("requests", []), player, msg)
    if found is None and msg["type"] == "queue":
        # a queue entry paired by another player's queue: the match has that player's
        # derived id, and a person's live match is the one to look in
        live = matches.busy(player)
        if live is not None and live != mid:
            stored = await store.stored_match(live)
            found = None if stored is None else check_record(
                stored.meta.get("requests", []), player, msg)
    if found is None or stored is None:
        return False
    ref = msg.get("id")
    if "answer" in found:
        reply = dict(found["answer"])
        if ref is not None:
            reply["ref"] = ref
        conn.send(reply)
        ref = None
    if matches.follows(conn, stored.match_id):
        if ref is not None:
            conn.send(match_message(stored, player, ref))
    else:
        await matches.follow(conn, stored.match_id, None, 0, announce=True, ref=ref)
    return True
