"""``moo report``: a Markdown report with PNG plots of strategies' guess counts and win rates.

    moo report                                  every shipped bot
    moo report mybot.py:MyBot --out report/     ... plus your own strategy (or pkg.mod:Class,
    moo report cmd:./mybot                       or an external program)
    moo report --games games.jsonl --player ann  a player's estimated score against minimum,
                                                 from matches exported by ``moo export``

For each strategy the report shows its guess-count distribution over all secrets beside the
``minimum`` strategy's (Tanaka's average-optimal table), and the exact win/draw/loss matrix of
every strategy against every other, with ``minimum``'s row highlighted: "how often does my bot
beat the optimal-average player" is the question most people come with.

Why exact: the two players' secrets are independent and uniform, so a match's outcome depends
only on the two guess counts. With ``p_A``, ``p_B`` the distributions,
``P(win) = sum_k p_A(k) P_B(> k)``, ``P(draw) = sum_k p_A(k) p_B(k)``; for a deterministic
strategy the distribution (one game per secret) is exact, so so is the matrix. A randomised
strategy is sampled (one game per secret with a fixed seed per game) and the report says so.

Distributions come from the bots developer's :func:`bots.evaluate.evaluate` when it can load
the strategy, and otherwise from playing every secret here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from bots.base import Strategy
from bots.registry import available, close_strategy, create, display_names
from moo.errors import MooError
from moo.rules import DEFAULT_RULES, Rules

__all__ = ["Distribution", "configure", "distribution_of", "main", "wdl", "write_report"]

BASELINE = "minimum"
#: a game longer than this means a broken strategy: it is stopped and counted at the cap
GUESS_CAP = 64


@dataclass
class Distribution:
    name: str
    spec: str
    #: guesses needed -> number of games
    counts: dict[int, int]
    method: str

    @property
    def games(self) -> int:
        return sum(self.counts.values())

    @property
    def total(self) -> int:
        return sum(k * n for k, n in self.counts.items())

    @property
    def average(self) -> float:
        return self.total / self.games if self.games else float("nan")

    @property
    def worst(self) -> int:
        return max(self.counts) if self.counts else 0


def wdl(a: Mapping[int, int], b: Mapping[int, int]) -> tuple[Fraction, Fraction, Fraction]:
    """Exact (win, draw, loss) of A against B from guess-count histograms (A's view)."""
    na, nb = sum(a.values()), sum(b.values())
    if not na or not nb:
        raise ValueError("empty distribution")
    # cumulative counts of B below each k, in one pass over the sorted keys
    win = draw = loss = 0
    for k, ca in a.items():
        below = sum(cb for j, cb in b.items() if j < k)
        same = b.get(k, 0)
        above = nb - below - same
        win += ca * above
        draw += ca * same
        loss += ca * below
    total = na * nb
    return Fraction(win, total), Fraction(draw, total), Fraction(loss, total)


def _label(spec: str) -> str:
    return display_names([spec])[0]


def _play_every_secret(spec: str, rules: Rules, seed: int) -> Distribution:
    """Fallback evaluation: one game per secret, driven by the Strategy contract only."""
    strategy: Strategy = create(spec, relabel=False)  # the bare decision tree
    counts: Counter[int] = Counter()
    try:
        for secret in rules.secrets:
            strategy.new_match(rules, random.Random(f"report:{seed}:{secret}"))
            n = 0
            while n < GUESS_CAP:
                n += 1
                guess = rules.check_guess(strategy.next_guess())
                response = rules.score(secret, guess)
                if response == rules.solved:
                    break
                strategy.observe(guess, response)
            counts[n] += 1
    finally:
        close_strategy(strategy)
    deterministic = getattr(strategy, "deterministic", None)
    method = (
        "exact: every secret played once"
        if deterministic
        else f"every secret played once (seed {seed}); exact if the strategy is deterministic"
    )
    return Distribution(_label(spec), spec, dict(sorted(counts.items())), method)


def distribution_of(spec: str, rules: Rules = DEFAULT_RULES, seed: int = 0,
                    progress: bool = False) -> Distribution:
    """The guess-count distribution of ``spec``, from ``bots.evaluate`` when it applies."""
    if not spec.startswith("cmd:"):
        try:
            evaluate_module = importlib.import_module("bots.evaluate")
        except ImportError:
            evaluate_module = None
        evaluate = getattr(evaluate_module, "evaluate", None)
        if evaluate is not None:
            try:
                ev = evaluate(spec, rules, seed=seed, show_progress=progress)
                return Distribution(
                    _label(spec), spec, {int(k): int(v) for k, v in ev.distribution.items()},
                    str(ev.method),
                )
            except (MooError, TypeError, ImportError, AttributeError):
                pass  # not something it can load (or another API): play it here
    return _play_every_secret(spec, rules, seed)


# -- the report -----------------------------------------------------------------------------------


def _pct(x: Fraction) -> str:
    return f"{100 * float(x):.2f}"


def write_report(
    specs: Sequence[str],
    out_dir: str | Path,
    *,
    rules: Rules = DEFAULT_RULES,
    baseline: str | None = BASELINE,
    seed: int = 0,
    command: str = "moo report",
    progress: bool = False,
    optional: Sequence[str] = (),
) -> dict[str, Any]:
    """Evaluate ``specs``, write report.md, report.json and the PNGs; return the data."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    specs = list(dict.fromkeys(specs))
    if baseline is not None and baseline not in specs:
        specs.insert(0, baseline)
    dists: list[Distribution] = []
    skipped: dict[str, str] = {}
    for spec in specs:
        t0 = time.monotonic()
        try:
            dists.append(distribution_of(spec, rules, seed, progress))
        except MooError as exc:
            if spec not in optional and spec != baseline:
                raise
            skipped[spec] = str(exc)
            if progress:
                print(f"skipped {spec}: {exc}", file=sys.stderr)
            continue
        if progress:
            print(f"evaluated {spec} in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    if not dists:
        raise MooError("no strategy could be evaluated")
    base = next((d for d in dists if d.spec == baseline), None)
    dists.sort(key=lambda d: (d is not base, d.average))  # baseline first, then best average
    names = [d.name for d in dists]
    matrix = [[wdl(a.counts, b.counts) for b in dists] for a in dists]
    _race_adaptive(dists, matrix, rules, seed, progress)
    plots = _plots(dists, base, matrix, out)
    data = {
        "rules": rules.to_dict(),
        "baseline": baseline if base is not None else None,
        "skipped": skipped,
        "strategies": [
            {
                "name": d.name, "spec": d.spec, "games": d.games, "total": d.total,
                "average": round(d.average, 6), "worst": d.worst, "method": d.method,
                "distribution": {str(k): v for k, v in d.counts.items()},
            }
            for d in dists
        ],
        "matrix": {
            a: {
                b: {"win": str(w), "draw": str(dr), "loss": str(lo),
                    "score": float(w + dr / 2)}
                for b, (w, dr, lo) in zip(names, row)
            }
            for a, row in zip(names, matrix)
        },
    }
    (out / "report.json").write_text(json.dumps(data, indent=2) + "\n")
    (out / "report.md").write_text(
        _markdown(dists, base, matrix, plots, rules, command, skipped)
    )
    return data


def _is_adaptive(spec: str) -> bool:
    if spec.startswith(("cmd:", "dist:", "file:")) or ".py:" in spec:
        return False
    try:
        from bots.registry import create

        return bool(create(spec, relabel=False).adaptive)
    except (MooError, TypeError, ImportError, AttributeError):
        return False


def _race_adaptive(
    dists: list[Distribution],
    matrix: list[list[tuple[Fraction, Fraction, Fraction]]],
    rules: Rules,
    seed: int,
    progress: bool,
) -> None:
    """Replace the matrix cells of adaptive strategies by their exact races.

    Their guess counts depend on the opponent, so the distribution formula does not apply:
    each pair is enumerated (``bots.evaluate.race_wdl``; shipped results are cached, a new
    pair takes minutes). The distribution shown for them is their play alone.
    """
    from bots.evaluate import race_wdl

    adaptive = [i for i, d in enumerate(dists) if _is_adaptive(d.spec)]
    for i in adaptive:
        for j, other in enumerate(dists):
            if j in adaptive and j < i:
                continue
            t0 = time.monotonic()
            w, dr, lo, method = race_wdl(dists[i].spec, other.spec, rules, seed=seed)
            matrix[i][j] = (w, dr, lo)
            matrix[j][i] = (lo, dr, w)
            if progress:
                print(f"raced {dists[i].spec} vs {other.spec} in "
                      f"{time.monotonic() - t0:.1f} s ({method})", file=sys.stderr)


def _markdown(
    dists: list[Distribution],
    base: Distribution | None,
    matrix: list[list[tuple[Fraction, Fraction, Fraction]]],
    plots: dict[str, str],
    rules: Rules,
    command: str,
    skipped: Mapping[str, str],
) -> str:
    names = [d.name for d in dists]
    lines = [
        "# MOO strategy report",
        "",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
        f"Rules: {rules.length} {rules.symbols_text}, {len(rules.secrets)} secrets.",
        "",
        "Both players' secrets are independent and uniformly random, so a match's outcome "
        "depends only on the two guess counts and the win/draw/loss figures below are exact "
        "sums over the distributions (a draw counts half in the score, as in Tanaka 1996). "
        "An adaptive strategy's guesses depend on what it sees of the opponent: its cells "
        "come from the exact race enumeration instead (`moo eval NAME --vs OTHER`), and its "
        "distribution is its play with no opponent to watch.",
        "",
        "## Strategies",
        "",
        "| strategy | games | total | average | worst | how it was measured |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for d in sorted(dists, key=lambda d: d.average):
        lines.append(
            f"| `{d.name}` | {d.games} | {d.total} | {d.average:.4f} | {d.worst} | {d.method} |"
        )
    if skipped:
        lines += ["", "Not evaluated (shipped but unavailable here):", ""]
        lines += [f"* `{spec}`: {why}" for spec, why in skipped.items()]
    if base is not None:
        lines += [
            "",
            f"## Against `{base.name}`",
            "",
            f"Each strategy's chances in one match against `{base.name}` (its own view).",
            "",
            "| strategy | win % | draw % | loss % | score % |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        j = dists.index(base)
        for i, d in enumerate(dists):
            w, dr, lo = matrix[i][j]
            lines.append(
                f"| `{d.name}` | {_pct(w)} | {_pct(dr)} | {_pct(lo)} | {_pct(w + dr / 2)} |"
            )
    lines += [
        "",
        "## Win / draw / loss matrix",
        "",
        "Row strategy against column strategy, from the row's side: win % / draw % / loss %."
        + (f" The `{base.name}` row is in bold." if base is not None else ""),
        "",
        "| | " + " | ".join(f"`{n}`" for n in names) + " |",
        "| --- |" + " ---: |" * len(names),
    ]
    for d, row in zip(dists, matrix):
        cells = [f"{_pct(w)} / {_pct(dr)} / {_pct(lo)}" for w, dr, lo in row]
        if d is base:
            cells = [f"**{c}**" for c in cells]
            lines.append(f"| **`{d.name}`** | " + " | ".join(cells) + " |")
        else:
            lines.append(f"| `{d.name}` | " + " | ".join(cells) + " |")
    lines += ["", f"![score matrix]({plots['matrix']})", "", "## Guess-count distributions", ""]
    for d in dists:
        lines += [f"### `{d.name}`", "", _dist_table(d, base), "", f"![{d.name}]({plots[d.name]})",
                  ""]
    return "\n".join(lines)


def _dist_table(d: Distribution, base: Distribution | None) -> str:
    top = max([d.worst] + ([base.worst] if base else []))
    ks = range(1, top + 1)
    rows = ["| guesses | " + " | ".join(str(k) for k in ks) + " | average |",
            "| --- |" + " ---: |" * (len(ks) + 1)]
    rows.append(f"| `{d.name}` | " + " | ".join(str(d.counts.get(k, 0)) for k in ks)
                + f" | {d.average:.4f} |")
    if base is not None and base is not d:
        rows.append(f"| `{base.name}` | " + " | ".join(str(base.counts.get(k, 0)) for k in ks)
                    + f" | {base.average:.4f} |")
    return "\n".join(rows)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def _plots(
    dists: list[Distribution],
    base: Distribution | None,
    matrix: list[list[tuple[Fraction, Fraction, Fraction]]],
    out: Path,
) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    files: dict[str, str] = {}
    for d in dists:
        fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
        top = max([d.worst] + ([base.worst] if base else []))
        ks = list(range(1, top + 1))
        width = 0.4 if base is not None and base is not d else 0.8
        xs = [k - (width / 2 if width < 0.8 else 0) for k in ks]
        ax.bar(xs, [100 * d.counts.get(k, 0) / d.games for k in ks], width=width,
               label=f"{d.name} (avg {d.average:.4f})", color="#1f77b4")
        if base is not None and base is not d:
            ax.bar([k + width / 2 for k in ks],
                   [100 * base.counts.get(k, 0) / base.games for k in ks], width=width,
                   label=f"{base.name} (avg {base.average:.4f})", color="#ff7f0e")
        ax.set_xlabel("guesses needed")
        ax.set_ylabel("% of secrets")
        ax.set_xticks(ks)
        ax.set_title(f"Guess counts: {d.name}" + (f" vs {base.name}" if base and base is not d
                                                 else ""))
        ax.legend()
        fig.tight_layout()
        name = f"dist_{_safe(d.name)}.png"
        fig.savefig(out / name)
        plt.close(fig)
        files[d.name] = name
    n = len(dists)
    fig, ax = plt.subplots(figsize=(1.6 + 1.25 * n, 1.2 + 0.9 * n), dpi=100)
    scores = [[float(w + dr / 2) for w, dr, _ in row] for row in matrix]
    image = ax.imshow(scores, cmap="RdYlGn", vmin=0.3, vmax=0.7)
    ax.set_xticks(range(n), [d.name for d in dists], rotation=45, ha="right")
    ax.set_yticks(range(n), [d.name for d in dists])
    for i in range(n):
        for j in range(n):
            w, dr, lo = matrix[i][j]
            ax.text(j, i, f"{100 * float(w):.1f}\n{100 * float(dr):.1f}\n{100 * float(lo):.1f}",
                    ha="center", va="center", fontsize=7)
    if base is not None:
        i = dists.index(base)
        ax.add_patch(Rectangle((-0.5, i - 0.5), n, 1, fill=False, edgecolor="black",
                               linewidth=2.5))
    ax.set_title("score of row vs column (cells: win / draw / loss %)")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    fig.savefig(out / "matrix.png")
    plt.close(fig)
    files["matrix"] = "matrix.png"
    return files


# -- command line ---------------------------------------------------------------------------------


# -- observed players: moo report --games FILE.jsonl --player NAME ------------------------------


def observed_outcomes(
    path: str | Path, player: str, skipped: list[int] | None = None
) -> tuple[list[str], list[tuple[int, bool]]]:
    """The names matching ``player`` (a name, case-insensitive, or a shell pattern such as
    ``t1-strongest-*``) and their ``(guesses made, solved?)`` in every match of an export
    that can be set against the minimum strategy (classic 4-of-10 MOO without the assistant,
    ``moo.variants.against_minimum``); the player's other matches are counted in
    ``skipped[0]`` when a list is given."""
    import fnmatch

    from moo.variants import against_minimum

    pattern = player.casefold()
    names: dict[str, None] = {}
    outcomes: list[tuple[int, bool]] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            players = record["players"]
            counts = record["result"]["counts"]
            solved = record["result"]["solved"]
            pairs = [(str(players[s]), int(counts[s]), bool(solved[s])) for s in (0, 1)]
            comparable = against_minimum(record.get("config"))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            raise ValueError(
                f"{path}:{number}: not a 'moo export' record (docs/export.md)"
            ) from None
        for name, count, ok in pairs:
            if fnmatch.fnmatchcase(name.casefold(), pattern):
                names[name] = None
                if comparable:
                    outcomes.append((count, ok))
                elif skipped is not None:
                    skipped[0] += 1
    return list(names), outcomes


def player_report(path: str | Path, player: str) -> dict[str, Any]:
    """Everything ``moo report --games`` prints, as data."""
    from bots.estimator import estimate, tally
    from bots.tree import shipped_distribution

    skipped = [0]
    names, outcomes = observed_outcomes(path, player, skipped)
    if not outcomes:
        other = (f" ({skipped[0]} of other variants or assisted, which are not set against"
                 " minimum)") if skipped[0] else ""
        raise ValueError(f"no classic match of a player named {player!r} in {path}{other}")
    t = tally(outcomes)
    est = estimate(t, shipped_distribution(BASELINE))
    return {
        "player": player,
        "names": names,
        "matches": t.n,
        "other_matches": skipped[0],
        "solved": t.n_solved,
        "distribution": {str(k): n for k, n in sorted(t.solved.items())},
        "unsolved_after": {str(k): n for k, n in sorted(t.unsolved.items())},
        "estimated": (
            {str(k): round(p, 6) for k, p in sorted(est.distribution.items())} if est else None
        ),
        "unassigned": round(est.unassigned, 6) if est else None,
        "vs_minimum": est.to_dict() if est else None,
    }


def _print_player(data: dict[str, Any]) -> None:
    shown = data["names"][:4]
    names = ", ".join(shown) + (f", ... ({len(data['names'])} names)"
                                if len(data["names"]) > len(shown) else "")
    other = (f" ({data['other_matches']} matches of other variants or assisted left out)"
             if data.get("other_matches") else "")
    print(f"{data['player']} ({names}): {data['matches']} matches, {data['solved']} solved"
          + other)
    solved = ", ".join(f"{k}: {n}" for k, n in data["distribution"].items()) or "none"
    print(f"solved in k guesses: {solved}")
    vs = data["vs_minimum"]
    if vs is None:
        print("score against minimum: unknown (no solved match)")
        return
    est = ", ".join(f"{k}: {100 * p:.1f} %" for k, p in data["estimated"].items())
    print(f"estimated distribution (Kaplan-Meier): {est}"
          + (f", more than seen: {100 * data['unassigned']:.1f} %" if data["unassigned"] else ""))
    print(f"score against minimum: {vs['score']:.4f} "
          f"(95 % interval {vs['low']:.4f} to {vs['high']:.4f}, n = {vs['n']})")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("strategies", nargs="*", metavar="STRATEGY",
                        help="extra strategies: a registered name, pkg.mod:Class, "
                        "path/to/file.py:Class, or cmd:./program")
    parser.add_argument("--out", default="report", help="output directory (default report/)")
    parser.add_argument("--only", action="store_true",
                        help="only the named strategies (and minimum), not every shipped bot")
    parser.add_argument("--seed", type=int, default=0, help="seed for randomised strategies")
    parser.add_argument("--games", metavar="FILE.jsonl", default=None,
                        help="instead: estimate --player's score against minimum from the "
                        "matches in a 'moo export' file")
    parser.add_argument("--player", metavar="NAME", default=None,
                        help="with --games: the player (case-insensitive; a shell pattern "
                        "such as 't1-strongest-*' pools several names)")
    parser.add_argument("--json", action="store_true", help="with --games: print JSON")


def main(args: argparse.Namespace) -> int:
    if args.games is not None or args.player is not None:
        if args.games is None or args.player is None:
            print("moo report: --games and --player go together", file=sys.stderr)
            return 2
        if args.strategies:
            print("moo report: --games reports on a player, not on strategies", file=sys.stderr)
            return 2
        try:
            data = player_report(args.games, args.player)
        except (MooError, ValueError) as exc:
            print(f"moo report: {exc}", file=sys.stderr)
            return 1
        if args.json:
            print(json.dumps(data, indent=2))
        else:
            _print_player(data)
        return 0
    shipped = [] if args.only else available()
    baseline = BASELINE if BASELINE in available() else None  # skipped if its table is missing
    specs = [*shipped, *args.strategies]
    if not specs:
        print("moo report: no strategies to report on", file=sys.stderr)
        return 2
    for spec in args.strategies:  # a typo is told at once, not after every shipped bot's run
        if not spec.startswith(("dist:", "file:")):
            close_strategy(create(spec, relabel=False))
    command = "moo report " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "moo report"
    try:
        data = write_report(specs, args.out, baseline=baseline, seed=args.seed,
                            command=command.strip(), progress=True, optional=shipped)
    except (MooError, ValueError, RuntimeError, OSError) as exc:
        print(f"moo report: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {Path(args.out) / 'report.md'} ({len(data['strategies'])} strategies)")
    return 0
