"""Getting two players into a match: quick pairing, challenges, private rooms, hosted bots.

The lobby holds only who is waiting for whom; a match, once agreed, belongs to the arena.
All of it is in memory on purpose: after a restart people simply queue again, while matches
already started come back from the log.

People play one match at a time (bots, i.e. hello with ``bot: true``, any number): every
request that would seat a person in a second unfinished match is refused with ``in_match``,
and when a person's match starts by any path their queue entry and open rooms are dropped,
with ``unqueued`` / ``room_closed`` (reason ``matched``) so their client knows.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bots.registry import available
from bots.variants import VARIANT_BOTS, check_bot
from moo.errors import (
    AssistRated,
    InMatch,
    NoRoom,
    NotAvailable,
    NotYourSeat,
    UnknownMatch,
    UnknownPlayer,
    UnknownRoom,
    UnknownStrategy,
    WrongPool,
)
from moo.variants import GameRules
from server.arena import Arena
from server.hosted import bot_player_name
from server.matches import Follower, MatchService, Requested, TournamentGame
from server.requests import Answered, derived, fingerprint, match_id_of, record, reused

__all__ = ["Lobby"]

#: Room codes avoid look-alike characters (0/O, 1/I/L) so they can be read out loud.
_ROOM_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
_ROOM_CODE_LENGTH = 6
_MAX_ROOMS_PER_PLAYER = 3
_MAX_CHALLENGES_PER_PLAYER = 10
#: finished matches whose rematch wishes are remembered
_REMATCH_MAX = 1000
#: seconds a request that asked for a match is taken to be starting it (its first commit, on
#: a cluster on another node, not seen yet): a retry meanwhile is "try again", not a refusal
_STARTING_S = 30.0
#: requests remembered so (the oldest go first)
_STARTING_MAX = 10_000


@dataclass(eq=False)
class Waiting:
    conn: Follower
    player: str
    bot: bool
    pool: str
    pacing: str
    rated: bool
    rules: GameRules
    assist: bool = False
    #: the ``queue`` request that made this entry, when it had a ``request_id``: its
    #: ``request_id`` and content (server/requests.py)
    request: dict[str, Any] | None = None

    def accepts(self, other: Waiting) -> bool:
        return self.pool == "any" or (self.pool == "bots") == other.bot

    def pairs_with(self, other: Waiting) -> bool:
        """Two entries pair when each accepts the other on the same terms (never rated with
        unrated, never lockstep with free, never different rules)."""
        return (
            other.player != self.player
            and other.pacing == self.pacing
            and other.rated == self.rated
            and other.rules == self.rules
            and other.assist == self.assist
            and other.accepts(self)
            and self.accepts(other)
        )


@dataclass(eq=False)
class Challenge:
    challenge_id: str
    source: Follower
    source_name: str
    target: str
    pacing: str
    rated: bool
    rules: GameRules
    assist: bool = False
    #: the request that made it, when it had a ``request_id`` (see :class:`Waiting`)
    request: dict[str, Any] | None = None


@dataclass(eq=False)
class Room:
    code: str
    owner: Follower
    owner_name: str
    pacing: str
    rated: bool
    rules: GameRules
    assist: bool = False
    #: the request that made it, when it had a ``request_id`` (see :class:`Waiting`)
    request: dict[str, Any] | None = None


class Lobby:
    """The lobby of one node, or of the cluster's lobby leader (server/cluster/leadership.py).

    ``matches`` is where agreed matches start (the arena on one node, the cluster's router
    otherwise); ``busy(player)`` names the unfinished match a player sits in as far as the
    deciding node knows (on a cluster the leader adds what the player's own node reported).
    ``paired(a, b)`` is told of two queue entries just before they start a match (on a cluster
    the leader keeps them until the match is known to have started, to put them back in the
    queue if the node asked to start it dies with the request).
    """

    def __init__(
        self,
        arena: Arena,
        bot_strategies: list[str],
        *,
        matches: MatchService | None = None,
        busy: Callable[[str], str | None] | None = None,
        paired: Callable[[Waiting, Waiting], None] | None = None,
    ) -> None:
        self.arena = arena
        self.paired = paired
        self.matches: MatchService = matches if matches is not None else arena
        self.busy = busy if busy is not None else self.matches.busy
        self.allowed_bots = bot_strategies
        #: finished match id -> the players (casefolded) who asked for a rematch, with the
        #: connection they asked from
        self.wishes: OrderedDict[str, dict[str, Follower]] = OrderedDict()
        #: finished matches already rematched (a third wish is refused as unknown)
        self.rematched: OrderedDict[str, None] = OrderedDict()
        self.queue: list[Waiting] = []
        self.challenges: dict[str, Challenge] = {}
        self.rooms: dict[str, Room] = {}
        #: player name -> its one live connection
        self.online: dict[str, Follower] = {}
        #: player name -> hello said it is a program
        self.bots: dict[str, bool] = {}
        self.closed = False
        #: answers to requests with a ``request_id`` whose result a retry no longer finds
        #: where it looks (a room joined, a challenge answered, a queue entry paired)
        self.answered = Answered()
        #: (player, request id) -> when that request asked for its match (monotonic s)
        self.starting: OrderedDict[tuple[str, str], float] = OrderedDict()

    # -- presence -----------------------------------------------------------------------------
    def arrive(self, conn: Follower, player: str, bot: bool) -> Follower | None:
        """Register ``conn`` as the player's live connection; returns the one it replaces."""
        old = self.online.get(player)
        if old is conn:
            old = None
        if old is not None:
            self.leave(old)
        self.online[player] = conn
        self.bots[player] = bot
        return old

    def leave(self, conn: Follower) -> None:
        player = conn.player
        self.queue = [w for w in self.queue if w.conn is not conn]
        for cid in [c for c, ch in self.challenges.items() if ch.source is conn]:
            self.answered.forget(self.challenges.pop(cid).request)
        for code in [c for c, r in self.rooms.items() if r.owner is conn]:
            # gone with its connection: the same request sent again makes it again
            self.answered.forget(self.rooms.pop(code).request)
        if player is not None and self.online.get(player) is conn:
            del self.online[player]
            self.bots.pop(player, None)

    def check_open(self) -> None:
        if self.closed:
            raise NotAvailable("the server is shutting down; try again in a moment")

    # -- one live match per person ------------------------------------------------------------
    def is_bot(self, player: str) -> bool:
        return self.bots.get(player, False)

    def online_count(self) -> int:
        return len(self.online)

    def queue_length(self) -> int:
        return len(self.queue)

    def free(self, player: str, msg: dict[str, Any] | None = None) -> None:
        """Refuse (``in_match``) if ``player`` is a person already in an unfinished match;
        "try again" when that match is the one this very request (``msg``, sent again under
        its ``request_id``) is starting: it is answered once it is stored."""
        if self.is_bot(player):
            return
        live = self.busy(player)
        rid = None if msg is None else msg.get("request_id")
        if live is not None and rid is not None and live == match_id_of(player, rid):
            raise NotAvailable("this request is being answered already; try again")
        if live is not None:
            raise InMatch(
                f"you are playing match {live}: finish or resign it first", match_id=live
            )

    def start(
        self,
        players: tuple[str, str],
        conns: tuple[Follower | None, Follower | None],
        pacing: str | None,
        *,
        rated: bool,
        rules: GameRules,
        assist: bool = False,
        bots: tuple[str | None, str | None] = (None, None),
        refs: tuple[Any, Any] = (None, None),
        tournament: TournamentGame | None = None,
        requested: Requested | None = None,
    ) -> None:
        """Every path into a match: start it, then drop each person's other ways into one."""
        self.matches.create(
            players, conns, pacing, bots=bots, refs=refs, rated=rated, rules=rules,
            assist=assist, tournament=tournament, requested=requested,
        )
        for player, bot in zip(players, bots, strict=True):
            if bot is None and not self.is_bot(player):
                self._withdraw(player, "matched")

    def _withdraw(self, player: str, reason: str) -> None:
        """Take ``player`` out of the queue and close their rooms, telling their connection."""
        for w in [w for w in self.queue if w.player == player]:
            self.queue.remove(w)
            w.conn.send({"type": "unqueued", "reason": reason})
        for code in [c for c, r in self.rooms.items() if r.owner_name == player]:
            room = self.rooms.pop(code)
            room.owner.send({"type": "room_closed", "code": code, "reason": reason})

    # -- requests sent again under their request_id (server/requests.py) ----------------------
    def answered_before(self, conn: Follower, msg: dict[str, Any]) -> bool:
        """Send again what was first answered to this request (the first reply with the
        retry's ``ref``); False when nothing is kept for it. ``request_reused`` for the same
        request id with different content."""
        replies = self.answered.recall(_player(conn), msg)
        if replies is None:
            return False
        replies[0] = _with_ref(replies[0], msg.get("id"))
        for reply in replies:
            conn.send(reply)
        return True

    def _requested(self, player: str, msg: dict[str, Any]) -> Requested | None:
        """The id and record of a match that answers ``player``'s request ``msg``; None
        without a ``request_id``. The request is remembered as starting its match (a retry
        before the match is stored is "try again": :meth:`_check_not_starting`)."""
        rid = msg.get("request_id")
        if rid is None:
            return None
        self.starting[(player.casefold(), rid)] = time.monotonic()
        while len(self.starting) > _STARTING_MAX:
            self.starting.popitem(last=False)
        return Requested(match_id_of(player, rid), (record(player, msg),))

    # -- quick pairing ------------------------------------------------------------------------
    def enqueue(self, conn: Follower, msg: dict[str, Any]) -> None:
        """Queue (or re-queue: the new terms replace the old entry) and pair if possible.

        With a ``request_id``: sent again, the request is answered ``queued`` again and
        changes nothing, whether its entry still waits or was paired already."""
        self.check_open()
        player = _player(conn)
        if self.answered_before(conn, msg):
            return
        rid = msg.get("request_id")
        if rid is not None:
            for w in self.queue:
                if w.conn is conn and w.request is not None and w.request["request_id"] == rid:
                    if w.request["body"] != fingerprint(msg):
                        raise reused(rid)
                    conn.send(_with_ref(_queued(w), msg.get("id")))
                    return
        self.free(player, msg)
        bot = self.is_bot(player)
        pool = msg.get("pool") or "any"
        if pool == "bots" and not bot:
            raise WrongPool(
                "the bots pool pairs programs (hello with bot: true) only; "
                "queue in 'any' or 'humans', or use play_bot to play a hosted bot"
            )
        pacing = msg.get("pacing") or self.arena.settings.pacing
        rated = msg.get("rated", True)
        rules = self.arena.rules_of(msg)
        assist = _assist(msg, rated)
        me = Waiting(conn, player, bot, pool, pacing, rated, rules, assist,
                     None if rid is None else record(player, msg))
        self.queue = [w for w in self.queue if w.conn is not conn]
        conn.send(_with_ref(_queued(me), msg.get("id")))
        for i, other in enumerate(self.queue):
            if me.pairs_with(other):
                del self.queue[i]
                self._pair(other, me)
                return
        self.queue.append(me)

    def _pair(self, other: Waiting, me: Waiting) -> None:
        """Start the match of two queue entries (``other`` waited, ``me`` came last).

        Each entry's ``request_id`` is recorded with the match, with its ``queued`` reply: a
        ``queue`` sent again after its entry was paired gets ``queued`` again (and, from a
        connection that does not follow the match yet, the match), never a second entry."""
        records = tuple(
            {**w.request, "answer": _queued(w)} for w in (me, other) if w.request is not None
        )
        for w in (me, other):
            if w.request is not None:
                self.answered.remember(w.request, [_queued(w)])
        requested = (Requested(match_id_of(records[0]["player"], records[0]["request_id"]),
                               records) if records else None)
        if self.paired is not None:
            self.paired(other, me)
        self.start(
            (other.player, me.player), (other.conn, me.conn), me.pacing, rated=me.rated,
            rules=me.rules, assist=me.assist, requested=requested,
        )

    def pair_waiting(self) -> None:
        """Pair whatever in the queue pairs, oldest entries first.

        Only a cluster node needs it: entries put back in the queue at once (after the lobby
        leader changed) are not paired by :meth:`enqueue`, which pairs one newcomer.
        """
        i = 0
        while i < len(self.queue):
            me = self.queue[i]
            for j in range(i):
                other = self.queue[j]
                if me.pairs_with(other):
                    del self.queue[i]
                    del self.queue[j]
                    self._pair(other, me)
                    i = 0
                    break
            else:
                i += 1

    def requeue(self, entry: Waiting) -> bool:
        """Put back a paired entry whose match never started (the node asked to start it
        died with the request), telling its client with ``queued`` again, ``requeued: true``
        and no ``ref``; then pair what pairs. False if its player left or queued anew meanwhile,
        or sits in a match now."""
        if self.online.get(entry.player) is not entry.conn or any(
            w.player == entry.player for w in self.queue
        ):
            return False
        if not entry.bot and self.busy(entry.player) is not None:
            return False
        self.queue.append(entry)
        entry.conn.send({**_queued(entry), "requeued": True})
        return True

    def unqueue(self, conn: Follower, ref: Any) -> None:
        self.queue = [w for w in self.queue if w.conn is not conn]
        conn.send(_with_ref({"type": "unqueued", "reason": "requested"}, ref))

    # -- challenges ---------------------------------------------------------------------------
    def challenge(self, conn: Follower, msg: dict[str, Any]) -> None:
        self.check_open()
        player = _player(conn)
        if self.answered_before(conn, msg):
            return
        rid = msg.get("request_id")
        request = None if rid is None else record(player, msg)
        cid = None if rid is None else "c" + derived("challenge", player, rid)[:10]
        known = None if cid is None else self.challenges.get(cid)
        if known is not None and known.source_name == player:  # open: sent again
            _check_same(known.request, request)
            conn.send(_with_ref({"type": "challenge_sent", "challenge_id": known.challenge_id,
                                 "to": known.target}, msg.get("id")))
            return
        self.free(player, msg)
        target = self._find_online(msg["opponent"])
        if target == player:
            raise NotAvailable("you cannot challenge yourself")
        if sum(1 for c in self.challenges.values() if c.source is conn) >= (
            _MAX_CHALLENGES_PER_PLAYER
        ):
            raise NotAvailable("too many open challenges; wait for answers first")
        pacing = msg.get("pacing") or self.arena.settings.pacing
        rated = msg.get("rated", True)
        rules = self.arena.rules_of(msg)
        assist = _assist(msg, rated)
        if cid is None or cid in self.challenges:
            cid = "c" + secrets.token_hex(5)
        self.challenges[cid] = Challenge(cid, conn, player, target, pacing, rated, rules, assist,
                                         request)
        sent = {"type": "challenge_sent", "challenge_id": cid, "to": target}
        if request is not None:
            self.answered.remember(request, [sent])
        conn.send(_with_ref(dict(sent), msg.get("id")))
        # delivered even to a person in a match: their client decides (decline, or resign
        # then accept)
        self.online[target].send(
            {"type": "challenge", "challenge_id": cid, "from": player, "pacing": pacing,
             "rated": rated, "rules": rules.to_dict(), **({"assist": True} if assist else {})}
        )

    def answer(self, conn: Follower, msg: dict[str, Any]) -> None:
        player = _player(conn)
        ch = self.challenges.get(msg["challenge_id"])
        if ch is None or ch.target != player:
            self._check_not_starting(player, msg)
            raise NotAvailable("no such open challenge for you")
        if msg["type"] == "decline":
            del self.challenges[ch.challenge_id]
            declined = {"type": "declined", "challenge_id": ch.challenge_id}
            ch.source.send(dict(declined))
            conn.send(_with_ref(declined, msg.get("id")))
            return
        self.check_open()
        self.free(player, msg)
        if ch.source.closing or self.online.get(ch.source_name) is not ch.source:
            del self.challenges[ch.challenge_id]
            raise NotAvailable(f"{ch.source_name} is no longer online")
        if not self.is_bot(ch.source_name):
            busy = self.busy(ch.source_name)
            if busy is not None:  # the challenge stays open: accept it once they are done
                raise NotAvailable(f"{ch.source_name} is playing another match now; try later")
        del self.challenges[ch.challenge_id]
        self.start(
            (ch.source_name, player), (ch.source, conn), ch.pacing, rated=ch.rated,
            rules=ch.rules, assist=ch.assist, refs=(None, msg.get("id")),
            requested=self._requested(player, msg),
        )

    def _check_not_starting(self, player: str, msg: dict[str, Any]) -> None:
        """A retry of a request whose match is being started (its first commit not done yet):
        "try again", not the refusal of a request whose room or challenge it used itself."""
        rid = msg.get("request_id")
        if rid is None:
            return
        asked = self.starting.get((player.casefold(), rid))
        if self.matches.is_live(match_id_of(player, rid)) or (
            asked is not None and time.monotonic() - asked < _STARTING_S
        ):
            raise NotAvailable("this request is being answered already; try again")

    def _find_online(self, name: str) -> str:
        if name in self.online:
            return name
        folded = name.casefold()
        for online in self.online:
            if online.casefold() == folded:
                return online
        raise UnknownPlayer(f"{name!r} is not online")

    # -- private rooms ------------------------------------------------------------------------
    def room_create(self, conn: Follower, msg: dict[str, Any]) -> None:
        self.check_open()
        player = _player(conn)
        if self.answered_before(conn, msg):
            return
        rid = msg.get("request_id")
        request = None if rid is None else record(player, msg)
        wanted = None if rid is None else _room_code(derived("room", player, rid))
        known = None if wanted is None else self.rooms.get(wanted)
        if known is not None and known.owner_name == player:  # open: sent again
            _check_same(known.request, request)
            conn.send(_with_ref(_room_message(known), msg.get("id")))
            return
        self.free(player, msg)
        rules = self.arena.rules_of(msg)
        if sum(1 for r in self.rooms.values() if r.owner is conn) >= _MAX_ROOMS_PER_PLAYER:
            raise NotAvailable("too many open rooms; use or close one first")
        code = wanted
        while code is None or code in self.rooms:
            code = "".join(secrets.choice(_ROOM_ALPHABET) for _ in range(_ROOM_CODE_LENGTH))
        pacing = msg.get("pacing") or self.arena.settings.pacing
        rated = msg.get("rated", True)
        assist = _assist(msg, rated)
        room = self.rooms[code] = Room(code, conn, player, pacing, rated, rules, assist, request)
        if request is not None:
            self.answered.remember(request, [_room_message(room)])
        conn.send(_with_ref(_room_message(room), msg.get("id")))

    def room_cancel(self, conn: Follower, msg: dict[str, Any]) -> None:
        """Close the named room, or every open room of this connection's player."""
        code = msg.get("code")
        mine = [c for c, r in self.rooms.items() if r.owner is conn]
        if code is not None:
            code = code.strip().upper()
            mine = [c for c in mine if c == code]
        if not mine:
            raise NoRoom("you have no open room" + (f" {code!r}" if code else ""))
        ref = msg.get("id")
        for c in mine:
            del self.rooms[c]
            conn.send(_with_ref({"type": "room_closed", "code": c, "reason": "cancelled"}, ref))
            ref = None  # the first reply carries the request's ref

    def room_join(self, conn: Follower, msg: dict[str, Any]) -> None:
        self.check_open()
        player = _player(conn)
        code = msg["code"].strip().upper()
        room = self.rooms.get(code)
        if room is None:
            self._check_not_starting(player, msg)
            raise UnknownRoom(f"no open room {code!r}")
        if room.owner_name == player:
            raise NotAvailable("that is your own room: share the code with your opponent")
        self.free(player, msg)
        del self.rooms[code]
        self.start(
            (room.owner_name, player), (room.owner, conn), room.pacing, rated=room.rated,
            rules=room.rules, assist=room.assist, refs=(None, msg.get("id")),
            requested=self._requested(player, msg),
        )

    # -- hosted bots --------------------------------------------------------------------------
    def strategies(self) -> list[str]:
        """The hosted bots: the configured list, else every registered strategy plus the
        variant-only bots (bots/variants.py: the word bot)."""
        return self.allowed_bots or [*available(), *VARIANT_BOTS]

    def play_bot(self, conn: Follower, msg: dict[str, Any]) -> None:
        self.check_open()
        player = _player(conn)
        self.free(player, msg)
        strategy = msg["strategy"]
        # Only registered names: create() would also import "module:Class" paths.
        if strategy not in self.strategies():
            raise UnknownStrategy(
                f"unknown bot {strategy!r}; available: {', '.join(self.strategies())}"
            )
        rules = self.arena.rules_of(msg)
        check_bot(strategy, rules, self.strategies())
        rated = msg.get("rated", True)
        assist = _assist(msg, rated)
        self.start(
            (player, bot_player_name(strategy)),
            (conn, None),
            msg.get("pacing"),
            rated=rated,
            rules=rules,
            assist=assist,
            bots=(None, strategy),
            refs=(msg.get("id"), None),
            requested=self._requested(player, msg),
        )

    async def rematch(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A rematch of a finished match, seats swapped: at once against a hosted bot, else
        once both players asked (the other is sent ``rematch_offer``). The terms are read
        from the finished match wherever it ran; the wishes are kept here (a cluster's
        players' nodes tell a new lobby leader theirs again)."""
        self.check_open()
        player = _player(conn)
        if self.answered_before(conn, msg):
            return
        self.free(player, msg)
        match_id = msg["match_id"]
        if match_id in self.rematched:
            self._check_not_starting(player, msg)
            raise UnknownMatch(f"no recently finished match {match_id!r}")
        players, bots, config = await self.matches.finished_terms(match_id, player)
        self.check_open()  # the read took a while: the state may have changed meanwhile
        self.free(player, msg)
        folded = [p.casefold() for p in players]
        seat = folded.index(player.casefold()) if player.casefold() in folded else None
        if seat is None or bots[seat] is not None:
            raise NotYourSeat("you do not sit in this match")
        other = 1 - seat
        if bots[other] is None:
            name = players[other]
            if not self.is_bot(name) and self.busy(name) is not None:
                raise NotAvailable(f"{name} is playing another match now")
        wishes = self.wishes.setdefault(match_id, {})
        while len(self.wishes) > _REMATCH_MAX:
            self.wishes.popitem(last=False)
        wishes[player.casefold()] = conn
        if bots[other] is None and players[other].casefold() not in wishes:
            peer = self.online.get(players[other])
            if peer is not None and not peer.closing:
                peer.send({"type": "rematch_offer", "match_id": match_id})
            sent = {"type": "rematch_sent", "match_id": match_id}
            if msg.get("request_id") is not None:
                self.answered.remember(record(player, msg), [sent])
            conn.send(_with_ref(dict(sent), msg.get("id")))
            return
        self.wishes.pop(match_id, None)
        self.rematched[match_id] = None
        while len(self.rematched) > _REMATCH_MAX:
            self.rematched.popitem(last=False)
        conns: list[Follower | None] = [
            self.online.get(name) if bots[i] is None else None for i, name in enumerate(players)
        ]
        conns[seat] = conn
        refs: list[Any] = [None, None]
        refs[seat] = msg.get("id")
        self.start(  # seats swapped
            (players[1], players[0]), (conns[1], conns[0]), config.pacing,
            rated=config.rated, rules=config.rules, assist=config.assist,
            bots=(bots[1], bots[0]), refs=(refs[1], refs[0]),
            requested=self._requested(player, msg),
        )

    def wishers(self) -> dict[str, list[Follower]]:
        """The connections that asked for a rematch, by finished match."""
        return {m: list(w.values()) for m, w in self.wishes.items()}

    def restore_wish(self, match_id: str, conn: Follower) -> None:
        """A wish recorded by a former lobby leader, told again by the player's node."""
        if match_id not in self.rematched and conn.player is not None:
            self.wishes.setdefault(match_id, {})[conn.player.casefold()] = conn


def _player(conn: Follower) -> str:
    assert conn.player is not None
    return conn.player


def _assist(msg: dict[str, Any], rated: bool) -> bool:
    """The request's ``assist`` opt-in, refused (``assist_rated``) in a rated request."""
    assist = bool(msg.get("assist", False))
    if assist and rated:
        raise AssistRated(
            "the assistant is for practice matches only: send rated: false with assist: true"
        )
    return assist


def _room_code(digest: str) -> str:
    """A room code from a hex digest (the same request id makes the same code)."""
    n = int(digest[:16], 16)
    chars = []
    for _ in range(_ROOM_CODE_LENGTH):
        n, r = divmod(n, len(_ROOM_ALPHABET))
        chars.append(_ROOM_ALPHABET[r])
    return "".join(chars)


def _room_message(room: Room) -> dict[str, Any]:
    """The ``room`` reply to the ``room_create`` that made ``room``."""
    return {"type": "room", "code": room.code, "pacing": room.pacing, "rated": room.rated,
            "rules": room.rules.to_dict(), **({"assist": True} if room.assist else {})}


def _check_same(known: dict[str, Any] | None, request: dict[str, Any] | None) -> None:
    """``request_reused`` when a request id names an open room or challenge made by a
    different request (one restored by a new cluster leader has no record: accepted)."""
    if known is not None and request is not None and known["body"] != request["body"]:
        raise reused(request["request_id"])


def _queued(w: Waiting) -> dict[str, Any]:
    """The ``queued`` message for an entry (the reply to ``queue``, and a requeue's notice)."""
    return {"type": "queued", "pool": w.pool, "pacing": w.pacing, "rated": w.rated,
            "rules": w.rules.to_dict(), **({"assist": True} if w.assist else {})}


def _with_ref(msg: dict[str, Any], ref: Any) -> dict[str, Any]:
    if ref is not None:
        msg["ref"] = ref
    return msg
