"""``python -m bench.harness``: the fault harness from the command line (bench/harness/run.py).

    python -m bench.harness --minutes 30 --matches 24 --json          # every fault kind
    python -m bench.harness --once kill --matches 24 --seed 2         # the owner SIGKILLed
    python -m bench.harness --minutes 5 --kinds kill --every 20 25    # failover times
    python -m bench.harness --rounds 1 --every 1 1.5 --matches 6      # each kind once, then end

Exit status 0 when the checker found nothing, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict

from bench.harness.run import KINDS, Harness, Options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.harness",
        description="Cross-node matches on a 3-node cluster while a nemesis injects faults; "
                    "then every client's stream and the database are checked.")
    parser.add_argument("--minutes", type=float, default=2.0,
                        help="how long new matches are started (default 2)")
    parser.add_argument("--matches", type=int, default=12, help="concurrent matches")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"comma-separated fault kinds (default all: {','.join(KINDS)})")
    parser.add_argument("--every", type=float, nargs=2, default=(8.0, 14.0),
                        metavar=("MIN", "MAX"), help="seconds between faults")
    parser.add_argument("--rounds", type=int, default=0,
                        help="strike every kind this many times, then let the matches end"
                             " (default 0: faults until --minutes are up)")
    parser.add_argument("--once", choices=("kill", "term"), default="",
                        help="no nemesis: one fault of the busiest owner once all matches play")
    parser.add_argument("--lease-ms", type=int, default=10000,
                        help="the nodes' lease (default 10000, the server's)")
    parser.add_argument("--think-ms", type=int, default=150)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if bad := [k for k in kinds if k not in KINDS]:
        parser.error(f"unknown fault kind {bad[0]!r} (known: {', '.join(KINDS)})")
    if not 1 <= args.matches <= 500 or not 0 < args.minutes <= 240:
        parser.error("bounded: 1-500 matches, at most 240 minutes")
    if args.rounds < 0:
        parser.error("--rounds must be 0 or more")
    if not 0 < args.every[0] <= args.every[1]:
        parser.error("--every MIN MAX needs 0 < MIN <= MAX")
    options = Options(seconds=args.minutes * 60, matches=args.matches, kinds=kinds,
                      every=tuple(args.every), once=args.once, rounds=args.rounds,
                      lease_ms=args.lease_ms,
                      think_ms=args.think_ms, seed=args.seed)
    report = asyncio.run(Harness(options).run())
    if args.json:
        print(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
    else:
        print(report.summary())
        for name, lines in report.samples.items():
            for line in lines:
                print(f"  {name}: {line}")
        for line in report.server_errors[:20]:
            print(f"  server: {line}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
