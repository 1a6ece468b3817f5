"""The MQTT bus between cluster nodes: actions forwarded to a match's owner, events relayed back.

A client may sit on any node; the match it plays or watches is run by its owner only
(server/cluster/leases.py). When a node gets a ``guess``/``secret``/``resign``, ``resume``,
``watch`` or ``unwatch`` for a match it does not hold, it forwards the request to the owner:

* topic ``moo-cluster/<owner>/req``, JSON ``{"batch": [request, ...]}`` (every request to
  one node during one event-loop turn, in order), each request ``{"rid", "from", "conn",
  "player", "op", "msg"}``: ``rid`` is unique per request, so a request the broker delivers
  twice (published again after a reconnect) is applied once; ``conn`` names the client's
  connection on the origin node and ``player`` the name it said ``hello`` with there (nodes
  trust each other, not clients).
* The owner runs it exactly as for a local client, through a :class:`RemoteConn` standing for
  the client: the arena seats it, validates, commits, and only then "sends" the acknowledgement
  and every later event of the match to it. A :class:`RemoteConn` sends by publishing to
  ``moo-cluster/<origin>/out`` ``{"rid", "from", "run", "n", "batch": [{"conn", "from",
  "msg"}, ...]}`` (one MQTT message per origin node and event-loop turn), in commit order (one
  MQTT session, so the broker keeps the order), and the origin hands each message to the
  client's real connection. ``n`` counts the batches per destination (``run`` names the
  sending process): a gap means the broker dropped some, and the origin closes the clients
  relayed to that node with 1012, so they ``resume`` from the seq they have. So the client
  sees the same events, seq numbers, acknowledgements and errors as from a single node.
* When the client disconnects, the origin sends ``op = "detach"``: the owner's seat starts its
  grace clock, as for a local disconnect.

The owner of a match is read from PostgreSQL (``owners`` joined with a live ``nodes`` lease)
and cached. Every ``lease/10`` the origin re-checks the owners it relies on: if one changed
(takeover after a crash or a drain), the clients relayed to it are closed with 1012 and
reconnect and ``resume``, now forwarded to the new owner. The owner likewise detaches the
remote seats of an origin whose lease ran out.

Broker down: nothing is lost. Requests that cannot be handed to the broker are refused at once
with ``not_available`` ("try again"); messages whose publish was not acknowledged by the broker
stay queued and are published again after the reconnect. Every message carries a ``rid``
unique in the cluster and receivers drop one they already had, so a request is applied once
and a relayed event reaches its client once; relays the broker took but lost with its restart
show up as a gap in their numbers (clients resume). Matches whose clients all sit on the owner
never touch the bus and go on.

MQTT features relied on (any MQTT 3.1.1 broker: Mosquitto, EMQX, VerneMQ, HiveMQ): QoS 1
publishing (nodes subscribe with QoS 0, see ``_supervise``), per-session in-order delivery for
one publisher and topic, ``#`` and ``+`` wildcard
subscriptions, the Last Will (``moo-cluster/gone/<node>``). No retained messages, no
persistence, no MQTT 5 features.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import secrets
import socket
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

import aiomqtt

from moo.errors import InMatch, MooError, NotAvailable, NotYourSeat, UnknownMatch, UnknownPlayer
from moo.variants import GameRules, rules_from_dict
from server.connection import CLOSE_REPLACED, CLOSE_RESTART, Connection, error_message
from server.lobby import Challenge, Room, Waiting

if TYPE_CHECKING:
    from server.context import ServerContext

__all__ = ["Bus", "RemoteConn"]

log = logging.getLogger("moo.cluster")

PREFIX = "moo-cluster"
#: lobby requests a node forwards to the lobby leader: bus op -> Lobby method
_LOBBY_METHODS = {
    "queue": "enqueue", "unqueue": "unqueue", "challenge": "challenge", "answer": "answer",
    "room_create": "room_create", "room_join": "room_join", "room_cancel": "room_cancel",
    "rematch": "rematch",
}
_LOBBY_OPS = frozenset({*_LOBBY_METHODS, "arrive", "requeue", "restore"})
#: forwarded requests that need the match running on this node (they wait for its replay)
_MATCH_OPS = frozenset({"act", "resume", "watch"})
#: lobby requests that would seat the player in a match (a person may sit in one at a time)
_SEATING = frozenset({"queue", "challenge", "answer", "room_create", "room_join", "rematch"})
#: how long the leader keeps a challenge to a registered player it does not see online yet
#: (their node's presence may still be on its way), before refusing it with unknown_player
CHALLENGE_HOLD_S = 3.0
#: finished matches the leader remembers for rematch (as Arena.recent on one node)
_REMATCH_MAX = 1000
#: a forwarded request unanswered this long gets not_available (checked every lease/10)
FORWARD_TIMEOUT_S = 5.0
#: requests remembered for de-duplication
_SEEN_MAX = 20_000


class _Client(aiomqtt.Client):
    """aiomqtt's client, with fewer turns of the event loop between a message and the wire.

    Reading: aiomqtt's reader callback makes paho read one packet per call when no QoS 1
    message of ours is unacknowledged: on a busy event loop (hundreds of WebSockets) that is one
    relayed batch per loop turn, so a burst of them queued up in the socket for hundreds of ms.
    This one replaces that callback (same fd, registered after it) with one that goes on while
    the socket has data, up to 1000 packets per turn.

    Writing: aiomqtt registers the socket's writer through ``call_soon_threadsafe`` (paho may
    call it from the connecting thread), so a publish reached the socket two turns later. From
    the loop's own thread the writer is registered at once, and :meth:`write_now` writes what
    is queued in the same turn (the writer stays registered only for what the socket did not
    take). Relies on aiomqtt 2.x internals (``_client``, ``_queue``, ``_disconnected``,
    ``_loop``); the cluster tests exercise every one of them.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._thread = threading.get_ident()

    def _on_socket_register_write(self, client: Any, userdata: Any, sock: Any) -> None:
        if threading.get_ident() != self._thread:
            super()._on_socket_register_write(client, userdata, sock)
            return
        self._loop.add_writer(sock.fileno(), self.write_now)

    def write_now(self) -> None:
        """Write what paho has queued, as far as the socket takes it."""
        try:
            self._client.loop_write()
        except Exception as exc:  # as aiomqtt's own callback: the connection is gone
            if not self._disconnected.done():
                self._disconnected.set_exception(exc)

    def _on_socket_open(self, client: Any, userdata: Any, sock: Any) -> None:
        super()._on_socket_open(client, userdata, sock)

        def drain() -> None:
            try:
                for _ in range(1000):
                    if client.loop_read() != 0 or client.socket() is None:
                        break
                    try:  # more waiting? (MSG_PEEK leaves it for the next read)
                        if not sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                            break
                    except (BlockingIOError, InterruptedError):
                        break
            except Exception as exc:  # as aiomqtt's own callback: the connection is gone
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        self._loop.call_soon_threadsafe(self._loop.add_reader, sock.fileno(), drain)

    def publish_now(self, topic: str, payload: bytes) -> Any:
        """Publish (QoS 1) without waiting: the packet is queued in order at once and written
        when the socket is ready; the returned info says when the broker acknowledged it."""
        return self._client.publish(topic, payload, qos=1)

    def received(self) -> list[aiomqtt.Message]:
        """The messages received and not yet handed out (taken off the queue)."""
        out = []
        while not self._queue.empty():
            out.append(self._queue.get_nowait())
        return out


def _dumps(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


class _NotSent:
    """Stands for the publish info of a message queued while no session was up."""

    @staticmethod
    def is_published() -> bool:
        return False


_NOT_SENT = _NotSent()


def _acked(info: Any) -> bool:
    """Whether the broker acknowledged a publish (paho raises for one that failed, e.g. handed
    over just as the connection dropped: not acknowledged, so published again)."""
    try:
        return bool(info.is_published())
    except (RuntimeError, ValueError):
        return False


class RemoteConn:
    """On the owner node: a client connected to another node, as the arena sees it."""

    #: spectator frames are "encoded" once per value of ``binary``: relays share the message
    binary = "relay"

    def __init__(self, bus: Bus, origin: str, conn_id: str, player: str | None) -> None:
        self.bus = bus
        self.origin = origin
        self.conn_id = conn_id
        self.player = player
        self.matches: list[str] = []
        self.spectating: list[str] = []
        self.closing = False
        #: drop the next message of this type (see Bus._announce)
        self.mute: str | None = None

    def send(self, msg: dict[str, Any]) -> None:
        if self.mute is not None and msg.get("type") == self.mute:
            self.mute = None  # the reply to a re-sent request the client already had
            return
        if not self.closing:
            self.bus.relay(self.origin, self.conn_id, msg)

    def encode(self, msg: dict[str, Any]) -> Any:
        return msg

    def send_frame(self, frame: Any) -> None:
        self.send(frame)

    def close(self, code: int, reason: str) -> None:
        """Close the client's real connection on its node (e.g. replaced by a newer one)."""
        if not self.closing:
            self.bus.relay(self.origin, self.conn_id, {}, close=(code, reason))
            self.closing = True


class Bus:
    """One node's end of the bus: forwards, serves forwarded requests, relays events."""

    def __init__(self, app: ServerContext, url: str, node: str, lease_ms: int) -> None:
        parts = urlsplit(url)
        self.app = app
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 1883
        self.username = parts.username
        self.password = parts.password
        self.node = node
        self.check_s = lease_ms / 10000
        self.connected = asyncio.Event()
        #: the MQTT session's client while connected (publishes go straight to it)
        self._client: _Client | None = None
        #: handed to the MQTT client, in order, until the broker acknowledged them (publish
        #: info, topic, payload, when); those not acknowledged when a session ends are
        #: published again, in order, in the next one (receivers drop repeats by ``rid``)
        self._unacked: deque[tuple[Any, str, bytes, float]] = deque()
        #: requests (owner's req topic -> requests) and relays (origin -> relays) of this
        #: loop turn
        self._reqs: dict[str, list[dict[str, Any]]] = {}
        self._relays: dict[str, list[dict[str, Any]]] = {}
        self._flush_due = False
        #: relay batches numbered per destination (sender side) and the last number seen
        #: per sending process (receiver side): a gap means the broker lost relays
        self._relay_n: dict[str, int] = {}
        self._relay_last: dict[str, int] = {}
        self._rids = itertools.count(1)
        self._run_id = secrets.token_hex(4)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        #: owner side: remote clients by (origin node, connection id); requests seen
        self._remotes: dict[tuple[str, str], RemoteConn] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        #: origin side: local connections by id, and the owner each relayed match was sent to
        self._local: dict[str, Connection] = {}
        self._relayed: dict[str, dict[str, str]] = {}  # conn id -> {match id: owner}
        #: conn id -> unfinished matches other nodes run in which it has a seat (it was sent
        #: their ``match``), for the one-match-per-person check
        self._seated: dict[str, set[str]] = {}
        #: leader side, during one lobby request: player (casefolded) -> the match their own
        #: node says they sit in (see _busy_of)
        self._busy_now: dict[str, str] = {}
        self._owners: dict[str, str] = {}  # match id -> owner node (cache)
        #: the owner's epoch where known: a node restarted under the same name is a new owner
        self._owner_epochs: dict[str, int] = {}
        self._queued: dict[str, dict[str, Any]] = {}  # conn id -> its pending queue request
        #: conn id -> its open challenges and rooms at the leader, as the leader last said
        #: (``_lobby`` messages), re-announced to a new leader
        self._lobby_state: dict[str, dict[str, Any]] = {}
        #: leader side: what each remote connection was last told about its entries
        self._synced: dict[tuple[str, str], dict[str, Any]] = {}
        #: leader side: challenges to a registered player not (yet) seen online
        self._held: list[tuple[Connection, dict[str, Any]]] = []
        #: leader side: finished matches asked for a rematch: id -> players, bots, config,
        #: the seats that asked; ids already rematched
        self._rematches: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._rematched: OrderedDict[str, None] = OrderedDict()
        self._waiting: dict[str, list[Callable[[str | None], None]]] = {}
        #: forwarded act/resume/watch requests for a match this node is not running (yet):
        #: match_id -> requests in arrival order, served once its replay here is done
        self._until_live: dict[str, list[dict[str, Any]]] = {}
        #: counters for /metrics
        self.forwarded = 0
        self.served = 0
        self.relayed = 0
        self.forward_latency: list[float] = []
        self._sent_at: dict[tuple[str, Any], float] = {}
        #: forwarded requests not answered yet: (conn id, ref) -> (connection, node, deadline).
        #: A node that died with a request cannot answer it; the client gets not_available
        #: ("try again") instead of silence once the deadline passes.
        self._awaiting: dict[tuple[str, Any], tuple[Connection, str, float]] = {}
        self.forward_timeout_s = FORWARD_TIMEOUT_S
        #: nodes whose broker connection dropped (MQTT will) -> until when to skip them as
        #: lobby leader; the alive nodes (valid lease) as of the last check
        self._gone: dict[str, float] = {}
        #: node -> the epoch of its process whose will the broker published
        self._dead_epochs: dict[str, int] = {}
        self._alive: set[str] = set()
        arena = app.arena
        self._act, self._resume = arena.act, arena.resume
        self._watch, self._unwatch, self._detach = arena.watch, arena.unwatch, arena.detach
        # the arena's entry points, seen from sessions, now reach matches on other nodes
        arena.act = self.act  # type: ignore[method-assign]
        arena.resume = self.resume  # type: ignore[method-assign]
        arena.watch = self.watch  # type: ignore[method-assign]
        arena.unwatch = self.unwatch  # type: ignore[method-assign]
        arena.detach = self.detach  # type: ignore[method-assign]
        self._create = arena.create
        arena.create = self.create  # type: ignore[method-assign]
        self._storage_failed = arena._storage_failed
        self._following: set[asyncio.Task[None]] = set()
        arena._storage_failed = self._failed  # type: ignore[method-assign]
        # welcome.matches: a player's unfinished matches anywhere in the cluster, read from
        # PostgreSQL while hello looks its token up (player_matches itself is synchronous)
        self._listing = arena.listing
        arena.list_matches = self.list_matches  # type: ignore[method-assign]
        self._player_matches = arena.player_matches
        arena.player_matches = self.player_matches  # type: ignore[method-assign]
        self._by_token = app.store.player_by_token
        app.store.player_by_token = self._player_by_token  # type: ignore[method-assign]
        self._elsewhere: dict[str, list[dict[str, Any]]] = {}
        # the cluster lobby: one node (the leader: the alive node with the smallest name)
        # holds the queue, challenges, rooms and presence; the others forward to it
        lobby = app.lobby
        self.leader: str | None = None
        self._arrive, self._leave = lobby.arrive, lobby.leave
        self._challenge = lobby.challenge
        self._lobby_ops: dict[str, Callable[..., None]] = {
            "queue": lobby.enqueue, "unqueue": lobby.unqueue, "challenge": self._challenge_here,
            "answer": lobby.answer, "room_create": lobby.room_create,
            "room_join": lobby.room_join, "room_cancel": lobby.room_cancel,
            "rematch": self._rematch_here,
        }
        self._free_here = lobby._free
        lobby._free = self._free  # type: ignore[method-assign]
        lobby.arrive = self.arrive  # type: ignore[method-assign]
        lobby.leave = self.leave  # type: ignore[method-assign]
        for op, name in _LOBBY_METHODS.items():
            setattr(lobby, name, self._lobby_call(op))

    # -- lifecycle ----------------------------------------------------------------------------
    def _gone_now(self, node: str, epoch: Any = None) -> None:
        """The broker says ``node`` lost its connection (its MQTT will): a dead lobby leader is
        replaced at once, and requests waiting for that node's answer are refused now. Match
        ownership still waits for the lease, which is what keeps a paused node from forking."""
        if node == self.node:
            return
        log.warning("bus: node %s disconnected from the broker", node)
        self._gone[node] = time.monotonic() + self.check_s * 10  # = one lease
        if isinstance(epoch, int):
            self._dead_epochs[node] = epoch
            # the dead process's epoch, for matches cached before their first check: an owner
            # in any other epoch (that node restarted at once, or another node) is a move
            for match_id, owner in self._owners.items():
                if owner == node:
                    self._owner_epochs.setdefault(match_id, epoch)
        for key, (conn, target, _) in list(self._awaiting.items()):
            if target == node:
                self._awaiting[key] = (conn, target, 0.0)
        self._expire_forwards()
        self._elect(self._alive)

    def _epoch(self) -> int | None:
        leases = getattr(self.app, "leases", None)
        return None if leases is None else int(leases.epoch)

    def _elect(self, alive: set[str]) -> None:
        self._alive = alive
        now = time.monotonic()
        for node, until in list(self._gone.items()):
            if until < now:
                del self._gone[node]
        leader = min((alive - set(self._gone)) | {self.node})
        if leader == self.leader:
            return
        log.info("bus: lobby leader is %s (was %s)", leader, self.leader)
        if self.leader == self.node:
            self._hand_over()
        self.leader = leader
        self._announce()

    def _hand_over(self) -> None:
        """This node stops leading the lobby (a node with a smaller name is back, or this one
        was thought gone): its own players' queue entries, challenges and rooms are kept here,
        as a follower keeps them, to be re-announced to the new leader; the lobby state of
        other nodes' players is dropped (their nodes re-announce it)."""
        lobby = self.app.lobby
        for w in lobby.queue:
            if isinstance(w.conn, Connection):
                self._queued[self._conn_id(w.conn)] = {
                    "type": "queue", "pool": w.pool, "pacing": w.pacing, "rated": w.rated,
                    "rules": w.rules.to_dict(), "assist": w.assist,
                }
        for cid, state in self._entries(Connection).items():
            self._lobby_state[cid[1]] = state
        lobby.queue.clear()
        lobby.challenges.clear()
        lobby.rooms.clear()
        for name, conn in list(lobby.online.items()):
            if not isinstance(conn, Connection):
                del lobby.online[name]
                lobby.bots.pop(name, None)
        self._synced.clear()
        self._rematches.clear()

    def _entries(self, kind: type) -> dict[tuple[str, str], dict[str, Any]]:
        """The open challenges and rooms at this (leading) node whose source is a ``kind``
        (RemoteConn: other nodes' players; Connection: this node's), by (node, conn id)."""
        lobby = self.app.lobby
        out: dict[tuple[str, str], dict[str, Any]] = {}

        def key(conn: Any) -> tuple[str, str] | None:
            if not isinstance(conn, kind) or getattr(conn, "closing", False):
                return None
            if isinstance(conn, RemoteConn):
                return (conn.origin, conn.conn_id)
            return (self.node, self._cid(cast(Connection, conn)))

        for ch in lobby.challenges.values():
            k = key(ch.source)
            if k is not None:
                out.setdefault(k, {"challenges": [], "rooms": []})["challenges"].append({
                    "id": ch.challenge_id, "target": ch.target, "pacing": ch.pacing,
                    "rated": ch.rated, "rules": ch.rules.to_dict(), "assist": ch.assist,
                })
        for room in lobby.rooms.values():
            k = key(room.owner)
            if k is not None:
                out.setdefault(k, {"challenges": [], "rooms": []})["rooms"].append({
                    "code": room.code, "pacing": room.pacing, "rated": room.rated,
                    "rules": room.rules.to_dict(), "assist": room.assist,
                })
        return out

    def _sync_lobby(self) -> None:
        """Leader: tell each node what its players have open here (challenges, rooms), so
        that a new leader gets them back from those nodes if this one dies. Sent with the
        relayed events (same channel, same order), only when a connection's entries changed."""
        if self.leader != self.node:
            return
        state = self._entries(RemoteConn)
        empty: dict[str, Any] = {"challenges": [], "rooms": []}
        for key in set(state) | set(self._synced):
            now = state.get(key, empty)
            if now != self._synced.get(key, empty):
                self.relay(key[0], key[1], {"type": "_lobby", **now})
        self._synced = state

    def _restore(self, conn: Connection, state: dict[str, Any]) -> None:
        """Leader: put back the challenges and rooms a connection had at the old leader,
        under their ids and codes (the players were told them); nobody is told again."""
        lobby = self.app.lobby
        player = conn.player
        if player is None:
            return
        for c in state.get("challenges", ()):
            if c["id"] not in lobby.challenges:
                lobby.challenges[c["id"]] = Challenge(
                    c["id"], conn, player, c["target"], c["pacing"], bool(c["rated"]),
                    rules_from_dict(c["rules"]), bool(c.get("assist", False)),
                )
        for r in state.get("rooms", ()):
            if r["code"] not in lobby.rooms:
                lobby.rooms[r["code"]] = Room(
                    r["code"], conn, player, r["pacing"], bool(r["rated"]),
                    rules_from_dict(r["rules"]), bool(r.get("assist", False)),
                )

    def _announce(self) -> None:
        """Tell the lobby leader who is online here (a new leader, or after a reconnect), and
        what this node's players had open at the old one: queue entries, challenges, rooms."""
        lobby = self.app.lobby
        if self.leader == self.node:
            # this node leads now: its own players' entries at the old leader are kept here
            for cid, msg in list(self._queued.items()):
                conn = self._local.get(cid)
                if conn is not None and not conn.closing and conn.player is not None:
                    lobby.queue.append(Waiting(
                        conn, conn.player, lobby.bots.get(conn.player, False),
                        msg.get("pool") or "any", msg.get("pacing") or self.app.settings.pacing,
                        msg.get("rated", True) is not False,
                        self.app.arena.rules_of(msg), bool(msg.get("assist", False)),
                    ))
            self._queued.clear()
            for cid, state in list(self._lobby_state.items()):
                conn = self._local.get(cid)
                if conn is not None and not conn.closing:
                    self._restore(conn, state)
            self._lobby_state.clear()
            lobby.pair_waiting()  # two of them may pair with each other: no third needed
            self._retry_held(None)
            return
        leader = self._lobby_elsewhere()
        if leader is None or not self.connected.is_set():
            return
        for conn in list(lobby.online.values()):
            if isinstance(conn, Connection) and conn.player is not None:
                self._forward(
                    conn, leader, "arrive",
                    {"player": conn.player, "bot": lobby.bots.get(conn.player, False)},
                )
                cid = self._cid(conn)
                # a player queued here stays queued when the leader that held it died
                queued = self._queued.get(cid)
                if queued is not None:
                    self._forward(conn, leader, "requeue", queued)
                held = self._lobby_state.get(cid)
                if held is not None:
                    self._forward(conn, leader, "restore", held)

    async def start(self) -> None:
        with contextlib.suppress(Exception):
            await self._check()  # who leads the lobby, before the first client arrives
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._supervise()), loop.create_task(self._watchdog())]

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    @property
    def state(self) -> str:
        return "ok" if self.connected.is_set() else "down"

    async def _supervise(self) -> None:
        backoff = 0.1
        while not self._stopping:
            try:
                async with _Client(
                    self.host, self.port, username=self.username, password=self.password,
                    identifier=f"moo-node-{self.node}-{secrets.token_hex(3)}",
                    timeout=5.0, keepalive=10,
                    # no limit of 20 unacknowledged publishes (paho's default): _publish
                    # hands them over at once, and a full window would hold later ones back
                    max_inflight_messages=0,
                    # small messages go out at once, not after the previous one's TCP ACK
                    socket_options=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
                    # the broker announces this node's death as soon as its connection drops
                    will=aiomqtt.Will(
                        f"{PREFIX}/gone/{self.node}",
                        json.dumps({"node": self.node, "run": self._run_id,
                                    "epoch": self._epoch()}).encode(), qos=1,
                    ),
                ) as client:
                    # QoS 0 from the broker to this node: QoS 1 on that leg would add a
                    # PUBACK per message and the broker's window of 20 unacknowledged
                    # messages per subscriber (max_inflight_messages), which queued relays
                    # behind one another (p99 of a split match: hundreds of ms). It loses
                    # nothing more than QoS 1 does here: over one TCP connection both arrive
                    # in order, and after a reconnect (clean session) neither is resent;
                    # publishing stays QoS 1 (resent after a reconnect, see _publish); and
                    # relays are numbered, so what the broker drops is noticed (_check_gap).
                    await client.subscribe(f"{PREFIX}/{self.node}/#", qos=0)
                    await client.subscribe(f"{PREFIX}/gone/+", qos=1)
                    self._client = client
                    left, self._unacked = self._unacked, deque()
                    for info, topic, payload, _ in left:
                        if not _acked(info):  # lost with the last session: again
                            self._publish(topic, payload)
                    self.connected.set()
                    self._announce()
                    backoff = 0.1
                    log.info("bus: connected to %s:%d", self.host, self.port)
                    # whichever ends first (the reader sees a lost connection at once, the
                    # writer only at its next publish) ends the session
                    loop = asyncio.get_running_loop()
                    both = {
                        loop.create_task(self._read(client)),
                        loop.create_task(self._write(client)),
                    }
                    try:
                        done, _ = await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for task in both:
                            task.cancel()
                        for task in both:
                            with contextlib.suppress(asyncio.CancelledError, Exception):
                                await task
                    for task in done:
                        task.result()  # re-raise the reason
                    raise aiomqtt.MqttError("bus session ended")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # aiomqtt.MqttError, OSError: reconnect
                if self.connected.is_set():
                    log.warning("bus: connection lost: %s", exc)
            finally:
                self.connected.clear()
                self._client = None
            await asyncio.sleep(backoff)
            backoff = min(2.0, backoff * 2)

    async def _write(self, client: aiomqtt.Client) -> None:
        """End the session when the broker stops acknowledging what it was sent.

        Publishing itself is :meth:`_publish`: straight into the MQTT client, in order, never
        waiting for the broker (QoS 1 acknowledgements awaited one by one, or batch by batch
        as before, put a round trip through the broker and this busy event loop in front of
        every later message: hundreds of ms of latency tail for a split match).
        """
        while True:
            await asyncio.sleep(1.0)
            while self._unacked and _acked(self._unacked[0][0]):
                self._unacked.popleft()
            if self._unacked and time.monotonic() - self._unacked[0][3] > 5.0:
                raise aiomqtt.MqttError("the broker did not acknowledge a publish in 5 s")

    def _publish(self, topic: str, payload: bytes) -> None:
        """Hand one message to the MQTT client (or keep it for the next session)."""
        client = self._client
        info = None
        if client is not None:
            info = client.publish_now(topic, payload)
        self._unacked.append((info or _NOT_SENT, topic, payload, time.monotonic()))
        while self._unacked and _acked(self._unacked[0][0]):  # the broker has it
            self._unacked.popleft()

    async def _read(self, client: _Client) -> None:
        async for first in client.messages:
            # aiomqtt hands out one message per two turns of the event loop (a task and a
            # wait each); on a busy node that, not the broker, was the relay's latency tail.
            # So everything already received is taken at once.
            for message in (first, *client.received()):
                await self._handle(message)

    def _check_gap(self, data: dict[str, Any]) -> None:
        """Relays from one node arrive numbered 1, 2, 3...; one missing (lost by the broker:
        its connection to this node dropped, or its queue for this node overflowed) means a
        client here may have missed an event or an acknowledgement. Those clients are closed
        with 1012, so they reconnect and ``resume`` from the last seq they have: no gap."""
        run, n, sender = data.get("run"), data.get("n"), data.get("from")
        if not isinstance(run, str) or not isinstance(n, int):
            return
        last = self._relay_last.get(run)
        self._relay_last[run] = n if last is None else max(last, n)
        if last is None or n <= last + 1:
            return
        log.warning("bus: relays %d..%d from node %s lost; its clients here resume",
                    last + 1, n - 1, sender)
        for cid, relayed in list(self._relayed.items()):
            if sender in relayed.values():
                conn = self._local.get(cid)
                if conn is not None:
                    conn.close(CLOSE_RESTART, "relay interrupted; resume")

    async def _handle(self, message: aiomqtt.Message) -> None:
        topic = str(message.topic)
        try:
            data = json.loads(bytes(message.payload))  # type: ignore[arg-type]
            if topic.startswith(f"{PREFIX}/gone/"):
                self._gone_now(str(data["node"]), data.get("epoch"))
                return
            kind = topic.rsplit("/", 1)[-1]
            if kind == "out":
                if not self._first_time(data["rid"]):
                    return  # a batch re-published after a broker reconnect: delivered already
                self._check_gap(data)
            batch = data["batch"]
        except Exception:
            log.exception("bus: bad message on %s", topic)
            return
        for item in batch:  # one bad item does not cost the others theirs
            try:
                if kind == "req":
                    await self._serve(item)  # (each request has its own rid)
                elif kind == "out":
                    self._deliver(item)
            except Exception:
                log.exception("bus: bad item on %s", topic)

    def _send(self, topic: str, data: dict[str, Any]) -> None:
        """Queue a request for a node (``topic`` is its ``moo-cluster/<node>/req``): every
        request to one node during one turn of the event loop goes out as one MQTT message
        (``{"batch": [...]}``), in order."""
        pending = self._reqs.get(topic)
        if pending is None:
            pending = self._reqs[topic] = []
            self._flush_soon()
        pending.append(data)

    def _flush_soon(self) -> None:
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Publish this turn's requests, then its relays (the order they had before they
        were batched: requests went out at once, relays at the end of the turn)."""
        self._flush_due = False
        reqs, self._reqs = self._reqs, {}
        relays, self._relays = self._relays, {}
        for topic, batch in reqs.items():
            self._publish(topic, _dumps({"batch": batch}))
        for origin, batch in relays.items():
            n = self._relay_n[origin] = self._relay_n.get(origin, 0) + 1
            self._publish(f"{PREFIX}/{origin}/out", _dumps(
                {"rid": self._rid(), "from": self.node, "run": self._run_id, "n": n,
                 "batch": batch}
            ))
        if self._client is not None:
            self._client.write_now()  # this turn, not at the socket's next writable event

    # -- origin side: forwarding ------------------------------------------------------------------
    def _cid(self, conn: Connection) -> str:
        """A connection's id in the cluster: ``id()`` alone repeats across restarts of this
        node (and owners keep remote seats keyed by it), so this process's run id goes first."""
        return f"{self._run_id}.{id(conn):x}"

    def _conn_id(self, conn: Connection) -> str:
        key = self._cid(conn)
        self._local[key] = conn
        return key

    def _forward(
        self, conn: Connection, owner: str, op: str, msg: dict[str, Any],
        busy: str | None = None,
    ) -> None:
        if not self.connected.is_set():
            raise NotAvailable("the node running this match cannot be reached; try again")
        if op in ("act", "resume", "watch") and self.app.arena.stopping:
            # draining: this connection is about to be closed and its client will resume from
            # another node; a request sent now on its behalf could reach the owner after that
            # resume (another MQTT session: no order between them) and take the seat back
            raise NotAvailable("the server is shutting down; try again in a moment")
        cid = self._conn_id(conn)
        relayed = self._relayed.setdefault(cid, {})
        if op in _LOBBY_OPS:  # (a rematch names a finished match: not relayed from there)
            relayed[""] = owner  # "" = this connection is known to the leader's lobby
        elif "match_id" in msg:
            relayed[msg["match_id"]] = owner
        ref = msg.get("id")
        if ref is not None and op != "requeue":
            self._sent_at[(cid, ref)] = time.perf_counter()
            self._awaiting[(cid, ref)] = (conn, owner, time.monotonic() + self.forward_timeout_s)
        envelope = {"rid": self._rid(), "from": self.node, "conn": cid,
                    "player": conn.player, "op": op, "msg": msg}
        if busy is not None:
            envelope["busy"] = busy  # the match the player sits in (see _busy_of)
        self._send(f"{PREFIX}/{owner}/req", envelope)
        self.forwarded += 1

    def _with_owner(self, match_id: str, then: Callable[[str | None], None]) -> None:
        """Run ``then(owner)`` once the owner is known; in request order per match."""
        owner = self._owners.get(match_id)
        if owner is not None and match_id not in self._waiting:
            then(owner)
            return
        waiting = self._waiting.get(match_id)
        if waiting is not None:
            waiting.append(then)
            return
        self._waiting[match_id] = [then]
        asyncio.get_running_loop().create_task(self._look_up(match_id))

    async def _look_up(self, match_id: str) -> None:
        owner: str | None = None
        try:
            owner = await self._remote_owner(match_id)
        except NotAvailable:
            owner = ""  # still between owners after the wait: then() refuses, "try again"
        except MooError:
            owner = None
        for then in self._waiting.pop(match_id, []):
            then(owner)

    async def owner_of(self, match_id: str) -> str | None:
        """The node whose live lease owns ``match_id`` (None: nobody, or finished)."""
        from server.storage_pg import DB_NOW_MS

        async def read(conn: Any) -> Any:
            return await conn.fetchrow(
                "SELECT o.node, o.epoch FROM owners o JOIN nodes n ON n.name = o.node"
                f" AND n.epoch = o.epoch AND n.expires_ms > {DB_NOW_MS}"
                " WHERE o.match_id = $1",
                match_id,
            )

        store: Any = self.app.store
        row = await store._run(read)
        owner = None if row is None else str(row[0])
        if row is not None and owner != self.node:
            self._owners[match_id] = str(owner)
            self._owner_epochs[match_id] = int(row[1])
        return owner

    def act(self, conn: Connection, msg: dict[str, Any], received: float | None = None) -> None:
        match_id = msg["match_id"]
        if match_id in self.app.arena.live or conn.player is None:
            self._act(conn, msg, received)
            return

        def then(owner: str | None) -> None:
            if conn.closing:
                return  # gone while the owner was looked up: nobody to answer
            try:
                if owner == "":
                    raise NotAvailable("the match is moving to another node; try again")
                if owner is None or owner == self.node or match_id in self.app.arena.live:
                    self._act(conn, msg, received)
                else:
                    self._forward(conn, owner, "act", msg)
            except MooError as exc:
                conn.send(error_message(exc, msg.get("id")))

        self._with_owner(match_id, then)

    async def resume(self, conn: Connection, match_id: str, last_seq: int, ref: Any) -> None:
        owner = await self._remote_owner(match_id)
        if conn.closing:
            # closed while the owner was looked up (e.g. this node drained meanwhile): the
            # client resumes from its new connection, and a late resume for this one could
            # take the seat from it at the owner
            return
        if owner is None:
            await self._resume(conn, match_id, last_seq, ref)
            return
        msg = {"type": "resume", "match_id": match_id, "last_seq": last_seq, "id": ref}
        self._forward(conn, owner, "resume", msg)

    async def watch(self, conn: Connection, match_id: str, last_seq: int, ref: Any) -> None:
        owner = await self._remote_owner(match_id)
        if conn.closing:
            return
        if owner is None:
            await self._watch(conn, match_id, last_seq, ref)
            return
        if match_id not in conn.spectating:
            conn.spectating.append(match_id)
        msg = {"type": "watch", "match_id": match_id, "last_seq": last_seq, "id": ref}
        self._forward(conn, owner, "watch", msg)

    def unwatch(self, conn: Connection, match_id: str) -> None:
        cid = self._cid(conn)
        owner = self._relayed.get(cid, {}).pop(match_id, None)
        if owner is None:
            self._unwatch(conn, match_id)
            return
        if match_id in conn.spectating:
            conn.spectating.remove(match_id)
        with contextlib.suppress(NotAvailable):
            self._forward(conn, owner, "unwatch", {"type": "unwatch", "match_id": match_id})
        self._relayed.get(cid, {}).pop(match_id, None)  # _forward put it back

    def detach(self, conn: Connection) -> None:
        cid = self._cid(conn)
        relayed = self._relayed.pop(cid, {})
        conn.spectating[:] = [m for m in conn.spectating if m not in relayed]
        self._detach(conn)
        for owner in set(relayed.values()):
            self._send(
                f"{PREFIX}/{owner}/req",
                {"rid": self._rid(), "from": self.node, "conn": cid,
                 "player": conn.player, "op": "detach", "msg": {}},
            )
        self._local.pop(cid, None)
        self._queued.pop(cid, None)
        self._lobby_state.pop(cid, None)
        self._seated.pop(cid, None)
        for key in [k for k in self._awaiting if k[0] == cid]:
            del self._awaiting[key]
            self._sent_at.pop(key, None)

    def _lobby_elsewhere(self) -> str | None:
        leader = self.leader
        return leader if leader is not None and leader != self.node else None

    def arrive(self, conn: Connection, player: str, bot: bool) -> Connection | None:
        old = self._arrive(conn, player, bot)
        leader = self._lobby_elsewhere()
        if leader is not None and self.connected.is_set():
            self._forward(conn, leader, "arrive", {"player": player, "bot": bot})
        elif leader is None:
            self._retry_held(player)
        return old

    def leave(self, conn: Connection) -> None:
        self._leave(conn)
        leader = self._lobby_elsewhere()
        known = self._cid(conn) in self._local  # else detach() already told the leader
        if leader is not None and known and self.connected.is_set():
            self._forward(conn, leader, "leave", {})

    def _lobby_call(self, op: str) -> Callable[..., None]:
        local = self._lobby_ops[op]

        def call(conn: Connection, arg: Any) -> None:
            busy = None
            if op in _SEATING and conn.player is not None:
                busy = self._busy_of(conn)
            leader = self._lobby_elsewhere()
            if leader is None:
                key = cast(str, conn.player).casefold() if busy is not None else ""
                if busy is not None:
                    self._busy_now[key] = busy
                try:
                    if busy is not None and op == "rematch":
                        self._free(cast(str, conn.player))  # (rematch runs later, in a task)
                    local(conn, arg)
                finally:
                    self._busy_now.pop(key, None)
                    self._sync_lobby()
            elif op == "unqueue":
                self._forward(conn, leader, op, {"id": arg})
                self._queued.pop(self._cid(conn), None)
            else:
                self._forward(conn, leader, op, arg, busy)
                if op == "queue":  # kept until paired, to re-queue at a new leader
                    self._queued[self._cid(conn)] = arg

        return call

    def _busy_of(self, conn: Connection) -> str | None:
        """The unfinished match this node's client sits in, here or on another node (it was
        relayed its ``match``); None for a program (any number of matches) or a free person.

        One unfinished match per person, cluster-wide: the leader's lobby sees only the matches
        the leader runs itself, but a person's matches always reach their own node, so that
        node tells the leader with each request that would seat them (``busy``), and the
        lobby's own check (``Lobby._free``) refuses it there, in the single node's order of
        errors."""
        player = conn.player
        if player is None or self.app.lobby.bots.get(player, False):
            return None
        live = self.app.arena.live_match_of(player)
        if live is None:
            live = next(iter(self._seated.get(self._cid(conn), ())), None)
        return live

    def _free(self, player: str) -> None:
        """``Lobby._free`` at the leader: also a match the player's own node says they sit in."""
        busy = self._busy_now.get(player.casefold())
        if busy is not None and not self.app.lobby._is_bot(player):
            raise InMatch(
                f"you are playing match {busy}: finish or resign it first", match_id=busy
            )
        self._free_here(player)

    def create(
        self,
        players: tuple[str, str],
        conns: tuple[Connection | None, Connection | None],
        pacing: str | None,
        bots: tuple[str | None, str | None] = (None, None),
        refs: tuple[Any, Any] = (None, None),
        rated: bool = True,
        rules: GameRules | None = None,
        assist: bool = False,
    ) -> Any:
        """A new match goes to the node of its first seated player (the lobby leader only
        decides who plays whom), so matches spread over the nodes like their players."""
        first = next((c for c in conns if c is not None), None)
        target = first.origin if isinstance(first, RemoteConn) else self.node
        if target == self.node or not self.connected.is_set():
            return self._create(players, conns, pacing, bots, refs, rated, rules, assist)
        seats: list[dict[str, Any] | None] = []
        for c in conns:
            if c is None:
                seats.append(None)
            elif isinstance(c, RemoteConn):
                seats.append({"node": c.origin, "conn": c.conn_id, "player": c.player})
            else:
                seats.append({"node": self.node, "conn": self._conn_id(c), "player": c.player})
        self._send(
            f"{PREFIX}/{target}/req",
            {"rid": self._rid(), "from": self.node, "conn": "", "player": None,
             "op": "create", "msg": {"players": list(players), "seats": seats,
                                     "pacing": pacing, "bots": list(bots), "refs": list(refs),
                                     "rated": rated, "assist": assist,
                                     "rules": None if rules is None else rules.to_dict()}},
        )
        return None

    def _create_here(self, spec: dict[str, Any]) -> None:
        """``create`` sent by the lobby leader: the match is made (and owned) here."""
        conns: list[Any] = []
        for seat in spec["seats"]:
            if seat is None:
                conns.append(None)
            elif seat["node"] == self.node:
                conns.append(self._local.get(seat["conn"]))
                self._queued.pop(seat["conn"], None)
            else:
                conns.append(self._remote((seat["node"], seat["conn"]), seat["player"]))
        refs = tuple(spec["refs"])
        try:
            self._create(
                (spec["players"][0], spec["players"][1]), (conns[0], conns[1]),
                spec["pacing"], bots=(spec["bots"][0], spec["bots"][1]),
                refs=(refs[0], refs[1]), rated=bool(spec.get("rated", True)),
                rules=None if spec.get("rules") is None else rules_from_dict(spec["rules"]),
                assist=bool(spec.get("assist", False)),
            )
        except MooError as exc:
            for conn, ref in zip(conns, refs):
                if conn is not None:
                    conn.send(error_message(exc, ref))

    async def _player_by_token(self, token_hash: str) -> Any:
        record = await self._by_token(token_hash)
        if record is not None:
            try:
                self._elsewhere[record.name] = await self._matches_elsewhere(record.name)
            except MooError:
                self._elsewhere.pop(record.name, None)  # welcome lists what is live here
        return record

    async def _matches_elsewhere(self, player: str) -> list[dict[str, Any]]:
        """The player's unfinished matches that other nodes run, as welcome lists them."""
        from moo.match import Match

        async def read(conn: Any) -> Any:
            return await conn.fetch(
                "SELECT match_id FROM matches WHERE finished = 0"
                " AND (meta::jsonb -> 'players') ? $1",
                player,
            )

        store: Any = self.app.store
        ids = [r[0] for r in await store._run(read) if r[0] not in self.app.arena.live]
        out = []
        for sm in await store.stored_matches(ids) if ids else ():
            try:
                match = Match.replay(sm.events, keep_log=False)
            except (ValueError, KeyError, TypeError):
                continue
            seat = match.seat_of(player)
            bots = sm.meta.get("bots") or [None, None]
            if seat is None or match.finished or bots[seat] is not None:
                continue
            out.append(
                {"match_id": sm.match_id, "seat": seat, "seq": match.seq, "phase": match.phase}
            )
        return out

    async def list_matches(self, limit: int = 100) -> list[dict[str, Any]]:
        """The ``matches`` request on a cluster node: its own live matches, then those other
        live nodes own (PostgreSQL ``owners`` with a live lease, unfinished), each rebuilt from
        its log for its phase and counts. Without the database: this node's only."""
        from moo.match import Match
        from server.storage_pg import DB_NOW_MS

        here = self._listing(limit)
        if len(here) >= limit:
            return here

        async def read(conn: Any) -> Any:
            return await conn.fetch(
                "SELECT o.match_id FROM owners o JOIN nodes n ON n.name = o.node"
                f" AND n.epoch = o.epoch AND n.expires_ms > {DB_NOW_MS}"
                " JOIN matches m ON m.match_id = o.match_id"
                " WHERE m.finished = 0 AND o.node <> $1 ORDER BY m.created_ms LIMIT $2",
                self.node, limit,
            )

        store: Any = self.app.store
        try:
            live = self.app.arena.live
            ids = [r[0] for r in await store._run(read) if r[0] not in live]
            stored = await store.stored_matches(ids) if ids else []
        except MooError:
            return here
        out = list(here)
        for sm in stored:
            if len(out) >= limit:
                break
            try:
                m = Match.replay(sm.events, keep_log=False)
            except (ValueError, KeyError, TypeError):
                continue
            if m.finished:
                continue
            out.append({
                "match_id": sm.match_id,
                "players": list(m.players),
                "pacing": m.config.pacing,
                "rules": m.config.rules.to_dict(),
                "phase": m.phase,
                "counts": [s.count for s in m.seats],
            })
        return out

    def player_matches(self, player: str) -> list[dict[str, Any]]:
        here = self._player_matches(player)
        known = {m["match_id"] for m in here}
        extra = [m for m in self._elsewhere.pop(player, []) if m["match_id"] not in known]
        return sorted(here + extra, key=lambda m: str(m["match_id"]))

    def _failed(
        self, lm: Any, exc: BaseException, actor: Any, askers: Any = (),
    ) -> None:
        """The arena drops a match whose write failed. If it failed because this node lost
        the match's lease (paused or overloaded past it: another node took the match over),
        the players connected *here* are sent on to the new owner by a ``resume`` on their
        behalf, from the last event they were sent: nobody else would tell a player waiting
        for the opponent's move that the match now lives elsewhere (players relayed from
        other nodes are closed with 1012 by their node's check)."""
        from server.storage_pg import LeaseLost

        here = [c for c in lm.conns if isinstance(c, Connection) and not c.closing]
        self._storage_failed(lm, exc, actor, askers)
        # not while this node drains: it is about to close these connections with 1012 and
        # the clients resume by themselves (a resume sent for them as well could reach the
        # new owner after theirs and take their seat back for a connection about to close)
        if isinstance(exc, LeaseLost) and not self._stopping and not self.app.arena.stopping:
            loop = asyncio.get_running_loop()
            for conn in here:
                task = loop.create_task(self._follow(conn, lm.id, lm.durable_seq))
                self._following.add(task)
                task.add_done_callback(self._following.discard)

    async def _follow(self, conn: Connection, match_id: str, last_seq: int) -> None:
        try:
            await self.resume(conn, match_id, last_seq, None)
        except MooError as exc:
            if not conn.closing:
                conn.close(CLOSE_RESTART, f"match moved to another node; resume ({exc.code})")

    async def _remote_owner(self, match_id: str) -> str | None:
        """The node to forward a request for ``match_id`` to; None: this node handles it (it
        runs the match, or nobody does because it is finished or unknown).

        A match between two owners is waited for rather than refused (a refusal here would be
        "unknown match" to a client that merely reconnected early): its owner died and no
        survivor has claimed it yet, or this node has claimed it and is replaying it. That
        lasts at most about a lease; after that the request is refused with ``not_available``
        ("try again")."""
        deadline = time.monotonic() + self.check_s * 10 + 2.0
        while match_id not in self.app.arena.live:
            owner = await self.owner_of(match_id)
            if match_id in self.app.arena.live:
                break
            if owner is not None and owner != self.node:
                if not self._died(owner, match_id):
                    return owner
                # its process is dead (the broker published its will) but its lease still
                # runs: forwarding would only wait for an answer that cannot come; wait for
                # the takeover instead, like for a match with no owner
            elif owner is None and not await self._unfinished(match_id):
                break  # finished or unknown: answered here, from the log
            if time.monotonic() > deadline:
                raise NotAvailable("the match is moving to another node; try again")
            await asyncio.sleep(self.check_s / 2)
        return None

    def _died(self, owner: str, match_id: str) -> bool:
        """Whether ``owner``'s process that holds ``match_id`` is known dead: the broker
        published its will (within the last lease) for the very epoch the owners row names."""
        dead = self._dead_epochs.get(owner)
        return (
            dead is not None
            and self._gone.get(owner, 0.0) > time.monotonic()
            and self._owner_epochs.get(match_id) == dead
        )

    async def _unfinished(self, match_id: str) -> bool:
        async def read(conn: Any) -> Any:
            return await conn.fetchval(
                "SELECT finished FROM matches WHERE match_id = $1", match_id
            )

        store: Any = self.app.store
        return bool(await store._run(read) == 0)

    def _deliver(self, data: dict[str, Any]) -> None:
        """A message from an owner for one of this node's clients."""
        conn = self._local.get(data["conn"])
        if conn is None or conn.closing:
            return
        if "close" in data:
            code, reason = data["close"]
            conn.close(int(code), str(reason))
            return
        msg = data["msg"]
        if msg.get("type") == "_lobby":  # the leader's record of this client's open entries
            if msg["challenges"] or msg["rooms"]:
                self._lobby_state[data["conn"]] = msg
            else:
                self._lobby_state.pop(data["conn"], None)
            return
        if msg.get("type") == "match":
            self._queued.pop(data["conn"], None)
            if data.get("from") not in (None, self.node):  # seated in a match run elsewhere
                self._seated.setdefault(data["conn"], set()).add(msg["match_id"])
        if msg.get("type") == "match" and data.get("from") not in (None, self.node):
            # a match the cluster lobby made on another node: later requests go there
            self._relayed.setdefault(data["conn"], {})[msg["match_id"]] = data["from"]
            self._owners[msg["match_id"]] = data["from"]
        ref = msg.get("ref")
        if ref is not None:
            self._awaiting.pop((data["conn"], ref), None)
            sent = self._sent_at.pop((data["conn"], ref), None)
            if sent is not None:
                self.forward_latency.append(time.perf_counter() - sent)
                if len(self.forward_latency) > 5000:
                    del self.forward_latency[:1000]
        conn.send(msg)
        if msg.get("kind") == "finished":
            # nothing more will come for it: no owner to re-check (the cache would grow with
            # every match). The connection's entry stays, so its detach still reaches the
            # owner, which then frees the remote seat it keeps for this connection.
            self._owners.pop(msg.get("match_id", ""), None)
            self._owner_epochs.pop(msg.get("match_id", ""), None)
            self._seated.get(data["conn"], set()).discard(msg.get("match_id", ""))

    # -- owner side ---------------------------------------------------------------------------
    async def _serve(self, data: dict[str, Any]) -> None:
        if not self._first_time(data["rid"]):
            return  # delivered twice: applied once
        op, msg = data["op"], data["msg"]
        match_id = msg.get("match_id") if isinstance(msg, dict) else None
        if op in _MATCH_OPS and isinstance(match_id, str) and (
            match_id not in self.app.arena.live or match_id in self._until_live
        ):
            # The requester's node saw this node in the owners table, which happens as soon
            # as this node claims a match and before its replay here is done: a request that
            # overtakes the replay waits for it (queued per match, in order) instead of
            # getting "unknown match", and never stalls this reader (other matches go on).
            queued = self._until_live.get(match_id)
            if queued is not None:
                queued.append(data)
                return
            self._until_live[match_id] = [data]
            asyncio.get_running_loop().create_task(self._serve_when_live(match_id))
            return
        await self._serve_item(data)

    async def _serve_when_live(self, match_id: str) -> None:
        refuse: MooError | None = None
        try:
            arena = self.app.arena
            if (
                match_id not in arena.live
                and match_id not in arena.recent
                and await self._remote_owner(match_id) is not None
            ):
                refuse = NotAvailable("the match is moving to another node; try again")
        except MooError as exc:  # still between owners after the wait, or no database
            refuse = exc
        except Exception:
            log.exception("bus: waiting for match %s to be live here", match_id)
            refuse = NotAvailable("the match is moving to another node; try again")
        # served in arrival order; requests that arrive meanwhile join the queue
        while self._until_live.get(match_id):
            data = self._until_live[match_id].pop(0)
            try:
                await self._serve_item(data, refuse)
            except Exception:
                log.exception("bus: bad item for match %s", match_id)
        self._until_live.pop(match_id, None)

    async def _serve_item(self, data: dict[str, Any], refuse: MooError | None = None) -> None:
        key = (data["from"], data["conn"])
        op, msg = data["op"], data["msg"]
        if op == "create":
            self._create_here(msg)
            return
        remote = self._remotes.get(key)
        if op in ("detach", "leave"):
            # the client left its node: its seats start their grace clock, its lobby entries
            # (queue, challenges, rooms, presence) go
            if remote is not None:
                self._detach(cast(Connection, remote))
                self._leave(cast(Connection, remote))
                remote.closing = True
                del self._remotes[key]
                self._sync_lobby()
            for queued in self._until_live.values():  # nobody left to answer or seat
                queued[:] = [d for d in queued if (d["from"], d["conn"]) != key]
            return
        remote = self._remote(key, data["player"])
        conn = cast(Connection, remote)
        self.served += 1
        arena = self.app.arena
        ref = msg.get("id")
        busy = data.get("busy")
        if busy is not None and remote.player is not None:
            self._busy_now[remote.player.casefold()] = str(busy)
        try:
            if refuse is not None:
                raise refuse
            if op == "arrive":
                old = self._arrive(conn, msg["player"], bool(msg.get("bot")))
                if old is not None:
                    self.app.arena.detach(old)
                    old.close(CLOSE_REPLACED, "replaced by a newer connection")
                self._retry_held(msg["player"])
            elif op == "requeue":
                remote.mute = "queued"  # the client heard "queued" when it first asked
                self._lobby_ops["queue"](conn, msg)
            elif op == "restore":
                self._restore(conn, msg)
            elif op == "unqueue":
                self._lobby_ops["unqueue"](conn, ref)
            elif op == "rematch":
                await self._rematch(conn, msg)
            elif op in self._lobby_ops:
                self._lobby_ops[op](conn, msg)
            elif op == "act":
                if msg["match_id"] not in arena.live:
                    arena.check_finished(msg["match_id"])
                self._act(conn, msg, time.perf_counter())
            elif op == "resume":
                await self._resume(conn, msg["match_id"], msg.get("last_seq", 0), ref)
            elif op == "watch":
                await self._watch(conn, msg["match_id"], msg.get("last_seq", 0), ref)
            elif op == "unwatch":
                self._unwatch(conn, msg["match_id"])
        except MooError as exc:
            remote.send(error_message(exc, ref))
        finally:
            if busy is not None and remote.player is not None:
                self._busy_now.pop(remote.player.casefold(), None)
            if op in _LOBBY_OPS:
                self._sync_lobby()

    # -- leader side: lobby requests that need more than the single-node lobby ------------------
    def _challenge_here(self, conn: Connection, msg: dict[str, Any]) -> None:
        """A challenge at the leader. Its target's presence comes from the target's node and
        may arrive after the challenge (sent from a third node right after the target's
        ``welcome``): a target that is a registered player is waited for, briefly."""
        try:
            self._challenge(conn, msg)
        except UnknownPlayer as exc:
            asyncio.get_running_loop().create_task(self._hold(conn, msg, exc))

    async def _hold(self, conn: Connection, msg: dict[str, Any], exc: MooError) -> None:
        try:
            known = await self.app.store.account(msg["opponent"])
        except MooError:
            known = None
        if known is None:
            conn.send(error_message(exc, msg.get("id")))
            return
        entry = (conn, msg)
        self._held.append(entry)
        asyncio.get_running_loop().call_later(CHALLENGE_HOLD_S, self._give_up, entry, exc)
        self._retry_held(msg["opponent"])  # they may have arrived during the read

    def _give_up(self, entry: tuple[Connection, dict[str, Any]], exc: MooError) -> None:
        if entry in self._held:
            self._held.remove(entry)
            if not entry[0].closing:
                entry[0].send(error_message(exc, entry[1].get("id")))

    def _retry_held(self, player: str | None) -> None:
        """Challenges held for ``player`` (None: all) are tried again now."""
        folded = None if player is None else player.casefold()
        for entry in list(self._held):
            conn, msg = entry
            if folded is not None and msg["opponent"].casefold() != folded:
                continue
            if conn.closing:
                self._held.remove(entry)
                continue
            try:
                self._challenge(conn, msg)
            except UnknownPlayer:
                continue  # still not here: keep waiting
            except MooError as exc:
                conn.send(error_message(exc, msg.get("id")))
            self._held.remove(entry)
        self._sync_lobby()

    def _rematch_here(self, conn: Connection, msg: dict[str, Any]) -> None:
        """``rematch`` from a client of the leading node (the match may have run anywhere)."""

        async def run() -> None:
            try:
                await self._rematch(conn, msg)
            except MooError as exc:
                conn.send(error_message(exc, msg.get("id")))
            finally:
                self._sync_lobby()

        asyncio.get_running_loop().create_task(run())

    async def _rematch(self, conn: Connection, msg: dict[str, Any]) -> None:
        """The cluster's ``rematch``, run by the lobby leader, which sees every player online:
        the finished match is read from PostgreSQL (any node may have run it), each seat's
        wish is kept here, and once both want it (or the other seat is a hosted bot) the new
        match starts with the seats swapped, placed like any match the lobby makes. The same
        replies and errors as on one node (server/lobby.py ``rematch``)."""
        lobby = self.app.lobby
        lobby._open()
        player = conn.player
        assert player is not None
        lobby._free(player)
        match_id = msg["match_id"]
        info = self._rematches.get(match_id)
        if info is None:
            if match_id in self._rematched:
                raise UnknownMatch(f"no recently finished match {match_id!r}")
            info = await self._finished(match_id, player)
            info = self._rematches.setdefault(match_id, info)
            while len(self._rematches) > _REMATCH_MAX:
                self._rematches.popitem(last=False)
        players, bots, config = info["players"], info["bots"], info["config"]
        folded = [p.casefold() for p in players]
        seat = folded.index(player.casefold()) if player.casefold() in folded else None
        if seat is None or bots[seat] is not None:
            raise NotYourSeat("you do not sit in this match")
        other = 1 - seat
        if bots[other] is None:
            name = players[other]
            if not lobby._is_bot(name) and self.app.arena.live_match_of(name) is not None:
                raise NotAvailable(f"{name} is playing another match now")
        info["wishes"].add(seat)
        if bots[other] is None and other not in info["wishes"]:
            peer = lobby.online.get(players[other])
            if peer is not None and not peer.closing:
                peer.send({"type": "rematch_offer", "match_id": match_id})
            conn.send(_with_ref({"type": "rematch_sent", "match_id": match_id}, msg.get("id")))
            return
        del self._rematches[match_id]
        self._rematched[match_id] = None
        while len(self._rematched) > _REMATCH_MAX:
            self._rematched.popitem(last=False)
        conns: list[Connection | None] = [
            lobby.online.get(name) if bots[i] is None else None for i, name in enumerate(players)
        ]
        conns[seat] = conn
        refs: list[Any] = [None, None]
        refs[seat] = msg.get("id")
        lobby._start(  # seats swapped
            (players[1], players[0]), (conns[1], conns[0]), config.pacing,
            rated=config.rated, rules=config.rules, assist=config.assist,
            bots=(bots[1], bots[0]), refs=(refs[1], refs[0]),
        )

    async def _finished(self, match_id: str, player: str) -> dict[str, Any]:
        """A finished match's players, hosted bots and terms, from PostgreSQL (``player``
        asks: one still playing it is told ``in_match``, as on one node)."""
        from moo.match import MatchConfig

        async def read(conn: Any) -> Any:
            return await conn.fetchrow(
                "SELECT m.meta, m.finished, e.body FROM matches m LEFT JOIN events e"
                " ON e.match_id = m.match_id AND e.seq = 1 WHERE m.match_id = $1",
                match_id,
            )

        store: Any = self.app.store
        row = await store._run(read)
        if row is None or row[2] is None:
            raise UnknownMatch(f"no recently finished match {match_id!r}")
        meta = json.loads(row[0])
        if not row[1]:
            if player.casefold() in (str(p).casefold() for p in meta.get("players", ())):
                raise InMatch(
                    f"you are playing match {match_id}: finish or resign it first",
                    match_id=match_id,
                )
            raise NotAvailable("the match is still being played")
        created = json.loads(row[2])
        return {
            "players": [str(p) for p in meta["players"]],
            "bots": list(meta.get("bots") or [None, None]),
            "config": MatchConfig.from_dict(created.get("config") or {}),
            "wishes": set(),
        }

    def _remote(self, key: tuple[str, str], player: str | None) -> RemoteConn:
        """The stand-in for connection ``key``; a stale one of another player (its detach
        never came, and the id came round again) is detached and replaced."""
        remote = self._remotes.get(key)
        if remote is not None and player not in (None, remote.player):
            self._detach(cast(Connection, remote))
            self._leave(cast(Connection, remote))
            remote.closing = True
            remote = None
        if remote is None:
            remote = self._remotes[key] = RemoteConn(self, key[0], key[1], player)
        return remote

    def _rid(self) -> str:
        """A message id unique in the cluster: this process's random id and a counter."""
        return f"{self._run_id}.{next(self._rids)}"

    def _first_time(self, rid: str) -> bool:
        """Whether the message ``rid`` is new here (the last 20000 are remembered)."""
        if rid in self._seen:
            return False
        self._seen[rid] = None
        if len(self._seen) > _SEEN_MAX:
            self._seen.popitem(last=False)
        return True

    def relay(
        self, origin: str, conn_id: str, msg: dict[str, Any],
        close: tuple[int, str] | None = None,
    ) -> None:
        self.relayed += 1
        data: dict[str, Any] = {"conn": conn_id, "from": self.node, "msg": msg}
        if close is not None:
            data["close"] = list(close)
        # Everything relayed to one node during one turn of the event loop goes out as one
        # MQTT message: a commit fans out to many seats at once, and the per-message cost of
        # the MQTT client, not the payload, is what a relay costs.
        pending = self._relays.get(origin)
        if pending is None:
            pending = self._relays[origin] = []
            self._flush_soon()
        pending.append(data)

    # -- keeping both sides honest --------------------------------------------------------------
    async def _watchdog(self) -> None:
        """Every lease/10: clients relayed to a match that has a new owner now (takeover after
        a crash or a drain) are closed with 1012, so they reconnect and resume it there; remote
        seats of origins whose lease ran out are detached."""
        while not self._stopping:
            await asyncio.sleep(self.check_s)
            try:
                await self._check()
            except Exception as exc:
                log.warning("bus: check failed: %s", exc)

    def _expire_forwards(self) -> None:
        now = time.monotonic()
        for key, (conn, node, deadline) in list(self._awaiting.items()):
            if deadline > now:
                continue
            del self._awaiting[key]
            self._sent_at.pop(key, None)
            queued = self._queued.get(key[0])
            if queued is not None and queued.get("id") == key[1]:
                del self._queued[key[0]]  # refused ("try again"): not re-queued anywhere
            if not conn.closing:
                conn.send(error_message(
                    NotAvailable(f"node {node} did not answer; try again"), key[1]
                ))

    async def _check(self) -> None:
        from server.storage_pg import DB_NOW_MS

        self._expire_forwards()

        store: Any = self.app.store

        async def read(conn: Any) -> Any:
            return await conn.fetch(
                f"SELECT name FROM nodes WHERE epoch > 0 AND expires_ms > {DB_NOW_MS}"
            )

        alive = {row[0] for row in await store._run(read)}
        self._elect(alive)
        for key, remote in list(self._remotes.items()):
            if key[0] not in alive:
                self._detach(cast(Connection, remote))
                remote.closing = True
                del self._remotes[key]
        cached = list(self._owners.items())

        async def owners(conn: Any) -> Any:
            return await conn.fetch(
                "SELECT o.match_id, o.node, o.epoch FROM owners o JOIN nodes n"
                f" ON n.name = o.node AND n.epoch = o.epoch AND n.expires_ms > {DB_NOW_MS}"
                " WHERE o.match_id = ANY($1::text[])",
                [m for m, _ in cached],
            )

        now = {r[0]: (str(r[1]), int(r[2])) for r in await store._run(owners)} if cached else {}
        for match_id, owner in cached:
            current = now.get(match_id)
            if current is None:
                continue  # dead and not yet taken over: wait for the new owner
            before = self._owner_epochs.get(match_id)
            if current[0] == owner and before in (None, current[1]):
                self._owner_epochs[match_id] = current[1]
                continue  # still there
            # moved: to another node, or to a new process of the same node (restarted within
            # a lease: it adopted the match by replay, and knows none of the relayed seats)
            self._owners.pop(match_id, None)
            self._owner_epochs.pop(match_id, None)
            for cid, relayed in list(self._relayed.items()):
                if relayed.get(match_id) == owner:
                    conn = self._local.get(cid)
                    if conn is not None:
                        conn.close(CLOSE_RESTART, "match moved to another node; resume")


def _with_ref(msg: dict[str, Any], ref: Any) -> dict[str, Any]:
    if ref is not None:
        msg["ref"] = ref
    return msg
