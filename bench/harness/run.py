"""The fault harness: matches across the nodes of a cluster while a nemesis injects faults,
then the history checker (docs/cluster.md, "The fault harness").

Each of ``matches`` slots plays cross-node matches one after another until the run's time is
up: player 0 on node ``i``, player 1 on the next node, a spectator on the one after (the
match runs on player 0's node, so player 1's every move and the spectator's every event cross
the bus). The clients are bench/harness/player.py's: they follow docs/protocol.md and never
resync on their own.

The nemesis, every ``--every`` seconds (a random pick of the kinds asked for):

``kill``       SIGKILL the node that owns the most live matches; started again 3 s later
``term``       SIGTERM (a drain) of that node; started again once it has exited
``stop``       SIGSTOP of that node for the lease plus 2 s, then SIGCONT
``broker``     the broker stopped and started again on its port
``database``   PostgreSQL stopped (fast shutdown: every session terminated) and started again
``cut-broker`` one node's connection to the broker severed for 2 s
``cut-db``     one node's connection to the database severed for the lease plus 2 s
``slow-broker`` / ``slow-db``  one node's link to the broker / the database slow for 6 s: each
               chunk each way held 200 ms ± 100 ms (order kept)
``stall-broker`` / ``stall-db``  one node's link stalled for 3 s: nothing delivered either way,
               every connection kept open, then all of it at once
``drop-broker`` / ``drop-db``  half of one node's connections to the broker / the database reset
               at random, new ones accepted at once

``--once kill|term``: no nemesis; the owner of the most live matches gets that one fault once
every match is under way (the issue's "24 cross-node matches, the owner SIGKILLed mid-play").

For every kill, the time until every live match the node owned accepted a move again (an
acknowledged guess sent after the signal) is the kill's failover time.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from bench.harness.checker import Fault, Verdict, check, parse_log
from bench.harness.cluster import Cluster, Node
from bench.harness.pauses import Pauses
from bench.harness.player import RETRYABLE, DocsClient, Ended, Follower, Plan, play, watch
from bench.harness.services import PrivatePostgres
from moo.rules import DEFAULT_RULES

KINDS = (
    "kill", "term", "stop", "broker", "database", "cut-broker", "cut-db",
    "slow-broker", "slow-db", "stall-broker", "stall-db", "drop-broker", "drop-db",
)
#: a slow link: each chunk held SLOW_S ± SLOW_JITTER_S, for SLOW_FOR_S
SLOW_S, SLOW_JITTER_S, SLOW_FOR_S = 0.2, 0.1, 6.0
#: a stalled link delivers nothing for STALL_S
STALL_S = 3.0
#: a lossy link resets this share of its connections
DROP_SHARE = 0.5


@dataclass
class Options:
    seconds: float = 120.0  # how long new matches are started
    #: 0: faults until ``seconds`` are up; N: every kind struck N times (a shuffled turn each),
    #: then no new match starts (the run ends when its matches have, or at ``seconds``)
    rounds: int = 0
    matches: int = 12  # concurrent match slots
    kinds: tuple[str, ...] = KINDS
    every: tuple[float, float] = (8.0, 14.0)  # seconds between faults
    once: str = ""  # "kill" or "term": one fault of the owner, no nemesis
    nodes: int = 3
    lease_ms: int = 10000  # the server's default
    grace_ms: int = 60000
    think_ms: int = 150
    guesses: tuple[int, int] = (8, 16)  # a player's guesses, the last one solving
    seed: int = 1
    finish_s: float = 300.0  # safety net: after the last match started, until all ended
    stall_s: float = 5.0  # the longest silence on an open connection the checker allows


@dataclass
class Report:
    options: dict[str, Any]
    verdict: dict[str, Any]
    samples: dict[str, list[str]]
    faults: dict[str, int]
    failover_s: list[float]
    unrecovered: int
    server_errors: list[str]
    seconds: float
    orphans: int = 0  # matches in the database that no slot played (none expected)
    orphan_ends: dict[str, str] = field(default_factory=dict)  # their ids and last events
    pair_failures: dict[str, int] = field(default_factory=dict)
    started: float = 0.0  # time.time() at the start: the timeline counts from it
    timeline: list[dict[str, Any]] = field(default_factory=list)
    #: the harness's own pauses (bench/harness/pauses.py): a long one stalls every link
    pauses: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.verdict["ok"]) and self.unrecovered == 0 and self.orphans == 0

    def summary(self) -> str:
        v = self.verdict
        fo = sorted(self.failover_s)
        p99 = fo[min(len(fo) - 1, int(0.99 * len(fo)))] if fo else None
        return (
            f"{sum(self.faults.values())} faults {self.faults}; {v['matches']} matches, "
            f"{v['followers']} clients, {v['connections']} connections, {v['events']} events, "
            f"{v['acknowledged']} acknowledged guesses: lost {v['lost']}, gaps {v['gaps']}, "
            f"repeats {v['repeats']}, disorder {v['disorder']}, stalls {v['stalls']}, "
            f"finished wrong {v['finished_wrong']}, doubled {v['doubled']}, "
            f"forfeits {v['forfeits']}, unanswered "
            f"{v['unanswered']}, client errors "
            f"{v['client_errors']}, orphans {self.orphans}; reasons {v['reasons']}; "
            f"kill failover (s): {[round(x, 2) for x in fo]} p99 {p99}; "
            f"unrecovered {self.unrecovered}; harness paused at most "
            f"{self.pauses.get('loop_max_s')} s; {self.seconds:.0f} s"
        )


class Harness:
    def __init__(self, options: Options, progress: Callable[[str], None] | None = None,
                 pg: PrivatePostgres | None = None) -> None:
        """``pg``: a PostgreSQL server made but not initialised, to use instead of a new one
        (the tests' fixture, which removes it afterwards)."""
        self.o = options
        self.rng = random.Random(options.seed)
        self.cluster = Cluster(options.nodes, options.lease_ms, options.grace_ms, pg=pg)
        self.followers: list[Follower] = []
        #: match id -> its players (for the failover times: polled often, so not a scan of
        #: every follower of the run)
        self.players: dict[str, tuple[Follower, Follower]] = {}
        self.live: set[str] = set()
        self.started_at: dict[str, float] = {}
        self.faults: list[Fault] = []
        self.pair_failures: Counter[str] = Counter()
        self.tag = secrets.token_hex(2)
        self.say = progress or (lambda line: print(line, file=sys.stderr))
        self.deadline = 0.0

    # -- matches -----------------------------------------------------------------------------
    def _plan(self, target: str) -> tuple[list[str], float]:
        k = self.rng.randint(*self.o.guesses)
        wrong = [c for c in self.rng.sample(DEFAULT_RULES.secrets, k) if c != target][: k - 1]
        return [*wrong, target], self.o.think_ms / 1000

    async def _pair(self, slot: int, k: int) -> tuple[DocsClient, DocsClient] | None:
        """Two players in a new room match, or None (a fault broke the pairing: the slot
        tries again with new players)."""
        n = len(self.cluster.nodes)
        ports = self.cluster.ports()
        names = [f"h{self.tag}s{slot}m{k}p{seat}" for seat in (0, 1)]
        p0, p1 = (DocsClient(Follower(names[s], s), ports, (slot + s) % n,
                             random.Random(self.rng.random())) for s in (0, 1))
        give_up = time.time() + 60
        step = "hello"
        try:
            await p0.open(give_up)
            await p1.open(give_up)
            # Both requests carry a request_id (docs/protocol.md, "Retrying safely"): sent
            # again after a lost reply, a closed connection or a "try again", each is answered
            # with what the first one did, so a match that started is never left unplayed.
            step = "room_create"
            create = {"type": "room_create", "pacing": "free", "request_id": f"{names[0]}r"}
            room = await self._safely(p0, create, give_up, step)
            if room.get("type") != "room":
                self.pair_failures[f"{room.get('code')} at room_create"] += 1
                raise Ended()
            step = "room_join"
            join = {"type": "room_join", "code": room.get("code"), "request_id": f"{names[1]}j"}
            while True:
                joined = await self._safely(p1, join, give_up, step)
                if joined.get("type") == "match" or joined.get("code") != "unknown_room":
                    break
                # the room goes with its creator's connection: made again under its request
                # id (the same code) once that connection is back
                self.pair_failures["unknown_room at room_join"] += 1
                await asyncio.sleep(0.3)
                room = await self._safely(p0, create, give_up, "room_create")
                if room.get("type") != "room":
                    self.pair_failures[f"{room.get('code')} at room_create"] += 1
                    raise Ended()
            if joined.get("type") != "match":
                self.pair_failures[f"{joined.get('code')} at room_join"] += 1
                raise Ended()
            step = "announce"
            mid = str(joined["match_id"])
            p1.me.match_id = mid
            assert p1.conn is not None
            p1.conn.following_since = p1.conn.following_since or time.time()
            async with asyncio.timeout(30):
                while p0.me.match_id != mid:
                    if not p0.is_open:
                        welcome = await p0.open(give_up)
                        if any(m["match_id"] == mid for m in welcome.get("matches", [])):
                            p0.me.match_id = mid
                            assert p0.conn is not None
                            p0.conn.following_since = time.time()
                            break
                    await p0.wait_change(0.5)
            return p0, p1
        except (Ended, TimeoutError, OSError) as exc:
            self.pair_failures[f"{type(exc).__name__} at {step}"] += 1
            for p in (p0, p1):
                await p.close()
            return None

    async def _safely(self, p: DocsClient, msg: dict[str, Any], give_up: float,
                      step: str) -> dict[str, Any]:
        """``msg`` (with its ``request_id``) until it is answered other than "try again": on
        a lost reply or a closed connection, ``p`` reconnects and sends it again, as
        docs/protocol.md says a client may. :class:`Ended` once ``give_up`` has passed."""
        while True:
            if time.time() > give_up:
                raise Ended()
            if not p.is_open:
                await p.open(give_up)
            try:
                reply = await p.request(msg, 30)
            except (Ended, TimeoutError) as lost:
                self.pair_failures[f"{type(lost).__name__} in {step} (sent again)"] += 1
                await p.close()
                continue
            if reply.get("type") == "error" and reply.get("code") in RETRYABLE:
                self.pair_failures[f"{reply.get('code')} at {step} (sent again)"] += 1
                await asyncio.sleep(0.3)
                continue
            return reply

    async def _slot(self, slot: int) -> None:
        n = len(self.cluster.nodes)
        k = 0
        while time.time() < self.deadline or (self.o.once and not k):
            k += 1
            pair = await self._pair(slot, k)
            if pair is None:
                await asyncio.sleep(0.5)
                continue
            p0, p1 = pair
            mid = p0.me.match_id
            self.live.add(mid)
            self.started_at[mid] = time.time()
            spectator = DocsClient(Follower(f"h{self.tag}s{slot}m{k}w", None, mid),
                                   self.cluster.ports(), (slot + 2) % n,
                                   random.Random(self.rng.random()))
            self.followers += [p0.me, p1.me, spectator.me]
            self.players[mid] = (p0.me, p1.me)
            codes = self.rng.sample(DEFAULT_RULES.secrets, 2)
            plans = []
            for seat in (0, 1):
                guesses, think = self._plan(codes[1 - seat])
                plans.append(Plan(codes[seat], guesses, think))
            end = time.time() + self.o.seconds + self.o.finish_s
            await asyncio.gather(play(p0, plans[0], end), play(p1, plans[1], end),
                                 watch(spectator, end))
            self.live.discard(mid)
            if self.o.once:
                return  # one match per slot

    # -- the nemesis -------------------------------------------------------------------------
    async def _target(self) -> tuple[Node, set[str]]:
        """The running node that owns the most live matches, and those matches."""
        owners = await self.cluster.owners(sorted(self.live))
        counts = Counter(owners.values())
        running = [nd for nd in self.cluster.nodes if nd.running and not nd.paused]
        node = max(running, key=lambda nd: (counts.get(nd.name, 0), self.rng.random()))
        return node, {m for m, owner in owners.items() if owner == node.name}

    async def _owned(self, node: Node) -> set[str]:
        return {m for m, owner in (await self.cluster.owners(sorted(self.live))).items()
                if owner == node.name}

    async def _owned_at_strike(self, fault: Fault) -> None:
        """Add to a stop's or a database cut's ``matches`` what its node owned once struck.

        The snapshot taken before the strike is of the matches the slots know: a match seated
        on that node in the moment between the snapshot and the signal (or the cut) is missing
        from it, although its events logged then wait for a takeover like the others' (the
        checker's rule for a stopped owner, bench/harness/checker.py). Once the node is
        stopped or cut it can seat no new match, so the database's list is complete."""
        fault.matches = sorted(set(fault.matches) | await self.cluster.unfinished_of(fault.node))

    async def strike(self, kind: str) -> Fault:
        c = self.cluster
        lease = self.o.lease_ms / 1000
        if kind in ("kill", "term", "stop"):
            node, owned = await self._target()
            fault = Fault(kind, node.name, time.time(), owned=len(owned),
                          matches=sorted(owned))
            self.faults.append(fault)
            if kind == "kill":
                await node.stop(signal.SIGKILL)
                self._watch_failover(fault, owned)
                await asyncio.sleep(3.0)
                await node.start()
            elif kind == "term":
                await node.stop(signal.SIGTERM)
                await node.start()
            else:
                node.signal(signal.SIGSTOP)
                await self._owned_at_strike(fault)
                await asyncio.sleep(lease + 2.0)
                node.signal(signal.SIGCONT)
            fault.end = time.time()
            await c.on_bus(node)
        elif kind in ("cut-broker", "cut-db"):
            i = self.rng.randrange(len(c.nodes))
            relay = (c.to_broker if kind == "cut-broker" else c.to_db)[i]
            owned = await self._owned(c.nodes[i])
            fault = Fault(kind, c.nodes[i].name, time.time(), owned=len(owned),
                          matches=sorted(owned))
            self.faults.append(fault)
            await relay.down()
            if kind == "cut-db":
                await self._owned_at_strike(fault)
            await asyncio.sleep(2.0 if kind == "cut-broker" else lease + 2.0)
            await relay.up()
            fault.end = time.time()
        elif kind.split("-")[0] in ("slow", "stall", "drop"):
            how, service = kind.split("-")
            i = self.rng.randrange(len(c.nodes))
            link = (c.to_broker if service == "broker" else c.to_db)[i]
            owned = await self._owned(c.nodes[i])
            fault = Fault(kind, c.nodes[i].name, time.time(), owned=len(owned),
                          matches=sorted(owned))
            self.faults.append(fault)
            if how == "slow":
                link.slow(SLOW_S, SLOW_JITTER_S)
                await asyncio.sleep(SLOW_FOR_S)
                link.slow(0.0)
            elif how == "stall":
                link.stall()
                await asyncio.sleep(STALL_S)
                link.flow()
            else:
                fault.reset = link.drop(DROP_SHARE)
            fault.end = time.time()
        elif kind == "broker":
            assert c.broker is not None
            fault = Fault(kind, "", time.time())
            self.faults.append(fault)
            await c.broker.stop()
            await c.broker.start()
            fault.end = time.time()
        elif kind == "database":
            assert c.pg is not None
            fault = Fault(kind, "", time.time())
            self.faults.append(fault)
            await asyncio.to_thread(c.pg.stop)
            await asyncio.to_thread(c.pg.start)
            fault.end = time.time()
        else:
            raise ValueError(f"unknown fault kind {kind!r}")
        self.say(f"  {kind} {fault.node} at +{fault.start - self.t0:.0f} s "
                 f"({fault.end - fault.start:.1f} s; {fault.owned} owned)")
        return fault

    def _watch_failover(self, fault: Fault, owned: set[str]) -> None:
        """Measure, in the background, until every match of ``owned`` still live has an
        acknowledged guess sent after the kill."""
        async def measure() -> None:
            t_kill = fault.start
            deadline = t_kill + 120
            while time.time() < deadline:
                waiting = {m for m in owned if m in self.live
                           and not self._moved_since(m, t_kill)}
                if not waiting:
                    done = {m: t - t_kill for m in owned
                            if (t := self._moved_since(m, t_kill)) is not None}
                    fault.recovered_s = max(done.values(), default=0.0)
                    fault.slowest = max(done, key=done.__getitem__, default="")
                    if fault.slowest:
                        fault.breakdown = self._breakdown(fault.slowest, t_kill)
                    return
                await asyncio.sleep(0.02)

        self.measures.append(asyncio.get_running_loop().create_task(measure()))

    def _breakdown(self, mid: str, t: float) -> dict[str, Any]:
        """What each player of ``mid`` went through after the kill at ``t`` (seconds after
        it): its connection closed, the new one opened and welcomed, its refusals, its first
        guess sent after the kill and acknowledged."""
        out: dict[str, Any] = {}
        for f in self.players.get(mid, ()):
            closed = [c for c in f.conns if c.closed is not None and c.closed >= t]
            opened = [c for c in f.conns if c.opened >= t]
            acks = sorted((sent, ack) for sent, ack in f.ack_times if sent >= t)
            out[f"seat {f.seat}"] = {
                "node": f.conns[0].node if f.conns else "",
                "closed": round(closed[0].closed - t, 3) if closed and closed[0].closed else None,
                "reopened": [c.node for c in opened],
                "opened": round(opened[0].opened - t, 3) if opened else None,
                "welcomed": round(opened[0].welcomed - t, 3)
                if opened and opened[0].welcomed is not None else None,
                "refused": [(round(at - t, 3), what, code) for at, what, code in f.refused
                            if at >= t],
                "first_ack": (round(acks[0][0] - t, 3), round(acks[0][1] - t, 3))
                if acks else None,
            }
        return out

    def _server_phases(self, fault: Fault) -> list[str]:
        """The survivors' log lines about the killed node's death and its matches' takeover
        in the 10 s after the kill, each with its time after the signal (the phases:
        docs/cluster.md, "Failover")."""
        out = []
        for node in self.cluster.nodes:
            if node.name == fault.node:
                continue
            for raw in list(node.log):
                line = raw.decode(errors="replace").rstrip()
                if (f"node {fault.node} (epoch" not in line
                        and f"matches of {fault.node} (epoch" not in line):
                    continue
                try:
                    at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                except ValueError:
                    continue
                if fault.start <= at <= fault.start + 10:
                    out.append(f"{node.name} +{at - fault.start:.3f} {line[24:]}")
        return out

    def _moved_since(self, mid: str, t: float) -> float | None:
        """When the first guess sent after ``t`` in ``mid`` was acknowledged, or None."""
        times = [ack for f in self.players.get(mid, ()) for (sent, ack) in f.ack_times
                 if sent >= t]
        return min(times) if times else None

    async def _nemesis(self) -> None:
        """Faults until the deadline: every kind once, in a random order, then again; with
        ``rounds``, the deadline is moved to the end of the last round's last fault."""
        lo, hi = self.o.every
        turn: list[str] = []
        rounds = 0
        while time.time() < self.deadline:
            await asyncio.sleep(self.rng.uniform(lo, hi))
            if time.time() >= self.deadline or not self.live:
                continue
            if not turn:
                turn = self.rng.sample(self.o.kinds, len(self.o.kinds))
                rounds += 1
            await self.strike(turn.pop())
            if self.o.rounds and rounds == self.o.rounds and not turn:
                self.deadline = time.time()

    async def _once(self) -> None:
        # every match under way (each has an acknowledged guess), then the one fault
        while len(self.started_at) < self.o.matches or any(
            not self._moved_since(m, 0.0) for m in self.live
        ):
            await asyncio.sleep(0.05)
        if not self.live:
            raise RuntimeError("every match ended before the fault: make them longer")
        await self.strike(self.o.once)
        self.deadline = time.time()

    # -- the run -----------------------------------------------------------------------------
    async def run(self) -> Report:
        self.t0 = time.time()
        self.measures: list[asyncio.Task[None]] = []
        pauses = Pauses(self.t0)
        pauses.start()
        try:
            self.say(f"cluster of {self.o.nodes} nodes (lease {self.o.lease_ms} ms)...")
            await self.cluster.open()
            self.deadline = time.time() + self.o.seconds
            slots = [asyncio.create_task(self._slot(i)) for i in range(self.o.matches)]
            nemesis = asyncio.create_task(self._once() if self.o.once else self._nemesis())
            await asyncio.gather(*slots)
            await nemesis  # it strikes no more after the deadline: its last fault heals
            for m in self.measures:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(m, 5)
            rows = await self.cluster.query(
                "SELECT match_id, seq, body FROM events ORDER BY match_id, seq")
            logs = parse_log(rows)
            played = {f.match_id for f in self.followers if f.match_id}
            orphans = len(set(logs) - played)
            orphan_ends = {m: f"{logs[m][-1]['kind']} {logs[m][-1].get('reason', '')}"
                           f" (players {logs[m][0].get('players')})"
                           for m in sorted(set(logs) - played)[:20]}
            verdict: Verdict = check(self.followers, {m: logs.get(m, []) for m in played},
                                     self.faults, self.o.stall_s)
            server_errors = self.cluster.errors()
            for fault in self.faults:
                if fault.kind == "kill":
                    fault.breakdown["server"] = self._server_phases(fault)
        finally:
            await pauses.stop()
            await self.cluster.close()
        kills = [f for f in self.faults if f.kind == "kill"]
        return Report(
            options=asdict(self.o), verdict=verdict.counts(), samples=verdict.samples(),
            faults=dict(Counter(f.kind for f in self.faults)),
            failover_s=[f.recovered_s for f in kills if f.recovered_s is not None],
            unrecovered=sum(1 for f in kills if f.recovered_s is None and f.owned),
            server_errors=server_errors[:50], seconds=time.time() - self.t0, orphans=orphans,
            started=self.t0, orphan_ends=orphan_ends, pair_failures=dict(self.pair_failures),
            timeline=[{**asdict(f), "start": round(f.start - self.t0, 2),
                       "end": round(f.end - self.t0, 2)} for f in self.faults],
            pauses=pauses.report(),
        )
