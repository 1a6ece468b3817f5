"""Playing tournament matches for real, through a MOO Arena server over WebSockets.

Every match is an ordinary server match between two ordinary players: seat 0 opens a room
(``room_create``), seat 1 joins it with the code (``room_join``), so exactly the two intended
bots meet however many other players are online. Each seat then plays by the protocol alone
(``secret``, ``guess``; responses from ``round`` events in lockstep, ``guess`` events in free
pacing) and the ``finished`` event is the result that goes into the record.

Every connection is the SDK's :class:`~clients.sdk.Client` (the project's one protocol client):
it says hello with the bot flag, keeps its token, paces itself under the server's rate limit,
reconnects with backoff through the list of URLs, resumes its matches, and drops replayed
events by ``seq``. What is left here is the tournament's part: which connection plays which
match, and re-sending a move that a dropped connection may have lost (never twice: the match
is caught up first, and the move is sent again only if the server does not have it).

Why a pool of connections per bot: a connection plays one match at a time (so a ``match``
announcement cannot be confused between matches) and the server rate-limits every connection;
a bot whose connections are all busy opens another one, named ``{prefix}{bot}-{n}``.

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

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from bots.base import Strategy
from bots.registry import close_strategy
from clients.sdk import (
    Client,
    ConnectionLost,
    Finished,
    GuessMade,
    HandshakeRefused,
    MatchAnnounced,
    MatchEvent,
    RoundRevealed,
    ServerError,
    Started,
)
from clients.sdk.wire import Wire
from clients.tournament.results import MatchRecord
from clients.tournament.runner import (
    Job,
    begin_match,
    check_programs,
    choose_secret,
    failure_text,
    make_strategy,
    seat_rng,
)
from moo.errors import MooError
from moo.rules import DEFAULT_RULES, Response
from moo.variants import GameRules

__all__ = ["ATTEMPTS", "RemoteEngine", "RemoteError", "failure_reason"]

log = logging.getLogger("moo.tournament")

_NAME_OK = re.compile(r"[^A-Za-z0-9_.-]")
#: a match over this is abandoned (the server's own clocks end stuck matches)
MATCH_TIMEOUT_S = 120.0
#: problems before a match exists are retried this many times with fresh connections, backing
#: off (capped at 4 s) so a server being restarted, or a cluster node's death, is waited out
#: (about 13 to 26 s in all) instead of failing the match
ATTEMPTS = 10
#: how long a seat whose connection dropped waits for the SDK to reconnect (a restarted server,
#: or a cluster taking a dead node's matches over within its lease, ~10 s)
RECONNECT_S = 60.0
#: refusals of a move that mean it raced the end of the match or a replay: events follow
_RACES = frozenset({"match_finished", "not_your_turn", "already_set"})
#: what may go wrong with a connection or the server before or during a match
_FAILURES = (MooError, ServerError, ConnectionLost, ConnectionClosed, InvalidHandshake,
             InvalidURI, OSError, TimeoutError)


class RemoteError(MooError):
    """The server refused something or a connection failed mid-match."""

    code = "tournament_remote"


def failure_reason(exc: BaseException | None) -> str:
    """A connection failure in one short phrase: an ``OSError``'s own words without the
    ``[Errno N]`` prefix, an error without text by its kind."""
    if exc is None:
        return "no attempt was made"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class _Pool:
    """The connections of one bot; hands out an idle one or opens a new one."""

    def __init__(self, engine: RemoteEngine, label: str) -> None:
        self.engine, self.label = engine, label
        self.idle: list[Client] = []
        self.all: list[Client] = []
        self.counter = itertools.count(1)

    async def acquire(self) -> Client:
        while self.idle:
            conn = self.idle.pop()
            if conn.online:
                return conn
        conn = self.engine.new_client(self._name())
        self.all.append(conn)
        await conn.connect()
        return conn

    def release(self, conn: Client, match_id: str | None) -> None:
        if match_id is not None:
            conn.states.pop(match_id, None)  # a finished match is of no further interest
        conn.discard_pending()  # what this match left behind must not reach the next one
        if conn.online:
            self.idle.append(conn)

    def _name(self) -> str:
        suffix = f"-{next(self.counter)}"
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
        rules: GameRules | None = None,
        on_retry: Callable[[Job, int, BaseException], None] | None = None,
    ) -> None:
        self.urls = [url] if isinstance(url, str) else list(url)
        #: told of every failed attempt that will be retried (job, attempt number from 1, the
        #: error): the command line says the first one and counts the rest, rather than a line
        #: per attempt of every match (issue 32: 321 lines for a server that was down)
        self.on_retry = on_retry
        self.pacing = pacing
        #: the rules every match asks for (room_create), None for the server's default
        self.rules = rules
        self.prefix = prefix if prefix is not None else f"t{secrets.token_hex(2)}-"
        self.rate = rate
        self.encoding = "msgpack" if msgpack else "json"
        self.pools: dict[str, _Pool] = {}
        self.strategies: dict[str, list[Strategy]] = {}
        self.all_strategies: list[Strategy] = []
        #: where every strategy call runs, one at a time (see the module's docstring)
        self._thinker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="moo-strategies")

    async def think(self, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)`` on the strategies' thread, the event loop free meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self._thinker, call, *args)

    def new_client(self, name: str) -> Client:
        return Client(
            self.urls, name, bot=True, encoding=self.encoding, client_name="moo-tournament",
            rate_per_s=self.rate, rate_burst=max(2, int(2 * self.rate)),
            backoff_max=4.0, max_attempts=None, request_timeout=30.0,
        )

    async def start(self, jobs: Sequence[Job]) -> None:
        check_programs(sorted({s for job in jobs for s in job.specs}),
                       self.rules or DEFAULT_RULES)
        await self.check_server()
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

    async def check_server(self) -> None:
        """One WebSocket handshake (no ``hello``, so no name is made) before any match.

        Why: the retries of :meth:`play` wait out a server that restarts *during* a
        tournament; a server that is not there at the start (a typo, nothing started yet), or
        an address that is not an arena, is the person's to fix, so it is one line at once
        rather than every match failing ten times over 20 s.
        """
        last: BaseException | None = None
        for url in self.urls:
            try:
                wire = await Wire.open(url, self.encoding, open_timeout=10)
            except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
                last = exc
                continue
            with contextlib.suppress(Exception):
                await wire.close()
            return
        if isinstance(last, HandshakeRefused) and len(self.urls) == 1:
            raise RemoteError(str(last))
        raise RemoteError(f"cannot connect to {', '.join(self.urls)}: {failure_reason(last)}")

    async def play(self, job: Job) -> MatchRecord:
        last: BaseException | None = None
        for attempt in range(ATTEMPTS):
            try:
                return await asyncio.wait_for(self._play_once(job), MATCH_TIMEOUT_S)
            except _FAILURES as exc:
                last = exc
                log.debug("match %s attempt %d failed: %s", job.key, attempt + 1, exc)
                if attempt + 1 < ATTEMPTS:
                    if self.on_retry is not None:
                        self.on_retry(job, attempt + 1, exc)
                    await asyncio.sleep(min(4.0, 0.2 * 2**attempt) * random.uniform(0.5, 1.0))
        raise RemoteError(f"match {job.key} failed {ATTEMPTS} times: {failure_reason(last)}")

    async def _play_once(self, job: Job) -> MatchRecord:
        pools = (self.pools[job.names[0]], self.pools[job.names[1]])
        conns: list[Client] = []
        strategies = (
            await self._take_strategy(job.specs[0]), await self._take_strategy(job.specs[1])
        )
        match_id: str | None = None
        try:
            for pool in pools:
                conns.append(await pool.acquire())
            c0, c1 = conns
            started = int(time.time() * 1000)
            known = set(c0.states)
            room = await c0.create_room(pacing=self.pacing, rules=self.rules)
            m1 = await c1.join_room(room.code)
            first = await _announcement(c0, known)
            match_id = first.match_id
            if first.seat != 0 or m1.seat != 1 or m1.match_id != match_id:
                raise RemoteError("the room owner was expected in seat 0")
            rules = _interned(first.rules)
            rngs = (seat_rng(job, 0), seat_rng(job, 1))
            failed: dict[int, str] = {}
            for seat in (0, 1):
                try:
                    await self.think(begin_match, strategies[seat], rules, rngs[seat])
                except Exception as exc:
                    failed[seat] = f"{job.specs[seat]}: {failure_text(exc)}"
            chosen = job.secrets or tuple([
                await self.think(_secret, strategies[seat], rules, rngs[seat], seat in failed)
                for seat in (0, 1)])
            seats = await _both(*(
                _Seat(self, conns[seat], seat, match_id, strategies[seat], job.specs[seat],
                      first.config, failed.get(seat)).play(chosen[seat])
                for seat in (0, 1)
            ))
        except BaseException:
            if match_id is not None:  # do not leave a half-played match open on the server
                await _resign_quietly(conns, match_id)
            raise
        finally:
            for pool, conn in zip(pools, conns):
                pool.release(conn, match_id)
            for spec, strategy in zip(job.specs, strategies):
                self.strategies.setdefault(spec, []).append(strategy)
        finished = seats[0].finished
        assert finished is not None  # play() returns only once it has it
        forfeits = [s.failure for s in seats if s.failure]
        return MatchRecord(
            key=job.key,
            seed=job.seed,
            round=job.round,
            leg=job.leg,
            players=list(job.names),
            secrets=[str(s) for s in finished.secrets],
            guesses=[seats[0].guesses, seats[1].guesses],
            counts=[int(c) for c in finished.counts],
            winner=finished.winner,
            reason=str(finished.reason),
            mode="server",
            started_ms=started,
            finished_ms=int(time.time() * 1000),
            match_id=match_id,
            pair=list(job.pair),
            rules=job.rules,
            forfeit="; ".join(forfeits) or None,
        )

    async def close(self) -> None:
        conns = [c for pool in self.pools.values() for c in pool.all]
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
        for strategy in self.all_strategies:
            close_strategy(strategy)
        self.all_strategies.clear()
        self.strategies.clear()
        self._thinker.shutdown(wait=False, cancel_futures=True)


def _secret(strategy: Strategy, rules: GameRules, rng: random.Random, failed: bool) -> str:
    if not failed:
        with contextlib.suppress(Exception):  # a failing chooser forfeits later, not here
            return choose_secret(strategy, rules, rng)
    return rng.choice(rules.secrets)


async def _announcement(conn: Client, known: set[str]) -> MatchAnnounced:
    """The ``match`` of the room seat 0 just opened: the first announcement of a match this
    connection did not know before (one left over from an earlier match is skipped)."""
    async with asyncio.timeout(30):
        while True:
            msg = await conn.receive()
            if isinstance(msg, MatchAnnounced) and msg.match_id not in known:
                return msg


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


async def _resign_quietly(conns: Sequence[Client], match_id: str) -> None:
    for conn in conns:
        if conn.online:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.send("resign", match_id=match_id), 2)


_RULES: dict[GameRules, GameRules] = {}


def _interned(rules: GameRules) -> GameRules:
    """One Rules object per variant, so its cached code lists are built once, not per match."""
    return _RULES.setdefault(rules, rules)


class _Seat:
    """One seat of one match, played by the protocol from the events the SDK hands over."""

    def __init__(self, engine: RemoteEngine, conn: Client, seat: int, match_id: str,
                 strategy: Strategy, spec: str, config: dict[str, Any],
                 failure: str | None) -> None:
        self.think = engine.think
        self.conn, self.seat, self.match_id = conn, seat, match_id
        self.strategy, self.spec = strategy, spec
        self.lockstep = config.get("pacing") == "lockstep"
        self.cap = int(config.get("guess_cap", 64))
        self.length = int(config["rules"]["length"])
        self.guesses: list[str] = []
        #: why the strategy forfeited the match (None: it played it out)
        self.failure = failure
        self.solved = False
        self.over = False  # somebody solved in lockstep: the match ends with this round
        self.finished: Finished | None = None

    async def play(self, secret: str) -> _Seat:
        """Set the secret, answer every event until ``finished``; returns itself."""
        if self.failure is not None:
            await self._resign()
        await self._move("secret", secret=secret)
        while True:
            try:
                msg = await self.conn.receive(timeout=MATCH_TIMEOUT_S)
            except ConnectionLost:
                raise RemoteError(f"{self.conn.name}: connection lost for good") from None
            if not isinstance(msg, MatchEvent) or msg.match_id != self.match_id:
                continue
            if isinstance(msg, Finished):
                self.finished = msg
                return self
            if self.failure is None:
                try:
                    await self._on(msg)
                except (RemoteError, ConnectionLost, TimeoutError):
                    raise
                except Exception as exc:  # the strategy failed: it forfeits, the match ends
                    self.failure = f"{self.spec}: {failure_text(exc)}"
                    await self._resign()

    async def _on(self, msg: MatchEvent) -> None:
        if isinstance(msg, Started):
            if not self.guesses:
                await self._guess()
        elif isinstance(msg, GuessMade) and msg.seat == self.seat:
            if not self.lockstep and msg.bulls is not None and msg.cows is not None:
                response = Response(msg.bulls, msg.cows)
                await self.think(self.strategy.observe, str(msg.guess), response)
                self.solved = self.solved or response.bulls == self.length
                if not self.solved and len(self.guesses) < self.cap \
                        and len(self.guesses) == msg.n:
                    await self._guess()
        elif isinstance(msg, GuessMade):
            if not self.lockstep and msg.bulls is not None and msg.cows is not None:
                await self.think(self.strategy.observe_opponent_move, msg.n, msg.guess,
                                 Response(msg.bulls, msg.cows))
        elif isinstance(msg, RoundRevealed) and self.lockstep:
            own, other = msg.results[self.seat], msg.results[1 - self.seat]
            await self.think(self.strategy.observe, str(own[0]), Response(own[1], own[2]))
            await self.think(self.strategy.observe_opponent_move, msg.n, other[0],
                             Response(other[1], other[2]))
            self.solved = self.solved or own[1] == self.length
            self.over = self.over or own[1] == self.length or other[1] == self.length
            if not self.over and len(self.guesses) < self.cap and len(self.guesses) == msg.n:
                await self._guess()

    async def _guess(self) -> None:
        guess: str = await self.think(self.strategy.next_guess)
        self.guesses.append(guess)
        await self._move("guess", guess=guess)

    async def _resign(self) -> None:
        with contextlib.suppress(ServerError, ConnectionLost, TimeoutError):
            await self.conn.resign(self.match_id)

    async def _move(self, kind: str, **fields: Any) -> None:
        """Send a ``secret`` or ``guess``, riding out a dropped connection.

        The SDK re-sends a move refused as retryable itself. A connection that drops before
        the answer came leaves it unknown whether the server stored the move: once the SDK is
        back online (it has said hello with our token and resumed the match), the match is
        caught up (``resume`` then ``ping``, whose answer comes after the replay) and the move
        is sent again only if the server does not have it.
        """
        while True:
            try:
                await self.conn.request(kind, match_id=self.match_id, **fields)
                return
            except ServerError as exc:
                if exc.code in _RACES:
                    return
                raise RemoteError(f"{self.conn.name} in {self.match_id}: {exc}") from None
            except (ConnectionLost, TimeoutError):
                if not await self.conn.wait_online(RECONNECT_S):
                    raise RemoteError(f"{self.conn.name}: could not reconnect") from None
            state = self.conn.states.get(self.match_id)
            with contextlib.suppress(ServerError, ConnectionLost, TimeoutError):
                await self.conn.request("resume", match_id=self.match_id,
                                        last_seq=state.last_seq if state else 0)
                await self.conn.ping()
            state = self.conn.states.get(self.match_id)
            if state is None or state.finished:
                return
            if kind == "secret" and state.secrets_set[self.seat]:
                return
            if kind == "guess" and len(state.mine()) >= len(self.guesses):
                return
