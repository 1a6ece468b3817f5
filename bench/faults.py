"""Fault runs: a bot tournament through a real ``moo serve`` that keeps getting killed.

Many concurrent matches are played by raw-WebSocket bots (bench/rawbot.py). At moments drawn
from a seeded generator (after a random number of further acknowledged guesses, so the kill
lands mid-traffic whatever the machine's speed) the server is stopped with SIGKILL (crash) or
SIGTERM (graceful: clients must see close 1012), then started again on the same database. The
bots reconnect with their tokens and ``resume``. At the end we count:

* acknowledged guesses lost: a guess is acknowledged when its bot received the event carrying
  its ``ref``; every one must be in the database's log afterwards (must be 0);
* matches that could not finish: every match in the database must be finished (must be 0).

    python -m bench.faults --signal KILL --kills 10 --pairs 8 --matches 200
    python -m bench.faults --signal TERM --kills 10 --pairs 8 --matches 200
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.rawbot import (
    JSON,
    MSGPACK,
    Bot,
    Record,
    ServerProcess,
    free_port,
    healthz,
    logged_guesses,
    percentile,
    unfinished_in_db,
)


@dataclass
class FaultReport:
    signal: str
    kills: int
    restarts_s: list[float] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)
    matches: int = 0
    matches_in_db: int = 0
    acked: int = 0
    lost: list[tuple[str, int, int, str]] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    reconnects: int = 0
    unseen_ends: int = 0
    close_codes: dict[int, int] = field(default_factory=dict)
    client_errors: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    p99_ms: float = 0.0

    def summary(self) -> str:
        return (
            f"SIG{self.signal} x{self.kills}: {self.matches} matches finished by the bots "
            f"({self.matches_in_db} in the db), {self.acked} acknowledged guesses, "
            f"{len(self.lost)} lost, {len(self.unfinished)} unfinished, "
            f"{self.reconnects} reconnects, close codes {self.close_codes}, "
            f"restart {max(self.restarts_s, default=0):.2f} s max, "
            f"ack p99 {self.p99_ms:.0f} ms, {self.seconds:.0f} s"
        )


async def tournament(
    db_dir: Path,
    *,
    sig: int = signal.SIGKILL,
    kills: int = 3,
    pairs: int = 4,
    matches: int = 20,
    seed: int = 1,
    mean_gap: int = 40,
    timeout: float = 600.0,
    env: dict[str, str] | None = None,
    side: Callable[[Record], Coroutine[Any, Any, None]] | None = None,
) -> FaultReport:
    """Play until ``matches`` matches have finished, killing the server ``kills`` times."""
    rng = random.Random(seed)
    report = FaultReport(signal.Signals(sig).name.removeprefix("SIG"), kills)
    db = db_dir / "faults.sqlite3"
    server = ServerProcess(
        db,
        free_port(),
        "--grace-ms",
        "300000",
        env={"MOO_SQLITE_SYNCHRONOUS": "FULL", **(env or {})},
    )
    t0 = time.monotonic()
    report.restarts_s.append(await server.start())
    record = Record()
    stop = asyncio.Event()
    bots = [
        Bot(server.url, f"f{seed}x{i}", random.Random(rng.random()), record,
            subprotocol=MSGPACK if i % 3 == 0 else JSON, reconnect_for_s=120)
        for i in range(2 * pairs)
    ]
    tasks = [asyncio.create_task(b.play_matches(10**9, stop=stop)) for b in bots]
    # Another fault alongside (e.g. the MQTT broker going away): runs until the end.
    side_task = asyncio.create_task(side(record)) if side is not None else None

    async def until(pred: object, what: str, limit: float) -> None:
        async with asyncio.timeout(limit):
            while not pred():  # type: ignore[operator]
                for t in tasks:
                    if t.done() and not t.cancelled() and t.exception() is not None:
                        raise RuntimeError(f"bot failed while waiting for {what}") from (
                            t.exception()
                        )
                await asyncio.sleep(0.01)

    try:
        for _ in range(kills):
            target = len(record.acked) + rng.randint(1, 2 * mean_gap)
            await until(lambda target=target: len(record.acked) >= target, "traffic", timeout)
            report.exit_codes.append(await server.stop(sig))
            report.server_errors += server.errors()
            server.log.clear()
            report.restarts_s.append(await server.start())
        await until(lambda: len(record.finished) >= matches, "the matches", timeout)
        stop.set()
        # Done when no bot is in a match and the server has no live match (a pairing made
        # just before ``stop`` shows in live_matches at once, before it is even durable).
        while True:
            await until(lambda: not any(b.in_match for b in bots), "the last matches", timeout)
            idle = (await healthz(server.port))["live_matches"] == 0
            if idle and not any(b.in_match for b in bots):
                break
            await asyncio.sleep(0.05)
    finally:
        if side_task is not None:
            if side_task.done() and not side_task.cancelled() and side_task.exception():
                raise RuntimeError("the side fault failed") from side_task.exception()
            side_task.cancel()
            await asyncio.gather(side_task, return_exceptions=True)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for b in bots:
            await b.client.drop()
        with contextlib.suppress(Exception):
            report.exit_codes.append(await server.stop(signal.SIGTERM))
        report.server_errors += server.errors()
    logged = logged_guesses(db)
    report.acked = len(record.acked)
    report.lost = [a for a in record.acked if a not in logged]
    report.unfinished = unfinished_in_db(db)
    report.matches = len(record.finished)
    import sqlite3

    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        report.matches_in_db = conn.execute("SELECT count(*) FROM matches").fetchone()[0]
    report.reconnects = record.reconnects
    report.unseen_ends = record.unseen_ends
    report.close_codes = dict(record.close_codes)
    report.client_errors = record.errors
    report.seconds = time.monotonic() - t0
    report.p99_ms = percentile(record.latencies_ms, 99)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--signal", choices=["KILL", "TERM"], default="KILL")
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--matches", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    sig = signal.SIGKILL if args.signal == "KILL" else signal.SIGTERM
    with tempfile.TemporaryDirectory(prefix="moo-faults-") as tmp:
        report = asyncio.run(
            tournament(
                Path(tmp), sig=sig, kills=args.kills, pairs=args.pairs,
                matches=args.matches, seed=args.seed, timeout=1800,
            )
        )
    print(report.summary())
    for line in (report.client_errors + report.server_errors)[:20]:
        print("  ", line)
    for lost in report.lost[:20]:
        print("   LOST", lost)
    bad = report.lost or report.unfinished or report.client_errors
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
