"""``moo play`` against a server: connect through the SDK, find a match the way the options
say, play it, offer another.

The session around the matches (tokens, resuming unfinished matches, the running tally) lives
here; each match itself is :class:`clients.terminal.match.OnlineMatch`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from clients.sdk import DEFAULT_URL, Client, ConnectionLost, MatchAnnounced, ServerError
from clients.sdk.cli_args import default_player_name, urls_of
from clients.sdk.tokens import TokenStore
from clients.terminal.match import OnlineMatch
from clients.terminal.screen import LineReader, Screen
from clients.terminal.signin import read_password, set_password
from clients.terminal.text import COMMANDS, YES, Tally, average_text, rules_page
from moo.rules import DEFAULT_RULES


async def _find_match(client: Client, args: argparse.Namespace, screen: Screen,
                      previous: str | None, lines: LineReader) -> MatchAnnounced | None:
    """Get into a match the way the options say; None if the person gave up waiting."""
    rules = args.rules
    # the assistant is for practice only: an assisted request is always unrated
    rated, helped = (False, True) if args.assist else (None, None)
    if args.bot:
        return await client.play_bot(args.bot, pacing=args.pacing, rules=rules, rated=rated,
                                     assist=helped)
    if previous is not None and (args.room or args.create_room):
        await client.rematch(previous)
        screen.say("REMATCH OFFERED; WAITING FOR YOUR OPPONENT (TYPE ?QUIT TO STOP)...")
    elif args.room:
        return await client.join_room(args.room)
    elif args.create_room:
        room = await client.create_room(pacing=args.pacing, rules=rules, rated=rated,
                                     assist=helped)
        screen.say(f"ROOM CODE: {room.code}\nGIVE IT TO YOUR OPPONENT: moo play --room "
                   f"{room.code}\nWAITING FOR THEM (TYPE ?QUIT TO STOP)...")
    else:
        queued = await client.queue(pool="any", pacing=args.pacing, rules=rules, rated=rated,
                                     assist=helped)
        screen.say(f"WAITING FOR AN OPPONENT ({queued.pacing}; TYPE ?QUIT TO STOP)...")
    match_task = asyncio.ensure_future(client.wait_match())
    while True:
        line_task = asyncio.ensure_future(lines.get())
        done, _ = await asyncio.wait({match_task, line_task},
                                     return_when=asyncio.FIRST_COMPLETED)
        if match_task in done:
            line_task.cancel()
            return match_task.result()
        line = line_task.result()
        # No guess can be typed while waiting: QUIT and ?QUIT both stop, in every game.
        typed = "?quit" if line is None else line.strip().lower()
        said = COMMANDS.get(typed.removeprefix("?") or "?") if typed else None
        if said == "quit":
            match_task.cancel()
            if not args.room and not args.create_room:  # waiting in the queue: leave it
                try:
                    await client.unqueue()
                except (ServerError, ConnectionLost):
                    pass
            return None
        if said == "rules":
            screen.say(rules_page(rules or DEFAULT_RULES))


async def play_online(args: argparse.Namespace) -> int:
    screen = Screen()
    tokens = TokenStore()
    name = args.name or default_player_name()
    try:
        password = read_password(args)
    except ValueError as exc:
        print(f"moo play: {exc}", file=sys.stderr)
        return 2
    # A person is waiting: retry often (every 2 s at most) for about a minute, the server's
    # default grace window, rather than backing off to long silences.
    urls = urls_of(args, DEFAULT_URL)
    # Tokens are kept under the first URL: the nodes of one cluster share their players.
    # A password given now is checked now: a token saved earlier would sign in without it and
    # a wrong password would go unnoticed.
    saved = None if password is not None else tokens.get(urls[0], name)
    client = Client(urls, name, token=saved, password=password,
                    encoding=args.encoding, client_name="moo-play", backoff_max=2.0,
                    max_attempts=35)
    try:
        welcome = await client.connect()
    except ServerError as exc:
        screen.say(f"THE SERVER SAID NO: {exc.message}")
        if exc.code == "too_many_attempts":
            wait = int(exc.reply.raw.get("retry_after_ms", 0) or 0)
            screen.say(f"TRY AGAIN IN {max(1, (wait + 999) // 1000)} S.")
        elif exc.code in ("name_taken", "bad_token") and password is None:
            screen.say("IF THE NAME IS YOURS, SIGN IN WITH --sign-in (OR --password-file);"
                       " OTHERWISE CHOOSE ANOTHER WITH --name.")
        return 1
    except (OSError, TimeoutError) as exc:
        print(f"moo play: cannot reach {', '.join(urls)}: {exc or type(exc).__name__}",
              file=sys.stderr)
        return 1
    if client.token:
        tokens.put(urls[0], client.name, client.token)
    if getattr(args, "set_password", False):
        try:
            return await set_password(client, welcome, screen)
        finally:
            await client.close()
    # only now: its thread reads standard input, and the hidden password prompts must not race it
    lines = LineReader()
    screen.say(f"MOO ARENA ({welcome.server}). HELLO, {client.name}.")
    tally = Tally()
    previous: str | None = None
    # Matches this name left unfinished (the program was closed or crashed): finish them
    # first; the SDK has already asked to resume them, and the replay brings the screen up to
    # date before the next prompt.
    unfinished = [m.match_id for m in welcome.matches if m.phase != "finished"]
    try:
        while True:
            announced: MatchAnnounced | None
            try:
                if unfinished:
                    screen.say(f"YOU HAVE AN UNFINISHED MATCH ({unfinished.pop(0)}): "
                               "BACK TO IT.")
                    announced = await client.wait_match(timeout=client.request_timeout)
                else:
                    announced = await _find_match(client, args, screen, previous, lines)
            except ServerError as exc:
                screen.say(f"THE SERVER SAID NO: {exc.message}")
                return 1
            except TimeoutError:
                screen.say("THE SERVER DID NOT SEND THAT MATCH BACK.")
                continue
            if announced is None:
                break
            game = OnlineMatch(client, announced, lines, screen, args, tally)
            outcome = await game.run()
            previous = announced.match_id
            if outcome == "aborted":
                break
            screen.ask("\nPLAY AGAIN (YES OR NO)? ")
            answer = await lines.get()
            screen.answered()
            if answer is None or answer.strip().lower() not in YES:
                break
    except ConnectionLost:
        screen.say("THE CONNECTION TO THE SERVER IS GONE.")
        return 1
    finally:
        await client.close()
    if tally.games:
        screen.say(f"{tally.games} GAME{'S' if tally.games != 1 else ''} PLAYED, AVERAGE "
                   f"{average_text(tally.tries, tally.games)} TRIES.")
    screen.say("GOODBYE.")
    return 0


