"""Getting two players into a match: quick pairing, challenges, private rooms, hosted bots.

The lobby holds only who is waiting for whom; a match, once agreed, belongs to the arena.
All of it is in memory on purpose: after a restart people simply queue again, while matches
already started come back from the log.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from bots.base import available
from moo.errors import NotAvailable, UnknownPlayer, UnknownRoom, UnknownStrategy
from server.arena import Arena, LiveMatch, bot_player_name
from server.connection import Connection

__all__ = ["Lobby"]

#: Room codes avoid look-alike characters (0/O, 1/I/L) so they can be read out loud.
_ROOM_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
_ROOM_CODE_LENGTH = 6
_MAX_ROOMS_PER_PLAYER = 3
_MAX_CHALLENGES_PER_PLAYER = 10


@dataclass(eq=False)
class Waiting:
    conn: Connection
    player: str
    bot: bool
    pool: str
    pacing: str

    def accepts(self, other: Waiting) -> bool:
        return self.pool == "any" or (self.pool == "bots") == other.bot


@dataclass(eq=False)
class Challenge:
    challenge_id: str
    source: Connection
    source_name: str
    target: str
    pacing: str


@dataclass(eq=False)
class Room:
    code: str
    owner: Connection
    owner_name: str
    pacing: str


class Lobby:
    def __init__(self, arena: Arena, bot_strategies: list[str]) -> None:
        self.arena = arena
        self.allowed_bots = bot_strategies
        self.queue: list[Waiting] = []
        self.challenges: dict[str, Challenge] = {}
        self.rooms: dict[str, Room] = {}
        #: player name -> its one live connection
        self.online: dict[str, Connection] = {}
        #: player name -> hello said it is a program
        self.bots: dict[str, bool] = {}
        self.closed = False

    # -- presence -----------------------------------------------------------------------------
    def arrive(self, conn: Connection, player: str, bot: bool) -> Connection | None:
        """Register ``conn`` as the player's live connection; returns the one it replaces."""
        old = self.online.get(player)
        if old is conn:
            old = None
        if old is not None:
            self.leave(old)
        self.online[player] = conn
        self.bots[player] = bot
        return old

    def leave(self, conn: Connection) -> None:
        player = conn.player
        self.queue = [w for w in self.queue if w.conn is not conn]
        for cid in [c for c, ch in self.challenges.items() if ch.source is conn]:
            del self.challenges[cid]
        for code in [c for c, r in self.rooms.items() if r.owner is conn]:
            del self.rooms[code]
        if player is not None and self.online.get(player) is conn:
            del self.online[player]
            self.bots.pop(player, None)

    def _open(self) -> None:
        if self.closed:
            raise NotAvailable("the server is shutting down; try again in a moment")

    # -- quick pairing ------------------------------------------------------------------------
    def enqueue(self, conn: Connection, msg: dict[str, Any]) -> None:
        self._open()
        player = _player(conn)
        pacing = msg.get("pacing") or self.arena.settings.pacing
        me = Waiting(conn, player, self.bots.get(player, False), msg.get("pool") or "any", pacing)
        self.queue = [w for w in self.queue if w.conn is not conn]
        ref = msg.get("id")
        reply: dict[str, Any] = {"type": "queued", "pool": me.pool, "pacing": pacing}
        if ref is not None:
            reply["ref"] = ref
        conn.send(reply)
        for i, other in enumerate(self.queue):
            if (
                other.player != player
                and other.pacing == pacing
                and other.accepts(me)
                and me.accepts(other)
            ):
                del self.queue[i]
                self.arena.create((other.player, player), (other.conn, conn), pacing)
                return
        self.queue.append(me)

    def unqueue(self, conn: Connection, ref: Any) -> None:
        self.queue = [w for w in self.queue if w.conn is not conn]
        conn.send(_with_ref({"type": "unqueued"}, ref))

    # -- challenges ---------------------------------------------------------------------------
    def challenge(self, conn: Connection, msg: dict[str, Any]) -> None:
        self._open()
        player = _player(conn)
        target = self._find_online(msg["opponent"])
        if target == player:
            raise NotAvailable("you cannot challenge yourself")
        if sum(1 for c in self.challenges.values() if c.source is conn) >= (
            _MAX_CHALLENGES_PER_PLAYER
        ):
            raise NotAvailable("too many open challenges; wait for answers first")
        cid = "c" + secrets.token_hex(5)
        pacing = msg.get("pacing") or self.arena.settings.pacing
        self.challenges[cid] = Challenge(cid, conn, player, target, pacing)
        conn.send(_with_ref({"type": "challenge_sent", "challenge_id": cid, "to": target},
                            msg.get("id")))
        self.online[target].send(
            {"type": "challenge", "challenge_id": cid, "from": player, "pacing": pacing}
        )

    def answer(self, conn: Connection, msg: dict[str, Any]) -> None:
        player = _player(conn)
        ch = self.challenges.get(msg["challenge_id"])
        if ch is None or ch.target != player:
            raise NotAvailable("no such open challenge for you")
        del self.challenges[ch.challenge_id]
        if msg["type"] == "decline":
            ch.source.send({"type": "declined", "challenge_id": ch.challenge_id})
            return
        self._open()
        if ch.source.closing or self.online.get(ch.source_name) is not ch.source:
            raise NotAvailable(f"{ch.source_name} is no longer online")
        self.arena.create(
            (ch.source_name, player), (ch.source, conn), ch.pacing, refs=(None, msg.get("id"))
        )

    def _find_online(self, name: str) -> str:
        if name in self.online:
            return name
        folded = name.casefold()
        for online in self.online:
            if online.casefold() == folded:
                return online
        raise UnknownPlayer(f"{name!r} is not online")

    # -- private rooms ------------------------------------------------------------------------
    def room_create(self, conn: Connection, msg: dict[str, Any]) -> None:
        self._open()
        player = _player(conn)
        if sum(1 for r in self.rooms.values() if r.owner is conn) >= _MAX_ROOMS_PER_PLAYER:
            raise NotAvailable("too many open rooms; use or close one first")
        while True:
            code = "".join(secrets.choice(_ROOM_ALPHABET) for _ in range(_ROOM_CODE_LENGTH))
            if code not in self.rooms:
                break
        pacing = msg.get("pacing") or self.arena.settings.pacing
        self.rooms[code] = Room(code, conn, player, pacing)
        conn.send(_with_ref({"type": "room", "code": code, "pacing": pacing}, msg.get("id")))

    def room_join(self, conn: Connection, msg: dict[str, Any]) -> None:
        self._open()
        player = _player(conn)
        code = msg["code"].strip().upper()
        room = self.rooms.get(code)
        if room is None:
            raise UnknownRoom(f"no open room {code!r}")
        if room.owner_name == player:
            raise NotAvailable("that is your own room: share the code with your opponent")
        del self.rooms[code]
        self.arena.create(
            (room.owner_name, player), (room.owner, conn), room.pacing, refs=(None, msg.get("id"))
        )

    # -- hosted bots --------------------------------------------------------------------------
    def strategies(self) -> list[str]:
        return self.allowed_bots or available()

    def play_bot(self, conn: Connection, msg: dict[str, Any]) -> None:
        self._open()
        player = _player(conn)
        strategy = msg["strategy"]
        # Only registered names: create() would also import "module:Class" paths.
        if strategy not in self.strategies():
            raise UnknownStrategy(
                f"unknown bot {strategy!r}; available: {', '.join(self.strategies())}"
            )
        self.arena.create(
            (player, bot_player_name(strategy)),
            (conn, None),
            msg.get("pacing"),
            bots=(None, strategy),
            refs=(msg.get("id"), None),
        )

    def rematch(self, conn: Connection, msg: dict[str, Any]) -> None:
        self._open()
        old: LiveMatch | None = self.arena.rematch(conn, msg["match_id"])
        if old is None:
            conn.send(_with_ref({"type": "rematch_sent", "match_id": msg["match_id"]},
                                msg.get("id")))
            return
        players = old.match.players
        seat = self.arena.seat_of(old, conn)
        conns: list[Connection | None] = [None, None]
        for i, name in enumerate(players):
            c = self.online.get(name)
            conns[i] = c if old.bots[i] is None else None
        bots = tuple(b.strategy_name if b else None for b in old.bots)
        refs = [None, None]
        refs[seat] = msg.get("id")
        # seats swapped
        self.arena.create(
            (players[1], players[0]),
            (conns[1], conns[0]),
            old.match.config.pacing,
            bots=(bots[1], bots[0]),
            refs=(refs[1], refs[0]),
        )


def _player(conn: Connection) -> str:
    assert conn.player is not None
    return conn.player


def _with_ref(msg: dict[str, Any], ref: Any) -> dict[str, Any]:
    if ref is not None:
        msg["ref"] = ref
    return msg
