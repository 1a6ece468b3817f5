"""``moo eval``: exact guess counts of a strategy and its win rate against another.

For a fixed (deterministic) strategy, one game per secret is its whole decision tree, so the
distribution over uniformly random secrets is exact. A random strategy is sampled: every secret
is played ``--samples`` times with per-game seeds derived from ``--seed``, and the output says
so. Two players' secrets are independent and uniform, so with p_A, p_B the guess-count
distributions the outcome probabilities are exact sums (computed in fractions)::

    P(win)  = Σ_k p_A(k) · P_B(> k)
    P(draw) = Σ_k p_A(k) · p_B(k)
    P(loss) = Σ_k p_A(k) · P_B(< k)

and the score is P(win) + P(draw)/2 (Tanaka 1996 §6 counts a draw as half a win).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from bots.playout import Progress, play_all
from bots.registry import create
from bots.tree import read_dump
from moo.errors import MooError, UnknownStrategy, UsageError
from moo.rules import DEFAULT_RULES, Rules

__all__ = ["Evaluation", "configure", "evaluate", "main", "match_probabilities"]


@dataclass
class Evaluation:
    name: str
    #: guesses needed -> number of games
    distribution: dict[int, int]
    method: str
    #: the secrets that needed the most guesses (deterministic strategies only)
    worst_secrets: list[str] = field(default_factory=list)

    @property
    def games(self) -> int:
        return sum(self.distribution.values())

    @property
    def total(self) -> int:
        return sum(k * n for k, n in self.distribution.items())

    @property
    def average(self) -> float:
        return self.total / self.games

    @property
    def worst(self) -> int:
        return max(self.distribution)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "method": self.method,
            "games": self.games,
            "total": self.total,
            "average": round(self.average, 6),
            "worst": self.worst,
            "worst_secrets": self.worst_secrets,
            "distribution": {str(k): n for k, n in sorted(self.distribution.items())},
        }


def match_probabilities(
    a: Mapping[int, int], b: Mapping[int, int]
) -> tuple[Fraction, Fraction, Fraction]:
    """Exact (win, draw, loss) of A against B from their guess-count histograms."""
    na, nb = sum(a.values()), sum(b.values())
    win = draw = loss = Fraction(0)
    for k, ca in a.items():
        fewer = sum(cb for j, cb in b.items() if j < k)
        more = sum(cb for j, cb in b.items() if j > k)
        win += Fraction(ca * more, na * nb)
        draw += Fraction(ca * b.get(k, 0), na * nb)
        loss += Fraction(ca * fewer, na * nb)
    return win, draw, loss


#: Published distributions (Tanaka 1996, Table 7), usable as ``dist:tanaka-minimum``.
PUBLISHED: dict[str, tuple[int, ...]] = {
    "tanaka-minimum": (1, 7, 63, 697, 2424, 1774, 74),
    "tanaka-strongest": (1, 4, 47, 688, 2531, 1628, 141),
}


def from_distribution(spec: str) -> Evaluation:
    """An opponent known only by its guess-count distribution (``dist:1,7,63,...``).

    Win rates depend on nothing else, so a published distribution can be compared with
    exactly, without its tree.
    """
    body = spec[len("dist:") :]
    counts = PUBLISHED.get(body)
    if counts is None:
        try:
            counts = tuple(int(x) for x in body.split(","))
        except ValueError:
            raise UnknownStrategy(
                f"{spec!r}: expected dist:N1,N2,... (games solved in 1, 2, ... guesses) "
                f"or one of {', '.join('dist:' + k for k in PUBLISHED)}"
            ) from None
    if any(c < 0 for c in counts) or sum(counts) == 0:
        raise UnknownStrategy(f"{spec!r}: counts must be >= 0 and not all zero")
    dist = {k: c for k, c in enumerate(counts, start=1) if c}
    return Evaluation(spec, dist, "given as a guess-count distribution")


def evaluate(
    spec: str,
    rules: Rules = DEFAULT_RULES,
    *,
    seed: int = 0,
    samples: int = 1,
    show_progress: bool = True,
) -> Evaluation:
    """Guess-count distribution of a strategy name, ``module:Class``, ``file:PATH`` dump or
    ``dist:`` distribution."""
    if spec.startswith("dist:"):
        return from_distribution(spec)
    if spec.startswith("file:"):
        path = spec[len("file:") :]
        games = read_dump(path, rules)
        return _from_games(spec, games, f"read from the dump file {path} (one game per secret)")
    strategy = create(spec, relabel=False)
    # Alone (no opponent progress to see) an adaptive strategy is a fixed one.
    fixed = strategy.deterministic or strategy.adaptive
    runs = 1 if fixed else max(1, samples)
    n = len(rules.secrets)
    progress = Progress(runs * n, f"evaluating {spec}") if show_progress else None
    all_games = []
    for sample in range(runs):
        if progress is not None:
            progress.offset = sample * n
        all_games.extend(play_all(strategy, rules, seed=seed, sample=sample, progress=progress))
    if progress is not None:
        progress.finish()
    if strategy.adaptive:
        method = "exact: adaptive strategy playing alone (no opponent to see), every secret once"
    elif strategy.deterministic:
        method = "exact: fixed strategy, every secret played once"
    else:
        method = (
            f"sampled: every secret played {runs} time(s) with per-game seeds from seed {seed}"
        )
    return _from_games(spec, all_games, method, exact=fixed)


def _from_games(
    name: str, games: list[tuple[str, tuple[str, ...]]], method: str, *, exact: bool = True
) -> Evaluation:
    dist = Counter(len(guesses) for _, guesses in games)
    worst = max(dist)
    worst_secrets = (
        sorted({s for s, g in games if len(g) == worst}) if exact else []
    )
    return Evaluation(name, dict(sorted(dist.items())), method, worst_secrets)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name",
        help="strategy: a registered name (see 'moo strategy list'), package.module:Class, "
        "or file:PATH of a 'moo strategy dump' file",
    )
    parser.add_argument(
        "--vs",
        default="minimum",
        help="opponent strategy, same forms as NAME, or 'none', or a guess-count distribution "
        "dist:N1,N2,... / dist:tanaka-minimum / dist:tanaka-strongest (default: minimum)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seed", type=int, default=0, help="seed of random strategies' games")
    parser.add_argument(
        "--samples",
        type=int,
        default=1,
        help="games per secret for random strategies (fixed ones are always exact)",
    )


def _table(ev: Evaluation) -> str:
    ks = sorted(ev.distribution)
    head = "  guesses " + " ".join(f"{k:>6}" for k in ks)
    row = "  games   " + " ".join(f"{ev.distribution[k]:>6}" for k in ks)
    return f"{head}\n{row}"


def _is_adaptive(spec: str) -> bool:
    if spec == "none" or spec.startswith(("file:", "dist:")):
        return False
    return create(spec, relabel=False).adaptive


def race_result(
    name: str, vs: str, rules: Rules = DEFAULT_RULES, *, seed: int = 0,
    show_guesses: bool = True, show_progress: bool = True,
) -> dict[str, object]:
    """``moo eval`` figures when a side adapts: the race enumerated over all pairs of secrets.

    Same keys as the fixed case; ``distribution`` and ``vs_distribution`` then count pairs of
    secrets by the number of guesses each side made in the race (the match stops at the first
    round in which someone solves, so both sides make the same number in lockstep), ``games``
    is the number of pairs (5040²), and ``worst_secrets`` is empty.
    """
    from bots.race import agent_for, race

    sides = []
    exact = True
    for spec in (name, vs):
        if spec.startswith("dist:"):
            raise UnknownStrategy(
                f"{spec!r}: an adaptive player needs its opponent's moves, not a distribution"
            )
        strategy = create(spec, relabel=False)
        tree_bar = (Progress(len(rules.secrets), f"evaluating {spec}")
                    if show_progress and strategy.deterministic and not strategy.adaptive
                    else None)
        agent, side_exact = agent_for(strategy, rules, show_guesses=show_guesses, seed=seed,
                                      progress=tree_bar)
        if tree_bar is not None:
            tree_bar.finish()
        exact = exact and side_exact
        sides.append(agent)
    n = len(rules.secrets)
    # minutes against strongest: a bar on stderr (a terminal only, after 2 s) over the pairs
    bar = Progress(n * n, f"racing {name} vs {vs}") if show_progress else None
    result = race(sides[0], sides[1], rules, progress=bar)
    if bar is not None:
        bar.finish()
    win, draw, loss = result.fractions()
    method = (
        "exact: race enumerated over all pairs of secrets"
        if exact
        else f"race enumerated over all pairs of secrets; random choices sampled (seed {seed})"
    )
    ev = Evaluation(name, dict(sorted(result.rounds.items())), method)
    out = ev.to_dict()
    out["worst_secrets"] = []
    out.update(
        {
            "vs": vs,
            "vs_method": method,
            "vs_total": ev.total,
            "vs_average": round(ev.average, 6),
            "vs_distribution": out["distribution"],
            "win": float(win),
            "draw": float(draw),
            "loss": float(loss),
            "score": float(win + draw / 2),
            "score_exact": str(win + draw / 2),
            "win_exact": str(win),
            "draw_exact": str(draw),
            "loss_exact": str(loss),
            "states": result.states,
            "seconds": round(result.seconds, 1),
        }
    )
    return out


#: Exact races computed ahead of time (``python -m bench.adaptive_races``), keyed by
#: "NAME|VS"; valid only for the decision tables they were computed with (fingerprint).
RACES_FILE = Path(__file__).resolve().parent / "data" / "races.json"


def races_fingerprint() -> str:
    """SHA-256 over the adaptive bot's tables and trees: a cached race is stale otherwise."""
    from bots.tree import DATA_DIR

    digest = hashlib.sha256()
    for name in ("adaptive-strongest", "adaptive-minimum", "strongest", "minimum"):
        path = DATA_DIR / f"{name}.txt.gz"
        digest.update(name.encode())
        digest.update(path.read_bytes() if path.exists() else b"-")
    return digest.hexdigest()


def cached_races() -> dict[str, dict[str, object]]:
    """The shipped race results, or {} when missing or computed for other tables."""
    try:
        data = json.loads(RACES_FILE.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("fingerprint") != races_fingerprint():
        return {}
    races = data.get("races")
    return races if isinstance(races, dict) else {}


def race_wdl(
    name: str, vs: str, rules: Rules = DEFAULT_RULES, *, seed: int = 0
) -> tuple[Fraction, Fraction, Fraction, str]:
    """Exact (win, draw, loss, method) of an adaptive race, from the cache when it has it."""
    if rules == DEFAULT_RULES:
        for key, flip in ((f"{name}|{vs}", False), (f"{vs}|{name}", True)):
            hit = cached_races().get(key)
            if hit is not None:
                w, d, lo = (Fraction(str(hit[k])) for k in ("win", "draw", "loss"))
                method = f"{hit['method']} (cached in bots/data/races.json)"
                return (lo, d, w, method) if flip else (w, d, lo, method)
    result = race_result(name, vs, rules, seed=seed)
    return (
        Fraction(str(result["win_exact"])), Fraction(str(result["draw_exact"])),
        Fraction(str(result["loss_exact"])), str(result["method"]),
    )


def main(args: argparse.Namespace) -> int:
    if args.samples < 1:
        raise UsageError(f"--samples must be at least 1, got {args.samples}")
    try:
        for spec in (args.vs, args.name):
            if spec != "none" and not spec.startswith(("file:", "dist:")):
                create(spec, relabel=False)  # fail fast (e.g. a missing tree) before playing
        if args.vs != "none" and (_is_adaptive(args.name) or _is_adaptive(args.vs)):
            result = race_result(args.name, args.vs, seed=args.seed)
            if args.json:
                print(json.dumps(result, indent=2))
                return 0
            print(f"{args.name} vs {args.vs}: race over {result['games']} pairs of secrets, "
                  f"average length {result['average']:.4f} rounds ({result['method']})")
            print(
                f"  win {result['win']:.7f}  draw {result['draw']:.7f}  "
                f"loss {result['loss']:.7f}  score {result['score']:.7f} "
                f"(= {result['score_exact']})"
            )
            return 0
        a = evaluate(args.name, seed=args.seed, samples=args.samples)
        b = None if args.vs == "none" else evaluate(args.vs, seed=args.seed, samples=args.samples)
    except (MooError, RuntimeError) as exc:
        hint = ""
        if args.vs == "minimum" and "minimum" in str(exc):
            hint = " (compare with another strategy: --vs entropy, or --vs none)"
        print(f"moo eval: {exc}{hint}", file=sys.stderr)
        return 2
    result = a.to_dict()
    if b is not None:
        win, draw, loss = match_probabilities(a.distribution, b.distribution)
        result.update(
            {
                "vs": b.name,
                "vs_method": b.method,
                "vs_total": b.total,
                "vs_average": round(b.average, 6),
                "vs_distribution": {str(k): n for k, n in sorted(b.distribution.items())},
                "win": float(win),
                "draw": float(draw),
                "loss": float(loss),
                "score": float(win + draw / 2),
            }
        )
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{a.name}: total {a.total} over {a.games} games, average {a.average:.4f}, "
          f"worst {a.worst}")
    print(f"  ({a.method})")
    print(_table(a))
    if a.worst_secrets:
        shown = " ".join(a.worst_secrets[:10])
        more = f" ... ({len(a.worst_secrets)} in all)" if len(a.worst_secrets) > 10 else ""
        print(f"  needing {a.worst}: {shown}{more}")
    if b is not None:
        print(f"vs {b.name}: total {b.total}, average {b.average:.4f} ({b.method})")
        print(
            f"  win {result['win']:.7f}  draw {result['draw']:.7f}  "
            f"loss {result['loss']:.7f}  score {result['score']:.7f}"
        )
    return 0
