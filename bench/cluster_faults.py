"""Cluster fault runs: cross-node matches while cluster nodes are killed or drained.

The cluster counterpart of bench/faults.py (which kills a single SQLite server). It starts a
fresh PostgreSQL database, a Mosquitto broker on a free port and three ``moo serve --cluster``
nodes (a, b, c) on fixed ports, so a node restarted on its port is found again by its clients.
Every match has its two players on *different* nodes: player 0 starts on node ``i % 3`` and
player 1 on the next one; both are :class:`clients.sdk.Client` with the list of all three URLs,
so they fail over the way ``moo bot`` and ``moo play`` do. Matches are made with a room code
(the room's owner is player 0, so the match is owned by player 0's node and player 1's
every action crosses the bus).

``--kill`` mode (default), per round: make ``--matches`` matches, let them play, SIGKILL one
node (a, b, c in turn) once every match is under way, start it again when every match it
owned has accepted a move again (so the takeover is by lease expiry, not by the restart
bumping the epoch), and wait for every match to end. ``--rolling`` mode: a round is a rolling
restart: each node in turn gets SIGTERM (drain), is started again and must be back on the bus
before the next one goes; ``moo tournament`` (through the cluster, with the URL list) runs
alongside the SDK players.

Players do not search: the harness knows both secrets, so a player makes a planned number of
wrong guesses and then guesses the secret; matches last a known number of rounds and end
``solved``. Checked against PostgreSQL afterwards:

* acknowledged guesses lost: a guess is acknowledged when its player received the ``guess``
  event carrying its ``ref``; every one must be in the log (must be 0);
* matches unfinished: every match in the database must be finished (must be 0);
* forfeits: no match may end by ``disconnect``, ``timeout`` or ``resign`` (must be 0);
* per kill (or drain): the time from the signal until every match the node owned and that was
  still being played has acknowledged a move sent after the signal ("accepting moves again";
  includes the players' reconnect backoff and think time, ``--think-ms``).

    python -m bench.cluster_faults --matches 200 --rounds 10 --lease-ms 3000 --json
    python -m bench.cluster_faults --matches 200 --rounds 3 --lease-ms 10000
    python -m bench.cluster_faults --rolling --matches 100 --rounds 1 --lease-ms 3000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from bench.harness.cluster import Node
from bench.rawbot import ROOT, free_port, healthz
from clients.sdk import Client, ConnectionLost, ServerError, retryable
from clients.sdk.messages import MatchAnnounced
from moo.rules import DEFAULT_RULES

PG = os.environ.get("MOO_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
NAMES = ("a", "b", "c")
FORFEITS = frozenset({"disconnect", "timeout", "resign"})


def _node(name: str, port: int, args: list[str]) -> Node:
    """A node of bench/harness/cluster.py, its log also in ``MOO_FAULTS_LOGS``/<name>.log when
    that is set."""
    logs = os.environ.get("MOO_FAULTS_LOGS")
    return Node(name, port, args, Path(logs) if logs else None)


class Cluster:
    """A fresh database, a broker and three nodes; everything removed by :meth:`close`."""

    def __init__(self, lease_ms: int, grace_ms: int) -> None:
        self.lease_ms = lease_ms
        self.grace_ms = grace_ms
        self.dbname = f"moo_cfaults_{secrets.token_hex(4)}"
        self.db = f"{PG}/{self.dbname}"
        self.tmp = tempfile.TemporaryDirectory(prefix="moo-cluster-faults-")
        self.broker: asyncio.subprocess.Process | None = None
        self.nodes: list[Node] = []

    async def open(self) -> None:
        admin = await asyncpg.connect(PG + "/postgres")
        try:
            await admin.execute(f'CREATE DATABASE "{self.dbname}"')
        finally:
            await admin.close()
        port = free_port()
        conf = Path(self.tmp.name) / "mosquitto.conf"
        conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
        self.broker = await asyncio.create_subprocess_exec(
            shutil.which("mosquitto") or "/usr/sbin/mosquitto", "-c", str(conf),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )
        args = [
            "--db", self.db, "--cluster", f"mqtt://127.0.0.1:{port}",
            "--lease-ms", str(self.lease_ms), "--grace-ms", str(self.grace_ms),
            "--max-connections", "20000", "--new-names-per-address", "1000000",
        ]
        for name in NAMES:
            node = _node(name, free_port(), args)
            self.nodes.append(node)
            await node.start()
        for node in self.nodes:
            await self.on_bus(node)

    async def on_bus(self, node: Node, timeout: float = 30.0) -> None:
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(OSError, ValueError, TimeoutError):
                    if (await healthz(node.port)).get("bus") == "ok":
                        return
                await asyncio.sleep(0.1)

    def urls(self, first: int) -> list[str]:
        """Every node's URL, starting with node ``first``."""
        n = len(self.nodes)
        return [self.nodes[(first + k) % n].url for k in range(n)]

    async def query(self, sql: str, *args: Any) -> list[Any]:
        conn = await asyncpg.connect(self.db)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    def errors(self) -> list[str]:
        return [f"{n.name}: {line}" for n in self.nodes for line in n.errors()]

    async def close(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                await node.stop(signal.SIGKILL, 20)
        if self.broker is not None and self.broker.returncode is None:
            self.broker.kill()
            await self.broker.wait()
        with contextlib.suppress(Exception):
            admin = await asyncpg.connect(PG + "/postgres")
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')
            finally:
                await admin.close()
        self.tmp.cleanup()


@dataclass
class Move:
    match_id: str
    seat: int
    n: int
    guess: str
    sent: float  # monotonic
    acked: float


@dataclass
class Record:
    """What the players know for sure, checked against the database afterwards."""

    acked: list[Move] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    refusals: Counter[str] = field(default_factory=Counter)
    finished: dict[str, str] = field(default_factory=dict)  # match id -> reason (client view)


@dataclass
class Pairing:
    match_id: str
    clients: tuple[Client, Client]
    secrets: tuple[str, str]
    owner: str = ""


def _codes(rng: random.Random, k: int, avoid: str) -> list[str]:
    pool = [c for c in rng.sample(DEFAULT_RULES.secrets, k + 1) if c != avoid]
    return pool[:k]


async def _play(
    client: Client, match_id: str, secret: str, target: str, wrong: int,
    think: float, rng: random.Random, record: Record,
) -> None:
    """Set the secret, make ``wrong`` wrong guesses, then guess ``target``; retry through
    drops (the SDK reconnects and resumes; a lost reply is settled by looking at the state)."""
    plan = [*_codes(rng, wrong, target), target]
    state = client.states[match_id]
    while state.needs_secret or state.phase == "secrets":
        try:
            if state.needs_secret:
                await client.set_secret(match_id, secret)
            else:
                await client.receive(timeout=5)
        except ServerError as exc:
            if retryable(exc.reply):
                record.refusals["retries_exhausted"] += 1
                await asyncio.sleep(1.0)
            elif exc.code != "already_set":
                record.errors.append(f"{client.name} secret: {exc}")
                return
        except (ConnectionLost, TimeoutError):
            if not await client.wait_online(120):
                record.errors.append(f"{client.name}: gave up reconnecting (secret)")
                return
        state = client.states[match_id]
    while not state.finished:
        if not state.owes_guess:
            try:
                await client.receive(timeout=5)
            except TimeoutError:
                pass
            except ConnectionLost:
                record.errors.append(f"{client.name}: the client ended before the match did")
                return
            continue
        guess = plan[min(len(state.mine()), len(plan) - 1)]
        await asyncio.sleep(think * rng.uniform(0.5, 1.5))
        if not state.owes_guess:
            continue
        sent = time.monotonic()
        try:
            reply = await client.guess(match_id, guess)
        except ServerError as exc:
            record.refusals[exc.code] += 1
            if exc.code in ("not_your_turn", "match_finished"):
                continue
            if retryable(exc.reply):
                # the SDK's own retries ran out (a takeover slower than they wait): a
                # persistent bot keeps trying; counted in the report's refusals
                record.refusals["retries_exhausted"] += 1
                await asyncio.sleep(1.0)
                continue
            record.errors.append(f"{client.name} guess in {match_id}: {exc}")
            return
        except (ConnectionLost, TimeoutError) as exc:
            record.refusals[type(exc).__name__] += 1
            if not await client.wait_online(120):
                record.errors.append(f"{client.name}: gave up reconnecting")
                return
            continue
        raw = reply.raw
        if raw.get("kind") == "guess":
            record.acked.append(Move(match_id, int(raw["seat"]), int(raw["n"]),
                                     str(raw["guess"]), sent, time.monotonic()))
    if state.result is not None:
        record.finished[match_id] = state.result.reason


async def _pair(
    cluster: Cluster, i: int, tag: str, rng: random.Random, request_timeout: float
) -> Pairing:
    n = len(cluster.nodes)
    clients = tuple(
        Client(cluster.urls((i + seat) % n), f"{tag}{i}s{seat}", bot=True,
               encoding="msgpack" if (i + seat) % 3 == 0 else "json",
               request_timeout=request_timeout)
        for seat in (0, 1)
    )
    for c in clients:
        await c.connect()
    for attempt in range(5):
        room = await clients[0].create_room(pacing="lockstep")
        try:
            joined = await clients[1].join_room(room.code)
            break
        except ServerError as exc:
            # rooms live in the lobby leader's memory: when the leadership moves (a restarted
            # node with a smaller name takes it back) open rooms are lost (docs/cluster.md)
            if exc.code != "unknown_room" or attempt == 4:
                raise
            await asyncio.sleep(0.5)
    assert isinstance(joined, MatchAnnounced)
    # player 0 learns of the match from its stream
    async with asyncio.timeout(request_timeout):
        while joined.match_id not in clients[0].states:
            await clients[0].receive()
    codes = rng.sample(DEFAULT_RULES.secrets, 2)
    return Pairing(joined.match_id, (clients[0], clients[1]), (codes[0], codes[1]))


@dataclass
class Disruption:
    node: str
    signal: str
    owned: int = 0  # unfinished matches the node owned at the signal
    recovered_s: float | None = None  # all of them accepting moves again
    per_match_s: list[float] = field(default_factory=list)
    down_s: float = 0.0  # signal until the node listens again
    exit_code: int = 0


@dataclass
class Report:
    mode: str
    lease_ms: int
    rounds: int
    matches_per_round: int
    think_ms: int
    matches: int = 0
    matches_in_db: int = 0
    acked: int = 0
    lost: list[tuple[str, int, int, str]] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)
    forfeits: int = 0
    disruptions: list[Disruption] = field(default_factory=list)
    refusals: dict[str, int] = field(default_factory=dict)
    reconnects: int = 0
    client_errors: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    tournament: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def recovery(self) -> dict[str, float | None]:
        times = [d.recovered_s for d in self.disruptions if d.recovered_s is not None]
        per_match = [x for d in self.disruptions for x in d.per_match_s]
        return {
            "median_s": round(statistics.median(times), 2) if times else None,
            "max_s": round(max(times), 2) if times else None,
            "per_match_median_s": round(statistics.median(per_match), 2) if per_match else None,
            "unrecovered": sum(1 for d in self.disruptions if d.recovered_s is None),
        }

    def ok(self) -> bool:
        return not (self.lost or self.unfinished or self.forfeits or self.client_errors
                    or self.recovery["unrecovered"] or self.tournament.get("ok") is False)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["lost"] = len(self.lost)
        out["lost_sample"] = self.lost[:20]
        out["unfinished"] = len(self.unfinished)
        out["recovery"] = self.recovery
        out["client_errors"] = self.client_errors[:50]
        out["server_errors"] = self.server_errors[:50]
        out["ok"] = self.ok()
        return out

    def summary(self) -> str:
        r = self.recovery
        sig = "SIGTERM rolling restarts" if self.mode == "rolling" else "SIGKILLs"
        return (
            f"{len(self.disruptions)} {sig} (lease {self.lease_ms} ms): {self.matches} matches "
            f"({self.matches_in_db} in the db), {self.acked} acknowledged guesses, "
            f"{len(self.lost)} lost, {len(self.unfinished)} unfinished, {self.forfeits} "
            f"forfeits, reasons {self.reasons}; accepting moves again after a "
            f"{'drain' if self.mode == 'rolling' else 'kill'}: median {r['median_s']} s, max "
            f"{r['max_s']} s (per match median {r['per_match_median_s']} s); "
            f"{self.reconnects} reconnects, refusals {self.refusals}; {self.seconds:.0f} s"
        )


async def _owned(cluster: Cluster, node: str, ids: list[str]) -> list[str]:
    rows = await cluster.query(
        "SELECT match_id FROM owners WHERE node = $1 AND match_id = ANY($2::text[])", node, ids
    )
    return [r[0] for r in rows]


def _recovery(record: Record, ids: set[str], t_signal: float) -> tuple[list[float], set[str]]:
    """Per match of ``ids``: seconds from the signal to the first acknowledgement of a move
    sent after it; and the matches that have none yet."""
    first: dict[str, float] = {}
    for mv in record.acked:
        if mv.match_id in ids and mv.sent >= t_signal:
            t = mv.acked - t_signal
            if mv.match_id not in first or t < first[mv.match_id]:
                first[mv.match_id] = t
    return list(first.values()), ids - set(first)


async def _wait_recovered(
    record: Record, pairings: dict[str, Pairing], ids: set[str], t_signal: float,
    timeout: float,
) -> tuple[float | None, list[float]]:
    loop_end = time.monotonic() + timeout
    while True:
        per_match, missing = _recovery(record, ids, t_signal)
        # a match that finished meanwhile by a move sent before the signal needs no more
        missing = {m for m in missing if not pairings[m].clients[0].states[m].finished
                   or not pairings[m].clients[1].states[m].finished}
        if not missing:
            return (max(per_match) if per_match else 0.0), per_match
        if time.monotonic() > loop_end:
            return None, per_match
        await asyncio.sleep(0.05)


async def _round(
    cluster: Cluster, report: Report, record: Record, rnd: int, args: argparse.Namespace,
    rng: random.Random,
) -> None:
    tag = f"r{rnd}x{secrets.token_hex(2)}p"
    sem = asyncio.Semaphore(16)

    async def pair(i: int) -> Pairing:
        async with sem:
            return await _pair(cluster, i, tag, random.Random(rng.random()), 60.0)

    made = await asyncio.gather(*(pair(i) for i in range(args.matches)))
    pairings = {p.match_id: p for p in made}
    think = args.think_ms / 1000
    tasks = [
        asyncio.create_task(_play(
            p.clients[seat], p.match_id, p.secrets[seat], p.secrets[1 - seat],
            rng.randint(args.min_guesses, args.max_guesses) - 1, think,
            random.Random(rng.random()), record,
        ))
        for p in made for seat in (0, 1)
    ]
    tournament: asyncio.Task[dict[str, Any]] | None = None
    if args.rolling and args.tournament_rounds > 0:
        tournament = asyncio.create_task(_tournament(cluster, args, rnd))
    try:
        # every match under way: each has an acknowledged guess
        try:
            async with asyncio.timeout(300):
                while len({m.match_id for m in record.acked if m.match_id in pairings}) < len(
                    pairings
                ) and not all(t.done() for t in tasks):
                    _check_tasks(tasks)
                    await asyncio.sleep(0.05)
        except TimeoutError:
            started = {m.match_id for m in record.acked}
            waiting = [m for m in pairings if m not in started]
            raise RuntimeError(
                f"matches not under way after 300 s: {waiting[:5]}; errors {record.errors[:5]}"
            ) from None
        if args.rolling:
            for node in cluster.nodes:
                await _disrupt(cluster, report, record, pairings, node, signal.SIGTERM)
        else:
            node = cluster.nodes[rnd % len(cluster.nodes)]
            await _disrupt(cluster, report, record, pairings, node, signal.SIGKILL)
        try:
            async with asyncio.timeout(args.finish_timeout):
                await asyncio.gather(*tasks)
        except TimeoutError:
            record.errors += await _stuck(cluster, pairings)
        if tournament is not None:
            report.tournament = await tournament
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if tournament is not None and not tournament.done():
            tournament.cancel()
            await asyncio.gather(tournament, return_exceptions=True)
        for p in made:
            for c in p.clients:
                report.reconnects += c.reconnects
                await c.close()


async def _stuck(cluster: Cluster, pairings: dict[str, Pairing]) -> list[str]:
    """What each match that did not end looks like, from both players and the database."""
    out = []
    for mid, p in pairings.items():
        states = [c.states[mid] for c in p.clients]
        if all(st.finished for st in states):
            continue
        rows = await cluster.query(
            "SELECT o.node, o.epoch, m.finished FROM owners o JOIN matches m USING (match_id)"
            " WHERE match_id = $1", mid)
        out.append(
            f"stuck {mid}: owner {[tuple(r) for r in rows]}; "
            + "; ".join(
                f"{c.name} on {c.url} online={c.online} phase={st.phase} seq={st.last_seq} "
                f"counts={st.counts} owes={st.owes_guess} reconnects={c.reconnects}"
                for c, st in zip(p.clients, states)
            )
        )
    return out


def _check_tasks(tasks: list[asyncio.Task[None]]) -> None:
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise RuntimeError("a player failed") from t.exception()


async def _disrupt(
    cluster: Cluster, report: Report, record: Record, pairings: dict[str, Pairing],
    node: Node, sig: int,
) -> None:
    """Signal ``node``; measure until its unfinished matches accept moves again; restart it."""
    live = [m for m, p in pairings.items()
            if not (p.clients[0].states[m].finished and p.clients[1].states[m].finished)]
    owned = set(await _owned(cluster, node.name, live))
    owners = Counter(r[0] for r in await cluster.query(
        "SELECT node FROM owners WHERE match_id = ANY($1::text[])", live))
    print(f"  owners of the {len(live)} live matches: {dict(owners)}", file=sys.stderr)
    d = Disruption(node.name, signal.Signals(sig).name, owned=len(owned))
    t_signal = time.monotonic()
    d.exit_code = await node.stop(sig)
    report.server_errors += [f"{node.name}: {line}" for line in node.errors()]
    node.log.clear()
    if sig == signal.SIGTERM:
        # a drained node comes back at once (a rolling restart); its matches moved already
        d.down_s = round(time.monotonic() - t_signal + await node.start(), 2)
        await cluster.on_bus(node)
        d.recovered_s, d.per_match_s = await _wait_recovered(
            record, pairings, owned, t_signal, 120
        )
    else:
        # killed: restart once its matches were taken over (by lease expiry, not by the
        # restarted node bumping its epoch) and accept moves again
        d.recovered_s, d.per_match_s = await _wait_recovered(
            record, pairings, owned, t_signal, 120
        )
        d.down_s = round(time.monotonic() - t_signal + await node.start(), 2)
        await cluster.on_bus(node)
    if d.recovered_s is not None:
        d.recovered_s = round(d.recovered_s, 3)
    d.per_match_s = [round(x, 3) for x in d.per_match_s]
    report.disruptions.append(d)
    print(f"  {d.signal} {d.node}: {d.owned} matches owned, all accepting moves again after "
          f"{d.recovered_s} s; back after {d.down_s} s", file=sys.stderr)


async def _tournament(cluster: Cluster, args: argparse.Namespace, rnd: int) -> dict[str, Any]:
    """``moo tournament`` through the cluster (URL list), alongside the SDK players."""
    out = Path(cluster.tmp.name) / f"tournament{rnd}.jsonl"
    urls = ",".join(cluster.urls(rnd))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", "tournament", "minimum", "random", "--url", urls,
        "--rounds", str(args.tournament_rounds), "--seed", str(args.seed + rnd),
        "--concurrency", "4", "--out", str(out), "--no-progress",
        "--name-prefix", f"t{rnd}{secrets.token_hex(2)}-",
        cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await proc.communicate()
    records = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    reasons = Counter(r.get("reason") for r in records)
    expected = args.tournament_rounds * 2
    result = {
        "exit_code": proc.returncode, "matches": len(records), "expected": expected,
        "reasons": dict(reasons), "forfeits": sum(reasons[r] for r in FORFEITS),
        "stderr_tail": stderr.decode(errors="replace")[-800:] if proc.returncode else "",
    }
    result["ok"] = proc.returncode == 0 and len(records) == expected and not result["forfeits"]
    return result


async def _verify(cluster: Cluster, report: Report, record: Record) -> None:
    rows = await cluster.query(
        "SELECT match_id, body FROM events WHERE body::jsonb ->> 'kind' IN ('guess', 'finished')"
    )
    logged: set[tuple[str, int, int, str]] = set()
    reasons: Counter[str] = Counter()
    for match_id, body in rows:
        e = json.loads(body)
        if e["kind"] == "guess":
            logged.add((match_id, int(e["seat"]), int(e["n"]), str(e["guess"])))
        else:
            reasons[str(e["reason"])] += 1
    acked = {(m.match_id, m.seat, m.n, m.guess) for m in record.acked}
    report.acked = len(acked)
    report.lost = sorted(acked - logged)
    report.unfinished = [
        r[0] for r in await cluster.query("SELECT match_id FROM matches WHERE finished = 0")
    ]
    report.matches_in_db = (await cluster.query("SELECT count(*) FROM matches"))[0][0]
    report.reasons = dict(reasons)
    report.forfeits = sum(reasons[r] for r in FORFEITS)
    report.matches = len(record.finished)
    report.refusals = dict(record.refusals)
    report.client_errors = record.errors


async def run(args: argparse.Namespace) -> Report:
    report = Report("rolling" if args.rolling else "kill", args.lease_ms, args.rounds,
                    args.matches, args.think_ms)
    rng = random.Random(args.seed)
    record = Record()
    cluster = Cluster(args.lease_ms, args.grace_ms)
    t0 = time.monotonic()
    try:
        await cluster.open()
        for rnd in range(args.rounds):
            print(f"round {rnd + 1}/{args.rounds}: {args.matches} matches", file=sys.stderr)
            await _round(cluster, report, record, rnd, args, rng)
        await _verify(cluster, report, record)
        report.server_errors += cluster.errors()
    finally:
        await cluster.close()
    report.seconds = time.monotonic() - t0
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--matches", type=int, default=200, help="cross-node matches a round")
    parser.add_argument("--rounds", type=int, default=10,
                        help="kills (one a round) or, with --rolling, rolling restarts")
    parser.add_argument("--rolling", action="store_true",
                        help="SIGTERM and restart every node in turn, moo tournament alongside")
    parser.add_argument("--lease-ms", type=int, default=3000)
    parser.add_argument("--grace-ms", type=int, default=60000)
    parser.add_argument("--think-ms", type=int, default=200, help="a player's pause per guess")
    parser.add_argument("--min-guesses", type=int, default=8)
    parser.add_argument("--max-guesses", type=int, default=14)
    parser.add_argument("--tournament-rounds", type=int, default=6,
                        help="--rolling: moo tournament minimum random --rounds N (0: none)")
    parser.add_argument("--finish-timeout", type=float, default=240.0,
                        help="s after the disruption for every match of a round to end")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if not (1 <= args.matches <= 2000 and 1 <= args.rounds <= 100):
        parser.error("bounded: 1-2000 matches, 1-100 rounds")
    if not 2 <= args.min_guesses <= args.max_guesses <= 60:
        parser.error("need 2 <= --min-guesses <= --max-guesses <= 60")
    report = asyncio.run(run(args))
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.summary())
        for line in (report.client_errors + report.server_errors)[:20]:
            print("  ", line)
        for lost in report.lost[:20]:
            print("   LOST", lost)
    return 0 if report.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
