"""How long the post-match review takes: ``moo analyse FILE`` from a fresh process, and in bulk.

    python -m bench.analysis_bench --matches 200 --runs 200          # fresh processes
    python -m bench.analysis_bench --matches 1000 --in-process       # what export --analysis does
    python -m bench.analysis_bench --matches 1000 --export           # moo export --analysis itself
    python -m bench.analysis_bench --matches 50 --server             # the page's analysis request

The matches are classic two-player matches between the arena's bots, two drawn at random per
match from :data:`PLAYERS` (the weak ones, ``random`` and ``first``, play like a person who
guesses a code that is still possible; the heuristics and the trees play well), each guessing
the other's random secret; seeded, so every run analyses the same matches. ``--runs`` times
``moo analyse FILE --json`` (the installed ``moo`` script, else ``python -m cli``; a new
interpreter each time, so the first analysis of a process, imports included) over the files
in turn, next to a baseline process that only starts Python (``python -c pass``) in the same
run, and the import of the command alone. ``--in-process`` analyses every match in one
process, as ``moo export --analysis`` does (the same ``analyse_guesses`` per seat that its
``with_analysis`` calls; reading the database and writing the lines are left out).
``--export`` stores the matches in a SQLite database as a server would and times one
``moo export --db DB --analysis --out FILE`` process (a lockstep match, the default, ends with
the round in which a seat solves, so the other seat's later guesses are not stored: about 5 %
fewer guesses to analyse than ``--in-process``).
``--server`` plays each match on a server (free pacing, a room between two clients) and times
its ``analysis`` request.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
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
    from bots.registry import create
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


def _timed(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU of the child: user + system) of one process run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def command() -> list[str]:
    """The command people run: the ``moo`` console script installed next to this Python
    (``./dev setup`` makes it; it calls :func:`cli.main.main` as ``python -m cli`` does), or
    ``python -m cli`` in a checkout without it."""
    script = Path(sys.executable).parent / "moo"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


def compile_sources() -> None:
    """Write the bytecode caches of the packages the command imports, as an installed command
    has them (pip compiles on install; a checkout writes them on its first run). Without them,
    as under ``PYTHONDONTWRITEBYTECODE=1``, every timed process would compile the sources
    again, which no user's process does."""
    import compileall

    root = Path(__file__).resolve().parent.parent
    for package in ("cli", "clients", "bots", "moo", "server"):
        compileall.compile_dir(root / package, quiet=1)


def fresh(files: list[Path], runs: int) -> dict[str, Any]:
    """Wall and CPU time of ``moo analyse FILE --json`` in new processes, with two baselines
    from the same run: an empty Python, and the imports of the command alone."""
    compile_sources()
    moo = [*command(), "analyse"]
    got: dict[str, list[tuple[float, float]]] = {"analyse": [], "python": [], "imports": []}
    load0 = os.getloadavg()
    for i in range(runs):
        got["python"].append(_timed([sys.executable, "-c", "pass"]))
        got["imports"].append(_timed([sys.executable, "-c",
                                      "import cli.main, clients.analyse, bots.judge.review"]))
        got["analyse"].append(_timed([*moo, str(files[i % len(files)]), "--json"]))
    out: dict[str, Any] = {"command": " ".join([*moo, "FILE", "--json"]), "runs": runs,
                           "files": len(files), "load": (load0, os.getloadavg())}
    for name, rows in got.items():
        for k, label in ((0, "wall"), (1, "cpu")):
            values = [r[k] for r in rows]
            out[f"{name}_{label}_p50"] = round(statistics.median(values), 4)
            out[f"{name}_{label}_p95"] = round(pct(values, 0.95), 4)
            out[f"{name}_{label}_p99"] = round(pct(values, 0.99), 4)
            out[f"{name}_{label}_max"] = round(max(values), 4)
    return out


def in_process(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every match reviewed in this one process (as ``moo export --analysis`` does): wall and
    CPU time in all, and per match."""
    load0 = os.getloadavg()
    t0, c0 = time.perf_counter(), time.process_time()
    from bots.judge.review import parse_record, review_players

    per: list[float] = []
    for rec in records:
        t = time.process_time()
        rules, players = parse_record(rec)
        review_players(rules, players)
        per.append(time.process_time() - t)
    return {"matches": len(records), "wall": round(time.perf_counter() - t0, 2),
            "cpu": round(time.process_time() - c0, 2),
            "per_match_cpu_p50": round(statistics.median(per), 4),
            "per_match_cpu_p95": round(pct(per, 0.95), 4),
            "per_match_cpu_p99": round(pct(per, 0.99), 4),
            "per_match_cpu_max": round(max(per), 4), "load": (load0, os.getloadavg())}


def export_db(records: list[dict[str, Any]], path: Path) -> int:
    """A SQLite database of the current schema holding ``records`` as finished matches, as a
    server stores them (the match replayed by :class:`moo.match.Match`: secrets, then the
    guesses round by round until it finishes; ``results`` indexed as on every finish).
    Returns how many guesses were stored."""
    import sqlite3

    from moo.match import Match, MatchConfig
    from server import sql
    from server.schema import result_rows, upgrade_sqlite

    conn = sqlite3.connect(path, isolation_level=None)
    upgrade_sqlite(conn)
    stored = 0
    conn.execute("BEGIN")
    for i, rec in enumerate(records):
        mid = f"m{i:012d}"
        p = rec["players"]
        m, _ = Match.create(mid, (p[0]["name"], p[1]["name"]), MatchConfig(), 1000 * i)
        for seat in (0, 1):  # seat i's secret is the code the other seat guesses
            m.set_secret(seat, p[1 - seat]["secret"], f"s{seat}", 1000 * i + 1)
        for n in range(max(len(p[0]["guesses"]), len(p[1]["guesses"]))):
            for seat in (0, 1):
                if n < len(p[seat]["guesses"]) and not m.finished:
                    m.guess(seat, p[seat]["guesses"][n], 1000 * i + 2 + n)
                    stored += 1
        meta = json.dumps({"players": [p[0]["name"], p[1]["name"]], "bots": [None, None]})
        bodies = [json.dumps(e) for e in m.events]
        conn.execute("INSERT INTO matches(match_id, meta, finished, created_ms) "
                     "VALUES (?, ?, 1, ?)", (mid, meta, 1000 * i))
        conn.executemany("INSERT INTO events(match_id, seq, body) VALUES (?, ?, ?)",
                         [(mid, seq, body) for seq, body in enumerate(bodies, 1)])
        conn.executemany(sql.RESULTS_UPSERT.sqlite,
                         result_rows(mid, bodies[0], bodies[-1], meta))
    conn.execute("COMMIT")
    conn.close()
    return stored


def export(records: list[dict[str, Any]]) -> dict[str, Any]:
    """``moo export --db DB --analysis --out FILE`` itself, one process timed end to end (wall
    and CPU: reading the database, the analysis of every match, writing the lines)."""
    compile_sources()
    with tempfile.TemporaryDirectory() as tmp:
        db, out = Path(tmp) / "moo.sqlite3", Path(tmp) / "out.jsonl"
        guesses = export_db(records, db)
        load0 = os.getloadavg()
        wall, cpu = _timed([*command(), "export", "--db", str(db), "--analysis", "--out",
                            str(out)])
        lines = out.read_text(encoding="utf-8").splitlines()
        analysed = sum(1 for line in lines if json.loads(line).get("analysis") is not None)
    return {"command": " ".join([*command(), "export", "--db", "DB", "--analysis", "--out",
                                 "FILE"]),
            "matches": len(lines), "analysed": analysed, "guesses": guesses,
            "wall": round(wall, 2), "cpu": round(cpu, 2), "load": (load0, os.getloadavg())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matches", type=int, default=200)
    parser.add_argument("--runs", type=int, default=0, help="fresh `moo analyse` processes")
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--export", action="store_true",
                        help="time `moo export --analysis` of the matches stored in a database")
    parser.add_argument("--server", action="store_true",
                        help="the analysis request on a server, per match played there")
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
    if args.export:
        print(json.dumps(export(records)))
    if args.server:
        import asyncio

        print(json.dumps(asyncio.run(_server_latency(records))))
    return 0



async def _server_latency(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``analysis`` request on a real server: each record played as a room match, then
    asked for; the first request starts the worker, the rest find it warm."""
    from tests.server_support import Client, running, server_settings

    out: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with running(server_settings(Path(tmp), pacing="free", rate_per_s=1000.0,
                                           rate_burst=1000)) as app:
            a = await Client.hello(app.port, "ann", "moo.v1.json")
            b = await Client.hello(app.port, "bob", "moo.v1.json")
            for rec in records:
                p = rec["players"]
                room = await a.request({"type": "room_create"})
                m = await b.request({"type": "room_join", "code": room["code"]})
                mid = m["match_id"]
                seats = (a, b) if m["seat"] == 1 else (b, a)  # seats[i] plays seat i
                for i in (0, 1):  # seat i guesses the other seat's secret
                    await seats[i].request({"type": "secret", "match_id": mid,
                                            "secret": p[1 - i]["secret"]})
                for i in (0, 1):
                    for g in p[i]["guesses"]:
                        await seats[i].request({"type": "guess", "match_id": mid, "guess": g})
                await a.event(mid, "finished")
                t0 = time.perf_counter()
                reply = await a.request({"type": "analysis", "match_id": mid}, timeout=300)
                out.append(time.perf_counter() - t0)
                assert reply["type"] == "analysis", reply
    return {"requests": len(out), "first": round(out[0], 3),
            "warm_p50": round(statistics.median(out[1:]), 4),
            "warm_p99": round(pct(out[1:], 0.99), 4), "warm_max": round(max(out[1:]), 4),
            "load": os.getloadavg()}


if __name__ == "__main__":
    sys.exit(main())
