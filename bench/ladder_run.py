"""A ladder run, as issue 30's "Must show" asks: bots submitted from the command line, played
for minutes by bot workers, then checked.

Starts ``moo serve`` (one node, a fresh SQLite file, without its own worker) and ``--workers``
bot workers (``moo worker``, each a process of its own, as on other machines), submits the ten
bots of examples/ladder/ (or ``--only`` some of them) and any FILES given with ``moo ladder
submit`` (the real command, as a user runs it), lets the ladder play for ``--minutes``
from the moment every bot is accepted (``--kill-worker-at S``: SIGKILL one worker S seconds
into that, and start it again), then pauses every
bot, lets the games under way end, and reports:

* the games played, and each bot's rating with its 95 % interval and games (``moo ladder show``);
* no game stuck: no ladder game is still live once the bots are paused and the games under way
  have had their time (docs/ladder.md: every game ends, as played or void);
* every bot's games reachable from its ``ladder_page``: as many as its row says, its recent
  games each replayable (``match_record``, with the ladder mark and the bot in its seat), and
  its player's ``history`` holding at least that many matches;
* the exact scores of the deterministic bots (computed by the workers' ``eval`` jobs,
  clients/hosted/exact.py) equal to ``moo eval``'s for the shipped strategy each one plays
  (those still pending at the end are reported as pending).

With ``--cluster``: three ``moo serve --cluster`` nodes on one PostgreSQL database and a
broker (bench/harness/cluster.py), the workers connected to nodes b and c (not to a, the
lobby leader that runs the ladder), the bots submitted and paused on b, and node a SIGKILLed
``--kill-node-at`` seconds into the run (default: half way); the checks are the same, read
from c, plus the database's word on stuck games: no ladder game without an end.

    python -m bench.ladder_run --minutes 30 --workers 2 --kill-worker-at 900 [--json] [FILE ...]
    python -m bench.ladder_run --cluster --minutes 30 --workers 2 [--kill-node-at S] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import secrets
import signal
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

from clients.sdk.wire import Wire

ROOT = Path(__file__).resolve().parent.parent
LADDER = ROOT / "examples" / "ladder"
LISTENING = re.compile(r"listening on ws://[^:]+:(\d+)/")
#: the example bots that play a shipped strategy's tree -> that strategy (``moo eval NAME``)
SHIPPED = {"minimum": "minimum", "strongest": "strongest", "larmouth": "larmouth",
           "entropy": "entropy", "minimax": "minimax", "first": "first",
           "first_consistent": "first"}


class Viewer:
    """A plain protocol connection for the read-only ladder requests."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.ids = itertools.count(1)

    @classmethod
    async def open(cls, port: int) -> Viewer:
        viewer = cls(await Wire.open(f"ws://127.0.0.1:{port}/"))
        welcome = await viewer.request({"type": "hello", "name": f"viewer-{os.getpid()}",
                                        "bot": True})
        assert welcome["type"] == "welcome", welcome
        return viewer

    async def request(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The reply to ``msg``, paced under the server's rate limit (a page's checks send
        tens of requests); sent again a second later if the limit refused it anyway (nothing
        was done: docs/protocol.md)."""
        async with asyncio.timeout(120):
            while True:
                await asyncio.sleep(0.06)  # under the server's 20 messages a second
                ref = next(self.ids)
                await self.wire.send({**msg, "id": ref})
                while True:
                    reply = await self.wire.receive()
                    if reply.get("ref") in (ref, None) and reply.get("code") == "rate_limited":
                        break
                    if reply.get("ref") == ref:
                        return reply
                await asyncio.sleep(1.0)


async def moo(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def start_server(env: dict[str, str], db: Path) -> tuple[asyncio.subprocess.Process, int]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", "serve", "--port", "0", "--db", str(db),
        "--no-ladder-worker", cwd=ROOT, env=env, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    lines: list[str] = []
    async with asyncio.timeout(60):
        while True:
            line = (await proc.stderr.readline()).decode()
            if not line:
                raise RuntimeError("moo serve died:\n" + "".join(lines))
            lines.append(line)
            if found := LISTENING.search(line):
                break

    async def drain() -> None:
        assert proc.stderr is not None
        while await proc.stderr.readline():
            pass

    asyncio.get_running_loop().create_task(drain())
    return proc, int(found.group(1))


async def start_worker(env: dict[str, str], url: str, n: int,
                       slots: int) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", "worker", "--url", url, "--slots", str(slots),
        "--name", f"w{n}", cwd=ROOT, env=env, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL)


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(15):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def eval_scores(env: dict[str, str], strategy: str) -> dict[str, float]:
    """``moo eval``'s figures for a shipped strategy: its score against minimum and
    strongest, and its average guesses."""
    out: dict[str, float] = {}
    for vs in ("minimum", "strongest"):
        rc, text, err = await moo(env, "eval", strategy, "--vs", vs, "--json")
        if rc != 0:
            raise RuntimeError(f"moo eval {strategy}: {err}")
        data = json.loads(text)
        out[f"vs_{vs}"] = float(data["score"])
        out["average"] = float(data["average"])
    return out


async def live_ladder_games(viewer: Viewer, names: set[str]) -> list[str]:
    reply = await viewer.request({"type": "matches"})
    return [m["match_id"] for m in reply["matches"] if set(m["players"]) & names]


async def history_count(viewer: Viewer, player: str) -> int:
    count, cursor = 0, None
    while True:
        msg: dict[str, Any] = {"type": "history", "player": player, "limit": 50}
        if cursor is not None:
            msg["cursor"] = cursor
        reply = await viewer.request(msg)
        count += len(reply["matches"])
        cursor = reply.get("next")
        if not cursor or not reply["matches"]:
            return count


class Arena:
    """Where the run plays: one node (SQLite), or a three-node cluster (PostgreSQL)."""

    def __init__(self, args: argparse.Namespace, env: dict[str, str], tmp: Path) -> None:
        self.args = args
        self.env = env
        self.tmp = tmp
        self.server: asyncio.subprocess.Process | None = None
        self.cluster: Any = None
        #: where the bots are submitted and paused, where the workers connect (by worker),
        #: and the port the checks read from
        self.url = ""
        self.worker_urls: list[str] = []
        self.view_port = 0

    async def open(self) -> None:
        if not self.args.cluster:
            self.server, port = await start_server(self.env, self.tmp / "ladder.sqlite3")
            self.url = f"ws://127.0.0.1:{port}/"
            self.worker_urls = [self.url]
            self.view_port = port
            return
        from bench.harness.cluster import Cluster

        # the nodes inherit this process's environment: one worker key for all of them
        os.environ["MOO_LADDER_WORKER_KEY"] = self.env["MOO_LADDER_WORKER_KEY"]
        if self.args.logs:
            Path(self.args.logs).mkdir(parents=True, exist_ok=True)
        self.cluster = Cluster(n=3, lease_ms=3000, grace_ms=30000,
                               log_dir=self.args.logs and Path(self.args.logs))
        await self.cluster.open()
        _, b, c = self.cluster.nodes
        self.url = b.url
        self.worker_urls = [b.url, c.url]
        self.view_port = c.port

    async def kill_leader(self) -> None:
        """SIGKILL node a (the lobby leader, which runs the ladder)."""
        await self.cluster.nodes[0].stop(signal.SIGKILL)

    async def stuck(self) -> list[str]:
        """A cluster: the ladder games the database holds no end for."""
        rows = await self.cluster.query(
            "SELECT match_id FROM ladder_games WHERE ended_ms IS NULL")
        return [str(r[0]) for r in rows]

    async def close(self) -> None:
        if self.server is not None:
            await stop(self.server)
        if self.cluster is not None:
            errors = self.cluster.errors()
            if errors:
                print("node errors:\n" + "\n".join(errors[-20:]), file=sys.stderr)
            await self.cluster.close()


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    files = [LADDER / f for f in sorted(os.listdir(LADDER)) if (LADDER / f).is_file()]
    if args.only:
        wanted = set(args.only.split(","))
        files = [f for f in files if f.name in wanted or f.stem in wanted]
    files += [Path(f) for f in args.files]
    tmp = tempfile.TemporaryDirectory(prefix="moo-ladder-run-")
    key = secrets.token_hex(16)
    env = {**os.environ, "MOO_TOKENS": str(Path(tmp.name) / "tokens.json"),
           "MOO_LADDER_WORKER_KEY": key, "MOO_WORKER_KEY": key}
    result: dict[str, Any] = {"nodes": 3 if args.cluster else 1, "workers": args.workers,
                              "slots": args.slots, "minutes": args.minutes,
                              "cpus": os.cpu_count(), "loadavg_before": os.getloadavg()[0]}
    arena = Arena(args, env, Path(tmp.name))
    workers: list[asyncio.subprocess.Process] = []
    try:
        await arena.open()
        url, port = arena.url, arena.view_port
        wurls = arena.worker_urls
        workers = [await start_worker(env, wurls[n % len(wurls)], n, args.slots)
                   for n in range(args.workers)]
        t0 = time.monotonic()

        async def submit(path: Path) -> tuple[str, str]:
            name = path.stem.replace("_", "-")[:24]
            for _ in range(20):
                rc, out, err = await moo(env, "ladder", "submit", str(path), "--url", url,
                                         "--name", name, "--as", "runner")
                # a cluster's leader still reading the ladder: "try again" (docs/ladder.md)
                if rc == 0 or "try again" not in err:
                    break
                await asyncio.sleep(1.0)
            if rc != 0:
                raise RuntimeError(f"{path.name} was not accepted: {out}{err}")
            return path.stem, out.splitlines()[-1]

        # one after the other: a player's second connection replaces its first (close 4001)
        bots = dict([await submit(f) for f in files])
        result["submitted_s"] = round(time.monotonic() - t0, 1)
        print(f"{len(bots)} bots submitted and accepted in {result['submitted_s']} s",
              file=sys.stderr)
        t0 = time.monotonic()  # the run's minutes count from here: every bot is on the ladder
        end = t0 + args.minutes * 60
        if args.kill_worker_at is not None and t0 + args.kill_worker_at < end:
            await asyncio.sleep(max(0.0, t0 + args.kill_worker_at - time.monotonic()))
            workers[0].kill()  # SIGKILL: no goodbye, its claims let go by the server
            await workers[0].wait()
            workers[0] = await start_worker(env, wurls[0], 0, args.slots)
            result["worker_killed_at_s"] = round(time.monotonic() - t0, 1)
            print(f"worker w0 killed and started again at {result['worker_killed_at_s']} s",
                  file=sys.stderr)
        kill_node_at = args.kill_node_at if args.kill_node_at is not None \
            else args.minutes * 30
        if args.cluster and t0 + kill_node_at < end:
            await asyncio.sleep(max(0.0, t0 + kill_node_at - time.monotonic()))
            await arena.kill_leader()
            result["node_killed_at_s"] = round(time.monotonic() - t0, 1)
            print(f"node a (the lobby leader) SIGKILLed at {result['node_killed_at_s']} s",
                  file=sys.stderr)
        await asyncio.sleep(max(0.0, end - time.monotonic()))
        # the end: no new pairings; the games under way are played out
        for bot_id in bots.values():
            rc, out, err = await moo(env, "ladder", "pause", bot_id, "--url", url, "--as",
                                     "runner")
            if rc != 0:
                raise RuntimeError(f"pause {bot_id}: {out}{err}")
        viewer = await Viewer.open(port)
        names = {p.stem.replace("_", "-")[:24] for p in files}
        settle = time.monotonic()
        while (live := await live_ladder_games(viewer, names)) and \
                time.monotonic() - settle < args.settle_s:
            await asyncio.sleep(0.5)
        if args.cluster:
            while (unended := await arena.stuck()) and \
                    time.monotonic() - settle < args.settle_s:
                await asyncio.sleep(0.5)
            live = sorted(set(live) | set(unended))
        result["stuck_games"] = live
        result["settle_s"] = round(time.monotonic() - settle, 1)
        rc, out, err = await moo(env, "ladder", "show", "--url", url, "--json")
        standings = json.loads(out.splitlines()[-1])["standings"]
        result["games"] = sum(r["games"] for r in standings) // 2
        rows, exact_checks, reachable = [], [], True
        for row in standings:
            page = await viewer.request({"type": "ladder_page", "bot_id": row["bot_id"]})
            ok = page["games"] == row["games"] and len(page["recent"]) == min(50, row["games"])
            for game in page["recent"]:
                record = await viewer.request({"type": "match_record",
                                               "match_id": game["match_id"]})
                config = record["events"][0]["config"]
                ok = ok and bool(config.get("ladder")) and \
                    record["events"][0]["players"][game["seat"]] == row["bot"]
            ok = ok and await history_count(viewer, row["bot"]) >= row["games"]
            reachable = reachable and ok
            failures: list[str] = []
            if row["forfeits"]:  # what its author reads: moo ladder log ID --json
                rc, out, err = await moo(env, "ladder", "log", row["bot_id"], "--url", url,
                                         "--as", "runner", "--json")
                if rc == 0:
                    failures = [f"{e['match_id']}: {e['failure']}"
                                for e in json.loads(out.splitlines()[-1])["errors"]]
            rows.append({k: row[k] for k in ("bot", "rating", "low", "high", "games", "wins",
                                             "draws", "losses", "forfeits")}
                        | {"exact": row["exact"]["status"], "page_ok": ok,
                           "failures": failures})
            stem = next((s for s in bots if bots[s] == row["bot_id"]), "")
            if row["exact"]["status"] == "computed" and stem in SHIPPED:
                want = await eval_scores(env, SHIPPED[stem])
                got = {k: float(Fraction(row["exact"][k]))
                       for k in ("vs_minimum", "vs_strongest", "average")}
                equal = all(abs(got[k] - want[k]) < 1e-6 for k in got)
                exact_checks.append({"bot": row["bot"], "strategy": SHIPPED[stem],
                                     "ladder": row["exact"], "moo_eval": want,
                                     "equal": equal})
        await viewer.wire.close()
        result.update(standings=rows, reachable=reachable, exact=exact_checks,
                      exact_pending=[r["bot"] for r in rows if r["exact"] == "pending"])
    finally:
        for w in workers:
            await stop(w)
        await arena.close()
        tmp.cleanup()
    result["loadavg_after"] = os.getloadavg()[0]
    return result


def summary(r: dict[str, Any]) -> str:
    exact_ok = sum(1 for e in r["exact"] if e["equal"])
    return (f"summary: {r['games']} games by {len(r['standings'])} bots in {r['minutes']:g} min"
            f" on {r['nodes']} node{'s' if r['nodes'] > 1 else ''}"
            + (f" (node a SIGKILLed at {r['node_killed_at_s']} s)" if "node_killed_at_s" in r
               else "")
            + f" with {r['workers']} workers"
            + (f" (one killed at {r['worker_killed_at_s']} s)" if "worker_killed_at_s" in r
               else "")
            + f"; stuck games {len(r['stuck_games'])}; pages {'ok' if r['reachable'] else 'NOT ok'}"
            f"; exact scores equal to moo eval's {exact_ok}/{len(r['exact'])}"
            f" ({len(r['exact_pending'])} pending); load average {r['loadavg_before']:.1f} ->"
            f" {r['loadavg_after']:.1f} on {r['cpus']} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", metavar="FILE", help="more bots to submit")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slots", type=int, default=1, help="slots per worker")
    parser.add_argument("--kill-worker-at", type=float, default=None, metavar="S",
                        help="SIGKILL one worker S seconds in, then start it again")
    parser.add_argument("--only", default="", metavar="NAMES",
                        help="only these of examples/ladder/ (comma list, e.g. first,minimum)")
    parser.add_argument("--settle-s", type=float, default=120.0,
                        help="the most to wait for the games under way at the end")
    parser.add_argument("--cluster", action="store_true",
                        help="three nodes on PostgreSQL, workers on b and c, a killed")
    parser.add_argument("--kill-node-at", type=float, default=None, metavar="S",
                        help="--cluster: SIGKILL node a S seconds in (default: half way)")
    parser.add_argument("--logs", default="", metavar="DIR",
                        help="--cluster: keep the nodes' logs in DIR")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    if not 0 < args.minutes <= 24 * 60 or not 1 <= args.workers <= 16 \
            or not 1 <= args.slots <= 64:
        parser.error("bounded: 0-1440 minutes, 1-16 workers, 1-64 slots")
    for f in args.files:
        if not Path(f).is_file():
            parser.error(f"no such file: {f}")
    results = asyncio.run(amain(args))
    if args.json:
        print(json.dumps(results, indent=2))
    print(summary(results), file=sys.stderr)


if __name__ == "__main__":
    main()
