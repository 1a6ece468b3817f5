"""``moo ladder check FILE``: the hosted bots' compliance check, run where the author is.

The ladder itself (submitting, standings) is not built yet (docs/ladder.md); this command
lets a bot's author see, before any server is involved, whether a program would be accepted
and, if not, the exact reason the ladder would give. Exit status 0: accepted; 1: refused, or
this machine cannot confine programs; 2: a mistake on the command line (one line).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from moo.errors import UsageError

from .compliance import GAMES, Verdict, check_submission, size_refusal
from .sandbox import SandboxError

ACTIONS = ("check",)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", metavar="ACTION",
                        help="check: run the compliance check of a program (docs/ladder.md)")


def main(args: argparse.Namespace) -> int:
    if args.action is None:
        raise UsageError("name an action: 'moo ladder check FILE' (docs/ladder.md)")
    raise UsageError(f"unknown action {args.action!r}: the ladder has only 'check' so far "
                     "(docs/ladder.md)")


def configure_check(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE",
                        help="the program: a #! script (python3, sh, ...) or a Linux binary")
    parser.add_argument("--games", type=int, default=GAMES,
                        help=f"games against random it must play without a failure "
                             f"(default {GAMES}, 1-100)")
    parser.add_argument("--json", action="store_true",
                        help="print the verdict and each game (with the end of the program's "
                             "standard error) as JSON")


def main_check(args: argparse.Namespace) -> int:
    if not 1 <= args.games <= 100:
        raise UsageError(f"--games must be 1-100, got {args.games}")
    path: Path = args.file
    if not path.is_file():
        raise UsageError(f"no such file: {path}")
    too_big = size_refusal(path.stat().st_size)
    if too_big is not None:  # refused without reading it into memory
        return _print(args, Verdict(False, too_big))
    try:
        verdict = asyncio.run(check_submission(path.read_bytes(), games=args.games))
    except SandboxError as exc:
        print(f"moo ladder check: cannot confine the program: {exc}", file=sys.stderr)
        return 1
    return _print(args, verdict)


def _print(args: argparse.Namespace, verdict: Verdict) -> int:
    if args.json:
        print(json.dumps({
            "accepted": verdict.accepted, "reason": verdict.reason, "name": verdict.name,
            "games": [{"outcome": g.outcome, "reason": g.reason, "guesses": g.guesses,
                       "failure": g.failure, "stderr": g.stderr} for g in verdict.games],
        }))
    elif verdict.accepted:
        outcomes = ", ".join(g.outcome for g in verdict.games)
        print(f"accepted: {verdict.name} ({len(verdict.games)} games against random: "
              f"{outcomes})")
    else:
        print(f"refused: {verdict.reason}")
    return 0 if verdict.accepted else 1
