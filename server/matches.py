"""The one seam for match operations: what sessions and the lobby ask of "the matches".

A session never decides *where* a match runs. It calls a :class:`MatchService`:

* on a single node that is the :class:`~server.arena.Arena` itself, which runs every match;
* on a cluster it is the :class:`~server.cluster.router.Router`, which runs the matches this
  node owns in its own arena and forwards everything else to the owner over the bus.

Both sides deal in :class:`Follower` objects: something a match can send to. A local client's
:class:`~server.connection.Connection` is one; on an owner node, a client connected to another
node is represented by a stand-in (:class:`~server.cluster.serving.StandIn`) that relays what
it is sent. The arena does not know the difference, so a forwarded guess takes exactly the
path of a local one once it reaches its owner.

Every follower of a match (a seat or a spectator) is owed each event it may see, in ``seq``
order, exactly once, or a close with 1012 so that it resumes. :meth:`MatchService.follow` is
the single way to (re)attach a follower from a cursor (the last ``seq`` it was sent): a
client's ``resume`` and ``watch``, the seats given back after ``hello``, and the re-seating of
followers when a match changes node all go through it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from moo.match import MatchConfig, Viewer
from moo.variants import GameRules

__all__ = [
    "SPECTATOR", "Follower", "LobbyService", "MatchService", "Requested", "TournamentGame",
    "Viewer",
]

SPECTATOR: Literal["spectator"] = "spectator"


@dataclass(frozen=True, slots=True)
class TournamentGame:
    """What makes a match a hosted tournament's game (server/tournaments.py): the id the
    tournament chose for it beforehand (so it knows where to look for the result, wherever the
    match runs), the tournament's id, and the two secrets when the server sets them. The
    ladder's games (server/ladder.py) are started the same way, with ``ladder`` instead of a
    tournament id."""

    tournament_id: str | None
    match_id: str | None = None
    secrets: tuple[str, str] | None = None
    #: a ladder game instead (server/ladder.py): the ladder's family, as a rules spec
    ladder: str | None = None


@dataclass(frozen=True, slots=True)
class Requested:
    """A match that answers client requests carrying ``request_id`` (server/requests.py):
    the id the lobby derived for it from the request that completed it, and each request's
    record (player, request id, content, an earlier reply), stored in the match's meta by the
    commit that creates it, so that a retry finds the match and nothing else."""

    match_id: str
    records: tuple[dict[str, Any], ...] = ()


class Follower(Protocol):
    """What a match sends to: a local connection, or a stand-in for a remote one."""

    #: the player name the client said ``hello`` with (None before hello)
    player: str | None
    #: ids of the matches in which it holds a seat / watches (kept by the arena)
    matches: list[str]
    spectating: list[str]
    closing: bool
    #: a key for sharing encoded frames between followers of the same wire format
    binary: Any

    def send(self, msg: dict[str, Any]) -> None: ...

    def encode(self, msg: dict[str, Any]) -> Any: ...

    def send_frame(self, frame: Any) -> None: ...

    def close(self, code: int, reason: str) -> None: ...


class MatchService(Protocol):
    """Match operations as a session and the lobby see them (docs/protocol.md, "Matches")."""

    def act(self, conn: Follower, msg: dict[str, Any], received: float | None = None) -> None:
        """``secret`` / ``guess`` / ``resign`` from a seated client (validated message).

        Synchronous on purpose: on the owner nothing is awaited between the frame and the
        store, and a forwarded move is handed to the bus in the same turn."""

    async def follow(
        self,
        conn: Follower,
        match_id: str,
        viewer: Viewer | None,
        cursor: int,
        *,
        announce: bool,
        ref: Any = None,
    ) -> None:
        """Attach ``conn`` to ``match_id`` as ``viewer`` (None: the seat of ``conn.player``),
        replaying every event after ``cursor`` first; with ``announce`` the client is sent
        ``match`` (seat) or ``watching`` (spectator), carrying ``ref``, before the replay."""

    async def resume(self, conn: Follower, match_id: str, last_seq: int, ref: Any) -> None: ...

    async def watch(self, conn: Follower, match_id: str, last_seq: int, ref: Any) -> None: ...

    def unwatch(self, conn: Follower, match_id: str) -> None: ...

    def detach(self, conn: Follower) -> None:
        """The connection is gone: its seats start their grace window, its watching stops."""

    def release(self, conn: Follower) -> None:
        """A replaced connection lets go of its seats silently (its successor takes them)."""

    async def rejoin(
        self, conn: Follower, player: str, listed: Sequence[Mapping[str, Any]]
    ) -> None:
        """After ``hello``: back into the seats of ``player`` in the matches ``listed`` (the
        entries of ``welcome.matches``: ``match_id``, ``seat``), from ``seq`` 1."""

    async def player_matches(self, player: str) -> list[dict[str, Any]]:
        """``welcome.matches``: the player's unfinished matches (not their hosted-bot seats)."""

    async def list_matches(self) -> list[dict[str, Any]]:
        """The ``matches`` request: live matches to watch."""

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
        """Start a match; its seats get ``match`` then its events once they are durable."""

    async def finished_terms(
        self, match_id: str, player: str
    ) -> tuple[list[str], list[str | None], MatchConfig]:
        """Players, hosted bots and terms of a finished match (``rematch``); ``in_match`` /
        ``not_available`` while it is played, ``unknown_match`` if there is none."""

    def busy(self, player: str) -> str | None:
        """The unfinished match ``player`` sits in as far as this node can tell, or None."""

    def is_live(self, match_id: str) -> bool:
        """Whether ``match_id`` is being played (here or, on a cluster, known elsewhere)."""

    def follows(self, conn: Follower, match_id: str) -> bool:
        """Whether ``conn`` already follows ``match_id`` in its seat, or was sent it to its
        end (within :data:`~server.connection.ENDED_MEMORY_S`): a retried request that started
        the match is then answered without replaying the match to it again."""


class LobbyService(Protocol):
    """Getting players into matches (docs/protocol.md, "Lobby"): the :class:`~server.lobby.
    Lobby` on one node, :class:`~server.cluster.leadership.ClusterLobby` on a cluster."""

    #: set when the server stops: requests that would start a match are refused
    closed: bool

    def arrive(self, conn: Follower, player: str, bot: bool) -> Follower | None: ...

    def leave(self, conn: Follower) -> None: ...

    def enqueue(self, conn: Follower, msg: dict[str, Any]) -> None: ...

    def unqueue(self, conn: Follower, ref: Any) -> None: ...

    def challenge(self, conn: Follower, msg: dict[str, Any]) -> None: ...

    def answer(self, conn: Follower, msg: dict[str, Any]) -> None: ...

    def room_create(self, conn: Follower, msg: dict[str, Any]) -> None: ...

    def room_cancel(self, conn: Follower, msg: dict[str, Any]) -> None: ...

    def room_join(self, conn: Follower, msg: dict[str, Any]) -> None: ...

    def play_bot(self, conn: Follower, msg: dict[str, Any]) -> None: ...

    async def rematch(self, conn: Follower, msg: dict[str, Any]) -> None: ...

    def strategies(self) -> list[str]: ...

    def online_count(self) -> int: ...

    def queue_length(self) -> int: ...
