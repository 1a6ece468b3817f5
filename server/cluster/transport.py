"""The MQTT session between cluster nodes: ordered, numbered envelopes and the death notice.

Topics (any MQTT 3.1.1 broker; nothing retained, no persistence, no MQTT 5 features):

* ``moo-cluster/v1/node/<name>``: envelopes for one node (requests for the matches it owns,
  lobby requests if it leads, messages for its clients);
* ``moo-cluster/v1/all``: envelopes for every node (takeovers, ticks);
* ``moo-cluster/v1/gone/<name>``: the node's MQTT will, which the broker publishes as soon as
  the node's connection drops (a killed process's socket closes at once).

Ordering and loss: everything one process publishes goes out over one MQTT session in order,
QoS 1, so the broker delivers it in order. What one turn of the event loop sends to a node goes
out as one envelope; envelopes are numbered per destination (``n`` = 1, 2, 3, ... for each
publishing process, ``run``). A receiver drops an ``n`` it has seen (a publish repeated after a
reconnect) and reports a skipped ``n`` as a loss of that sender's messages; a :class:`Tick`
every second (and one as soon as a session is up) says how many were sent, so a lost *last*
envelope is noticed too. Every envelope names its sender's epoch: the receiver is told
(:meth:`Receiver.heard`), so a restarted node counts as alive again at once. Losing its own
session is reported as well (everything in flight may be gone). What to do about a loss is the
business of the layers above (:mod:`server.cluster.forwarding` re-attaches the affected
followers from their cursors).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiomqtt

from server.cluster.wire import (
    Envelope,
    Gone,
    Message,
    Tick,
    WireError,
    decode,
    encode,
)

__all__ = ["BusClient", "Receiver", "Transport"]

log = logging.getLogger("moo.cluster")

PREFIX = "moo-cluster/v1"
#: seconds between ticks (how long a lost last envelope can go unnoticed)
TICK_S = 1.0
#: a publish the broker has not acknowledged for this long ends the session
ACK_TIMEOUT_S = 5.0


class Receiver(Protocol):
    """What the transport hands its messages to (the cluster router)."""

    def received(self, sender: str, epoch: int, items: list[Message]) -> None: ...

    def lost(self, sender: str | None) -> None:
        """Messages from ``sender`` (None: from anyone, this node's own session dropped) may
        have been lost."""

    def connected(self) -> None:
        """A new session is up (after start or a reconnect) and the broker has this node's
        announcement to every node."""

    def heard(self, sender: str, epoch: int) -> None:
        """An envelope from ``sender``'s process in ``epoch`` arrived."""

    def back(self, sender: str) -> None:
        """``sender`` has a new session (its Tick after a reconnect): what this node sent it
        while it was away is lost (the broker keeps nothing for an absent node)."""

    def gone(self, node: str, run: str, epoch: int | None) -> None:
        """The broker published ``node``'s will: its process lost its connection."""


class BusClient(aiomqtt.Client):
    """aiomqtt's client, with fewer turns of the event loop between a message and the wire.

    Reading: aiomqtt's reader callback makes paho read one packet per call when no QoS 1
    message of ours is unacknowledged: on a busy event loop (hundreds of WebSockets) that is one
    envelope per loop turn, so a burst queued up in the socket for hundreds of ms. This one
    replaces that callback (same fd, registered after it) with one that goes on while the
    socket has data, up to 1000 packets per turn.

    Writing: aiomqtt registers the socket's writer through ``call_soon_threadsafe`` (paho may
    call it from the connecting thread), so a publish reached the socket two turns later. From
    the loop's own thread the writer is registered at once, and :meth:`write_now` writes what
    is queued in the same turn. Relies on aiomqtt 2.x internals (``_client``, ``_queue``,
    ``_connected``, ``_disconnected``, ``_loop``); the cluster tests exercise every one of them.

    Connecting: a connection that drops before the broker's CONNACK (a proxy, load balancer
    or relay in front of a broker that is down accepts it, then resets it) fails the attempt
    at once; aiomqtt ignores such a drop and waits out its whole timeout (5 s here), which
    kept a node off the bus for that long after a broker restart (issue 33).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._thread = threading.get_ident()

    def _on_socket_register_write(self, client: Any, userdata: Any, sock: Any) -> None:
        if threading.get_ident() != self._thread:
            super()._on_socket_register_write(client, userdata, sock)
            return
        self._loop.add_writer(sock.fileno(), self.write_now)

    def _on_disconnect(self, client: Any, userdata: Any, *args: Any, **kwargs: Any) -> None:
        if not self._connected.done():
            self._connected.set_exception(
                aiomqtt.MqttError("the connection dropped before the broker answered"))
            return
        super()._on_disconnect(client, userdata, *args, **kwargs)

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
        """Publish (QoS 1) without waiting: queued in order at once, written when the socket
        is ready; the returned info says when the broker acknowledged it."""
        return self._client.publish(topic, payload, qos=1)

    def taken(self) -> list[aiomqtt.Message]:
        """The messages received and not yet handed out (taken off the queue)."""
        out = []
        while not self._queue.empty():
            out.append(self._queue.get_nowait())
        return out


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


class Transport:
    """One node's MQTT session: send to a node or to all, receive in order, notice losses."""

    def __init__(
        self, url: str, node: str, receiver: Receiver, epoch: Callable[[], int | None]
    ) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 1883
        self.username = parts.username
        self.password = parts.password
        self.node = node
        self.receiver = receiver
        self.epoch = epoch
        #: this process's id: numbers restart with it, so a receiver tells runs apart
        self.run = secrets.token_hex(4)
        self.up = asyncio.Event()
        self._client: BusClient | None = None
        #: handed to the MQTT client, in order, until the broker acknowledged them (publish
        #: info, topic, payload, when); those not acknowledged when a session ends are
        #: published again, in order, in the next one (receivers drop repeats by number)
        self._unacked: deque[tuple[Any, str, bytes, float]] = deque()
        #: this turn's items per destination ("" = every node)
        self._out: dict[str, list[Message]] = {}
        self._flush_due = False
        #: envelopes published per destination (sender side), by this run
        self._sent: dict[str, int] = {}
        #: the last envelope number seen per (sending run, topic kind)
        self._seen: dict[tuple[str, bool], int] = {}
        #: sending run -> the count of its last tick that reported a loss
        self._ticked: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        #: counters for /metrics
        self.published = 0
        self.received_count = 0
        self.losses = 0

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._supervise()), loop.create_task(self._ticker())]

    async def stop(self) -> None:
        """Leave the broker cleanly (no will: a node that drains is not dead)."""
        self._stopping = True
        self._flush()
        client = self._client
        if client is not None:
            with contextlib.suppress(Exception):
                client.write_now()
            # wait briefly for the broker to take what is queued (a drain's last replies)
            deadline = time.monotonic() + 1.0
            while self._unacked and time.monotonic() < deadline:
                while self._unacked and _acked(self._unacked[0][0]):
                    self._unacked.popleft()
                await asyncio.sleep(0.01)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    @property
    def state(self) -> str:
        return "ok" if self.up.is_set() else "down"

    # -- sending ----------------------------------------------------------------------------------
    def send(self, node: str, item: Message) -> None:
        """Queue ``item`` for ``node``: this turn's items to one node go out as one envelope."""
        self._queue(node, item)

    def broadcast(self, item: Message) -> None:
        self._queue("", item)

    def _queue(self, dest: str, item: Message) -> None:
        pending = self._out.get(dest)
        if pending is None:
            pending = self._out[dest] = []
            if not self._flush_due:
                self._flush_due = True
                asyncio.get_running_loop().call_soon(self._flush)
        pending.append(item)

    def _flush(self) -> None:
        self._flush_due = False
        out, self._out = self._out, {}
        for dest, items in out.items():
            n = self._sent[dest] = self._sent.get(dest, 0) + 1
            topic = f"{PREFIX}/all" if dest == "" else f"{PREFIX}/node/{dest}"
            self._publish(topic, encode(Envelope(self.node, self.run, self.epoch() or 0, n, items)))
        if self._client is not None:
            self._client.write_now()  # this turn, not at the socket's next writable event

    def _publish(self, topic: str, payload: bytes) -> None:
        client = self._client
        info = None
        if client is not None:
            info = client.publish_now(topic, payload)
        self.published += 1
        self._unacked.append((info or _NOT_SENT, topic, payload, time.monotonic()))
        while self._unacked and _acked(self._unacked[0][0]):  # the broker has it
            self._unacked.popleft()

    async def _ticker(self) -> None:
        while not self._stopping:
            await asyncio.sleep(TICK_S)
            if self._sent and self.up.is_set():
                self.broadcast(Tick({d: n for d, n in self._sent.items() if d}))

    # -- the session -----------------------------------------------------------------------------
    async def _supervise(self) -> None:
        backoff = 0.1
        while not self._stopping:
            try:
                async with BusClient(
                    self.host, self.port, username=self.username, password=self.password,
                    identifier=f"moo-node-{self.node}-{self.run}-{secrets.token_hex(2)}",
                    timeout=5.0, keepalive=10,
                    # no limit of 20 unacknowledged publishes (paho's default): a full window
                    # would hold later messages back
                    max_inflight_messages=0,
                    # small messages go out at once, not after the previous one's TCP ACK
                    socket_options=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
                    will=aiomqtt.Will(
                        f"{PREFIX}/gone/{self.node}",
                        encode(Envelope(self.node, self.run, self.epoch() or 0, 0,
                                        [Gone(self.node, self.run, self.epoch())])),
                        qos=1,
                    ),
                ) as client:
                    # QoS 0 from the broker to this node: QoS 1 on that leg would add a PUBACK
                    # per message and the broker's window of unacknowledged messages per
                    # subscriber, which queued envelopes behind one another. It loses nothing
                    # more than QoS 1 does here: over one TCP connection both arrive in order,
                    # and after a reconnect (clean session) neither is resent; envelopes are
                    # numbered, so what the broker drops is noticed.
                    await client.subscribe(f"{PREFIX}/node/{self.node}", qos=0)
                    await client.subscribe(f"{PREFIX}/all", qos=0)
                    await client.subscribe(f"{PREFIX}/gone/+", qos=1)
                    self._client = client
                    left, self._unacked = self._unacked, deque()
                    for info, topic, payload, _ in left:
                        if not _acked(info):  # lost with the last session: again
                            self._publish(topic, payload)
                    self.up.set()
                    backoff = 0.1
                    log.info("bus: connected to %s:%d", self.host, self.port)
                    # the others learn at once that this process is here (its epoch: a
                    # restarted node counts again) and what they missed from it
                    await self._announce()
                    self.receiver.connected()
                    await self._session(client)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # aiomqtt.MqttError, OSError: reconnect
                if self.up.is_set() and not self._stopping:
                    log.warning("bus: connection lost: %s", exc)
            finally:
                was_up = self.up.is_set()
                self.up.clear()
                self._client = None
                if was_up and not self._stopping:
                    self.receiver.lost(None)
            if self._stopping:
                return
            await asyncio.sleep(backoff)
            # a local broker is cheap to ask: at most half a second between attempts, so a
            # node is back on the bus within that of the broker (or the link) coming back
            backoff = min(0.5, backoff * 2)

    async def _announce(self) -> None:
        """Broadcast a :class:`Tick` now and wait (at most :data:`ACK_TIMEOUT_S`) until the
        broker acknowledged it: it has handed it on to every node then, before anything this
        node's clients could make other nodes publish afterwards."""
        self.broadcast(Tick({d: n for d, n in self._sent.items() if d}))
        self._flush()
        if not self._unacked:
            return
        info = self._unacked[-1][0]
        deadline = time.monotonic() + ACK_TIMEOUT_S
        while not _acked(info) and time.monotonic() < deadline and self.up.is_set():
            await asyncio.sleep(0.005)

    async def _session(self, client: BusClient) -> None:
        """Read until the session ends; whichever ends first (the reader sees a lost
        connection at once, the acknowledgement check only later) ends it."""
        loop = asyncio.get_running_loop()
        both = {loop.create_task(self._read(client)), loop.create_task(self._watch_acks())}
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

    async def _watch_acks(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            while self._unacked and _acked(self._unacked[0][0]):
                self._unacked.popleft()
            if self._unacked and time.monotonic() - self._unacked[0][3] > ACK_TIMEOUT_S:
                raise aiomqtt.MqttError("the broker did not acknowledge a publish in 5 s")

    async def _read(self, client: BusClient) -> None:
        async for first in client.messages:
            # aiomqtt hands out one message per two turns of the event loop; on a busy node
            # that, not the broker, was the latency tail: everything received is taken at once
            for message in (first, *client.taken()):
                self._handle(str(message.topic), bytes(message.payload))  # type: ignore[arg-type]

    # -- receiving -------------------------------------------------------------------------------
    def _handle(self, topic: str, payload: bytes) -> None:
        try:
            envelope, errors = decode(payload)
        except WireError as exc:
            log.error("bus: refused a message on %s: %s", topic, exc)
            return
        for error in errors:
            log.error("bus: skipped an item from %s: %s", envelope.node, error)
        self.received_count += 1
        if topic.startswith(f"{PREFIX}/gone/"):
            for item in envelope.items:
                if isinstance(item, Gone) and item.node != self.node:
                    self.receiver.gone(item.node, item.run, item.epoch)
            return
        if envelope.node == self.node and envelope.run == self.run:
            return  # our own broadcast
        if envelope.node != self.node:
            self.receiver.heard(envelope.node, envelope.epoch)
        broadcast = topic == f"{PREFIX}/all"
        key = (envelope.run, broadcast)
        last = self._seen.get(key)
        if last is not None and envelope.n <= last:
            return  # published again after a reconnect: handled already
        self._seen[key] = envelope.n
        if last is not None and envelope.n > last + 1:
            self._loss(envelope.node, f"envelopes {last + 1}..{envelope.n - 1}")
        items = envelope.items
        if broadcast:
            ticks = [i for i in items if isinstance(i, Tick)]
            items = [i for i in items if not isinstance(i, Tick)]
            if ticks and envelope.node != self.node:
                self.receiver.back(envelope.node)
            for tick in ticks:
                sent = tick.sent.get(self.node)
                seen = self._seen.get((envelope.run, False))
                if sent is not None and (seen is None or seen < sent) and (
                    self._ticked.get(envelope.run) != sent
                ):
                    # (reported once per count: the numbers themselves stay what arrived)
                    self._ticked[envelope.run] = sent
                    self._loss(envelope.node, f"envelopes {(seen or 0) + 1}..{sent}")
        if items:
            self.receiver.received(envelope.node, envelope.epoch, items)

    def _loss(self, sender: str, what: str) -> None:
        self.losses += 1
        log.warning("bus: %s from node %s lost", what, sender)
        self.receiver.lost(sender)
