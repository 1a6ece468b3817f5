"""``moo tournament``: bot-versus-bot tournaments, in-process or through a real server.

Examples::

    moo tournament minimum strongest random --local --rounds 100
    moo tournament minimum strongest random --url ws://127.0.0.1:8765/ --rounds 20 --out r.jsonl
    moo tournament mybot.py:Mine minimum --local --sprt 0,20,0.05,0.05 --rounds 5000
    moo tournament minimum strongest --local --rounds 500 --out r.jsonl --resume   # after a crash

--rounds N draws N pairs of secrets; every pair of bots plays each pair both ways, so a
round robin of B bots plays B(B-1)/2 * N * 2 matches. See docs/tournaments.md.

Tournaments hosted by a server (players join with moo bot NAME --tournament ID)::

    moo tournament create --url URL --name NAME --format round-robin|swiss|arena --rounds R ...
    moo tournament show ID --url URL [--json]

(moo tournament create --help, moo tournament show --help: their options.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

from bots import dictionary
from clients.sdk.cli_args import add_url_option, urls_of
from clients.tournament.results import (
    MatchRecord,
    ResultsFile,
    pair_standings,
    player_standings,
)
from clients.tournament.runner import (
    FORMATS,
    SECRET_MODES,
    Engine,
    Job,
    LocalEngine,
    Progress,
    TournamentResult,
    display_names,
    make_plan,
    run_tournament,
)
from moo.errors import UsageError
from moo.match import MatchConfig
from moo.rules import DEFAULT_RULES
from moo.stats import SprtSpec
from moo.variants import CLASSIC_SPEC, rules_arg, rules_spec

__all__ = ["configure", "format_standings", "main", "standings_json"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__.split("Examples::", 1)[1] if __doc__ else None
    parser.add_argument(
        "bots",
        nargs="+",
        metavar="BOT",
        help="a registered strategy name, pkg.module:Class, or cmd:./program",
    )
    where = parser.add_mutually_exclusive_group()
    add_url_option(where, "play every match on this server (ws://HOST:PORT/)")
    where.add_argument(
        "--local", action="store_true", help="play in-process (the default without --url)"
    )
    parser.add_argument("--format", choices=FORMATS, default="roundrobin",
                        help="roundrobin: every pair; gauntlet: the first bot against each other")
    parser.add_argument("--rounds", type=int, default=10,
                        help="secret pairs per pair of bots, each played both ways (default 10)")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="matches at once (default: 1 local = in this process, 32 --url); "
                        "local > 1 uses worker processes")
    parser.add_argument("--out", help="one JSON line per match (the file is replaced unless "
                        "--resume)")
    parser.add_argument("--resume", action="store_true",
                        help="skip matches already in --out (after a crash or Ctrl-C)")
    parser.add_argument("--secrets", choices=SECRET_MODES, default="uniform",
                        help="uniform: the tournament draws secret pairs (default); "
                        "bots: each bot picks its own")
    parser.add_argument("--sprt", metavar="ELO0,ELO1,ALPHA,BETA",
                        help="stop when the SPRT decides (two bots only), e.g. 0,20,0.05,0.05")
    parser.add_argument("--seed", type=int, help="seed of the secret draw and the bots' RNG")
    parser.add_argument("--pacing", choices=("lockstep", "free"), default="lockstep",
                        help="match pacing (default lockstep, the server's default)")
    parser.add_argument("--rules", type=rules_arg, default=None, metavar="SPEC",
                        help="the game: GAME[:LENGTH[:ALPHABET[:repeats]]] (docs/variants.md); "
                        "default classic 4 of 10. Mastermind: minimum, strongest, random; "
                        "other MOO variants: random, minimum, strongest (the exact tree where "
                        "it can be solved, else entropy), the heuristics and cmd: programs; "
                        "word MOO (words[:LENGTH[:SCORING]]): words")
    parser.add_argument("--json", action="store_true", help="print standings as JSON")
    parser.add_argument("--name-prefix", default=None,
                        help="--url: prefix of the players' names (default: a random tag)")
    parser.add_argument("--client-rate", type=float, default=18.0,
                        help="--url: messages per second per connection, kept under the "
                        "server's rate limit (default 18)")
    parser.add_argument("--wire", choices=("msgpack", "json"), default="msgpack",
                        help="--url: WebSocket encoding (default msgpack: cheaper for client "
                        "and server alike)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def main(args: argparse.Namespace) -> int:
    """Usage mistakes raise :class:`UsageError` (status 2); a failure while playing is a
    :class:`~moo.errors.MooError` or ``OSError`` (status 1): ``moo`` prints either as one line."""
    dictionary.install()  # word MOO: the secrets of words:N are checked against the real list
    return asyncio.run(_main(args))


def _check(args: argparse.Namespace) -> SprtSpec | None:
    """Every option's value, before anything is played or written."""
    if args.rounds < 1:
        raise UsageError(f"--rounds must be at least 1, got {args.rounds}")
    if args.concurrency is not None and args.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {args.concurrency}")
    if not args.client_rate > 0:
        raise UsageError(f"--client-rate must be above 0, got {args.client_rate:g}")
    if len(args.bots) < 2:
        raise UsageError("a tournament needs at least two bots")
    try:
        spec = SprtSpec.parse(args.sprt) if args.sprt else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if spec is not None and (len(args.bots) != 2):
        raise UsageError("--sprt compares exactly two bots")
    if args.out:
        folder = Path(args.out).parent
        if not folder.is_dir():
            # a typo must not grow a directory tree: name the folder and create nothing
            raise UsageError(f"--out {args.out}: directory {folder} does not exist")
        if Path(args.out).is_dir():
            raise UsageError(f"--out {args.out} is a directory; give a file name")
    if args.resume and not args.out:
        raise UsageError("--resume needs --out FILE")
    return spec


async def _main(args: argparse.Namespace) -> int:
    spec = _check(args)
    out = ResultsFile(args.out)
    seed = args.seed
    if args.resume:
        seeds = {r.seed for r in out.load()}
        if len(seeds) > 1:
            raise UsageError(f"{args.out} mixes tournaments of seeds {sorted(seeds)}")
        if seeds:
            (found,) = seeds
            if seed is not None and seed != found:
                raise UsageError(f"{args.out} was played with --seed {found}, not {seed}")
            seed = found
    if seed is None:
        seed = random.SystemRandom().randrange(1, 2**31)
    config = MatchConfig(rules=args.rules or DEFAULT_RULES, pacing=args.pacing, secret_ms=None)
    jobs = make_plan(
        args.bots, fmt=args.format, rounds=args.rounds, seed=seed, secrets=args.secrets,
        rules=config.rules,
    )
    concurrency = args.concurrency or (32 if args.url else 1)
    progress = Progress(len(jobs), enabled=False if args.no_progress else None)
    retries = _Retries(progress)
    engine: Engine
    if args.url:
        from clients.tournament.remote import RemoteEngine

        engine = RemoteEngine(
            urls_of(args), pacing=args.pacing, prefix=args.name_prefix, rate=args.client_rate,
            msgpack=args.wire == "msgpack", rules=args.rules, on_retry=retries,
        )
        mode = f"through {', '.join(urls_of(args))}"
    else:
        engine = LocalEngine(config, concurrency)
        mode = "local" + (f", {concurrency} processes" if concurrency > 1 else "")
    forfeits: dict[str, int] = {}

    def forfeited(record: MatchRecord) -> None:
        """The first forfeit of each bot is said at once; the count comes at the end."""
        for why in (record.forfeit or "").split("; "):
            bot = why.split(": ", 1)[0]
            if bot not in forfeits:
                progress.interrupt(f"moo tournament: {why} (it forfeits the match {record.key}; "
                                   "its later forfeits are counted below)")
            forfeits[bot] = forfeits.get(bot, 0) + 1

    result = await run_tournament(
        jobs, engine, out=out, resume=args.resume, concurrency=concurrency, sprt_spec=spec,
        progress=progress, on_forfeit=forfeited,
    )
    retries.summary()
    for bot, count in forfeits.items():
        print(f"moo tournament: {bot} forfeited {count} match{'es' if count > 1 else ''}",
              file=sys.stderr)
    names = display_names(args.bots)
    info = {
        "bots": list(args.bots),
        "format": args.format,
        "rounds": args.rounds,
        "seed": seed,
        "mode": mode,
        "pacing": args.pacing,
        "secrets": args.secrets,
        "rules": rules_spec(config.rules),
    }
    if args.json:
        print(json.dumps(standings_json(result, names, info, spec), indent=2))
    else:
        print(format_standings(result, names, info))
    return 0


class _Retries:
    """Failed match attempts that are retried (``--url``): the first is said at once, the
    rest only counted, and the count is one line at the end.

    Why not a line each: with a server down, every match of the plan fails up to ten times at
    once, and a line per attempt buried the one line that mattered (issue 32). A tournament
    that then fails altogether ends on its own error line instead of the count.
    """

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.attempts = 0
        self.matches: set[str] = set()
        self.last = ""

    def __call__(self, job: Job, attempt: int, exc: BaseException) -> None:
        from clients.tournament.remote import ATTEMPTS, failure_reason

        self.last = failure_reason(exc)
        if not self.attempts:
            self.progress.interrupt(
                f"moo tournament: match {job.key} failed ({self.last}); retrying it, and any "
                f"other that fails, up to {ATTEMPTS} times (the count comes at the end)")
        self.attempts += 1
        self.matches.add(job.key)

    def summary(self) -> None:
        if self.attempts:
            n = len(self.matches)
            print(f"moo tournament: {self.attempts} failed attempt"
                  f"{'s' if self.attempts > 1 else ''} of {n} match{'es' if n > 1 else ''} "
                  f"retried, all played in the end (last failure: {self.last})",
                  file=sys.stderr)


def _num(x: float, digits: int = 1) -> float | str:
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return round(x, digits)


def standings_json(
    result: TournamentResult, names: list[str], info: dict[str, Any],
    spec: SprtSpec | None = None,
) -> dict[str, Any]:
    records = result.records
    players = []
    for st in player_standings(records, names):
        iv = st.interval
        players.append({
            "name": st.name, "games": st.games, "wins": st.wins, "draws": st.draws,
            "losses": st.losses, "score": round(st.score, 4), "elo": _num(iv.elo),
            "elo_low": _num(iv.elo_low), "elo_high": _num(iv.elo_high),
            "los": round(st.los, 4),
            "avg_guesses": None if st.avg_guesses is None else round(st.avg_guesses, 4),
        })
    pairs = []
    for (a, b), ps in sorted(pair_standings(records).items()):
        iv = ps.interval
        pairs.append({
            "a": names[a], "b": names[b], "games": ps.games, "wins": ps.wins,
            "draws": ps.draws, "losses": ps.losses, "score": round(ps.score, 4),
            "elo": _num(iv.elo), "elo_low": _num(iv.elo_low), "elo_high": _num(iv.elo_high),
            "los": round(ps.los, 4), "pentanomial": ps.penta,
        })
    out: dict[str, Any] = {
        **info,
        "matches": len(records),
        "played": result.played,
        "resumed": result.skipped,
        "elapsed_s": round(result.elapsed_s, 3),
        "matches_per_s": round(result.played / result.elapsed_s, 1) if result.elapsed_s else None,
        "players": players,
        "pairs": pairs,
    }
    if result.sprt is not None and spec is not None:
        out["sprt"] = {
            "elo0": spec.elo0, "elo1": spec.elo1, "alpha": spec.alpha, "beta": spec.beta,
            "llr": round(result.sprt.llr, 4), "lower": round(result.sprt.lower, 4),
            "upper": round(result.sprt.upper, 4), "decision": result.sprt.decision,
            "model": "GSPRT over pentanomial pair scores (constrained maximum likelihood)",
        }
    return out


def _elo_text(elo: float, low: float, high: float) -> str:
    def f(x: float) -> str:
        return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{round(x) + 0:+d}"

    return f"{f(elo)} [{f(low)}, {f(high)}]"


def format_standings(
    result: TournamentResult, names: list[str], info: dict[str, Any]
) -> str:
    records: list[MatchRecord] = result.records
    rate = result.played / result.elapsed_s if result.elapsed_s > 0 else 0.0
    lines = [
        f"{len(names)} bots, {info['format']}, {info['rounds']} secret pairs per pair of bots, "
        f"{info['pacing']}, seed {info['seed']}, {info['mode']}"
        + (f", rules {info['rules']}" if info.get("rules", CLASSIC_SPEC) != CLASSIC_SPEC else ""),
        f"{len(records)} matches ({result.played} played, {result.skipped} from the file) "
        f"in {result.elapsed_s:.1f} s ({rate:.1f} matches/s)",
        "",
        f"{'#':>2} {'bot':<16} {'games':>6} {'W':>5} {'D':>5} {'L':>5} {'score':>7} "
        f"{'Elo [95% CI]':>20} {'LOS':>6} {'avg solved':>11}",
    ]
    for rank, st in enumerate(player_standings(records, names), start=1):
        iv = st.interval
        avg = "-" if st.avg_guesses is None else f"{st.avg_guesses:.3f}"
        lines.append(
            f"{rank:>2} {st.name:<16} {st.games:>6} {st.wins:>5} {st.draws:>5} {st.losses:>5} "
            f"{100 * st.score:>6.1f}% {_elo_text(iv.elo, iv.elo_low, iv.elo_high):>20} "
            f"{100 * st.los:>5.1f}% {avg:>11}"
        )
    lines += ["", "pairs (first bot's view; interval over game pairs, pentanomial 0..2 points):"]
    for (a, b), ps in sorted(pair_standings(records).items()):
        iv = ps.interval
        lines.append(
            f"  {names[a]} vs {names[b]}: +{ps.wins} ={ps.draws} -{ps.losses}  "
            f"score {100 * ps.score:.1f}%  Elo {_elo_text(iv.elo, iv.elo_low, iv.elo_high)}  "
            f"LOS {100 * ps.los:.1f}%  penta {ps.penta}"
        )
    if result.sprt is not None:
        s = result.sprt
        verdict = {"H0": "H0 accepted", "H1": "H1 accepted", None: "no decision yet"}[s.decision]
        lines.append(
            f"\nSPRT (GSPRT, pentanomial): LLR {s.llr:+.3f} in [{s.lower:.3f}, {s.upper:.3f}]: "
            f"{verdict}"
        )
    return "\n".join(lines)
