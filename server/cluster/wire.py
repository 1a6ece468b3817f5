"""The messages cluster nodes send each other: typed, versioned, MessagePack-encoded.

Every MQTT message between nodes is one :class:`Envelope`: the wire version, the sending node
and its process (``run``), the envelope's number on its topic from that process (``n``: 1, 2,
3, ... per destination, so a receiver can tell a repeat from a loss), and a batch of items. An
item is one of the dataclasses below, encoded as a list ``[tag, field, field, ...]`` in field
order. A receiver drops an envelope of another wire version (logged, never a crash) and skips
an item it cannot decode, without losing the rest of the batch.

Client messages travel inside as the maps the protocol defines (docs/protocol.md), already
validated by the node the client is connected to; nodes trust each other, not clients.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgpack

__all__ = [
    "VERSION",
    "Act",
    "Adopted",
    "Close",
    "Create",
    "Deliver",
    "Detach",
    "Dropped",
    "Envelope",
    "Follow",
    "Followed",
    "Gone",
    "LobbyCall",
    "LobbyState",
    "Message",
    "NotHere",
    "Tick",
    "Unwatch",
    "WireError",
    "decode",
    "encode",
]

log = logging.getLogger("moo.cluster")

#: the version of this module's encoding; bump it for any change a peer would misread
VERSION = 1


class WireError(ValueError):
    """A message that is not a well-formed envelope of this wire version."""


@dataclass(frozen=True, slots=True)
class Message:
    TAG: ClassVar[int] = 0


# -- to a match's owner -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Act(Message):
    """A seated client's ``secret`` / ``guess`` / ``resign`` (the validated message)."""

    TAG: ClassVar[int] = 1
    conn: str
    player: str
    msg: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Follow(Message):
    """Attach client ``conn`` to ``match_id`` as ``viewer`` from ``cursor`` (see
    :meth:`server.matches.MatchService.follow`). ``gen`` numbers the origin's follows of this
    subscription; the owner's :class:`Followed` answer quotes it."""

    TAG: ClassVar[int] = 2
    conn: str
    player: str
    match_id: str
    viewer: int | str | None
    cursor: int
    announce: bool
    ref: Any
    gen: int


@dataclass(frozen=True, slots=True)
class Unwatch(Message):
    TAG: ClassVar[int] = 3
    conn: str
    match_id: str


@dataclass(frozen=True, slots=True)
class Detach(Message):
    """Client ``conn`` is gone: its seats start their grace window, its watching stops. With
    ``replaced``, a newer connection of the same player takes its seats: nobody sees it go."""

    TAG: ClassVar[int] = 4
    conn: str
    replaced: bool = False


# -- from a match's owner -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Deliver(Message):
    """A protocol message for client ``conn`` on the receiving node."""

    TAG: ClassVar[int] = 10
    conn: str
    msg: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Close(Message):
    TAG: ClassVar[int] = 11
    conn: str
    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class Followed(Message):
    """The replay a :class:`Follow` asked for has been sent, up to ``upto``; ``seen`` are the
    ids of that client's moves in this match the owner has received (the others never
    reached it). The follow's marker (the ``match`` or ``watching`` message before the
    replay) carries ``_gen``, which the client's node removes."""

    TAG: ClassVar[int] = 12
    conn: str
    match_id: str
    gen: int
    upto: int
    seen: list[Any] = field(default_factory=list)
    #: the error code if the follow failed (the client heard it if it had a ref)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class NotHere(Message):
    """The receiver does not run ``match_id`` (it moved, or finished and was forgotten): the
    request was not applied; the origin asks the directory again and re-sends it."""

    TAG: ClassVar[int] = 13
    conn: str
    match_id: str
    request: list[Any]


@dataclass(frozen=True, slots=True)
class Dropped(Message):
    """The owner let go of its stand-in for client ``conn`` (its node looked dead): if the
    client is in fact still there, its node re-attaches it."""

    TAG: ClassVar[int] = 14
    conn: str


# -- the lobby ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LobbyCall(Message):
    """A lobby request (or presence: ``arrive``/``leave``) for the lobby leader. ``busy`` is
    the unfinished match the player's node knows them to sit in (one match per person)."""

    TAG: ClassVar[int] = 20
    conn: str
    player: str
    op: str
    msg: dict[str, Any]
    busy: str | None = None
    #: sent again to a new leader (the old one may have done it before it died): a refusal
    #: that its own first doing would explain is "try again" instead (server/requests.py)
    resent: bool = False


@dataclass(frozen=True, slots=True)
class LobbyState(Message):
    """The leader's record of what client ``conn`` has open with it (challenges, rooms, the
    queue entry, rematch wishes), kept by the client's node for a new leader."""

    TAG: ClassVar[int] = 21
    conn: str
    state: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Create(Message):
    """The lobby leader asks the first seated player's node to start a match."""

    TAG: ClassVar[int] = 22
    players: list[str]
    seats: list[Any]
    pacing: str | None
    bots: list[str | None]
    refs: list[Any]
    rated: bool
    rules: dict[str, Any] | None
    assist: bool
    #: a hosted tournament's game: [tournament_id, match_id, secrets or None], with a 4th
    #: item for a ladder game: its ladder (server/matches.py ``TournamentGame``)
    tournament: list[Any] | None = None
    #: a match that answers requests with a ``request_id``: [match_id, records]
    #: (server/matches.py ``Requested``); a queue pairing's match sent to another node also
    #: comes with its id fixed here (no records), so that sending it again is safe
    requested: list[Any] | None = None
    #: 0: the first sending. Otherwise the leader sends a queue pairing's request again (it
    #: may have been lost: server/cluster/pairings.py), to the node's epoch it names: that
    #: node starts the match only if no request of that id reached it before
    again: int = 0


# -- to every node -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Adopted(Message):
    """``node`` (in ``epoch``) runs these matches now: followers elsewhere re-attach there."""

    TAG: ClassVar[int] = 30
    node: str
    epoch: int
    match_ids: list[str]


@dataclass(frozen=True, slots=True)
class Tick(Message):
    """How many envelopes the sender has published to each node so far: a receiver that has
    seen fewer lost the last ones (nothing after them would tell it)."""

    TAG: ClassVar[int] = 31
    sent: dict[str, int]


@dataclass(frozen=True, slots=True)
class Gone(Message):
    """The broker's will for a node whose connection dropped (its process is presumed dead)."""

    TAG: ClassVar[int] = 32
    node: str
    run: str
    epoch: int | None


@dataclass(frozen=True, slots=True)
class Seated(Message):
    """``node`` (in ``epoch``) adopted these matches, with these players in their seats (match
    id -> the two names; None for a hosted bot's seat). A node where one of them is connected
    and does not follow the match attaches them: the node that started it may have died
    between storing it and relaying its ``match`` message, and nothing else would tell them."""

    TAG: ClassVar[int] = 33
    node: str
    epoch: int
    matches: dict[str, list[str | None]]


_TYPES: dict[int, type[Message]] = {
    cls.TAG: cls
    for cls in (Act, Follow, Unwatch, Detach, Deliver, Close, Followed, NotHere, Dropped,
                LobbyCall, LobbyState, Create, Adopted, Tick, Gone, Seated)
}


def item_fields(item: Message) -> list[Any]:
    return [getattr(item, f.name) for f in dataclasses.fields(item)]


def item_list(item: Message) -> list[Any]:
    """An item in its list form (as inside an envelope)."""
    return [item.TAG, *item_fields(item)]


def item_of(raw: Any) -> Message:
    """One item from its list form; :class:`WireError` if it is not one."""
    if not isinstance(raw, list | tuple) or not raw or not isinstance(raw[0], int):
        raise WireError(f"not an item: {raw!r:.80}")
    cls = _TYPES.get(raw[0])
    if cls is None:
        raise WireError(f"unknown item tag {raw[0]}")
    names = [f for f in dataclasses.fields(cls)]
    required = sum(
        1 for f in names
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    args = list(raw[1:])
    if not required <= len(args) <= len(names):
        raise WireError(f"{cls.__name__}: {len(args)} fields")
    try:
        return cls(*args)
    except TypeError as exc:
        raise WireError(f"{cls.__name__}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Envelope:
    node: str
    run: str
    #: the sender's lease epoch (0 before it has one): messages about a match say which
    #: incarnation of its owner sent them
    epoch: int
    n: int
    items: list[Message]


def encode(envelope: Envelope) -> bytes:
    items = [[item.TAG, *item_fields(item)] for item in envelope.items]
    out: bytes = msgpack.packb(
        [VERSION, envelope.node, envelope.run, envelope.epoch, envelope.n, items],
        use_bin_type=True,
    )
    return out


def decode(payload: bytes) -> tuple[Envelope, list[WireError]]:
    """The envelope and the errors of the items that were skipped; :class:`WireError` if the
    envelope itself is unreadable or of another version."""
    try:
        raw = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as exc:
        raise WireError(f"undecodable: {exc}") from None
    if not isinstance(raw, list) or not raw:
        raise WireError("not an envelope")
    if raw[0] != VERSION:
        raise WireError(f"wire version {raw[0]!r}, this node speaks {VERSION}")
    if len(raw) != 6:
        raise WireError("not an envelope")
    _, node, run, epoch, n, items = raw
    if not (isinstance(node, str) and isinstance(run, str) and isinstance(epoch, int)
            and isinstance(n, int)):
        raise WireError("bad envelope header")
    if not isinstance(items, list):
        raise WireError("bad envelope items")
    out: list[Message] = []
    errors: list[WireError] = []
    for item in items:
        try:
            out.append(item_of(item))
        except WireError as exc:
            errors.append(exc)
    return Envelope(node, run, epoch, n, out), errors
