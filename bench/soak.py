"""Soak: a steady mixed load on a real ``moo serve`` process, sampled every interval.

The load is bounded and loopback-only: ``--pairs`` pairs of raw-WebSocket bots queue and play
matches back to back (lockstep and free, JSON and MessagePack) with a think time, a chaos task
drops a random bot's connection every ``--reconnect-every`` seconds (it reconnects with its token
and ``resume``-s), and ``--spectators`` clients watch live matches one after another. Every
``--interval`` seconds the server process's RSS (/proc/PID/status), open descriptors
(/proc/PID/fd) and the guess-acknowledgement latency p50/p99 over the interval go to a CSV;
at the end a PNG plots them. Memory that grows without bound, a descriptor leak or a p99 that
creeps up show as slopes.

    python -m bench.soak                          # 30 minutes, docs/soak.csv, docs/img/soak.png
    python -m bench.soak --duration 120 --interval 10 --csv /tmp/s.csv --png /tmp/s.png
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.rawbot import (
    JSON,
    MSGPACK,
    Bot,
    Record,
    ServerProcess,
    Spectator,
    free_port,
    percentile,
    proc_fds,
    proc_rss_kb,
)

FIELDS = [
    "minute",
    "elapsed_s",
    "rss_mb",
    "fds",
    "p50_ms",
    "p99_ms",
    "guesses",
    "matches_finished",
    "reconnects",
    "spectator_events",
]


async def soak(args: argparse.Namespace) -> list[dict[str, float]]:
    rng = random.Random(args.seed)
    rows: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="moo-soak-") as tmp:
        server = ServerProcess(
            Path(tmp) / "soak.sqlite3", free_port(),
            "--grace-ms", "120000",
        )
        await server.start()
        record = Record()
        bots = [
            Bot(server.url, f"soak{i}", random.Random(rng.random()), record,
                subprotocol=JSON if i % 2 else MSGPACK, think_s=args.think_ms / 1000)
            for i in range(2 * args.pairs)
        ]
        t0 = time.monotonic()
        until = t0 + args.duration
        spectators = [
            Spectator(server.url, f"watch{i}", random.Random(rng.random()))
            for i in range(args.spectators)
        ]
        tasks = [asyncio.create_task(b.play_matches(10**9)) for b in bots]
        tasks += [asyncio.create_task(s.run(until)) for s in spectators]

        async def chaos() -> None:
            while True:
                await asyncio.sleep(args.reconnect_every)
                victim = rng.choice(bots).client
                if victim.ws is not None:
                    with contextlib.suppress(Exception):
                        await victim.ws.close()

        tasks.append(asyncio.create_task(chaos()))
        seen_lat = 0
        with open(args.csv, "w", newline="", encoding="utf-8") as f:
            out = csv.DictWriter(f, FIELDS)
            out.writeheader()
            minute = 0
            while time.monotonic() < until:
                await asyncio.sleep(min(args.interval, max(0.0, until - time.monotonic())))
                minute += 1
                for t in tasks:
                    if t.done() and not t.cancelled() and t.exception() is not None:
                        raise RuntimeError(f"load task failed: {t.exception()!r}")
                lat = record.latencies_ms[seen_lat:]
                seen_lat = len(record.latencies_ms)
                row = {
                    "minute": minute,
                    "elapsed_s": round(time.monotonic() - t0, 1),
                    "rss_mb": round(proc_rss_kb(server.pid) / 1024, 1),
                    "fds": proc_fds(server.pid),
                    "p50_ms": round(percentile(lat, 50), 2),
                    "p99_ms": round(percentile(lat, 99), 2),
                    "guesses": len(lat),
                    "matches_finished": len(record.finished),
                    "reconnects": record.reconnects,
                    "spectator_events": sum(s.events for s in spectators),
                }
                rows.append(row)
                out.writerow(row)
                f.flush()
                print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for b in bots:
            await b.client.drop()
        code = await server.stop(signal.SIGTERM)
        errors = server.errors()
        leaks = [m for s in spectators for m in s.leaks]
        print(f"server exit {code}; {len(errors)} error lines; {len(leaks)} secret leaks; "
              f"{len(record.errors)} unexpected client errors")
        for line in errors[:10] + record.errors[:10]:
            print("  ", line)
        if errors or leaks or record.errors:
            raise SystemExit(1)
    return rows


def plot(rows: list[dict[str, float]], png: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["elapsed_s"] / 60 for r in rows]
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    axes[0].plot(x, [r["rss_mb"] for r in rows], marker=".")
    axes[0].set_ylabel("server RSS (MiB)")
    axes[0].set_ylim(bottom=0)
    axes[1].plot(x, [r["fds"] for r in rows], marker=".", color="tab:green")
    axes[1].set_ylabel("open fds")
    axes[1].set_ylim(bottom=0)
    axes[2].plot(x, [r["p50_ms"] for r in rows], marker=".", label="p50")
    axes[2].plot(x, [r["p99_ms"] for r in rows], marker=".", label="p99")
    axes[2].set_ylabel("guess ack latency (ms)")
    axes[2].set_xlabel("minutes")
    axes[2].set_ylim(bottom=0)
    axes[2].legend()
    fig.suptitle(title)
    fig.tight_layout()
    Path(png).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=1800.0, help="seconds (default 30 min)")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--pairs", type=int, default=6, help="pairs of playing bots")
    parser.add_argument("--spectators", type=int, default=4)
    parser.add_argument("--think-ms", type=float, default=100.0, help="mean pause per guess")
    parser.add_argument("--reconnect-every", type=float, default=5.0, help="chaos period (s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--csv", default="docs/soak.csv")
    parser.add_argument("--png", default="docs/img/soak.png")
    args = parser.parse_args(argv)
    rows = asyncio.run(soak(args))
    title = (
        f"soak: {args.pairs * 2} bots, {args.spectators} spectators, "
        f"reconnect every {args.reconnect_every:g} s, {args.duration / 60:g} min"
    )
    plot(rows, args.png, title)
    print(f"wrote {args.csv} and {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
