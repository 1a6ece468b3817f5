"""``moo potm``: referee programs as in the May 1999 POTM and print the standings.

Examples::

    moo potm examples/potm/letterwise.sh ./mine --length 5 --dictionary
    moo potm a.sh b.pl --length 7 --words words.txt --seed 3 --json

See docs/potm.md for the rules, the confinement and the output. A person's mistake is one
line and exit status 2; a machine that cannot confine the entries (no bubblewrap, no user
namespaces) is one line and exit status 1, and nothing runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from bots.dictionary import load_words
from moo.words import MAX_LENGTH, MIN_LENGTH

from .referee import WALL_FACTOR, Limits, SandboxError, run_tournament
from .rounds import FAIL_SCORE, PER_ROUND, Tournament, WordResult, entry_names


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("entries", nargs="+", metavar="ENTRY", type=Path,
                        help="executable programs (each is copied and run once per guess, "
                             "in a bubblewrap sandbox: docs/potm.md)")
    parser.add_argument("--length", type=int, required=True,
                        help=f"word length N ({MIN_LENGTH}-{MAX_LENGTH})")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--words", type=Path, metavar="FILE",
                     help="the target words: a file of words, one per line (filtered to A-Z)")
    src.add_argument("--dictionary", action="store_true",
                     help="the target words: Debian's wamerican list (built on first use)")
    parser.add_argument("--target", action="append", default=[], metavar="WORD",
                        help="play this word first (repeatable; then random words)")
    parser.add_argument("--playoffs", type=int, default=5,
                        help="at most this many playoffs between entries tied first (default 5)")
    parser.add_argument("--seed", type=int, help="seed the choice of words (repeatable runs)")
    parser.add_argument("--cpu", type=float, default=10.0,
                        help="user+sys CPU seconds of all its processes for one guess; more "
                             "scores 999 (default 10, the POTM's)")
    parser.add_argument("--wall", type=float, default=None,
                        help="wall-clock safety guard for one guess in seconds (default "
                             f"{WALL_FACTOR} x --cpu): stops only a guess that waits idle")
    parser.add_argument("--memory", type=int, default=512,
                        help="address-space limit per run in MB (default 512)")
    parser.add_argument("--processes", type=int, default=32,
                        help="process limit per run (default 32)")
    parser.add_argument("--unconfined", action="store_true",
                        help="run the entries WITHOUT the sandbox (only programs you trust; "
                             "the standings say so)")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
    parser.add_argument("--quiet", action="store_true", help="no per-word lines on stderr")


def _fail(text: str, status: int = 2) -> int:
    print(f"moo potm: {text}", file=sys.stderr)
    return status


def main(args: argparse.Namespace) -> int:
    n = args.length
    if not MIN_LENGTH <= n <= MAX_LENGTH:
        return _fail(f"--length must be {MIN_LENGTH}-{MAX_LENGTH}, got {n}")
    for p in args.entries:
        if p.is_dir():
            return _fail(f"entry {p} is a directory, not a program")
        if not p.exists():
            return _fail(f"no such entry: {p}")
        if not p.is_file():
            return _fail(f"entry {p} is not a regular file (a program is run from a file)")
        if not os.access(p, os.X_OK):
            return _fail(f"entry is not executable: {p} (chmod +x, with a #! line for scripts)")
    if args.playoffs < 0:
        return _fail("--playoffs must be at least 0")
    if args.cpu <= 0 or (args.wall is not None and args.wall <= 0) or args.memory < 16 \
            or args.processes < 1:
        return _fail("limits must be positive (--memory at least 16 MB)")
    try:
        words = load_words(n, source=args.words) if args.words else load_words(n)
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(str(exc) if isinstance(exc, FileNotFoundError) and not args.words
                     else f"cannot read the word list: {exc}")
    targets = [t.strip().upper() for t in args.target]
    for t in targets:
        if len(t) != n or not all("A" <= c <= "Z" for c in t):
            return _fail(f"--target {t!r} is not {n} letters A-Z")
    dup = next((t for k, t in enumerate(targets) if t in targets[:k]), None)
    if dup is not None:
        return _fail(f"--target {dup} is given twice (a round plays {PER_ROUND} different words)")
    distinct = len(set(words) | set(targets))
    if distinct < PER_ROUND:
        return _fail(f"only {distinct} different {n}-letter words in the list and the --target "
                     f"words: the final and each playoff play {PER_ROUND} different words")
    limits = Limits(cpu=args.cpu, wall=args.wall, memory_mb=args.memory,
                    processes=args.processes)

    def progress(res: WordResult) -> None:
        if not args.quiet:
            print(f"{res.entry:<24} {res.word:<9} {res.score:>4}  {res.reason}",
                  file=sys.stderr, flush=True)

    # a referee stopped with SIGTERM still removes its directory (the `with` in run_tournament)
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    try:
        result = run_tournament(entry_names(args.entries), words, n,
                                max_playoffs=args.playoffs, targets=targets, seed=args.seed,
                                limits=limits, confined=not args.unconfined, progress=progress)
    except SandboxError as exc:
        return _fail(f"cannot confine the entries: {exc} (--unconfined runs entries you trust "
                     "without a sandbox)", 1)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print("\n".join(standings_text(result)))
    return 0


def standings_text(t: Tournament) -> list[str]:
    """The standings table: one column per round, the final first."""
    width = max(len(name) for name in t.rounds[0].results)
    lines = [f"POTM MOO, {t.length} letters ({FAIL_SCORE} = failed word)"]
    cpu, wall = t.limits.get("cpu", 0.0), t.limits.get("wall", 0.0)
    if t.confined:
        lines.append(f"each guess in a sandbox; {cpu:g} s CPU per guess "
                     f"(wall-clock safety guard {wall:g} s)")
    else:
        lines.append(f"UNCONFINED: entries ran without a sandbox (--unconfined); {cpu:g} s CPU "
                     f"per guess (wall-clock safety guard {wall:g} s)")
    for r in t.rounds:
        lines.append(f"{r.name}: {' '.join(r.words)}")
    head = f"{'rank':>4}  {'entry':<{width}}  " + "  ".join(f"{r.name:>9}" for r in t.rounds)
    lines.append(head)
    for rank, name, totals in t.standings():
        cells = "  ".join(f"{v:>9}" for v in totals)
        lines.append(f"{rank:>4}  {name:<{width}}  {cells}")
    lines.append(f"winner: {t.winner}" if t.winner else f"winner: none ({_why_none(t)})")
    return lines


def _why_none(t: Tournament) -> str:
    """Why no entry won, in true words: a tie is only "after the last playoff" when a playoff
    was played (``--playoffs 0`` plays none; issue 32)."""
    last = t.rounds[-1]
    totals = last.totals()
    tied = sum(1 for v in totals.values() if v == min(totals.values()))
    playoffs = len(t.rounds) - 1
    if not playoffs:
        return f"{tied} entries tied after the final; --playoffs 0 plays no playoff"
    return (f"{tied} entries still tied after {playoffs} playoff{'s' if playoffs > 1 else ''}, "
            "the most --playoffs allows")
