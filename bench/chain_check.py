"""End-to-end chain check: a through-server tournament lands on the exact win rate.

    python -m bench.chain_check [A B] [--rounds 2000] [--concurrency 64]

1. ``moo eval A --vs B --json`` computes A's exact win/draw/loss/score against B from the two
   guess-count distributions (independent uniform secrets).
2. ``moo serve`` is started on a free loopback port with a fresh database, and
   ``moo tournament A B --url ... --rounds N`` plays 2N real matches through it (bots on their
   own WebSocket connections, every guess durable on the server).
3. The measured score's 95 % interval (pentanomial, over secret pairs) must contain the exact
   score; so must the win and draw rates' own 95 % intervals (per game, normal approximation).

Exit status 0 when everything is inside its interval. The paired secrets make the score's
interval much narrower than independent games would (the secret's difficulty cancels).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.tournament_bench import _free_port, _wait_healthy
from clients.tournament.results import ResultsFile, pair_standings
from moo.stats import Z95


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bots", nargs="*", default=["strongest", "minimum"])
    p.add_argument("--rounds", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--keep", help="also copy the results JSONL here")
    ns = p.parse_args()
    a, b = ns.bots
    exact = json.loads(subprocess.run(
        [sys.executable, "-m", "cli", "eval", a, "--vs", b, "--json"],
        check=True, capture_output=True, text=True,
    ).stdout)
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(ns.keep) if ns.keep else Path(tmp) / "chain.jsonl"
        server = subprocess.Popen(
            [sys.executable, "-m", "cli", "serve", "--port", str(port),
             "--db", str(Path(tmp) / "chain.sqlite3"), "--log-level", "WARNING"],
        )
        try:
            _wait_healthy(port, server)
            run = subprocess.run(
                [sys.executable, "-m", "cli", "tournament", a, b, "--url",
                 f"ws://127.0.0.1:{port}/", "--rounds", str(ns.rounds), "--concurrency",
                 str(ns.concurrency), "--seed", "2026", "--out", str(out), "--json",
                 "--no-progress"],
                check=True, capture_output=True, text=True,
            )
        finally:
            server.terminate()
            server.wait(30)
        summary = json.loads(run.stdout)
        records = ResultsFile(out).load()
    (st,) = pair_standings(records).values()
    assert all(r.mode == "server" for r in records)
    iv = st.interval
    low, high = iv.score - Z95 * iv.stderr, iv.score + Z95 * iv.stderr
    n = st.games
    ok = low <= exact["score"] <= high
    lines = [
        f"{a} vs {b}: {n} matches through the server in {summary['elapsed_s']} s "
        f"({summary['matches_per_s']} matches/s)",
        f"exact (moo eval):  win {exact['win']:.4f}  draw {exact['draw']:.4f}  "
        f"loss {exact['loss']:.4f}  score {exact['score']:.4f}",
        f"measured:          win {st.wins / n:.4f}  draw {st.draws / n:.4f}  "
        f"loss {st.losses / n:.4f}  score {st.score:.4f}  "
        f"95% CI [{low:.4f}, {high:.4f}] (pentanomial {st.penta})",
    ]
    for label, count, p_exact in (("win", st.wins, exact["win"]), ("draw", st.draws,
                                                                   exact["draw"])):
        rate = count / n
        half = Z95 * math.sqrt(rate * (1 - rate) / n)
        inside = rate - half <= p_exact <= rate + half
        ok = ok and inside
        lines.append(
            f"{label} rate {rate:.4f} +- {half:.4f}: exact {p_exact:.4f} "
            f"{'inside' if inside else 'OUTSIDE'}"
        )
    where = "inside" if low <= exact["score"] <= high else "OUTSIDE"
    lines.append(f"score: exact {exact['score']:.4f} {where} the 95% interval")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
