"""The compliance check of a submitted program, before it may play anyone (as fastchess's
``--compliance`` checks a chess engine before a tournament).

A submission is one file: a ``#!`` script for an interpreter the sandbox has (``python3`` with
its standard library, ``sh``, and the rest of the system's ``/usr/bin``) or a Linux binary.
It is accepted when, in the sandbox and with the same limits as on the ladder, it answers the
protocol's hello (``moo 1`` -> ``ready``) and plays :data:`GAMES` complete legal games against
``random``, one seat then the other; the first failure refuses it, with that failure as the
reason. No server is involved: the games are refereed in-process (:mod:`.program`).
"""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass, field

from bots.variants import create_for
from moo.protocol import MAX_PROGRAM_BYTES
from moo.rules import DEFAULT_RULES
from moo.variants import GameRules

from .cpu_cap import CpuCap
from .program import MatchReport, hosted_bot, play_match
from .sandbox import Limits

__all__ = ["GAMES", "MAX_PROGRAM_BYTES", "Verdict", "check_file", "check_submission",
           "size_refusal"]

#: Games against ``random`` a submission must play without a failure.
GAMES = 3
#: Where an interpreter named by ``#!`` may live: the sandbox shows the system's ``/usr``
#: (``/bin`` is ``/usr/bin`` on a merged-/usr system).
SANDBOX_PATH = ("/usr/bin", "/bin")


@dataclass
class Verdict:
    """Accepted, or refused with one line that says why."""

    accepted: bool
    reason: str = ""
    #: the name it announced (``ready NAME``), if it got that far
    name: str | None = None
    games: list[MatchReport] = field(default_factory=list)


def size_refusal(size: int, *, max_bytes: int = MAX_PROGRAM_BYTES) -> str | None:
    """Why a file of ``size`` bytes is refused (None: it is not too big)."""
    if size > max_bytes:
        return f"the file has {size} bytes; the limit is {max_bytes}"
    return None


def check_file(program: bytes, *, max_bytes: int = MAX_PROGRAM_BYTES) -> str | None:
    """Why ``program`` cannot be run in the sandbox at all (None: it can be tried)."""
    if not program:
        return "the file is empty"
    too_big = size_refusal(len(program), max_bytes=max_bytes)
    if too_big is not None:
        return too_big
    if program.startswith(b"\x7fELF"):
        return None
    if not program.startswith(b"#!"):
        return "the file is neither a script starting with #! nor a Linux binary (ELF)"
    first = program.split(b"\n", 1)[0][2:].decode("utf-8", "replace").split()
    if not first:
        return "the #! line names no interpreter"
    interpreter = first[0]
    if interpreter in ("/usr/bin/env", "/bin/env"):
        args = [a for a in first[1:] if not a.startswith("-")]
        if not args:
            return "the #! line runs env without a program"
        found = shutil.which(args[0], path=os.pathsep.join(SANDBOX_PATH))
        if found is None:
            return f"the sandbox has no interpreter {args[0]!r} (#! line)"
        return None
    if not interpreter.startswith(tuple(p + "/" for p in SANDBOX_PATH)) or not (
            os.path.isfile(interpreter) and os.access(interpreter, os.X_OK)):
        return f"the sandbox has no interpreter {interpreter!r} (#! line)"
    return None


async def check_submission(program: bytes, *, rules: GameRules = DEFAULT_RULES,
                           limits: Limits | None = None, games: int = GAMES,
                           max_bytes: int = MAX_PROGRAM_BYTES,
                           rng: random.Random | None = None,
                           cap: CpuCap | None = None) -> Verdict:
    """Run the compliance check of ``program`` (the file's bytes) in ``rules``, the game of the
    ladder it is submitted to (a bot that plays only classic MOO must not pass for MOO of 5),
    in the worker's CPU cap ``cap`` if any; never raises for anything the program does."""
    why = check_file(program, max_bytes=max_bytes)
    if why is not None:
        return Verdict(False, why)
    rng = rng or random.Random()
    bot = hosted_bot(program, limits, cap)
    reports: list[MatchReport] = []
    for i in range(games):
        report = await play_match(bot, create_for("random", rules), rng, rules=rules,
                                  bot_seat=i % 2)
        reports.append(report)
        if report.failure is not None:
            return Verdict(False, f"game {i + 1} of {games} against random: {report.failure}",
                           None if bot.starts == 0 else bot.name, reports)
    return Verdict(True, "", bot.name, reports)
