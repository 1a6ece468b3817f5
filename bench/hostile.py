"""What a flood costs a bystander: guess-ack latency of a normal match while others abuse.

``python -m bench.hostile [--flooders 4] [--guesses 30]`` starts a real ``moo serve`` (SQLite,
``synchronous=NORMAL``), pairs ann and bob in a free match, measures ann's guess-ack latency
alone, then again while ``bench.flood`` (its own process) floods pings from ``--flooders``
connections, and prints both, with the flooders' close codes, as one JSON line.

tests/server/test_hostile.py checks what must hold whatever the machine's load (every flooder
closed with 1008, every bystander guess acknowledged, the server healthy); how little the
flood costs the bystander is a timing figure, so it is measured here and recorded in
docs/benchmarks.md, not asserted by a test.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.rawbot import ROOT, RawClient, ServerProcess, free_port, healthz, percentile

#: Guesses that never solve against bob's "0123" (no 0-3 at all): a long free match.
LONG = ["".join(p) for p in itertools.permutations("456789", 4)]


async def pair(
    srv: ServerProcess, a: str, b: str, timeout: float = 10.0
) -> tuple[RawClient, RawClient, str]:
    """Two clients in a free match, secrets set; ann guesses, bob's secret is 0123."""
    ca, cb = RawClient(srv.url, a), RawClient(srv.url, b)
    await ca.connect(timeout)
    await cb.connect(timeout)
    sent = await ca.request({"type": "challenge", "opponent": b, "pacing": "free"}, timeout)
    reply = await cb.request({"type": "accept", "challenge_id": sent["challenge_id"]}, timeout)
    assert reply["type"] == "match", reply
    mid = reply["match_id"]
    for c, secret in ((ca, "9876"), (cb, "0123")):
        ack = await c.request({"type": "secret", "match_id": mid, "secret": secret}, timeout)
        assert ack["type"] == "event", ack
    return ca, cb, mid


async def guess_latencies(
    c: RawClient, mid: str, guesses: list[str], timeout: float = 10.0
) -> list[float]:
    """Play ``guesses`` one after another; each must be acknowledged. Milliseconds each took."""
    out = []
    for g in guesses:
        t0 = time.perf_counter()
        reply = await c.request({"type": "guess", "match_id": mid, "guess": g}, timeout)
        assert reply.get("kind") == "guess", reply
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def measure(flooders: int, guesses: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="moo-hostile-") as tmp:
        srv = ServerProcess(
            Path(tmp) / "hostile.sqlite3", free_port(),
            env={"MOO_SQLITE_SYNCHRONOUS": "NORMAL", "MOO_RATE_PER_S": "100",
                 "MOO_RATE_BURST": "200"},
        )
        await srv.start()
        try:
            ann, _bob, mid = await pair(srv, "ann", "bob")
            alone = await guess_latencies(ann, mid, LONG[:guesses])
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.flood", srv.url, str(flooders),
                cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            )
            assert proc.stdin is not None and proc.stdout is not None
            try:
                assert (await proc.stdout.readline()).strip() == b"started"
                during = await guess_latencies(ann, mid, LONG[guesses:2 * guesses])
            finally:
                proc.stdin.close()
                while not (line := await proc.stdout.readline()).startswith(b"{"):
                    assert line, "the flooder ended without its summary"
                flood = json.loads(line)
                await proc.wait()
            healthy = (await healthz(srv.port))["status"] == "ok"
        finally:
            await srv.stop()
    return {
        "flooders": flooders,
        "guesses": guesses,
        "alone_p50_ms": round(percentile(alone, 50), 2),
        "alone_max_ms": round(max(alone), 2),
        "flood_p50_ms": round(percentile(during, 50), 2),
        "flood_max_ms": round(max(during), 2),
        "p50_ratio": round(percentile(during, 50) / max(percentile(alone, 50), 1e-9), 2),
        "healthy_after": healthy,
        "flood": flood,
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__)
    parser.add_argument("--flooders", type=int, default=4)
    parser.add_argument("--guesses", type=int, default=30)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.flooders, args.guesses))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
