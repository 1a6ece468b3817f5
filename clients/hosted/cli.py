"""``moo ladder ...``: hosted bots and the ladder from the command line (docs/ladder.md).

``check FILE`` runs the compliance check where the author is, before any server is involved,
and gives the exact reason the ladder would. The others talk to a server (docs/protocol.md,
"Ladder") as the player whose token the command holds, exactly as ``moo play``: the token
saved for ``--as NAME`` (default: your user name) on that server, or, with none saved, a new
player of that name whose token is saved. ``submit`` uploads the program in chunks, waits for
the check and prints the bot's id on its last line. Exit status 0: done (accepted); 1: refused
or the server said no; 2: a mistake on the command line (one line).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from clients.sdk import DEFAULT_URL, Client, ConnectionLost, ServerError
from clients.sdk.cli_args import add_url_option, default_player_name, urls_of
from clients.sdk.client import new_request_id
from clients.sdk.tokens import TokenStore
from moo.errors import MooError, UsageError
from moo.variants import rules_arg, rules_from_dict, rules_spec

from .compliance import GAMES, MAX_PROGRAM_BYTES, Verdict, check_submission, size_refusal
from .sandbox import SandboxError

ACTIONS = ("check", "submit", "mine", "pause", "resume", "withdraw", "show", "log")
#: raw bytes per upload chunk: 3072 base64 characters (docs/protocol.md, "Ladder")
CHUNK = 2304
#: uploads and submits of one program when the connection drops in between (the upload is
#: the connection's: sent again with the same request_id after a reconnect, the submit needs
#: it uploaded again)
SUBMIT_TRIES = 3
#: seconds ``submit`` waits for the check's verdict
VERDICT_WAIT_S = 600.0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", metavar="ACTION",
                        help="check, submit, mine, pause, resume, withdraw, show or log "
                             "('moo ladder ACTION --help'; docs/ladder.md)")


def main(args: argparse.Namespace) -> int:
    actions = ", ".join(ACTIONS)
    if args.action is None:
        raise UsageError(f"name an action: {actions} (docs/ladder.md)")
    raise UsageError(f"unknown action {args.action!r}: the actions are {actions} "
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


# -- talking to a server ------------------------------------------------------------------------


def _server_options(parser: argparse.ArgumentParser) -> None:
    add_url_option(parser, "the arena (ws://HOST:PORT/; default " + DEFAULT_URL + ")")
    parser.add_argument("--as", dest="player", default=None, metavar="NAME",
                        help="the player you are (its token saved by moo play or an earlier "
                             "moo ladder; default: your user name)")


def configure_submit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE",
                        help="the program: a #! script (python3, sh, ...) or a Linux binary")
    parser.add_argument("--name", default=None,
                        help="the new bot's name (a player name, 1-24 letters, digits, _ - .)")
    parser.add_argument("--rules", type=rules_arg, default=None, metavar="SPEC",
                        help="the ladder (variant family) it plays, e.g. moo:4:0123456789 "
                             "(default: the server's default rules)")
    parser.add_argument("--replace", default=None, metavar="ID",
                        help="submit a new version of your bot ID instead of a new bot")
    _server_options(parser)


def configure_mine(parser: argparse.ArgumentParser) -> None:
    _server_options(parser)
    parser.add_argument("--json", action="store_true", help="print the bots as JSON")


def _configure_bot(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bot_id", metavar="ID", help="the bot's id (b + 12 hex digits)")
    _server_options(parser)


configure_pause = configure_resume = configure_withdraw = _configure_bot


def configure_log(parser: argparse.ArgumentParser) -> None:
    _configure_bot(parser)
    parser.add_argument("--json", action="store_true", help="print the bot as JSON")


def configure_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rules", type=rules_arg, default=None, metavar="SPEC",
                        help="the ladder (variant family), e.g. moo:4:0123456789 (default: the "
                             "server's default rules)")
    _server_options(parser)
    parser.add_argument("--json", action="store_true",
                        help='print {"rules", "standings": [...]} as one JSON line')


def _player_name(args: argparse.Namespace) -> str:
    name = args.player or default_player_name()
    if not 1 <= len(name) <= 24:
        raise UsageError(f"--as must be a player name of 1-24 characters, got {name!r}")
    return name


async def _connected(args: argparse.Namespace) -> Client:
    """A session as ``--as NAME`` with its saved token, or a new player whose token is saved
    (as ``moo play``)."""
    urls = urls_of(args, DEFAULT_URL)
    name = _player_name(args)
    tokens = TokenStore()
    client = Client(urls, name, token=tokens.get(urls[0], name), client_name="moo-ladder")
    try:
        await client.connect()
    except ServerError as exc:
        hint = (" (if the name is yours, sign in once with moo play --sign-in; otherwise "
                "pick another with --as)") if exc.code == "bad_token" else ""
        raise MooError(f"the server refused {name!r}: {exc.message}{hint}") from None
    except (OSError, TimeoutError) as exc:
        raise MooError(f"cannot reach {', '.join(urls)}: {exc or type(exc).__name__}") from None
    if client.token:
        tokens.put(urls[0], client.name, client.token)
    return client


def _run(coro: Any) -> Any:
    try:
        return asyncio.run(coro)
    except ServerError as exc:
        raise MooError(f"the server said no: {exc.message}") from None
    except (ConnectionLost, TimeoutError) as exc:
        raise MooError(f"lost the server: {exc or type(exc).__name__}") from None


def main_submit(args: argparse.Namespace) -> int:
    path: Path = args.file
    if (args.name is None) == (args.replace is None):
        raise UsageError("give --name NAME for a new bot, or --replace ID for a new version")
    if args.replace is not None and args.rules is not None:
        raise UsageError("--rules is for a new bot; a new version plays its bot's ladder")
    if not path.is_file():
        raise UsageError(f"no such file: {path}")
    size = path.stat().st_size
    if size > MAX_PROGRAM_BYTES:
        raise UsageError(f"{path} has {size} bytes; the limit is {MAX_PROGRAM_BYTES}")
    if size == 0:
        raise UsageError(f"{path} is empty")
    program = path.read_bytes()
    accepted, lines = _run(_submit(args, program))
    for line in lines:
        print(line, flush=True)
    return 0 if accepted else 1


async def _upload(client: Client, program: bytes) -> str:
    """The program sent in chunks on this connection; the upload's id."""
    upload = None
    for offset in range(0, len(program), CHUNK):
        fields: dict[str, Any] = {
            "offset": offset,
            "data": base64.b64encode(program[offset:offset + CHUNK]).decode("ascii")}
        if upload is not None:
            fields["upload"] = upload
        upload = (await client.request("ladder_upload", **fields)).raw["upload"]
    assert upload is not None
    return str(upload)


async def _submit(args: argparse.Namespace, program: bytes) -> tuple[bool, list[str]]:
    client = await _connected(args)
    try:
        fields: dict[str, Any] = {"sha256": hashlib.sha256(program).hexdigest(),
                                  "request_id": new_request_id()}
        if args.replace is not None:
            fields["bot_id"] = args.replace
        else:
            fields["name"] = args.name
            if args.rules is not None:
                fields["rules"] = args.rules.to_dict()
        for attempt in range(SUBMIT_TRIES):
            try:
                fields["upload"] = await _upload(client, program)
                bot = (await client.request("ladder_submit", **fields)).raw["bot"]
                break
            except ServerError as exc:
                # the upload is gone (the connection dropped and the submit was sent again
                # under its request_id, or a cluster's ladder moved to another node):
                # uploaded again, the request is done or answered as it first was
                # (docs/protocol.md, "Retrying safely"; docs/ladder.md, "On a cluster")
                if exc.code != "unknown_upload" or attempt == SUBMIT_TRIES - 1:
                    raise
        print(f"submitted: {bot['name']} version {bot['checking']} ({bot['bot_id']}); "
              "checking it ...", flush=True)
        checked = await _verdict(client, bot["bot_id"], bot["checking"])
        if checked["accepted"]:
            return True, [f"accepted: {bot['name']} version {checked['version']} plays on the "
                          f"ladder {_spec(bot['rules'])}", bot["bot_id"]]
        return False, [f"refused: {checked['reason']}"]
    finally:
        await client.close()


async def _verdict(client: Client, bot_id: str, version: int) -> dict[str, Any]:
    """``ladder_checked`` for the version; after a reconnect (the message may be lost), the
    verdict is read from ``ladder_mine``."""
    reconnects = client.reconnects
    async with asyncio.timeout(VERDICT_WAIT_S):
        while True:
            if client.reconnects != reconnects:
                reconnects = client.reconnects
                for bot in (await client.request("ladder_mine")).raw["bots"]:
                    for v in bot["versions"] if bot["bot_id"] == bot_id else ():
                        if v["version"] == version and v["check"] != "checking":
                            return {"accepted": v["check"] == "accepted", "reason": v["reason"],
                                    "version": version}
            msg = (await client.receive()).raw
            if (msg.get("type") == "ladder_checked" and msg.get("bot_id") == bot_id
                    and msg.get("version") == version):
                return msg


def _spec(rules: dict[str, Any]) -> str:
    return rules_spec(rules_from_dict(dict(rules)))


def main_mine(args: argparse.Namespace) -> int:
    bots = _run(_ask(args, "ladder_mine"))["bots"]
    if args.json:
        print(json.dumps(bots))
        return 0
    if not bots:
        print("no bots yet: moo ladder submit FILE --name NAME")
    for bot in bots:
        print(_bot_line(bot))
    return 0


def _bot_line(bot: dict[str, Any]) -> str:
    version = "-" if bot["version"] is None else f"v{bot['version']}"
    checking = f", checking v{bot['checking']}" if bot.get("checking") else ""
    return (f"{bot['bot_id']}  {bot['name']:<24} {_spec(bot['rules']):<24} "
            f"{bot['status']:<9} {version}{checking}")


def _status_main(kind: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        bot = _run(_ask(args, kind, bot_id=args.bot_id))["bot"]
        print(_bot_line(bot))
        return 0

    return run


main_pause = _status_main("ladder_pause")
main_resume = _status_main("ladder_resume")
main_withdraw = _status_main("ladder_withdraw")


def main_log(args: argparse.Namespace) -> int:
    bots = _run(_ask(args, "ladder_mine"))["bots"]
    found = [b for b in bots if b["bot_id"] == args.bot_id]
    if not found:
        raise MooError(f"you have no bot {args.bot_id!r} (moo ladder mine lists yours)")
    bot = found[0]
    if args.json:
        print(json.dumps(bot))
        return 0
    print(_bot_line(bot))
    for v in bot["versions"]:
        why = f": {v['reason']}" if v["reason"] else ""
        print(f"  version {v['version']}: {v['check']}{why} ({v['size']} bytes, sha256 "
              f"{v['sha256'][:12]}...)")
    print(f"  error log ({len(bot['errors'])}):" if bot["errors"] else "  error log: empty")
    for e in bot["errors"]:
        print(f"    {e['match_id']} v{e['version']}: {e['failure']}")
    if bot["stderr"]:
        print("  standard error of its last game:")
        for line in bot["stderr"].splitlines()[-20:]:
            print(f"    {line}")
    return 0


def main_show(args: argparse.Namespace) -> int:
    fields = {} if args.rules is None else {"rules": args.rules.to_dict()}
    reply = _run(_ask(args, "ladder_show", **fields))
    if args.json:
        print(json.dumps({"rules": reply["rules"], "standings": reply["standings"]}))
        return 0
    print(f"ladder {_spec(reply['rules'])}: {len(reply['standings'])} bots")
    for rank, row in enumerate(reply["standings"], 1):
        rating = "-" if row["rating"] is None else (
            f"{row['rating']} [{_bound(row['low'])}, {_bound(row['high'])}]")
        exact = row.get("exact") or {}
        scores = (f"  exact: {float(Fraction(exact['vs_minimum'])):.4f} vs minimum, "
                  f"{float(Fraction(exact['vs_strongest'])):.4f} vs strongest"
                  if exact.get("status") == "computed" else "")
        marks = [m for m in (row.get("kind") if row.get("kind") == "connected" else None,
                             row["status"] if row["status"] != "active" else None) if m]
        print(f"{rank:>3}. {row['bot']:<24} {row['owner']:<24} {rating:<20} "
              f"{row['games']} games +{row['wins']} ={row['draws']} -{row['losses']}"
              f" ({row['forfeits']} forfeits){scores}"
              + (f"  [{', '.join(marks)}]" if marks else ""))
    return 0


def _bound(value: int | None) -> str:
    return "?" if value is None else str(value)


async def _ask(args: argparse.Namespace, kind: str, **fields: Any) -> dict[str, Any]:
    client = await _connected(args)
    try:
        return (await client.request(kind, **fields)).raw
    finally:
        await client.close()
