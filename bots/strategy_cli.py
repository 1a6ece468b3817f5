"""``moo strategy``: list the strategies and dump any of them as a decision-tree file.

``dump`` prints the strategy's own tree (no relabelling), one ``SECRET: GUESS1 ... GUESSn``
line per secret in ascending order, the format the table bots read; so a heuristic's dump can
be played back as ``file:PATH`` and a solver's output can be checked with ``moo eval``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

from bots.playout import Progress, play_all
from bots.registry import available, create, describe
from bots.tree import format_dump_line
from moo.errors import MooError
from moo.rules import DEFAULT_RULES

__all__ = ["configure", "main"]


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    lister = sub.add_parser("list", help="names and one-line summaries")
    lister.add_argument("--json", action="store_true", help="print a JSON list")
    dump = sub.add_parser("dump", help="print the decision tree: 'SECRET: GUESS1 ... GUESSn'")
    dump.add_argument("name", help="registered name, package.module:Class or file:PATH")
    dump.add_argument("--seed", type=int, default=0, help="seed of a random strategy's games")
    dump.add_argument("--json", action="store_true", help="a JSON list of {secret, guesses}")
    dump.add_argument(
        "-o", "--output", help="write to this file instead of stdout (gzip if it ends in .gz)"
    )


def _list(as_json: bool) -> int:
    rows = []
    for name in available():
        summary, problem = describe(name)
        rows.append({"name": name, "summary": summary, "available": not problem,
                     "problem": problem})
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows)  # type: ignore[arg-type]
    for row in rows:
        note = f"  [unavailable: {row['problem']}]" if row["problem"] else ""
        print(f"{row['name']:<{width}}  {row['summary']}{note}")
    return 0


def _dump(args: argparse.Namespace) -> int:
    try:
        strategy = create(args.name, relabel=False)
        progress = Progress(len(DEFAULT_RULES.secrets), f"dumping {args.name}")
        games = play_all(strategy, DEFAULT_RULES, seed=args.seed, progress=progress)
        progress.finish()
    except (MooError, RuntimeError) as exc:
        print(f"moo strategy dump: {exc}", file=sys.stderr)
        return 2
    if args.json:
        text = json.dumps([{"secret": s, "guesses": list(g)} for s, g in games]) + "\n"
    else:
        text = "".join(format_dump_line(s, g) + "\n" for s, g in games)
    if args.output:
        path = Path(args.output)
        if path.suffix == ".gz":
            with gzip.open(path, "wt", encoding="ascii") as fh:
                fh.write(text)
        else:
            path.write_text(text, encoding="ascii")
    else:
        sys.stdout.write(text)
    return 0


def main(args: argparse.Namespace) -> int:
    if args.action == "list":
        return _list(args.json)
    return _dump(args)
