"""The ``moo`` console command: one entry point, one subcommand per capability.

Subcommands live beside the code they drive (``server/cli.py``, ``bots/solver/cli.py``, ...)
and are imported only when named, so ``moo play`` never pays for the solver's tables and
``moo --help`` stays instant. Each command module provides::

    def configure(parser: argparse.ArgumentParser) -> None: ...
    def main(args: argparse.Namespace) -> int: ...

A person's mistake (a bad flag value, a URL of the wrong kind, a file that is not there) is
answered with one line ``moo COMMAND: what is wrong`` and exit status 2, never a traceback:
argparse errors are shortened to that line, and a command reports its own checks by raising
:class:`UsageError` (or any :class:`~moo.errors.MooError`), which :func:`main` prints.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn
from urllib.parse import urlsplit

from moo.errors import BadRules, MooError
from moo.variants import GameRules, parse_rules_spec

__all__ = ["COMMANDS", "UsageError", "main", "ws_url"]

#: subcommand -> (module implementing it, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("server.cli", "run the match server (WebSocket + HTTP on one port)"),
    "db": ("server.db_cli", "upgrade the server's database schema (SQLite or PostgreSQL)"),
    "play": ("clients.terminal", "play MOO in the terminal: online or solo like the 1971 program"),
    "bot": ("clients.botrunner", "connect a strategy or an external program to a server"),
    "tournament": ("clients.tournament.cli", "run a bot-versus-bot tournament"),
    "eval": ("bots.evaluate", "exact guess counts and win rates of strategies"),
    "solve": ("bots.solver.cli", "compute optimal strategies by exhaustive search"),
    "strategy": ("bots.strategy_cli", "list strategies and dump their decision trees"),
    "report": ("bots.report", "write a Markdown + PNG report of strategies' win rates"),
    "watch": ("clients.watch", "print the live MQTT event stream of the arena"),
    "analyse": ("clients.analyse",
                "analyse a finished match's guesses (a record file or a MATCH_ID)"),
    "potm": ("clients.potm.cli", "referee word-guessing programs as in the May 1999 POTM"),
    "export": ("server.export", "write every finished match as one JSON line (docs/export.md)"),
}


class UsageError(Exception):
    """A person's mistake on the command line: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``moo bot: argument --games: ... (see moo bot --help)``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def rules_arg(text: str) -> GameRules:
    """argparse type of every ``--rules``: the compact spec (docs/variants.md), one line on a
    mistake (``moo play: error: argument --rules: length must be 3-6, got 9``)."""
    try:
        return parse_rules_spec(text)
    except BadRules as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def ws_url(text: str) -> str:
    """argparse type of every ``--url``: a ``ws://`` or ``wss://`` URL with a host.

    The usual slips (``localhost:8765``, the page's ``http://`` address) get the URL that was
    probably meant, instead of a traceback from deep inside the WebSocket library.
    """
    parts = urlsplit(text)
    if parts.scheme in ("ws", "wss") and parts.hostname:
        try:
            parts.port  # noqa: B018 -- raises on a port that is not a number in range
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad port in {text!r}") from None
        return text
    if parts.scheme in ("http", "https") and parts.hostname:
        hint = f"ws{'s' if parts.scheme == 'https' else ''}://{parts.netloc}{parts.path or '/'}"
    elif "://" not in text and text.strip():
        hint = f"ws://{text.strip().rstrip('/')}/"
    else:
        hint = "ws://127.0.0.1:8765/"
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a WebSocket URL; a server's address is ws://HOST:PORT/ "
        f"(did you mean {hint}?)"
    )


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="moo",
        description="MOO Arena: Bulls and Cows matches, bots, solver and tournaments.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n"
        + "\n".join(f"  {name:<11} {text}" for name, (_, text) in COMMANDS.items())
        + "\n\nRun 'moo COMMAND --help' for a command's options.",
    )
    parser.add_argument("command", nargs="?", choices=sorted(COMMANDS), metavar="COMMAND")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        top = _top_parser()
        ns = top.parse_args(argv[:1] if argv and argv[0] in ("--version",) else argv or ["-h"])
        if ns.version:
            from moo import __version__

            print(f"moo {__version__}")
            return 0
        top.print_help()
        return 2
    name, rest = argv[0], argv[1:]
    module_name, text = COMMANDS[name]
    module = importlib.import_module(module_name)
    parser = _Parser(prog=f"moo {name}", description=text)
    module.configure(parser)
    args = parser.parse_args(rest)
    try:
        return int(module.main(args) or 0)
    except (UsageError, MooError) as exc:
        print(f"moo {name}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `moo strategy dump minimum | head`: the reader left, which is not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    raise SystemExit(main())
