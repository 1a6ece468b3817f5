"""``python -m bench.fuzz``: run either driver from the command line and print (or write as
JSON) its figures; the exit status is 1 if any promise was broken.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from bench import fuzz
from bench.fuzz.inproc import fuzz_inproc
from bench.fuzz.sockets import fuzz_sockets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.fuzz", description=str(fuzz.__doc__).split("\n\n")[0]
    )
    parser.add_argument("--mode", choices=["inproc", "sockets"], default="inproc")
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--duration", type=float, default=None, help="stop after this many s")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--worlds", type=int, default=4, help="independent servers at once")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    parser.add_argument("--reply-timeout", type=float, default=5.0, help="sockets mode: s")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    if args.mode == "inproc":
        stats = asyncio.run(fuzz_inproc(args.frames, args.seed, args.duration, args.worlds))
    else:
        stats = asyncio.run(fuzz_sockets(args.frames, args.seed, args.reply_timeout))
    print(stats.line())
    print("families:", dict(stats.by_label.most_common()))
    print("refusals:", dict(stats.by_code.most_common()))
    for v in stats.violations[:50]:
        print("VIOLATION", v)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "mode": args.mode,
                    "seed": args.seed,
                    "frames": stats.frames,
                    "refused": stats.refused,
                    "accepted": stats.accepted,
                    "seconds": round(stats.seconds, 1),
                    "violations": stats.violations,
                    "harness_errors": stats.harness_errors,
                    "families": dict(stats.by_label),
                    "codes": dict(stats.by_code),
                },
                indent=1,
            )
        )
    return 1 if stats.violations or stats.harness_errors else 0


if __name__ == "__main__":
    sys.exit(main())
