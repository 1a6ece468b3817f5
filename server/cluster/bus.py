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

from moo.errors import MooError, NotAvailable
from moo.variants import GameRules, rules_from_dict
from server.connection import CLOSE_REPLACED, CLOSE_RESTART, Connection, error_message
from server.lobby import Waiting

if TYPE_CHECKING:
    from server.context import ServerContext

__all__ = ["Bus", "RemoteConn"]

log = logging.getLogger("moo.cluster")

PREFIX = "moo-cluster"
#: lobby requests a node forwards to the lobby leader: bus op -> Lobby method
_LOBBY_METHODS = {
    "queue": "enqueue", "unqueue": "unqueue", "challenge": "challenge", "answer": "answer",
    "room_create": "room_create", "room_join": "room_join",
}
_LOBBY_OPS = frozenset({*_LOBBY_METHODS, "arrive", "requeue"})
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
        self._owners: dict[str, str] = {}  # match id -> owner node (cache)
        self._queued: dict[str, dict[str, Any]] = {}  # conn id -> its pending queue request
        self._waiting: dict[str, list[Callable[[str | None], None]]] = {}
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
        # welcome.matches: a player's unfinished matches anywhere in the cluster, read from
        # PostgreSQL while hello looks its token up (player_matches itself is synchronous)
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
        self._lobby_ops: dict[str, Callable[..., None]] = {
            "queue": lobby.enqueue, "unqueue": lobby.unqueue, "challenge": lobby.challenge,
            "answer": lobby.answer, "room_create": lobby.room_create,
            "room_join": lobby.room_join,
        }
        lobby.arrive = self.arrive  # type: ignore[method-assign]
        lobby.leave = self.leave  # type: ignore[method-assign]
        for op, name in _LOBBY_METHODS.items():
            setattr(lobby, name, self._lobby_call(op))

    # -- lifecycle ----------------------------------------------------------------------------
    def _gone_now(self, node: str) -> None:
        """The broker says ``node`` lost its connection (its MQTT will): a dead lobby leader is
        replaced at once, and requests waiting for that node's answer are refused now. Match
        ownership still waits for the lease, which is what keeps a paused node from forking."""
        if node == self.node:
            return
        log.warning("bus: node %s disconnected from the broker", node)
        self._gone[node] = time.monotonic() + self.check_s * 10  # = one lease
        for key, (conn, target, _) in list(self._awaiting.items()):
            if target == node:
                self._awaiting[key] = (conn, target, 0.0)
        self._expire_forwards()
        self._elect(self._alive)

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
        self.leader = leader
        self._announce()

    def _announce(self) -> None:
        """Tell the lobby leader who is online here (a new leader, or after a reconnect)."""
        lobby = self.app.lobby
        if self.leader == self.node:
            # this node leads now: its own players queued at the old leader wait here
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
                # a player queued here stays queued when the leader that held it died
                queued = self._queued.get(f"{id(conn):x}")
                if queued is not None:
                    self._forward(conn, leader, "requeue", queued)

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
                        json.dumps({"node": self.node, "run": self._run_id}).encode(), qos=1,
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
                self._gone_now(str(data["node"]))
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
    def _conn_id(self, conn: Connection) -> str:
        key = f"{id(conn):x}"
        self._local[key] = conn
        return key

    def _forward(self, conn: Connection, owner: str, op: str, msg: dict[str, Any]) -> None:
        if not self.connected.is_set():
            raise NotAvailable("the node running this match cannot be reached; try again")
        cid = self._conn_id(conn)
        relayed = self._relayed.setdefault(cid, {})
        if "match_id" in msg:
            relayed[msg["match_id"]] = owner
        elif op in _LOBBY_OPS:
            relayed[""] = owner  # "" = this connection is known to the leader's lobby
        ref = msg.get("id")
        if ref is not None and op != "requeue":
            self._sent_at[(cid, ref)] = time.perf_counter()
            self._awaiting[(cid, ref)] = (conn, owner, time.monotonic() + self.forward_timeout_s)
        self._send(
            f"{PREFIX}/{owner}/req",
            {"rid": self._rid(), "from": self.node, "conn": cid,
             "player": conn.player, "op": op, "msg": msg},
        )
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
            owner = await self.owner_of(match_id)
        except MooError:
            owner = None
        for then in self._waiting.pop(match_id, []):
            then(owner)

    async def owner_of(self, match_id: str) -> str | None:
        """The node whose live lease owns ``match_id`` (None: nobody, or finished)."""
        from server.storage_pg import DB_NOW_MS

        async def read(conn: Any) -> Any:
            return await conn.fetchval(
                "SELECT o.node FROM owners o JOIN nodes n ON n.name = o.node"
                f" AND n.epoch = o.epoch AND n.expires_ms > {DB_NOW_MS}"
                " WHERE o.match_id = $1",
                match_id,
            )

        store: Any = self.app.store
        owner = await store._run(read)
        if owner is not None and owner != self.node:
            self._owners[match_id] = owner
        return cast(str | None, owner)

    async def _owners_of(self, match_ids: list[str]) -> dict[str, str]:
        """The nodes whose live lease owns each of ``match_ids`` (absent: nobody)."""
        from server.storage_pg import DB_NOW_MS

        async def read(conn: Any) -> Any:
            return await conn.fetch(
                "SELECT o.match_id, o.node FROM owners o JOIN nodes n ON n.name = o.node"
                f" AND n.epoch = o.epoch AND n.expires_ms > {DB_NOW_MS}"
                " WHERE o.match_id = ANY($1::text[])",
                match_ids,
            )

        store: Any = self.app.store
        return {str(r[0]): str(r[1]) for r in await store._run(read)}

    def act(self, conn: Connection, msg: dict[str, Any], received: float | None = None) -> None:
        match_id = msg["match_id"]
        if match_id in self.app.arena.live or conn.player is None:
            self._act(conn, msg, received)
            return

        def then(owner: str | None) -> None:
            try:
                if owner is None or owner == self.node or match_id in self.app.arena.live:
                    self._act(conn, msg, received)
                else:
                    self._forward(conn, owner, "act", msg)
            except MooError as exc:
                conn.send(error_message(exc, msg.get("id")))

        self._with_owner(match_id, then)

    async def resume(self, conn: Connection, match_id: str, last_seq: int, ref: Any) -> None:
        owner = await self._remote_owner(match_id)
        if owner is None:
            await self._resume(conn, match_id, last_seq, ref)
            return
        msg = {"type": "resume", "match_id": match_id, "last_seq": last_seq, "id": ref}
        self._forward(conn, owner, "resume", msg)

    async def watch(self, conn: Connection, match_id: str, last_seq: int, ref: Any) -> None:
        owner = await self._remote_owner(match_id)
        if owner is None:
            await self._watch(conn, match_id, last_seq, ref)
            return
        if match_id not in conn.spectating:
            conn.spectating.append(match_id)
        msg = {"type": "watch", "match_id": match_id, "last_seq": last_seq, "id": ref}
        self._forward(conn, owner, "watch", msg)

    def unwatch(self, conn: Connection, match_id: str) -> None:
        cid = f"{id(conn):x}"
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
        cid = f"{id(conn):x}"
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
        return old

    def leave(self, conn: Connection) -> None:
        self._leave(conn)
        leader = self._lobby_elsewhere()
        known = f"{id(conn):x}" in self._local  # else detach() already told the leader
        if leader is not None and known and self.connected.is_set():
            self._forward(conn, leader, "leave", {})

    def _lobby_call(self, op: str) -> Callable[..., None]:
        local = self._lobby_ops[op]

        def call(conn: Connection, arg: Any) -> None:
            leader = self._lobby_elsewhere()
            if leader is None:
                local(conn, arg)
            elif op == "unqueue":
                self._forward(conn, leader, op, {"id": arg})
                self._queued.pop(f"{id(conn):x}", None)
            else:
                self._forward(conn, leader, op, arg)
                if op == "queue":  # kept until paired, to re-queue at a new leader
                    self._queued[f"{id(conn):x}"] = arg

        return call

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
                key = (seat["node"], seat["conn"])
                remote = self._remotes.get(key)
                if remote is None:
                    remote = self._remotes[key] = RemoteConn(self, *key, seat["player"])
                conns.append(remote)
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

    def player_matches(self, player: str) -> list[dict[str, Any]]:
        here = self._player_matches(player)
        known = {m["match_id"] for m in here}
        extra = [m for m in self._elsewhere.pop(player, []) if m["match_id"] not in known]
        return sorted(here + extra, key=lambda m: str(m["match_id"]))

    async def _remote_owner(self, match_id: str) -> str | None:
        if match_id in self.app.arena.live:
            return None
        owner = await self.owner_of(match_id)
        if owner is None or owner == self.node or match_id in self.app.arena.live:
            return None
        return owner

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
        if msg.get("type") == "match":
            self._queued.pop(data["conn"], None)
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
        if msg.get("kind") == "finished":  # nothing more will come for it
            self._relayed.get(data["conn"], {}).pop(msg.get("match_id", ""), None)

    # -- owner side ---------------------------------------------------------------------------
    async def _serve(self, data: dict[str, Any]) -> None:
        if not self._first_time(data["rid"]):
            return  # delivered twice: applied once
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
            return
        if remote is None:
            remote = self._remotes[key] = RemoteConn(self, key[0], key[1], data["player"])
        conn = cast(Connection, remote)
        self.served += 1
        arena = self.app.arena
        ref = msg.get("id")
        try:
            if op == "arrive":
                old = self._arrive(conn, msg["player"], bool(msg.get("bot")))
                if old is not None:
                    self.app.arena.detach(old)
                    old.close(CLOSE_REPLACED, "replaced by a newer connection")
            elif op == "requeue":
                remote.mute = "queued"  # the client heard "queued" when it first asked
                self._lobby_ops["queue"](conn, msg)
            elif op == "unqueue":
                self._lobby_ops["unqueue"](conn, ref)
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
        # one query for all of them (one per match and second was most of a split
        # match's bus cost at a few hundred matches)
        current_of = await self._owners_of(list(self._owners)) if self._owners else {}
        for match_id, owner in list(self._owners.items()):
            current = current_of.get(match_id)
            if current is None or current == owner:
                continue  # still there, or dead and not yet taken over: wait for the new owner
            self._owners.pop(match_id, None)
            for cid, relayed in list(self._relayed.items()):
                if relayed.get(match_id) == owner:
                    conn = self._local.get(cid)
                    if conn is not None:
                        conn.close(CLOSE_RESTART, "match moved to another node; resume")

