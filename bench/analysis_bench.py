"""How long the post-match review takes: ``moo analyse FILE`` from a fresh process, and in bulk.

    python -m bench.analysis_bench --matches 200 --runs 200          # fresh processes
    python -m bench.analysis_bench --matches 1000 --in-process       # what export --analysis does

The matches are classic two-player matches between the arena's bots, two drawn at random per
match from :data:`PLAYERS` (the weak ones, ``random`` and ``first``, play like a person who
guesses a code that is still possible; the heuristics and the trees play well), each guessing
the other's random secret; seeded, so every run analyses the same matches. ``--runs`` times
``moo analyse FILE --json`` (a new interpreter each time, so the first analysis of a process,
imports included) over the files in turn, next to a baseline process that only starts Python
(``python -c pass``) in the same run, and the import of the command alone. ``--in-process``
analyses every match in one process, as ``moo export --analysis`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PLAYERS = ["random", "first", "entropy", "expected", "minimax", "parts", "larmouth",
           "minimum", "strongest"]


def play(name: str, secret: str, rng: random.Random) -> list[str]:
    """One player's guesses against ``secret`` until solved (bots.base strategies)."""
    from bots.base import create
    from moo.rules import DEFAULT_RULES, score

    bot = create(name)
    bot.new_match(DEFAULT_RULES, rng)
    guesses: list[str] = []
    while not guesses or guesses[-1] != secret:
        g = bot.next_guess()
        guesses.append(g)
        bot.observe(g, score(secret, g))
        if len(guesses) > 20:
            raise RuntimeError(f"{name} did not solve {secret}")
    return guesses


def matches(count: int, seed: int = 1) -> list[dict[str, Any]]:
    from moo.rules import DEFAULT_RULES

    rng = random.Random(seed)
    out = []
    for _ in range(count):
        names = [rng.choice(PLAYERS), rng.choice(PLAYERS)]
        secrets = [rng.choice(DEFAULT_RULES.secrets) for _ in names]
        out.append({"rules": {}, "players": [
            {"name": names[i], "secret": secrets[1 - i],
             "guesses": play(names[i], secrets[1 - i], rng)} for i in (0, 1)]})
    return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))]


def fresh(files: list[Path], runs: int) -> dict[str, Any]:
    moo = [sys.executable, "-m", "moo", "analyse"]
    times, base, imports = [], [], []
    for i in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        base.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import moo.cli, clients.analyse, bots.judge.review"],
                       check=True)
        imports.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([*moo, str(files[i % len(files)]), "--json"], check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return {
        "runs": runs, "files": len(files), "load": os.getloadavg(),
        "analyse_p50": statistics.median(times), "analyse_p99": pct(times, 0.99),
        "analyse_max": max(times),
        "python_p50": statistics.median(base), "python_p99": pct(base, 0.99),
        "imports_p50": statistics.median(imports), "imports_p99": pct(imports, 0.99),
    }


def in_process(records: list[dict[str, Any]]) -> dict[str, Any]:
    from bots.judge.review import parse_record, review_players

    t0 = time.perf_counter()
    per: list[float] = []
    for rec in records:
        t = time.perf_counter()
        rules, players = parse_record(rec)
        review_players(rules, players)
        per.append(time.perf_counter() - t)
    return {"matches": len(records), "seconds": time.perf_counter() - t0,
            "per_match_p50": statistics.median(per), "per_match_p99": pct(per, 0.99),
            "per_match_max": max(per), "load": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matches", type=int, default=200)
    parser.add_argument("--runs", type=int, default=0, help="fresh `moo analyse` processes")
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="write the match files here")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    records = matches(args.matches, args.seed)
    print(f"{len(records)} matches played in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        files = []
        for i, rec in enumerate(records):
            f = where / f"match-{i:04d}.json"
            f.write_text(json.dumps(rec))
            files.append(f)
        if args.runs:
            print(json.dumps(fresh(files, args.runs)))
    if args.in_process:
        print(json.dumps(in_process(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
