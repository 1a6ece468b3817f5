"""``moo tournament create`` and ``moo tournament show``: tournaments hosted by a server.

The local runner (``moo tournament A B C ...``, clients/tournament/cli.py) connects every bot
itself; these two sub-actions only ask a server to run one (docs/protocol.md, "Tournaments")
and read its standings, through the SDK. Players join from wherever they are
(``moo bot NAME --tournament ID``). Both print one line and exit 1 on a run-time failure (the
server unreachable or refusing), exit 2 on a usage mistake (argparse, or the checks below).

Examples::

    moo tournament create --url ws://127.0.0.1:8765/ --name friday --format round-robin \\
        --rounds 1 --pool bots --start-in 30          # the id alone on the last line
    moo tournament show t5e0c41a9b7d2 --url ws://127.0.0.1:8765/ --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
from typing import Any

from clients.sdk import DEFAULT_URL, Client, ConnectionLost, ServerError, TournamentInfo
from clients.sdk.cli_args import add_url_option, urls_of
from clients.sdk.tokens import TokenStore
from moo.errors import MooError, UsageError
from moo.protocol import POOLS, TOURNAMENT_FORMATS, TOURNAMENT_SECRETS
from moo.variants import rules_arg

__all__ = ["configure_create", "configure_show", "format_table", "main_create", "main_show"]


def configure_create(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "The tournament's id is printed alone on the last line. See " \
                    "docs/tournaments.md, \"Tournaments hosted by the server\"."
    add_url_option(parser, "the server that hosts the tournament (ws://HOST:PORT/)")
    parser.add_argument("--name", required=True, help="the tournament's name (1-64 characters)")
    parser.add_argument("--format", required=True, choices=TOURNAMENT_FORMATS)
    parser.add_argument("--rounds", type=int, required=True, metavar="R",
                        help="round-robin: meetings of every two players (each two games, "
                             "seats swapped); swiss: rounds; ignored by an arena")
    parser.add_argument("--duration", type=int, default=None, metavar="S",
                        help="arena: its length in seconds (required there, 10-86400)")
    parser.add_argument("--rules", type=rules_arg, default=None, metavar="SPEC",
                        help="the variant, e.g. moo:5 or mastermind (default: the server's)")
    parser.add_argument("--pool", choices=POOLS, default="any",
                        help="who may join: any (default), humans, bots")
    parser.add_argument("--start-in", type=int, default=60, metavar="S",
                        help="seconds until the start (default 60)")
    parser.add_argument("--secrets", choices=TOURNAMENT_SECRETS, default=None,
                        help="server: the server draws each pairing's two secrets and plays "
                             "them both ways (default in the bots pool); players: each sets "
                             "their own")
    parser.add_argument("--pacing", choices=("lockstep", "free"), default=None)
    parser.add_argument("--unrated", action="store_true", help="games do not change ratings")
    parser.add_argument("--as", dest="creator", default=None, metavar="NAME",
                        help="the name to connect with (default tournament-creator-XXXX)")


def configure_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tournament_id", metavar="ID", help="the tournament's id")
    add_url_option(parser, "the server that hosts the tournament (ws://HOST:PORT/)")
    parser.add_argument("--json", action="store_true",
                        help="print the tournament object as one JSON line (with 'id')")


def main_create(args: argparse.Namespace) -> int:
    if not args.url:
        raise UsageError("--url is required: the server that hosts the tournament")
    if args.format == "arena" and args.duration is None:
        raise UsageError("an arena needs --duration S (seconds)")
    if args.format != "arena" and args.duration is not None:
        raise UsageError(f"--duration is for an arena, not a {args.format}")
    if not 1 <= args.rounds <= 50:
        raise UsageError("--rounds must be 1-50")
    if args.duration is not None and not 10 <= args.duration <= 86400:
        raise UsageError("--duration must be 10-86400 seconds")
    if not 0 <= args.start_in <= 86400:
        raise UsageError("--start-in must be 0-86400 seconds")
    if not args.name.strip() or len(args.name) > 64:
        raise UsageError("--name must be 1-64 characters")
    info = asyncio.run(_create(args))
    when = "now" if args.start_in == 0 else f"in {args.start_in} s"
    print(f"tournament {info.name!r} ({info.format}, {info.data.get('pool')} pool, secrets "
          f"{info.data.get('secrets')}) starts {when}; join with: moo bot NAME --url "
          f"{urls_of(args)[0]} --tournament {info.tournament_id}")
    print(info.tournament_id, flush=True)
    return 0


async def _create(args: argparse.Namespace) -> TournamentInfo:
    name = args.creator or f"tournament-creator-{secrets.token_hex(2)}"
    urls = urls_of(args)
    tokens = TokenStore()  # --as NAME: the name's token from an earlier run (moo play/bot)
    client = Client(urls, name, token=tokens.get(urls[0], name) if args.creator else None,
                    bot=args.creator is None, client_name="moo-tournament")
    try:
        await _connect(client)
        if args.creator and client.token:
            tokens.put(urls[0], client.name, client.token)
        return await client.create_tournament(
            args.name, args.format, rounds=args.rounds if args.format != "arena" else None,
            duration_s=args.duration, rules=args.rules, pool=args.pool,
            start_in_s=args.start_in, secrets=args.secrets,
            rated=False if args.unrated else None, pacing=args.pacing,
        )
    except ServerError as exc:
        raise MooError(f"the server refused: {exc}") from None
    except (ConnectionLost, TimeoutError) as exc:
        raise MooError(f"lost the server: {exc or type(exc).__name__}") from None
    finally:
        await client.close()


def main_show(args: argparse.Namespace) -> int:
    info = asyncio.run(_show(args))
    data = info.data
    if args.json:
        print(json.dumps({"id": info.tournament_id, **data}), flush=True)
        return 0
    print(f"{data.get('name')} ({info.tournament_id}): {data.get('format')}, {info.status}, "
          f"round {info.round}, {len(info.players)} players, "
          f"{info.game_count} games")
    print(format_table(info.standings, str(data.get("tiebreak", "tiebreak"))))
    return 0


async def _show(args: argparse.Namespace) -> TournamentInfo:
    client = Client(urls_of(args, DEFAULT_URL), f"tournament-viewer-{secrets.token_hex(3)}",
                    bot=True, client_name="moo-tournament")
    try:
        await _connect(client)
        return await client.watch_tournament(args.tournament_id)
    except ServerError as exc:
        raise MooError(str(exc)) from None
    except (ConnectionLost, TimeoutError) as exc:
        raise MooError(f"lost the server: {exc or type(exc).__name__}") from None
    finally:
        await client.close()


async def _connect(client: Client) -> None:
    try:
        await client.connect()
    except (ServerError, OSError, TimeoutError) as exc:
        raise MooError(f"cannot connect to {', '.join(client.urls)}: "
                       f"{exc or type(exc).__name__}") from None


def format_table(rows: list[dict[str, Any]], tiebreak: str) -> str:
    """The standings as a fixed-width table (``moo tournament show``)."""
    head = f"{'#':>3} {'player':<24} {'games':>5} {'W':>4} {'D':>4} {'L':>4} {'score':>6} " \
           f"{'Elo':>6} {'95 % interval':>15} {tiebreak:>17}"
    lines = [head]
    for r in rows:
        elo = "" if r.get("elo") is None else f"{r['elo']:+d}"
        low = "-inf" if r.get("elo_low") is None else f"{r['elo_low']:+d}"
        high = "+inf" if r.get("elo_high") is None else f"{r['elo_high']:+d}"
        interval = f"[{low}, {high}]" if r.get("games") else ""
        lines.append(
            f"{r['rank']:>3} {r['name']:<24} {r['games']:>5} {r['wins']:>4} {r['draws']:>4} "
            f"{r['losses']:>4} {r['score']:>6g} {elo:>6} {interval:>15} {r['tiebreak']:>17g}")
    return "\n".join(lines)
