"""Many connected, mostly idle players on one node (issue 33): memory, CPU and latency.

10 000 connections (5 000 live lockstep matches, private rooms, secrets set) on one
``moo serve`` with its default SQLite store (``synchronous = FULL``); every player guesses
every ``--interval`` seconds (10 by default, each on its own random phase), which is
1 000 guesses/s for 10 000 players. The load generator is ``--workers`` processes of
:mod:`bench.server_bench`'s harness (one class of player for every server benchmark), never
the server's process. Phases, each measured from ``/proc`` around it:

* setup: connect, ``hello``, pair, set secrets; the server's resident memory before and after
  gives the memory per connection of a player sitting in a live match;
* idle (``--idle-seconds``): nobody sends anything; the node's CPU while it only holds them
  (its heartbeat task, websockets' keepalive is off);
* active (``--seconds``): the guesses; acknowledgement latency (client side: send to the
  guess's own event; server side: ``/healthz``'s frame in -> acknowledgement queued), the
  node's CPU, and the memory per connection again.

Every connection is a file descriptor in the server and in one worker: the bench raises its
own soft ``RLIMIT_NOFILE`` to the hard limit (the workers and the server inherit it, and
``moo serve`` raises its own towards ``--max-connections``); a hard limit below ~10 300 needs
``ulimit -n`` first. Loopback only, bounded (at most 10 000 players, 600 s a phase), and
everything is torn down at the end.

    python -m bench.idle_players --players 10000 --interval 10 --idle-seconds 20 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import sys
import time
from typing import Any

from bench.server_bench import Workers, _healthz, _pct, start

#: one bucket of the server's acknowledgement-latency histogram in /metrics
BUCKET = re.compile(
    rb'^moo_ack_latency_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} ([0-9.e+]+)\r?$', re.M
)

#: descriptors a worker or the server needs beyond its share of the connections
SPARE_FDS = 512


async def ack_buckets(port: int) -> dict[str, float]:
    """The server's cumulative acknowledgement-latency histogram (/metrics): bound -> count."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    async with asyncio.timeout(30):
        data = await reader.read()
    writer.close()
    return {le.decode(): float(count) for le, count in BUCKET.findall(data)}


def server_side(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """Every acknowledgement of the phase, from the server's histogram (frame in ->
    acknowledgement queued, after the commit): the share within 50 ms, and the smallest
    bucket bound that 99 % are within."""
    counts = {le: after[le] - before.get(le, 0.0) for le in after}
    total = counts.get("+Inf", 0.0)
    if not total:
        return {"n": 0}
    p99 = next((le for le in counts if counts[le] >= 0.99 * total), "+Inf")
    return {"n": int(total), "within_50ms": round(counts.get("0.05", 0.0) / total, 4),
            "p99_at_most_s": p99}


def raise_nofile(needed: int) -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit (children inherit it); (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        soft = hard if hard != resource.RLIM_INFINITY else max(soft, needed)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft, hard


async def run(args: argparse.Namespace) -> dict[str, Any]:
    connections = 2 * args.matches
    soft, hard = raise_nofile(connections + SPARE_FDS)
    if soft != resource.RLIM_INFINITY and soft < connections + SPARE_FDS:
        raise SystemExit(
            f"idle_players: the open-file limit is {soft} (hard {hard}); {connections} players"
            f" need {connections + SPARE_FDS}: raise it with ulimit -n"
        )
    out: dict[str, Any] = {
        "players": connections,
        "live_matches": args.matches,
        "interval_s": args.interval,
        "load_workers": args.workers,
        "cpus": os.cpu_count(),
        "nofile": soft,
        "loadavg_before": os.getloadavg()[0],
    }
    server = await start("moo", args.synchronous)
    workers = Workers(args, "moo", server.port)
    try:
        rss0 = server.rss_kib()
        t0 = time.perf_counter()
        await workers.start()
        out["setup_s"] = round(time.perf_counter() - t0, 1)
        rss_setup = server.rss_kib()
        print(f"{connections} players connected and paired in {out['setup_s']} s",
              file=sys.stderr)
        cpu0, t0 = server.cpu_s(), time.perf_counter()
        await asyncio.sleep(args.idle_seconds)
        idle_cpu = (server.cpu_s() - cpu0) / (time.perf_counter() - t0)
        rss_idle = server.rss_kib()
        # counted now: once the phase is over the workers start closing their players
        connected = (await _healthz(server.port)).get("connections")
        cpu0 = server.cpu_s()
        buckets = await ack_buckets(server.port)
        lat = [x for part in await workers.phase("steady") for x in part]
        whole = server_side(buckets, await ack_buckets(server.port))
        active_cpu = (server.cpu_s() - cpu0) / args.steady_seconds
        rss_active = server.rss_kib()
        health = await _healthz(server.port)
        out["memory"] = {
            "rss_kib": {"idle_server": rss0, "after_setup": rss_setup,
                        "after_idle": rss_idle, "after_active": rss_active},
            "kib_per_connection_after_setup": round((rss_setup - rss0) / connections, 1),
            "kib_per_connection_after_active": round((rss_active - rss0) / connections, 1),
        }
        out["cpu_cores"] = {"idle": round(idle_cpu, 3), "active": round(active_cpu, 3)}
        out["active"] = {
            "seconds": args.steady_seconds,
            "guesses": len(lat),
            "guesses_per_s": round(len(lat) / args.steady_seconds),
            "ack_p50_ms": round(_pct(lat, 0.50) * 1000, 2),
            "ack_p99_ms": round(_pct(lat, 0.99) * 1000, 2),
            "ack_max_ms": round(max(lat) * 1000, 2) if lat else None,
            # the server's own view: over the whole phase (histogram), and the last 5000 acks
            "server_side_whole_phase": whole,
            "server_side_ack_ms": health.get("ack_latency_ms"),
            "server_connections_before": connected,
        }
    finally:
        workers.close()
        await server.stop()
    # what the server logged at WARNING or above, and every connection it closed (and why)
    noted = [line.decode(errors="replace").rstrip() for line in server.log
             if b" WARNING " in line or b" ERROR " in line or b" closing " in line]
    out["server_warnings"] = {"count": len(noted), "last": noted[-5:]}
    out["loadavg_after"] = os.getloadavg()[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--players", type=int, default=10_000, help="even, 2-10000")
    parser.add_argument("--interval", type=float, default=10.0,
                        help="seconds between one player's guesses")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=60.0, help="the active phase")
    parser.add_argument("--workers", type=int, default=4, help="load-generator processes")
    parser.add_argument("--synchronous", default="FULL", help="the server's sqlite_synchronous")
    args = parser.parse_args()
    if (
        not 2 <= args.players <= 10_000 or args.players % 2
        or not 1 <= args.workers <= 16
        or not 0.1 <= args.interval <= 600
        or not 0 <= args.idle_seconds <= 600
        or not 1 <= args.seconds <= 600
    ):
        parser.error("bounded: an even 2-10000 players, 1-16 workers, at most 600 s a phase")
    # the harness's names for the same things (bench/server_bench.py, Workers)
    args.matches = args.players // 2
    args.steady_seconds = args.seconds
    args.seconds = 0
    args.subprotocol = "moo.v1.msgpack"
    results = asyncio.run(run(args))
    print(json.dumps(results, indent=2))
    a, m = results["active"], results["memory"]
    print(
        f"summary: {results['players']} players, ack p50 {a['ack_p50_ms']} ms p99"
        f" {a['ack_p99_ms']} ms (target <= 50; server side: p99 <="
        f" {a['server_side_whole_phase'].get('p99_at_most_s')} s,"
        f" {a['server_side_whole_phase'].get('within_50ms')} within 50 ms),"
        f" {m['kib_per_connection_after_active']} KiB per"
        f" connection (target <= 16), node CPU {results['cpu_cores']['idle']} core idle /"
        f" {results['cpu_cores']['active']} active; load average"
        f" {results['loadavg_before']:.1f} -> {results['loadavg_after']:.1f}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
