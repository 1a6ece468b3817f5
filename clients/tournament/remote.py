"""Playing tournament matches for real, through a MOO Arena server over WebSockets.

Every match is an ordinary server match between two ordinary players: seat 0 opens a room
(``room_create``), seat 1 joins it with the code (``room_join``), so exactly the two intended
bots meet however many other players are online. Each seat then plays by the protocol alone
(``secret``, ``guess``; responses from ``round`` events in lockstep, ``guess`` events in free
pacing) and the ``finished`` event is the result that goes into the record.

Why a pool of connections per bot: a connection plays one match at a time (so the ``match``
announcement cannot be confused between matches) and the server rate-limits every connection
(20 messages/s by default, over which it closes the connection). Each connection here keeps a
client-side token bucket a little under the server's limit, and a bot whose rested connections
are all busy simply opens another one, named ``{prefix}{bot}-{n}``.

The strategy's random generator is seeded exactly as in local mode, so a through-server match
plays the same guesses as its ``--local`` twin: the two modes can be compared record by record.

Why the strategies think on a thread of their own: a strategy's move (or its first use, which
builds tables) can take a second or more of CPU, several on a busy machine, and while the event
loop is held nothing else moves: a connection just opened cannot send its ``hello``, and the
server closes it when its handshake timeout runs out (1008), other matches' events wait. Every
call into a strategy (making it, ``new_match``, its secret, ``next_guess``, ``observe``) runs
on the engine's one worker thread, one at a time, as the server's hosted bots do on theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import re
import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.typing import Subprotocol

from bots.base import Strategy, close_strategy
from clients.tournament.results import MatchRecord
from clients.tournament.runner import (
    Job,
    begin_match,
    choose_secret,
    make_strategy,
    seat_rng,
)
from moo.errors import MooError
from moo.protocol import Codec
from moo.rules import Response
from moo.variants import GameRules, rules_from_dict

__all__ = ["BotConnection", "RemoteEngine", "RemoteError"]

log = logging.getLogger("moo.tournament")

_NAME_OK = re.compile(r"[^A-Za-z0-9_.-]")
#: a match over this is abandoned (the server's own clocks end stuck matches)
MATCH_TIMEOUT_S = 120.0
#: connection problems before a match exists are retried this many times with fresh connections,
#: backing off (capped at 4 s) so a server being restarted, or a cluster node's death, is waited
#: out (about 13 to 26 s in all) instead of failing the match
ATTEMPTS = 10
#: how long a seat whose connection dropped keeps trying to reconnect and resume (a restarted
#: server, or a cluster taking a dead node's matches over within its lease, ~10 s)
RECONNECT_S = 60.0
#: refusals that mean "not done, try again" (a database outage, a cluster node that lost the
#: match's lease or did not answer a forwarded request)
RETRYABLE = frozenset({"storage_unavailable", "not_available"})


class RemoteError(MooError):
    """The server refused something or a connection failed mid-match."""

    code = "tournament_remote"


class TokenBucket:
    """Client-side rate limiter: ``rate`` messages/s sustained, ``burst`` at once."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.stamp = time.monotonic()

    def level(self) -> float:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        return self.tokens

    async def take(self) -> None:
        while self.level() < 1.0:
            await asyncio.sleep((1.0 - self.tokens) / self.rate)
        self.tokens -= 1.0


class BotConnection:
    """One logged-in player; plays at most one match at a time."""

    def __init__(self, urls: Sequence[str], name: str, rate: float, codec: Codec) -> None:
        #: servers in order of preference; a failed connect moves on to the next one
        self.urls = list(urls)
        self.url_index = 0
        self.name = name
        #: issued by the first hello; reclaims the name when reconnecting
        self.token: str | None = None
        self.codec = codec
        self.bucket = TokenBucket(rate, max(2.0, 2 * rate))
        self.ws: ClientConnection | None = None
        self.reader: asyncio.Task[None] | None = None
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.waiters: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.match_waiter: asyncio.Future[dict[str, Any]] | None = None
        self.current: str | None = None
        self.ids = itertools.count(1)
        self.broken: BaseException | None = None
        self.busy = False
        #: bumped by every :meth:`resync`: only the newest ``_resumed`` marker is acted on
        self.generation = 0

    @property
    def url(self) -> str:
        return self.urls[self.url_index]

    async def open(self) -> None:
        """Connect (each URL once, in order, from the current one) and say hello."""
        for i in range(len(self.urls)):
            try:
                await self._open_one()
                return
            except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed) as exc:
                log.info("%s: cannot connect to %s: %s", self.name, self.url, exc)
                self.url_index = (self.url_index + 1) % len(self.urls)
                if i == len(self.urls) - 1:
                    raise

    async def _open_one(self) -> None:
        self.ws = await connect(
            self.url,
            subprotocols=[Subprotocol(self.codec.subprotocol)],
            compression=None,
            open_timeout=30,
            ping_interval=None,
            max_queue=None,
        )
        self.broken = None
        self.reader = asyncio.create_task(self._read(self.ws))
        hello: dict[str, Any] = {"type": "hello", "name": self.name, "bot": True}
        if self.token:
            hello["token"] = self.token
        welcome = await self.request(hello)
        if welcome.get("type") != "welcome":
            raise RemoteError(f"unexpected reply to hello: {welcome}")
        if isinstance(welcome.get("token"), str):
            self.token = welcome["token"]

    async def reconnect(self, match_id: str, last_seq: int) -> None:
        """After a drop: reconnect (rotating URLs, capped backoff), reclaim the name, resume.

        The old socket is dead, so the hello with our token takes our seat back (the server
        gave the seat its grace window); the match is then resumed from ``last_seq``.
        Raises :class:`RemoteError` after :data:`RECONNECT_S` without success.
        """
        deadline = time.monotonic() + RECONNECT_S
        attempt = 0
        while True:
            old = self.ws
            if old is not None:
                old.transport.abort()
            if self.reader is not None:
                self.reader.cancel()
            delay = min(4.0, 0.2 * 2 ** (attempt // len(self.urls)))
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            attempt += 1
            try:
                await self._open_one()
                await self.resync(match_id, last_seq)
                return
            except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed,
                    RemoteError) as exc:
                log.info("%s: reconnect to %s failed: %s", self.name, self.url, exc)
                self.url_index = (self.url_index + 1) % len(self.urls)
                if time.monotonic() > deadline:
                    raise RemoteError(f"{self.name}: could not reconnect: {exc}") from None

    async def resync(self, match_id: str, last_seq: int) -> None:
        """Ask for the match's events after ``last_seq``, then queue a ``_resumed`` marker.

        ``resume`` is answered with ``match`` then the replayed events, and a ``ping`` after
        it is answered after them, so the marker lands behind the whole replay: when the seat
        reads it, it knows everything the server stored and can tell whether its last secret
        or guess got through.
        """
        self.current = match_id
        reply = await asyncio.wait_for(
            self.request({"type": "resume", "match_id": match_id, "last_seq": last_seq}), 30)
        if reply.get("type") != "match":
            raise RemoteError(f"{self.name}: unexpected reply to resume: {reply}")
        await asyncio.wait_for(self.request({"type": "ping"}), 30)
        self.generation += 1
        self.events.put_nowait({"type": "_resumed", "generation": self.generation})

    async def send(self, message: dict[str, Any]) -> None:
        if self.broken is not None:
            raise RemoteError(f"{self.name}: connection lost ({self.broken})")
        assert self.ws is not None
        await self.bucket.take()
        await self.ws.send(self.codec.encode(message))

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send with an ``id`` and wait for the reply that carries it back as ``ref``."""
        ref = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiters[ref] = fut
        try:
            await self.send({**message, "id": ref})
            reply = await fut
        finally:
            self.waiters.pop(ref, None)
        if reply.get("type") == "error":
            raise RemoteError(f"{self.name}: {reply.get('code')}: {reply.get('message')}")
        return reply

    def expect_match(self) -> asyncio.Future[dict[str, Any]]:
        """The next ``match`` announcement; events of that match queue up from then on."""
        self.events = asyncio.Queue()  # nothing left over from an earlier, failed match
        if self.broken is not None:
            self.events.put_nowait({"type": "_closed", "reason": str(self.broken)})
        self.match_waiter = asyncio.get_running_loop().create_future()
        return self.match_waiter

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for frame in ws:
                self._dispatch(self.codec.decode(frame))
        except ConnectionClosed as exc:
            self._fail(exc, ws)
        except Exception as exc:  # a decoding bug must not hang the waiters
            self._fail(exc, ws)
        else:
            self._fail(RemoteError("connection closed"), ws)

    def _fail(self, exc: BaseException, ws: ClientConnection | None = None) -> None:
        if ws is not None and ws is not self.ws:
            return  # a socket already replaced by a reconnect: its end is old news
        self.broken = exc
        for fut in list(self.waiters.values()):
            if not fut.done():
                fut.set_exception(RemoteError(f"{self.name}: connection lost ({exc})"))
        if self.match_waiter is not None and not self.match_waiter.done():
            self.match_waiter.set_exception(RemoteError(f"{self.name}: connection lost"))
        self.events.put_nowait({"type": "_closed", "reason": str(exc)})

    def _dispatch(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        if kind == "event":
            if msg.get("match_id") == self.current:
                self.events.put_nowait(msg)
            return
        if kind == "match" and self.match_waiter is not None and not self.match_waiter.done():
            # from now on this match's events are ours, even before the waiter runs
            self.current = str(msg.get("match_id"))
            self.match_waiter.set_result(msg)
        ref = msg.get("ref")
        if isinstance(ref, int) and ref in self.waiters:
            fut = self.waiters[ref]
            if not fut.done():
                fut.set_result(msg)
            return
        if kind == "error" and msg.get("match_id") == self.current and self.current:
            self.events.put_nowait(msg)

    async def close(self) -> None:
        if self.ws is not None:
            if self.broken is not None:
                self.ws.transport.abort()  # no closing handshake to wait for on a dead link
            else:
                try:
                    await asyncio.wait_for(self.ws.close(), 5)
                except Exception:
                    self.ws.transport.abort()
        if self.reader is not None:
            self.reader.cancel()


class _Pool:
    """The connections of one bot; hands out a rested idle one or opens a new one."""

    def __init__(self, engine: RemoteEngine, label: str) -> None:
        self.engine, self.label = engine, label
        self.conns: list[BotConnection] = []
        #: broken connections, closed when the engine closes
        self.closing: list[BotConnection] = []
        self.counter = itertools.count(1)

    async def acquire(self, need: float) -> BotConnection:
        idle = [c for c in self.conns if not c.busy and c.broken is None]
        rested = [c for c in idle if c.bucket.level() >= need]
        if rested:
            conn = max(rested, key=lambda c: c.bucket.tokens)
        elif idle and len(self.conns) >= self.engine.max_per_bot:
            conn = max(idle, key=lambda c: c.bucket.level())
        else:
            conn = BotConnection(
                self.engine.urls, self._name(), self.engine.rate, self.engine.codec
            )
            conn.busy = True
            self.conns.append(conn)
            try:
                await conn.open()
            except BaseException:
                self.conns.remove(conn)
                await conn.close()
                raise
        conn.busy = True
        return conn

    def release(self, conn: BotConnection) -> None:
        conn.busy = False
        conn.current = None
        if conn.broken is not None and conn in self.conns:
            self.conns.remove(conn)
            self.closing.append(conn)

    def _name(self) -> str:
        n = next(self.counter)
        suffix = f"-{n}"
        label = _NAME_OK.sub("_", self.label)
        room = 24 - len(self.engine.prefix) - len(suffix)
        return f"{self.engine.prefix}{label[:room]}{suffix}"


class RemoteEngine:
    """Plays each job as a real match on the server at ``url`` (or the first that answers)."""

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        pacing: str = "lockstep",
        prefix: str | None = None,
        rate: float = 18.0,
        msgpack: bool = False,
        max_per_bot: int = 512,
        rules: GameRules | None = None,
    ) -> None:
        self.urls = [url] if isinstance(url, str) else list(url)
        self.pacing = pacing
        #: the rules every match asks for (room_create), None for the server's default
        self.rules = rules
        self.prefix = prefix if prefix is not None else f"t{secrets.token_hex(2)}-"
        self.rate = rate
        self.codec = Codec("moo.v1.msgpack" if msgpack else "moo.v1.json")
        self.max_per_bot = max_per_bot
        self.pools: dict[str, _Pool] = {}
        self.strategies: dict[str, list[Strategy]] = {}
        self.all_strategies: list[Strategy] = []
        #: where every strategy call runs, one at a time (see the module's docstring)
        self._thinker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="moo-strategies")

    async def think(self, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)`` on the strategies' thread, the event loop free meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self._thinker, call, *args)

    async def start(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            for spec, name in zip(job.specs, job.names):
                self.pools.setdefault(name, _Pool(self, name))
                if spec not in self.strategies:  # fail fast on a bad name
                    self.strategies[spec] = [await self._new_strategy(spec)]

    async def _new_strategy(self, spec: str) -> Strategy:
        strategy: Strategy = await self.think(lambda: make_strategy(spec, rules=self.rules))
        self.all_strategies.append(strategy)
        return strategy

    async def _take_strategy(self, spec: str) -> Strategy:
        idle = self.strategies.setdefault(spec, [])
        return idle.pop() if idle else await self._new_strategy(spec)

    async def play(self, job: Job) -> MatchRecord:
        last: BaseException | None = None
        for attempt in range(ATTEMPTS):
            try:
                return await asyncio.wait_for(self._play_once(job), MATCH_TIMEOUT_S)
            except (RemoteError, ConnectionClosed, OSError, TimeoutError) as exc:
                last = exc
                log.warning("match %s attempt %d failed: %s", job.key, attempt + 1, exc)
                if attempt + 1 < ATTEMPTS:
                    await asyncio.sleep(min(4.0, 0.2 * 2**attempt) * random.uniform(0.5, 1.0))
        raise RemoteError(f"match {job.key} failed {ATTEMPTS} times: {last}")

    async def _play_once(self, job: Job) -> MatchRecord:
        pools = (self.pools[job.names[0]], self.pools[job.names[1]])
        need = 12.0
        conns: list[BotConnection] = []
        strategies = (
            await self._take_strategy(job.specs[0]), await self._take_strategy(job.specs[1])
        )
        match_id: str | None = None
        try:
            for pool in pools:
                conns.append(await pool.acquire(need))
            c0, c1 = conns
            started = int(time.time() * 1000)
            asked: dict[str, Any] = {"type": "room_create", "pacing": self.pacing}
            if self.rules is not None:
                asked["rules"] = self.rules.to_dict()
            room = await c0.request(asked)
            m0 = c0.expect_match()
            c1.expect_match()
            m1 = await c1.request({"type": "room_join", "code": room["code"]})
            if m1.get("type") != "match":
                raise RemoteError(f"unexpected reply to room_join: {m1}")
            first = await m0
            match_id = str(first["match_id"])
            if first.get("seat") != 0 or m1.get("seat") != 1:
                raise RemoteError("the room owner was expected in seat 0")
            c0.current = c1.current = match_id
            rules = _interned(rules_from_dict(first["config"]["rules"]))
            rngs = (seat_rng(job, 0), seat_rng(job, 1))
            for seat in (0, 1):
                await self.think(begin_match, strategies[seat], rules, rngs[seat])
            chosen = job.secrets or (
                await self.think(choose_secret, strategies[0], rules, rngs[0]),
                await self.think(choose_secret, strategies[1], rules, rngs[1]),
            )
            seats = await _both(
                _play_seat(self, c0, 0, match_id, strategies[0], chosen[0], first["config"]),
                _play_seat(self, c1, 1, match_id, strategies[1], chosen[1], first["config"]),
            )
        except BaseException:
            if match_id is not None:  # do not leave a half-played match open on the server
                await _resign_quietly(conns, match_id)
            raise
        finally:
            for pool, conn in zip(pools, conns):
                pool.release(conn)
            for spec, strategy in zip(job.specs, strategies):
                self.strategies.setdefault(spec, []).append(strategy)
        finished = seats[0][1]
        return MatchRecord(
            key=job.key,
            seed=job.seed,
            round=job.round,
            leg=job.leg,
            players=list(job.names),
            secrets=[str(s) for s in finished["secrets"]],
            guesses=[seats[0][0], seats[1][0]],
            counts=[int(c) for c in finished["counts"]],
            winner=finished["winner"],
            reason=str(finished["reason"]),
            mode="server",
            started_ms=started,
            finished_ms=int(time.time() * 1000),
            match_id=match_id,
            pair=list(job.pair),
        )

    async def close(self) -> None:
        conns = [c for pool in self.pools.values() for c in pool.conns + pool.closing]
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
        for strategy in self.all_strategies:
            close_strategy(strategy)
        self.all_strategies.clear()
        self.strategies.clear()
        self._thinker.shutdown(wait=False, cancel_futures=True)


async def _both(*coros: Any) -> list[Any]:
    """Run both seats; if one fails, cancel the other (it must not outlive its match)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for t in tasks:
            if not t.done():
                t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for t in tasks:
        if not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
    return [t.result() for t in tasks]


async def _resign_quietly(conns: Sequence[BotConnection], match_id: str) -> None:
    for conn in conns:
        if conn.broken is None and conn.ws is not None:
            try:
                await asyncio.wait_for(
                    conn.ws.send(conn.codec.encode({"type": "resign", "match_id": match_id})), 2
                )
            except Exception:
                pass


_RULES: dict[GameRules, GameRules] = {}


def _interned(rules: GameRules) -> GameRules:
    """One Rules object per variant, so its cached code lists are built once, not per match."""
    return _RULES.setdefault(rules, rules)


async def _play_seat(
    engine: RemoteEngine,
    conn: BotConnection,
    seat: int,
    match_id: str,
    strategy: Strategy,
    secret: str,
    config: dict[str, Any],
) -> tuple[list[str], dict[str, Any]]:
    """Play one seat by the protocol; returns (own guesses, the ``finished`` event)."""
    lockstep = config.get("pacing") == "lockstep"
    cap = int(config.get("guess_cap", 64))
    length = int(config["rules"]["length"])
    guesses: list[str] = []
    solved = False
    over = False  # somebody solved in lockstep: the match ends with this round
    last_seq = 0  # highest seq applied: replays after a reconnect are skipped up to it
    acked = 0  # own guesses the server has stored (our own ``guess`` events)
    secret_stored = False
    #: how many guesses we had sent when the last resync began: only those may need re-sending
    sent_at_resync = 0

    async def guess() -> None:
        g: str = await engine.think(strategy.next_guess)
        guesses.append(g)
        await send({"type": "guess", "match_id": match_id, "guess": g})

    async def send(message: dict[str, Any]) -> None:
        # a send on a dead socket is not an error here: the reader has queued ``_closed``
        # and the loop below reconnects, resumes and re-sends what did not get through
        with contextlib.suppress(RemoteError, ConnectionClosed):
            await conn.send(message)

    events = conn.events  # this match's queue, even if the connection moves on
    await send({"type": "secret", "match_id": match_id, "secret": secret})
    while True:
        msg = await events.get()
        kind = msg.get("type")
        if kind == "_closed":
            # The server died or the link broke: resume the match, never resign it.
            log.info("%s: connection lost in %s; resuming from seq %d",
                     conn.name, match_id, last_seq)
            sent_at_resync = len(guesses)
            await conn.reconnect(match_id, last_seq)
            continue
        if kind == "_resumed":
            if msg["generation"] != conn.generation:
                continue  # a later resync follows; re-sending twice could guess twice
            # Everything stored is replayed by now: re-send what did not get through. Only a
            # guess sent before the resync began, and only if no newer one was made since (the
            # replay itself may have asked for one, sent on the new connection: re-sending
            # that one would play it twice, in the next round).
            if not secret_stored:
                await send({"type": "secret", "match_id": match_id, "secret": secret})
            elif acked < sent_at_resync == len(guesses) and not over:
                await send({"type": "guess", "match_id": match_id, "guess": guesses[-1]})
            continue
        if kind == "error":
            code = msg.get("code")
            if code in ("match_finished", "not_your_turn", "already_set"):
                continue  # a race with the end of the match or a replay: events follow
            if code in RETRYABLE:
                # not stored: catch up on the same connection, then re-send (see _resumed)
                await asyncio.sleep(0.5)
                sent_at_resync = len(guesses)
                try:
                    await conn.resync(match_id, last_seq)
                except (RemoteError, TimeoutError):
                    pass  # the connection broke meanwhile: ``_closed`` is queued
                continue
            raise RemoteError(f"{conn.name} in {match_id}: {code}: {msg.get('message')}")
        seq = msg.get("seq")
        if isinstance(seq, int):
            if seq <= last_seq:
                continue  # already applied before the reconnect
            last_seq = seq
        ev = msg.get("kind")
        if ev == "secret" and msg.get("seat") == seat:
            secret_stored = True
        elif ev == "started":
            secret_stored = True
            if not guesses:
                await guess()
        elif ev == "guess" and msg.get("seat") == seat:
            acked = max(acked, int(msg["n"]))
            if not lockstep and "bulls" in msg:
                response = Response(msg["bulls"], msg["cows"])
                await engine.think(strategy.observe, msg["guess"], response)
                solved = solved or response.bulls == length
                if not solved and len(guesses) < cap and len(guesses) == acked:
                    await guess()
        elif ev == "round" and lockstep:
            results = msg["results"]
            own, other = results[seat], results[1 - seat]
            await engine.think(strategy.observe, own[0], Response(own[1], own[2]))
            await engine.think(strategy.observe_opponent_move, int(msg["n"]), other[0],
                               Response(other[1], other[2]))
            solved = solved or own[1] == length
            over = over or own[1] == length or other[1] == length
            if not over and len(guesses) < cap and len(guesses) == int(msg["n"]):
                await guess()
        elif ev == "guess" and not lockstep and "bulls" in msg:
            response = Response(msg["bulls"], msg["cows"])
            await engine.think(strategy.observe_opponent_move, int(msg["n"]), msg.get("guess"),
                               response)
        elif ev == "finished":
            return guesses, msg
