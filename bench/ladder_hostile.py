"""Hostile hosted bots beside people's matches: the steady p99 with and without them.

Issue 30's target: the steady acknowledgement p99 of 200 people-like matches on one
``moo serve`` node stays within 1.5x of the same run without hostile bots. One node (a fresh
SQLite file), started as a user starts it, so it runs its own bot worker (docs/ladder.md, "Bot
workers": ``ladder_cpu_share`` of the cores, at nice 10). Hostile bots are submitted with
``moo ladder submit`` as a user would: tests/hosted_entries/turncoat.py (it passes the check
by playing legally, then turns hostile against the beacon bots: a CPU burner with children, a
fork bomb, a memory hog, a flood of output), each beside a beacon (tests/hosted_entries/
beacon.py). The matches are bench/server_bench.py's steady phase: every player guesses every
``--interval`` seconds, and the time from sending a guess to its acknowledgement is measured.

Phases alternate, so that both see the same (shared, noisy) machine: ``quiet`` (every ladder
bot paused, none of their processes left), then ``hostile`` (the bots resumed, the worker
playing them), ``--rounds`` times. Reported: each phase's p50/p99, the pooled p99 of each kind
and their ratio (hostile / quiet), and, when the worker has a CPU cap (docs/ladder.md, "The CPU
cap"), how many of the cap's periods in each phase were throttled (``cap_throttled`` of
``cap_periods``, from its cgroup's ``cpu.stat``): none means the hostile programs never reached
the cap, as on a machine already saturated by other work.

    python -m bench.ladder_hostile --matches 200 --seconds 60 --rounds 3 [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.server_bench import ROOT, ServerProc, setup, start, steady
from clients.hosted.cpu_cap import PREFIX
from clients.hosted.proctree import children

ENTRIES = ROOT / "tests" / "hosted_entries"
#: what the hostile bots do once they see a beacon (tests/hosted_entries/turncoat.py)
ACTIONS = ("burner", "fork_bomb", "hog", "flood")


def turncoat(action: str, marker: str) -> str:
    """The turncoat's source with its placeholders filled in."""
    text = (ENTRIES / "turncoat.py").read_text()
    for key, value in {"ACTION": action, "MARKER": marker, "SECRET_WORD": "unused"}.items():
        text = text.replace(f'"@{key}@"', json.dumps(value))
    return text.replace('["@TARGETS@"]', "[]").replace('["@PATHS@"]', "[]")


async def moo(env: dict[str, str], *args: str) -> list[str]:
    """``moo ARGS`` as a user runs it; its standard output's lines (a failure raises)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"moo {' '.join(args)}: {out.decode()}{err.decode()}")
    return out.decode().splitlines()


def marked(marker: str) -> int:
    """How many processes carry ``marker`` on their command line (the hostile bots')."""
    n = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    n += marker.encode() in f.read()
            except OSError:
                continue
    return n


def cap_stat(server_pid: int) -> dict[str, int]:
    """The ``cpu.stat`` of the server's own worker's cgroup; {} when it has none."""
    for child in children(server_pid):
        for depth in range(5):
            for path in glob.glob("/sys/fs/cgroup/" + "*/" * depth + f"{PREFIX}{child}"):
                words = Path(path, "cpu.stat").read_text().split()
                return {k: int(v) for k, v in zip(words[::2], words[1::2], strict=False)}
    return {}


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def submit_bots(server: ServerProc, env: dict[str, str], marker: str,
                      tmp: Path) -> dict[str, list[str]]:
    """Submit the beacons and the hostile bots; their ids by kind."""
    url = f"ws://127.0.0.1:{server.port}/"
    ids: dict[str, list[str]] = {"beacon": [], "hostile": []}
    for action in ACTIONS:
        path = tmp / f"{action}.py"
        path.write_text(turncoat(action, marker))
        out = await moo(env, "ladder", "submit", str(path), "--url", url, "--name",
                        f"h-{action}", "--as", "mallory")
        ids["hostile"].append(out[-1])
        out = await moo(env, "ladder", "submit", str(ENTRIES / "beacon.py"), "--url", url,
                        "--name", f"beacon-{action}", "--as", "keeper")
        ids["beacon"].append(out[-1])
    return ids


async def set_status(server: ServerProc, env: dict[str, str], ids: dict[str, list[str]],
                     action: str) -> None:
    url = f"ws://127.0.0.1:{server.port}/"
    for kind, owner in (("hostile", "mallory"), ("beacon", "keeper")):
        for bot_id in ids[kind]:
            await moo(env, "ladder", action, bot_id, "--url", url, "--as", owner)


async def quiet_down(marker: str, limit_s: float = 180.0, calm_s: float = 5.0) -> float:
    """Wait until no hostile process has run for ``calm_s`` (the games under way played out:
    between two games of a pairing none runs for a moment, so one empty look is not enough);
    the seconds it took."""
    t0 = calm = time.perf_counter()
    while time.perf_counter() - calm < calm_s and time.perf_counter() - t0 < limit_s:
        if marked(marker):
            calm = time.perf_counter()
        await asyncio.sleep(0.2)
    return time.perf_counter() - t0


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    marker = f"hostile-{uuid.uuid4().hex}"
    results: dict[str, Any] = {"matches": args.matches, "seconds": args.seconds,
                               "interval": args.interval, "rounds": args.rounds,
                               "cpus": os.cpu_count(), "loadavg_before": os.getloadavg()[0],
                               "hostile_bots": list(ACTIONS), "phases": []}
    server = await start("moo", "FULL", ladder_worker=True)
    tmp = tempfile.TemporaryDirectory(prefix="moo-ladder-hostile-")
    env = {**os.environ, "MOO_TOKENS": str(Path(tmp.name) / "tokens.json")}
    try:
        ids = await submit_bots(server, env, marker, Path(tmp.name))
        await set_status(server, env, ids, "pause")
        await quiet_down(marker)
        players = await setup(server, args.matches, "moo.v1.msgpack")
        print(f"{2 * args.matches} connections ready; {len(ACTIONS)} hostile bots submitted",
              file=sys.stderr)
        pooled: dict[str, list[float]] = {"quiet": [], "hostile": []}
        for n in range(args.rounds):
            for kind in ("quiet", "hostile"):
                if kind == "hostile":
                    await set_status(server, env, ids, "resume")
                    t0 = time.perf_counter()  # until the worker runs them
                    while not marked(marker) and time.perf_counter() - t0 < 60:
                        await asyncio.sleep(0.1)
                cpu0 = server.cpu_s()
                cap0 = cap_stat(server.pid)
                seen = []
                phase = asyncio.create_task(steady(players, args.seconds, args.interval))
                while not phase.done():  # how often a hostile process was running
                    seen.append(marked(marker))
                    await asyncio.sleep(0.5)
                await phase
                cpu = server.cpu_s() - cpu0
                cap1 = cap_stat(server.pid)
                lat = [x for p in players for x in p.latencies]
                pooled[kind] += lat
                processes = sum(1 for s in seen if s) / max(1, len(seen))
                row = {"round": n + 1, "kind": kind, "guesses": len(lat),
                       "p50_ms": round(percentile(lat, 0.5) * 1000, 2),
                       "p99_ms": round(percentile(lat, 0.99) * 1000, 2),
                       "server_cpu_share": round(cpu / args.seconds, 3),
                       "hostile_running_share": round(processes, 2)}
                if cap0 and cap1:
                    for key, name in (("nr_periods", "cap_periods"),
                                      ("nr_throttled", "cap_throttled")):
                        row[name] = cap1.get(key, 0) - cap0.get(key, 0)
                results["phases"].append(row)
                print(f"round {n + 1} {kind}: p99 {row['p99_ms']} ms over {len(lat)} guesses;"
                      f" hostile processes running {processes:.0%} of the phase; CPU cap "
                      + (f"throttled {row['cap_throttled']} of {row['cap_periods']} periods"
                         if "cap_periods" in row else "none"),
                      file=sys.stderr)
                if kind == "hostile":
                    await set_status(server, env, ids, "pause")
                    row["quiet_down_s"] = round(await quiet_down(marker), 1)
        for kind, lat in pooled.items():
            results[kind] = {"guesses": len(lat),
                             "p50_ms": round(percentile(lat, 0.5) * 1000, 2),
                             "p99_ms": round(percentile(lat, 0.99) * 1000, 2)}
        results["p99_ratio"] = round(results["hostile"]["p99_ms"]
                                     / results["quiet"]["p99_ms"], 2)
        url = f"ws://127.0.0.1:{server.port}/"
        shown = json.loads((await moo(env, "ladder", "show", "--url", url, "--json"))[-1])
        results["ladder"] = [{k: row[k] for k in ("bot", "games", "losses", "forfeits")}
                             for row in shown["standings"]]
    finally:
        await server.stop()
        tmp.cleanup()
    results["loadavg_after"] = os.getloadavg()[0]
    return results


def summary(results: dict[str, Any]) -> str:
    q, h = results["quiet"], results["hostile"]
    return (f"summary: steady p99 with hostile bots {results['p99_ratio']:.2f} x without"
            f" ({h['p99_ms']} / {q['p99_ms']} ms; target <= 1.5); {results['matches']} matches,"
            f" {results['rounds']} x {results['seconds']:g} s per kind; load average"
            f" {results['loadavg_before']:.1f} -> {results['loadavg_after']:.1f} on"
            f" {results['cpus']} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matches", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each phase")
    parser.add_argument("--rounds", type=int, default=3, help="quiet + hostile phases")
    parser.add_argument("--interval", type=float, default=2.0, help="s between guesses")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    if not 1 <= args.matches <= 2000 or not 1 <= args.seconds <= 600 or not 1 <= args.rounds <= 20:
        parser.error("bounded: 1-2000 matches, 1-600 s per phase, 1-20 rounds")
    results = asyncio.run(amain(args))
    if args.json:
        print(json.dumps(results, indent=2))
    print(summary(results), file=sys.stderr)


if __name__ == "__main__":
    main()
