"""The lobby's records of what each client has open, which outlive a lobby leader.

The leader sends each node, after every change, the record of what its clients have open at
the leader: challenges and rooms (with the ids and codes the players were told), the queue
entry and the rematch wishes. A new leader is given these records back by the clients' nodes
and puts everything back under the same ids, telling nobody anything again
(docs/cluster.md, "Lobby"). Pure functions over a :class:`~server.lobby.Lobby`, and
:class:`Records`, which keeps both ends: what the leader last sent, and what a node was sent.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from moo.variants import rules_from_dict
from server.cluster.serving import StandIn
from server.cluster.wire import LobbyState, Message
from server.connection import Connection
from server.lobby import Challenge, Lobby, Room, Waiting
from server.matches import Follower

__all__ = ["EMPTY", "Records", "open_entries", "restore_entries"]

#: the record of a client with nothing open
EMPTY: dict[str, Any] = {"challenges": [], "rooms": [], "queue": None, "wishes": []}

K = TypeVar("K", bound=Hashable)


def open_entries(lobby: Lobby, key_of: Callable[[Follower], K | None]) -> dict[K, dict[str, Any]]:
    """Each client's record, by ``key_of(connection)`` (None: not recorded)."""
    out: dict[K, dict[str, Any]] = {}

    def record(conn: Follower) -> dict[str, Any] | None:
        key = None if conn.closing else key_of(conn)
        if key is None:
            return None
        return out.setdefault(key, {"challenges": [], "rooms": [], "queue": None, "wishes": []})

    for ch in lobby.challenges.values():
        entry = record(ch.source)
        if entry is not None:
            entry["challenges"].append({
                "id": ch.challenge_id, "target": ch.target, "pacing": ch.pacing,
                "rated": ch.rated, "rules": ch.rules.to_dict(), "assist": ch.assist,
                "request": ch.request,
            })
    for room in lobby.rooms.values():
        entry = record(room.owner)
        if entry is not None:
            entry["rooms"].append({
                "code": room.code, "pacing": room.pacing, "rated": room.rated,
                "rules": room.rules.to_dict(), "assist": room.assist, "request": room.request,
            })
    for w in lobby.queue:
        entry = record(w.conn)
        if entry is not None:
            entry["queue"] = {"pool": w.pool, "pacing": w.pacing, "rated": w.rated,
                              "rules": w.rules.to_dict(), "assist": w.assist,
                              "request": w.request}
    for match_id, who in lobby.wishers().items():
        for conn in who:
            entry = record(conn)
            if entry is not None:
                entry["wishes"].append(match_id)
    return out


def restore_entries(lobby: Lobby, conn: Follower, state: dict[str, Any]) -> None:
    """Put back what ``conn``'s client had open at a former leader, under the same ids and
    codes (and with the ``request_id`` records that made them, so that a request sent again
    finds them); nobody is told again. What pairs now is paired."""
    player = conn.player
    if player is None:
        return
    for c in state.get("challenges", ()):
        if c["id"] not in lobby.challenges:
            lobby.challenges[c["id"]] = Challenge(
                c["id"], conn, player, c["target"], c["pacing"], bool(c["rated"]),
                rules_from_dict(c["rules"]), bool(c.get("assist", False)), c.get("request"),
            )
    for r in state.get("rooms", ()):
        if r["code"] not in lobby.rooms:
            lobby.rooms[r["code"]] = Room(
                r["code"], conn, player, r["pacing"], bool(r["rated"]),
                rules_from_dict(r["rules"]), bool(r.get("assist", False)), r.get("request"),
            )
    q = state.get("queue")
    if q is not None and all(w.conn is not conn for w in lobby.queue):
        lobby.queue.append(Waiting(
            conn, player, lobby.is_bot(player), q["pool"], q["pacing"], bool(q["rated"]),
            rules_from_dict(q["rules"]), bool(q.get("assist", False)), q.get("request"),
        ))
    for match_id in state.get("wishes", ()):
        lobby.restore_wish(match_id, conn)
    lobby.pair_waiting()


class Records:
    """Both ends of the records, for one node's :class:`~server.cluster.leadership.ClusterLobby`.

    As leader it sends each node the records of that node's clients when they change (its
    own clients' it keeps, as any node keeps what it was sent); as any node it keeps the
    last records of its own clients, to give them back to the next leader.
    """

    def __init__(self, node: str, lobby: Lobby, cid: Callable[[Connection], str],
                 send: Callable[[str, Message], None]) -> None:
        self.node = node
        self.lobby = lobby
        self._cid = cid
        self._send = send
        #: the leader's last record of each local client's open entries, by connection id
        self.mine: dict[str, dict[str, Any]] = {}
        #: leader side: what each client was last told it has open, by (node, conn id)
        self._synced: dict[tuple[str, str], dict[str, Any]] = {}

    def _key(self, conn: Follower) -> tuple[str, str] | None:
        if isinstance(conn, StandIn):
            return (conn.origin, conn.cid)
        if isinstance(conn, Connection):
            return (self.node, self._cid(conn))
        return None

    def entries(self) -> dict[tuple[str, str], dict[str, Any]]:
        """What each client has open at this (leading) node, by (node, conn id)."""
        return open_entries(self.lobby, self._key)

    def told(self, item: LobbyState) -> None:
        """The leader sent the record of a client of this node."""
        if item.state == EMPTY or not any(item.state.values()):
            self.mine.pop(item.conn, None)
        else:
            self.mine[item.conn] = item.state

    def sync(self) -> None:
        """Leader: tell each node what its clients have open here, where it changed."""
        state = self.entries()
        for key in set(state) | set(self._synced):
            now = state.get(key, EMPTY)
            if now != self._synced.get(key, EMPTY):
                if key[0] == self.node:
                    if now == EMPTY:
                        self.mine.pop(key[1], None)
                    else:
                        self.mine[key[1]] = now
                else:
                    self._send(key[0], LobbyState(key[1], now))
        self._synced = state

    def keep(self) -> None:
        """This node stops leading: its own clients' entries become its records, to give
        to the next leader, and what it sent the others is forgotten (they keep theirs)."""
        for key, state in self.entries().items():
            if key[0] == self.node:
                self.mine[key[1]] = state
        self._synced.clear()
