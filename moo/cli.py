"""The ``moo`` console command: one entry point, one subcommand per capability.

Subcommands live beside the code they drive (``server/cli.py``, ``bots/solver/cli.py``, ...)
and are imported only when named, so ``moo play`` never pays for the solver's tables and
``moo --help`` stays instant. Each command module provides::

    def configure(parser: argparse.ArgumentParser) -> None: ...
    def main(args: argparse.Namespace) -> int: ...
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

#: subcommand -> (module implementing it, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("server.cli", "run the match server (WebSocket + HTTP on one port)"),
    "play": ("clients.terminal", "play MOO in the terminal: online or solo like the 1971 program"),
    "bot": ("clients.botrunner", "connect a strategy or an external program to a server"),
    "tournament": ("clients.tournament.cli", "run a bot-versus-bot tournament"),
    "eval": ("bots.evaluate", "exact guess counts and win rates of strategies"),
    "solve": ("bots.solver.cli", "compute optimal strategies by exhaustive search"),
    "strategy": ("bots.strategy_cli", "list strategies and dump their decision trees"),
    "report": ("bots.report", "write a Markdown + PNG report of strategies' win rates"),
    "watch": ("clients.watch", "print the live MQTT event stream of the arena"),
}


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
    parser = argparse.ArgumentParser(prog=f"moo {name}", description=text)
    module.configure(parser)
    args = parser.parse_args(rest)
    try:
        return int(module.main(args) or 0)
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
