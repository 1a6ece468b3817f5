"""The ``moo`` console command: one entry point, one subcommand per capability.

Why here and not in ``moo/``: the command starts the applications (the server, the clients, the
solver), so it sits above all of them; the pure core imports nothing of theirs. Subcommands live
beside the code they drive (``server/cli.py``, ``bots/solver/cli.py``, ...) and are imported only
when named, so ``moo play`` never pays for the solver's tables and ``moo --help`` stays instant.
Each command module provides::

    def configure(parser: argparse.ArgumentParser) -> None: ...
    def main(args: argparse.Namespace) -> int: ...

A person's mistake is answered with one line ``moo COMMAND: what is wrong``, never a traceback:

* exit status 2 for a usage mistake: argparse's own errors (shortened to that line), a
  :class:`~moo.errors.UsageError` a command raises after its own checks, a strategy spec that
  does not load (:class:`~moo.errors.UnknownStrategy`) or a rules spec that is not one;
* exit status 1 for a failure at run time: any other :class:`~moo.errors.MooError` (a server
  that refused, a bot program that crashed), an ``OSError`` (a file that cannot be written, a
  server that does not answer), or anything unexpected. ``MOO_TRACEBACK=1`` in the environment
  shows the traceback of the unexpected ones, for whoever debugs the program itself.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from moo.errors import BadRules, InvalidCode, MooError, UnknownStrategy, UsageError

__all__ = ["COMMANDS", "main"]

#: subcommand -> (module implementing it, one-line help). ``moo --help`` lists them all.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("server.cli", "run the match server (WebSocket + HTTP on one port)"),
    "db": ("server.db_cli", "upgrade the server's database schema (SQLite or PostgreSQL)"),
    "play": ("clients.terminal", "play MOO in the terminal: online or solo like the 1971 program"),
    "bot": ("clients.botrunner", "connect a strategy or an external program to a server"),
    "tournament": ("clients.tournament.cli",
                   "run a bot-versus-bot tournament, locally or through a server"),
    "eval": ("bots.evaluate", "exact guess counts and win rates of strategies"),
    "solve": ("bots.solver.cli", "compute optimal strategies by exhaustive search"),
    "strategy": ("bots.strategy_cli", "list strategies and dump their decision trees"),
    "report": ("bots.report", "write a Markdown + PNG report of strategies' win rates"),
    "watch": ("clients.watch", "print the live MQTT event stream of the arena"),
    "analyse": ("clients.analyse",
                "analyse a finished match's guesses (a record file or a MATCH_ID)"),
    "potm": ("clients.potm.cli", "referee word-guessing programs as in the May 1999 POTM"),
    "words": ("bots.words_cli",
              "print word MOO's answer list (--answers) or its accepted guesses"),
    "export": ("server.export", "write every finished match as one JSON line (docs/export.md)"),
    "ladder": ("clients.hosted.cli",
               "hosted bots and the ladder: check, submit, standings (docs/ladder.md)"),
    "worker": ("clients.hosted.worker",
               "run hosted bots for an arena: a bot worker (docs/ladder.md)"),
}

#: sub-actions of a command, told apart from its own arguments by the first word after it
#: (``moo tournament create ...``; anything else is the command itself, e.g. the bots of the
#: local tournament runner): (command, word) -> (module, the sub-action's name in the module,
#: one-line help). The module provides ``configure_<name>`` and ``main_<name>``.
SUBCOMMANDS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("tournament", "create"): ("clients.tournament.hosted", "create",
                               "create a tournament hosted by a server (prints its id last)"),
    ("tournament", "show"): ("clients.tournament.hosted", "show",
                             "print a hosted tournament's standings"),
    ("ladder", "check"): ("clients.hosted.cli", "check",
                          "run the compliance check of a program in the sandbox: accepted "
                          "or refused with the reason"),
    ("ladder", "submit"): ("clients.hosted.cli", "submit",
                           "submit a program to a server's ladder (a new bot, or --replace "
                           "ID); waits for the check, prints the bot's id last"),
    ("ladder", "mine"): ("clients.hosted.cli", "mine", "list your hosted bots"),
    ("ladder", "pause"): ("clients.hosted.cli", "pause", "stop pairing one of your bots"),
    ("ladder", "resume"): ("clients.hosted.cli", "resume", "pair a paused bot again"),
    ("ladder", "withdraw"): ("clients.hosted.cli", "withdraw",
                             "take one of your bots off the ladder for good"),
    ("ladder", "show"): ("clients.hosted.cli", "show", "print a ladder's standings"),
    ("ladder", "log"): ("clients.hosted.cli", "log",
                        "print one of your bots' versions and error log"),
}

#: errors that mean "what you typed is not something the command can do": exit status 2
USAGE_ERRORS: tuple[type[Exception], ...] = (UsageError, UnknownStrategy, BadRules, InvalidCode)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``moo bot: argument --games: ... (see moo bot --help)``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def _top_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="moo",
        description="MOO Arena: Bulls and Cows matches, bots, solver and tournaments.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="moo [--version] COMMAND [options]",
        epilog="commands:\n"
        + "\n".join(f"  {name:<11} {text}" for name, (_, text) in COMMANDS.items())
        + "\n\nRun 'moo COMMAND --help' for a command's options.",
    )
    parser.add_argument("command", nargs="?", choices=sorted(COMMANDS), metavar="COMMAND",
                        help="one of the commands below")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    return parser


def _one_line(text: str) -> str:
    """A message as one line: an exception's text may span several (a program's stderr)."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        top = _top_parser()
        if not argv or argv[0] in ("-h", "--help"):
            top.print_help()
            return 0 if argv else 2
        ns = top.parse_args(argv[:1])  # an unknown command: one line, status 2
        if ns.version:
            from moo import __version__

            print(f"moo {__version__}")
            return 0
        top.print_help()
        return 2
    name, rest = argv[0], argv[1:]
    module_name, text = COMMANDS[name]
    configure_name, main_name = "configure", "main"
    sub = SUBCOMMANDS.get((name, rest[0])) if rest else None
    if sub is not None:
        module_name, action, text = sub
        configure_name, main_name = f"configure_{action}", f"main_{action}"
        name, rest = f"{name} {rest[0]}", rest[1:]
    module = importlib.import_module(module_name)
    if "asyncio" in sys.modules:
        # asyncio's warnings about the children it reaps (a bot program that exited at once)
        # are not a person's business; its errors still show. Only for the commands that run
        # asyncio (their modules import it): importing logging costs ``moo analyse FILE``,
        # which has no event loop, a noticeable part of its startup (issue 19).
        import logging

        logging.getLogger("asyncio").setLevel(logging.ERROR)
    parser = _Parser(prog=f"moo {name}", description=text)
    getattr(module, configure_name)(parser)
    args = parser.parse_args(rest)
    try:
        return int(getattr(module, main_name)(args) or 0)
    except USAGE_ERRORS as exc:
        print(f"moo {name}: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `moo strategy dump minimum | head`: the reader left, which is not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (MooError, OSError) as exc:
        print(f"moo {name}: {_describe(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if os.environ.get("MOO_TRACEBACK"):
            import traceback

            traceback.print_exc()
        print(f"moo {name}: unexpected error: {_describe(exc)} "
              "(MOO_TRACEBACK=1 shows where)", file=sys.stderr)
        return 1


def _describe(exc: BaseException) -> str:
    """One line for a run-time failure: the message, or the exception's kind when it has none."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return _one_line(f"{exc.strerror}{where}")
    text = _one_line(str(exc))
    return text or type(exc).__name__


if __name__ == "__main__":
    raise SystemExit(main())
