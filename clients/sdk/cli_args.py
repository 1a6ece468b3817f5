"""The ``--url`` option shared by ``moo bot``, ``moo play``, ``moo tournament`` and ``moo analyse``.

Why one helper: the three commands must accept several servers the same way (the nodes of a
cluster, tried in order when one is down), and a mistyped address must get the same one-line
error from each. ``--url`` may be repeated and each value may hold several comma-separated
URLs; the order is kept: ``--url ws://a/ --url ws://b/,ws://c/`` means a, then b, then c.
"""

from __future__ import annotations

import argparse
import getpass
import re

from clients.sdk.client import url_list
from moo.urls import ws_url

__all__ = ["add_url_option", "default_player_name", "urls_of", "ws_url", "ws_url_list"]


def ws_url_list(text: str) -> list[str]:
    """argparse type: one or more comma-separated ``ws://``/``wss://`` URLs, each checked."""
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        raise argparse.ArgumentTypeError("--url needs at least one ws:// or wss:// URL")
    if not all(parts):
        raise argparse.ArgumentTypeError(f"empty URL in the list {text!r}")
    return [ws_url(part) for part in parts]


def add_url_option(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup,
                   help: str) -> None:
    """Add ``--url`` (repeatable, comma-separated lists allowed) to ``parser``."""
    parser.add_argument(
        "--url", action="append", type=ws_url_list, default=None, metavar="URL[,URL...]",
        help=help + "; several servers (cluster nodes): repeat --url or separate URLs by "
                    "commas; they are tried in order, the next one when one fails",
    )


def urls_of(args: argparse.Namespace, default: str | None = None) -> list[str]:
    """The flat, ordered list of ``--url`` values (``[default]`` when none was given).

    ``args.url`` may also be a plain string (one URL or a comma-separated list), as programs
    that build the namespace themselves pass it.
    """
    groups: str | list[str] | list[list[str]] | None = args.url
    if not groups:
        return [] if default is None else [default]
    if isinstance(groups, str):
        return url_list(groups)
    return [url for group in groups for url in ([group] if isinstance(group, str) else group)]


def default_player_name() -> str:
    """The player name a command uses when none is given: the login name, cut to what a name
    may hold (docs/protocol.md: 1-24 letters, digits, ``_``, ``-``, ``.``), else ``player``."""
    try:
        user = getpass.getuser()
    except Exception:
        user = "player"
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "", user)[:24]
    return cleaned or "player"
