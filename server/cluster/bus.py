"""The MQTT bus between cluster nodes: actions forwarded to a match's owner, events relayed back.

A client may sit on any node; the match it plays or watches is run by its owner only
(server/cluster/leases.py). When a node gets a ``guess``/``secret``/``resign``, ``resume``,
``watch`` or ``unwatch`` for a match it does not hold, it forwards the request to the owner:

* topic ``moo-cluster/<owner>/req``, JSON ``{"rid", "from", "conn", "player", "op", "msg"}``:
  ``rid`` is unique per request, so a request the broker delivers twice (QoS 1 after a
  reconnect) is applied once; ``conn`` names the client's connection on the origin node and
  ``player`` the name it said ``hello`` with there (nodes trust each other, not clients).
* The owner runs it exactly as for a local client, through a :class:`RemoteConn` standing for
  the client: the arena seats it, validates, commits, and only then "sends" the acknowledgement
  and every later event of the match to it. A :class:`RemoteConn` sends by publishing to
  ``moo-cluster/<origin>/out`` ``{"rid", "batch": [{"conn", "from", "msg"}, ...]}`` (one MQTT
  message per origin node and event-loop turn), in commit order (one publishing task, one
  MQTT session, QoS 1, so the broker keeps the order), and the origin hands each message to the
  client's real connection. So the client sees the same events, seq numbers, acknowledgements
  and errors as from a single node.
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
and a relayed event reaches its client once. Matches whose
clients all sit on the owner never touch the bus and go on.

MQTT features relied on (any MQTT 3.1.1 broker: Mosquitto, EMQX, VerneMQ, HiveMQ): QoS 1
delivery, per-session in-order delivery for one publisher and topic, ``#`` and ``+`` wildcard
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
import time
from collections import OrderedDict
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
        self._out: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()
        self._inflight: list[tuple[str, bytes]] = []
        self._relays: dict[str, list[dict[str, Any]]] = {}  # origin -> relays this turn
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
        #: the owner's epoch where known: a node restarted under the same name is a new owner
        self._owner_epochs: dict[str, int] = {}
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
        self._storage_failed = arena._storage_failed
        self._following: set[asyncio.Task[None]] = set()
        arena._storage_failed = self._failed  # type: ignore[method-assign]
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
    def _gone_now(self, node: str, epoch: Any = None) -> None:
        """The broker says ``node`` lost its connection (its MQTT will): a dead lobby leader is
        replaced at once, and requests waiting for that node's answer are refused now. Match
        ownership still waits for the lease, which is what keeps a paused node from forking."""
        if node == self.node:
            return
        log.warning("bus: node %s disconnected from the broker", node)
        self._gone[node] = time.monotonic() + self.check_s * 10  # = one lease
        if isinstance(epoch, int):
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
                queued = self._queued.get(self._cid(conn))
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
                async with aiomqtt.Client(
                    self.host, self.port, username=self.username, password=self.password,
                    identifier=f"moo-node-{self.node}-{secrets.token_hex(3)}",
                    timeout=5.0, keepalive=10,
                    # the broker announces this node's death as soon as its connection drops
                    will=aiomqtt.Will(
                        f"{PREFIX}/gone/{self.node}",
                        json.dumps({"node": self.node, "run": self._run_id,
                                    "epoch": self._epoch()}).encode(), qos=1,
                    ),
                ) as client:
                    await client.subscribe(f"{PREFIX}/{self.node}/#", qos=1)
                    await client.subscribe(f"{PREFIX}/gone/+", qos=1)
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
            await asyncio.sleep(backoff)
            backoff = min(2.0, backoff * 2)

    async def _write(self, client: aiomqtt.Client) -> None:
        """Publish what is queued, in order, many at a time.

        QoS 1 makes every publish wait for the broker's acknowledgement; awaited one by one that
        is one round trip per message (a few hundred messages/s). So everything queued goes out
        together: the publishes start in queue order (each hands its packet to the socket
        before its first wait), then all their acknowledgements are awaited at once. If the
        session fails, the whole unacknowledged batch is published again in the next session;
        receivers drop what they already had (``rid``).
        """
        while True:
            if not self._inflight:
                batch = [await self._out.get()]
                while len(batch) < 1000 and not self._out.empty():
                    batch.append(self._out.get_nowait())
                self._inflight = batch
            await asyncio.gather(
                *(client.publish(t, p, qos=1, timeout=5.0) for t, p in self._inflight)
            )
            self._inflight = []

    async def _read(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            try:
                data = json.loads(bytes(message.payload))  # type: ignore[arg-type]
                kind = str(message.topic).rsplit("/", 1)[-1]
                if str(message.topic).startswith(f"{PREFIX}/gone/"):
                    self._gone_now(str(data["node"]), data.get("epoch"))
                elif kind == "req":
                    await self._serve(data)
                elif kind == "out" and self._first_time(data["rid"]):
                    # (a batch re-published after a broker reconnect is dropped: delivered)
                    for item in data["batch"]:
                        self._deliver(item)
            except Exception:
                log.exception("bus: bad message on %s", message.topic)

    def _send(self, topic: str, data: dict[str, Any]) -> None:
        self._out.put_nowait((topic, json.dumps(data, separators=(",", ":")).encode()))

    # -- origin side: forwarding ------------------------------------------------------------------
    def _cid(self, conn: Connection) -> str:
        """A connection's id in the cluster: ``id()`` alone repeats across restarts of this
        node (and owners keep remote seats keyed by it), so this process's run id goes first."""
        return f"{self._run_id}.{id(conn):x}"

    def _conn_id(self, conn: Connection) -> str:
        key = self._cid(conn)
        self._local[key] = conn
        return key

    def _forward(self, conn: Connection, owner: str, op: str, msg: dict[str, Any]) -> None:
        if not self.connected.is_set():
            raise NotAvailable("the node running this match cannot be reached; try again")
        if op in ("act", "resume", "watch") and self.app.arena.stopping:
            # draining: this connection is about to be closed and its client will resume from
            # another node; a request sent now on its behalf could reach the owner after that
            # resume (another MQTT session: no order between them) and take the seat back
            raise NotAvailable("the server is shutting down; try again in a moment")
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
        known = self._cid(conn) in self._local  # else detach() already told the leader
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
                self._queued.pop(self._cid(conn), None)
            else:
                self._forward(conn, leader, op, arg)
                if op == "queue":  # kept until paired, to re-queue at a new leader
                    self._queued[self._cid(conn)] = arg

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
                return owner
            if owner is None and not await self._unfinished(match_id):
                break  # finished or unknown: answered here, from the log
            if time.monotonic() > deadline:
                raise NotAvailable("the match is moving to another node; try again")
            await asyncio.sleep(self.check_s / 2)
        return None

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
        if msg.get("kind") == "finished":
            # nothing more will come for it: no owner to re-check (the cache would grow with
            # every match). The connection's entry stays, so its detach still reaches the
            # owner, which then frees the remote seat it keeps for this connection.
            self._owners.pop(msg.get("match_id", ""), None)
            self._owner_epochs.pop(msg.get("match_id", ""), None)

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
        remote = self._remote(key, data["player"])
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
            if len(self._relays) == 1:
                asyncio.get_running_loop().call_soon(self._flush_relays)
        pending.append(data)

    def _flush_relays(self) -> None:
        relays, self._relays = self._relays, {}
        for origin, batch in relays.items():
            self._send(f"{PREFIX}/{origin}/out", {"rid": self._rid(), "batch": batch})

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

