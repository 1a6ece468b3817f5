"""The fault harness's clients: players and spectators written from docs/protocol.md alone.

Why not the SDK (clients/sdk), the project's one protocol client: these clients exist to check
the server's promise, so they must not carry the SDK's belts (its resync of a quiet match, its
retries). They do only what the protocol document tells a client to do, and they record
everything they receive, per connection, for bench/harness/checker.py:

* a connection follows its matches from ``welcome`` (a player: "Back in your seats at once",
  every event from ``seq`` 1) or from ``watching`` (a spectator's ``watch`` with ``last_seq``);
* every event is kept in the connection's record as it arrived; the client applies an event
  only when its ``seq`` is above the highest it applied (the rule under "Events");
* nothing is re-requested while the connection is open: no ``resume``, no ``watch`` again.
  When the connection closes, the client connects again (to its node, else the next) and
  sends ``hello`` with its token; a spectator sends ``watch`` with its ``last_seq``; a player
  whose match is no longer in ``welcome.matches`` (it ended meanwhile) sends ``resume`` to see
  its end. That is all a client following the document does.

Players do not search: each knows the secret it must find, makes a planned number of wrong
guesses, then guesses it (free pacing), so a match lasts a known number of guesses and ends
``solved``. A refusal the document calls retryable (``storage_unavailable``,
``not_available``) is tried again after a short pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

SUBPROTOCOL = "moo.v1.json"
RETRYABLE = frozenset({"storage_unavailable", "not_available"})


@dataclass
class Received:
    seq: int
    kind: str
    t: float  # time.time() when it arrived


@dataclass
class Conn:
    """One WebSocket connection of one client: what it was sent, and when it followed."""

    node: str
    opened: float
    following_since: float | None = None  # when the match's events began to come on it
    welcomed: float | None = None  # when its welcome came
    closed: float | None = None
    code: int | None = None
    events: list[Received] = field(default_factory=list)
    #: every other message it was sent: (time, type, match_id, ref), to explain a repeat
    notes: list[tuple[float, str, Any, Any]] = field(default_factory=list)


@dataclass
class Follower:
    """One client of one match, player (seat 0 or 1) or spectator (seat None)."""

    name: str
    seat: int | None
    match_id: str = ""
    conns: list[Conn] = field(default_factory=list)
    applied: list[int] = field(default_factory=list)
    acked: list[tuple[int, int, str]] = field(default_factory=list)  # (seat, n, guess)
    ack_times: list[tuple[float, float]] = field(default_factory=list)  # (sent, acknowledged)
    refusals: Counter[str] = field(default_factory=Counter)
    #: each refusal: (time.time(), the request, the code), for the failover breakdown
    refused: list[tuple[float, str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: requests that got no reply within a minute on a connection that stayed open
    unanswered: list[str] = field(default_factory=list)
    finished: dict[str, Any] | None = None  # the applied `finished` event

    def refuse(self, what: str, code: str) -> None:
        self.refusals[code] += 1
        self.refused.append((time.time(), what, code))


@dataclass
class Plan:
    secret: str  # the secret this player sets
    guesses: list[str]  # wrong ones, then the opponent's secret
    think_s: float


class Ended(Exception):
    """The connection closed (or could not be opened): connect again."""


class DocsClient:
    """A client of one match that reconnects for as long as the match is not over for it."""

    def __init__(self, follower: Follower, nodes: list[tuple[str, int]], home: int,
                 rng: random.Random) -> None:
        self.me = follower
        self.nodes = nodes
        self.home = home
        self.rng = rng
        self.token: str | None = None
        self.ws: ClientConnection | None = None
        self.conn: Conn | None = None
        self.ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.changed = asyncio.Event()
        self.last_seq = 0
        self.events: list[dict[str, Any]] = []  # applied, in order
        self.reader: asyncio.Task[None] | None = None  # held: a task nobody holds may vanish

    # -- connection --------------------------------------------------------------------------
    async def open(self, give_up_at: float) -> dict[str, Any]:
        """Connect (home node first, then the others) and say hello; the welcome."""
        n = len(self.nodes)
        delay = 0.1
        for attempt in itertools.count():
            name, port = self.nodes[(self.home + attempt) % n]
            try:
                ws = await asyncio.wait_for(
                    connect(f"ws://127.0.0.1:{port}/", subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                            open_timeout=5, ping_interval=None, max_queue=None),
                    10,
                )
            except (OSError, InvalidHandshake, TimeoutError):
                if time.time() > give_up_at:
                    raise
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)
                continue
            self.ws = ws
            self.conn = Conn(node=name, opened=time.time())
            self.me.conns.append(self.conn)
            hello: dict[str, Any] = {"type": "hello", "bot": True}
            hello.update({"token": self.token} if self.token else {"name": self.me.name})
            reader = asyncio.get_running_loop().create_task(self.read(ws, self.conn))
            self.reader = reader
            try:
                welcome = await self.request(hello, 15)
            except (Ended, TimeoutError):
                reader.cancel()
                await ws.close()
                if time.time() > give_up_at:
                    raise
                await asyncio.sleep(delay)
                continue
            if welcome.get("type") != "welcome":
                reader.cancel()
                await ws.close()
                if welcome.get("code") in RETRYABLE and time.time() < give_up_at:
                    self.me.refuse("hello", str(welcome.get("code")))
                    await asyncio.sleep(0.3)
                    continue
                if welcome.get("code") == "bad_token" and self.token is None:
                    # our first hello took the name but its reply (the token) was lost: the
                    # name is gone for good; a spectator, who has nothing under it yet,
                    # takes another, a player (seated under it) cannot
                    if self.me.seat is not None or time.time() > give_up_at:
                        raise Ended()
                    self.me.name += "x"
                    continue
                raise RuntimeError(f"{self.me.name}: hello refused: {welcome}")
            self.token = welcome.get("token") or self.token
            self.conn.welcomed = time.time()
            return welcome
        raise AssertionError("unreachable")

    async def read(self, ws: ClientConnection, conn: Conn) -> None:
        try:
            async for frame in ws:
                msg = json.loads(frame)
                self.handle(msg, conn)
        except ConnectionClosed:
            pass
        finally:
            conn.closed = time.time()
            conn.code = ws.close_code
            for fut in self.waiting.values():
                if not fut.done():
                    fut.set_exception(Ended())
            self.waiting.clear()
            self.changed.set()

    def handle(self, msg: dict[str, Any], conn: Conn) -> None:
        kind = msg.get("type")
        mid = self.me.match_id
        if kind == "event" and msg.get("match_id") == mid and mid:
            seq = int(msg["seq"])
            conn.events.append(Received(seq, str(msg["kind"]), time.time()))
            if seq > self.last_seq:
                self.last_seq = seq
                self.me.applied.append(seq)
                self.events.append(msg)
                if msg["kind"] == "finished":
                    self.me.finished = msg
        else:
            conn.notes.append((time.time(), str(kind), msg.get("match_id"), msg.get("ref")))
        if kind == "match" and not mid:
            # the room's match: announced to its owner, the reply to the joiner's room_join
            self.me.match_id = str(msg["match_id"])
            conn.following_since = time.time()
        ref = msg.get("ref")
        if ref is not None and (fut := self.waiting.pop(int(ref), None)) and not fut.done():
            fut.set_result(msg)
        self.changed.set()

    async def request(self, msg: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        """Send; the reply (the message carrying its ``ref``). :class:`Ended` if the
        connection closes first."""
        if self.ws is None or self.conn is None or self.conn.closed is not None:
            raise Ended()
        rid = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[rid] = fut
        try:
            await self.ws.send(json.dumps({**msg, "id": rid}))
        except ConnectionClosed:
            self.waiting.pop(rid, None)
            raise Ended() from None
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            if self.conn is not None and self.conn.closed is None:
                self.me.unanswered.append(
                    f"{msg['type']} (id {rid}) sent at {time.time() - timeout:.1f} on "
                    f"{self.conn.node}")
            raise
        finally:
            self.waiting.pop(rid, None)

    async def wait_change(self, timeout: float) -> None:
        self.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout)

    async def close(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()

    @property
    def is_open(self) -> bool:
        return self.conn is not None and self.conn.closed is None

    # -- what a player knows from the events it applied ---------------------------------------
    def mine(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == "guess" and e.get("seat") == self.me.seat]

    def secret_set(self) -> bool:
        return any(e["kind"] == "secret" and e.get("seat") == self.me.seat for e in self.events)

    def started(self) -> bool:
        return any(e["kind"] == "started" for e in self.events)

    def solved(self) -> bool:
        return any(e.get("bulls") == 4 for e in self.mine())


async def play(client: DocsClient, plan: Plan, deadline: float) -> None:
    """A player's whole life in its match: until it has applied ``finished`` (or ``deadline``,
    a safety net: the checker then reports the match)."""
    me = client.me
    while me.finished is None and time.time() < deadline:
        if not client.is_open:
            if me.conns:
                await asyncio.sleep(client.rng.uniform(0.05, 0.3))  # reconnect backoff
            try:
                welcome = await client.open(deadline)
            except Exception as exc:  # recorded: the checker reports it
                me.errors.append(f"could not connect again: {exc!r}")
                return
            assert client.conn is not None
            listed = {m["match_id"] for m in welcome.get("matches", [])}
            if me.match_id in listed:
                client.conn.following_since = time.time()
            elif me.match_id and me.finished is None:
                # it ended while we were away: the welcome does not list it; see its end
                try:
                    reply = await client.request(
                        {"type": "resume", "match_id": me.match_id,
                         "last_seq": client.last_seq})
                except (Ended, TimeoutError):
                    continue
                if reply.get("type") == "match":
                    client.conn.following_since = time.time()
                else:
                    me.refuse("resume", str(reply.get("code")))
                    await asyncio.sleep(0.3)
                    await client.close()  # try again on a fresh connection
            continue
        try:
            await _act(client, plan)
        except Ended:
            continue
        except TimeoutError:
            await client.close()  # unanswered (recorded): a fresh connection goes on
    await client.close()


async def _act(client: DocsClient, plan: Plan) -> None:
    me = client.me
    if not me.match_id:
        await client.wait_change(1.0)
        return
    if not client.secret_set():
        reply = await client.request(
            {"type": "secret", "match_id": me.match_id, "secret": plan.secret}, 60)
        if reply.get("type") == "error":
            me.refuse("secret", str(reply["code"]))
            if reply["code"] in RETRYABLE:
                await asyncio.sleep(0.3)
            elif reply["code"] != "already_set":
                me.errors.append(f"secret: {reply}")
                await client.wait_change(1.0)
        return
    if not client.started() or client.solved():
        await client.wait_change(1.0)
        return
    k = len(client.mine())
    await asyncio.sleep(plan.think_s * client.rng.uniform(0.5, 1.5))
    if not client.is_open or len(client.mine()) != k or me.finished is not None:
        return
    guess = plan.guesses[min(k, len(plan.guesses) - 1)]
    sent = time.time()
    # numbered (docs/protocol.md, "Retrying safely"): sent again after a lost answer or a
    # "try again", a guess that landed is answered with its first event, never played twice
    reply = await client.request(
        {"type": "guess", "match_id": me.match_id, "guess": guess, "n": k + 1}, 60)
    if reply.get("type") == "event" and reply.get("kind") == "guess":
        me.acked.append((int(reply["seat"]), int(reply["n"]), str(reply["guess"])))
        me.ack_times.append((sent, time.time()))
    elif reply.get("type") == "error":
        me.refuse("guess", str(reply["code"]))
        if reply["code"] in RETRYABLE:
            await asyncio.sleep(0.3)
        elif reply["code"] in ("not_your_turn", "match_finished"):
            await client.wait_change(1.0)
        else:
            me.errors.append(f"guess {guess}: {reply}")
            await client.wait_change(1.0)


async def watch(client: DocsClient, deadline: float) -> None:
    """A spectator: ``watch`` on every new connection, with its ``last_seq``, until it has
    applied ``finished``."""
    me = client.me
    while me.finished is None and time.time() < deadline:
        if not client.is_open:
            if me.conns:
                await asyncio.sleep(client.rng.uniform(0.05, 0.3))
            try:
                await client.open(deadline)
            except Exception as exc:  # recorded: the checker reports it
                me.errors.append(f"could not connect again: {exc!r}")
                return
            assert client.conn is not None
            conn = client.conn
            while conn.closed is None:
                try:
                    reply = await client.request(
                        {"type": "watch", "match_id": me.match_id, "last_seq": client.last_seq})
                except (Ended, TimeoutError):
                    break
                if reply.get("type") == "watching":
                    conn.following_since = time.time()
                    break
                me.refuse("watch", str(reply.get("code")))
                if reply.get("code") not in RETRYABLE:
                    me.errors.append(f"watch: {reply}")
                    return
                await asyncio.sleep(0.3)
            continue
        await client.wait_change(1.0)
    await client.close()
