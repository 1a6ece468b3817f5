"""``moo analyse FILE|MATCH_ID``: the post-match analysis of a record file or of a stored match.

The analysis itself is :mod:`bots.judge.review` (pure, no network); this module is the command:
reading the record, printing the table or the JSON. Fetching a match is a client concern, so
it lives here too: from a server over the protocol's ``match_record`` request
(``--url``, default the local server), or straight from a server's database (``--db``, read
only, as ``moo export`` reads it). Either way the match becomes the same ``{rules, players}``
record a file holds and is analysed exactly as a file would be (docs/analysis.md).

What names a file and what a match: ``-`` is stdin, and an existing path is a file; anything
else is a match id (without ``--url``/``--db``, a path-like argument that does not exist,
with a ``/`` or a ``.json`` ending, is reported as a missing file rather than looked up).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bots.judge.review import Players, parse_record, review_players
from moo.mastermind import MastermindRules
from moo.rules import Rules
from moo.urls import ws_url

# asyncio, secrets and the WebSocket client are imported where a match is fetched, never at
# the top: ``moo analyse FILE`` is timed from a fresh process (issue 19), and asyncio alone
# costs more to import than the review of a typical match.

__all__ = ["FetchError", "configure", "fetch_record", "main", "record_from_match_record",
           "report"]

#: the local server (clients.sdk.client.DEFAULT_URL; not imported, so that analysing a file
#: does not load the WebSocket stack)
DEFAULT_URL = "ws://127.0.0.1:8765/"

#: seconds to connect and for each reply
TIMEOUT_S = 10.0


class FetchError(Exception):
    """The match could not be fetched: one line for the person at the command line."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", metavar="FILE|MATCH_ID",
        help="a match record file (JSON {rules, players: [{name, secret, guesses}]}, "
        "{rules, secret, guesses} or an export record; docs/analysis.md), '-' for stdin, or "
        "the id of a finished match to fetch from --url or --db")
    parser.add_argument("--json", action="store_true", help="print the analysis as JSON")
    parser.add_argument("--record", type=int, default=None, metavar="N",
                        help="an export file of several records (JSON lines): analyse only "
                        "its Nth record (from 1); without it, every record is analysed")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--url", type=ws_url, default=None,
                       help=f"fetch MATCH_ID from this server (default {DEFAULT_URL})")
    where.add_argument("--db", default=None, metavar="PATH|URL",
                       help="fetch MATCH_ID from a server's database instead: a SQLite file "
                       "or a postgresql:// URL (read only)")


def _is_file(text: str) -> bool:
    return text == "-" or Path(text).exists() or "/" in text or text.endswith(
        (".json", ".jsonl"))


def record_from_match_record(reply: dict[str, Any]) -> dict[str, Any]:
    """A ``match_record`` reply (docs/protocol.md) -> the ``{rules, players}`` record.

    Spectators see every guess of a finished match: in free pacing on the ``guess`` events,
    in lockstep on the ``round`` events (whose ``guess`` events carry no code); the secrets
    are on the ``finished`` event.
    """
    events = list(reply.get("events") or [])
    config = reply.get("config") or {}
    finished = next((e for e in events if e.get("kind") == "finished"), None)
    secrets_ = (finished or {}).get("secrets") or [None, None]
    if not all(secrets_):
        raise FetchError(f"match {reply.get('match_id')} never started: nothing to analyse")
    guesses: list[list[str]] = [[], []]
    if config.get("pacing") == "lockstep":
        for e in events:
            if e.get("kind") == "round":
                for seat, result in enumerate(e.get("results") or []):
                    if result and result[0]:
                        guesses[seat].append(str(result[0]))
    else:
        for e in events:
            if e.get("kind") == "guess" and e.get("guess"):
                guesses[int(e["seat"])].append(str(e["guess"]))
    names = list(reply.get("players") or ["player 1", "player 2"])
    return {
        "rules": dict(config.get("rules") or {}),
        "players": [{"name": names[seat], "secret": secrets_[1 - seat],
                     "guesses": guesses[seat]} for seat in (0, 1)],
    }


async def _fetch(url: str, match_id: str) -> dict[str, Any]:
    import asyncio
    import secrets

    from clients.sdk import Client, ServerError

    # A throwaway name: match_record works after hello, and reading a record needs no seat.
    # One request, so no reconnect and no resync: a failure is reported, not retried.
    client = Client(url, f"analyse-{secrets.token_hex(3)}", bot=True, reconnect=False,
                    client_name="moo-analyse", request_timeout=TIMEOUT_S,
                    buffer_events=False, resync_after=None)
    try:
        await asyncio.wait_for(client.connect(), TIMEOUT_S)
        record = await client.match_record(match_id)
    except ServerError as exc:
        raise FetchError(exc.message or exc.code) from None
    finally:
        await client.close()
    return dict(record.raw)


def fetch_record(url: str, match_id: str) -> dict[str, Any]:
    """The finished match ``match_id`` from the server at ``url``, as a ``{rules, players}``
    record; :class:`FetchError` with the server's own words (unknown or unfinished match) or
    why the server could not be reached."""
    import asyncio

    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

    from clients.sdk import ConnectionLost, HandshakeRefused

    try:
        reply = asyncio.run(_fetch(url, match_id))
    except HandshakeRefused as exc:  # an address that is not an arena: its own one line
        raise FetchError(str(exc)) from None
    except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as exc:
        raise FetchError(f"cannot reach the server at {url}: "
                         f"{exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}"
                         f" ({type(exc).__name__})") from None
    except (ConnectionClosed, ConnectionLost) as exc:
        raise FetchError(f"the server at {url} closed the connection: {exc}") from None
    return record_from_match_record(reply)


def _from_db(db: str, match_id: str) -> dict[str, Any]:
    from server.export import ExportError, stored_record

    try:
        record = stored_record(db, match_id)
    except ExportError as exc:
        raise FetchError(str(exc)) from None
    if not all(record.get("secrets") or [None]):
        raise FetchError(f"match {match_id} never started: nothing to analyse")
    return record


def _records(path: Path) -> list[Any]:
    """The records of a file: one JSON document, or one per line (an export file).

    Why every line and not the first: an export holds every match of a server, and analysing
    its first record without a word about the rest looked like analysing the file (issue 32).
    """
    text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    if not (text.lstrip().startswith("{") and "\n{" in text.strip()):
        return [json.loads(text)]
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path} is not JSON ({exc.msg}, line {number})") from None
    return records


def _from_file(args: argparse.Namespace) -> int:
    try:
        records = _records(args.file)
        if args.record is not None:
            if not 1 <= args.record <= len(records):
                print(f"moo analyse: --record {args.record}: {args.file} holds "
                      f"{len(records)} record{'s' if len(records) > 1 else ''}",
                      file=sys.stderr)
                return 2
            records = [records[args.record - 1]]
        if len(records) > 1:
            return _report_many(records, args.json)
        rules, players = parse_record(records[0])
        return report(rules, players, args.json)
    except FileNotFoundError:
        print(f"moo analyse: no such file: {args.file}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(f"moo analyse: {args.file} is not JSON ({exc.msg}, line {exc.lineno})",
              file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        print(f"moo analyse: {exc}", file=sys.stderr)
        return 2


def _report_many(records: list[Any], as_json: bool) -> int:
    """Every record of an export file, each under a line naming it, then a count.

    A record that cannot be analysed (a match that never started, a variant the analysis does
    not cover) is said in its place and counted, so one odd match does not hide the others;
    the status is 2 only when none could be analysed. The tables go to stdout as they are
    made, a progress bar to stderr (on a terminal, after 2 s: an export can hold thousands).
    """
    from bots.playout import Progress

    total = len(records)
    progress = Progress(total, "analysing")
    analysed = 0
    for number, record in enumerate(records, 1):
        match_id = record.get("match_id") if isinstance(record, dict) else None
        head = f"record {number} of {total}" + (f": match {match_id}" if match_id else "")
        try:
            rules, players = parse_record(record)
            results = review_players(rules, players)
        except (ValueError, TypeError) as exc:
            if as_json:
                print(json.dumps({"record": number, "match_id": match_id, "error": str(exc)}))
            else:
                print(f"{head}: not analysed: {exc}\n")
            progress(number)
            continue
        analysed += 1
        if as_json:
            print(json.dumps({"record": number, "match_id": match_id,
                              "rules": rules.to_dict(), "players": results}))
        else:
            names = " vs ".join(str(p["name"]) for p in results)
            print(f"{head} ({names})")
            _print_tables(results)
            print()
        progress(number)
    progress.finish()
    if not as_json:
        print(f"{total} records: {analysed} analysed, {total - analysed} not analysed")
    return 0 if analysed else 2


def report(rules: Rules | MastermindRules, players: Players, as_json: bool) -> int:
    """Analyse every player and print the tables (or the JSON of ``--json``); the analysis'
    ``ValueError``/``TypeError`` (an illegal code, rules it cannot analyse) propagate."""
    results = review_players(rules, players)
    if as_json:
        print(json.dumps({"rules": rules.to_dict(), "players": results}, indent=2))
        return 0
    _print_tables(results)
    return 0


def _print_tables(results: list[dict[str, Any]]) -> None:
    """One table per player: its guesses, what each left, and what it cost."""
    for player in results:
        res = player["guesses"]
        lost = sum(a["loss"] for a in res)
        print(f"{player['name']} (secret {player['secret']}): {len(res)} guesses, "
              f"{lost:.3f} expected guesses lost")
        print(f"{'#':>3} {'guess':>6} {'resp':>5} {'left':>5} {'best':>6} {'played':>6} "
              f"{'loss':>6}  {'best guess':<10} mark")
        for a in res:
            line = (f"{a['number']:>3} {a['guess']:>6} {a['response']:>5} "
                    f"{a['candidates']:>5} {a['best_expected']:>6.3f} "
                    f"{a['played_expected']:>6.3f} {a['loss']:>6.3f}  "
                    f"{a['best_guess']:<10} {a['mark'] or ''}")
            print(line.rstrip())


def main(args: argparse.Namespace) -> int:
    target = str(args.file)
    if target == "-" or Path(target).exists() or (
        args.url is None and args.db is None and _is_file(target)
    ):
        args.file = Path(target)
        return _from_file(args)
    if getattr(args, "record", None) is not None:
        print("moo analyse: --record N picks a record of a file; a MATCH_ID is one match",
              file=sys.stderr)
        return 2
    try:
        if args.db is not None:
            data = _from_db(args.db, target)
        else:
            data = fetch_record(args.url or DEFAULT_URL, target)
        rules, players = parse_record(data)
        return report(rules, players, args.json)
    except FetchError as exc:
        print(f"moo analyse: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError) as exc:
        print(f"moo analyse: {exc}", file=sys.stderr)
        return 2
