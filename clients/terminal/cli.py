"""The ``moo play`` command: its options and the choice between solo and online play.

Only this module knows about argparse options; the others take the parsed namespace.
"""

from __future__ import annotations

import argparse
import asyncio

from bots import dictionary
from clients.sdk import DEFAULT_URL
from clients.sdk.cli_args import add_url_option
from clients.terminal.online import play_online
from clients.terminal.solo import play_solo
from moo.variants import rules_arg


def configure(parser: argparse.ArgumentParser) -> None:
    add_url_option(parser, f"server (default {DEFAULT_URL})")
    parser.add_argument("--name", default=None, help="your player name (default: your login)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--solo", action="store_true",
                       help="offline: the computer picks the secret, as in the 1971 program")
    where.add_argument("--bot", default=None, metavar="STRATEGY",
                       help="play a bot hosted by the server (e.g. random)")
    where.add_argument("--room", default=None, metavar="CODE", help="join a friend's room")
    where.add_argument("--create-room", action="store_true",
                       help="create a room and print its code for a friend")
    where.add_argument("--words", type=int, default=None, metavar="N",
                       help="offline word MOO: guess an English word of N letters (4-9)")
    parser.add_argument("--scoring", choices=("bulls_cows", "hits_misses"), default="bulls_cows",
                        help="--words: UNIX bulls and cows (default) or the 1999 POTM's hits "
                        "and misses")
    parser.add_argument("--helper", action="store_true",
                        help="after each response, show how many codes are still possible")
    parser.add_argument("--pacing", choices=("lockstep", "free"), default=None)
    parser.add_argument("--assist", action="store_true",
                        help="a practice (unrated) match with the assistant: after each of your "
                        "responses, how many codes are still possible and a suggested guess; "
                        "with --solo, the same offline")
    parser.add_argument("--rules", type=rules_arg, default=None, metavar="SPEC",
                        help="the game: GAME[:LENGTH[:ALPHABET[:repeats]]], e.g. moo:5, "
                        "moo:4:hex, mastermind:4:123456, or word MOO words[:LENGTH[:SCORING]], "
                        "e.g. words:5, words:7:hits_misses (docs/variants.md); online: the "
                        "server must offer it; default: the server's default, solo: classic")
    parser.add_argument("--encoding", choices=("json", "msgpack"), default="json")
    parser.add_argument("--sign-in", action="store_true",
                        help="sign in to your name with its password (asked without echo), "
                        "e.g. on a new device")
    parser.add_argument("--password-file", default=None, metavar="FILE",
                        help="like --sign-in, reading the password from FILE's first line")
    parser.add_argument("--set-password", action="store_true",
                        help="secure your name with a password (or change it), then exit")
    parser.add_argument("--seed", type=int, default=None,
                        help="solo: seed the computer's choices (replay the same games)")


def main(args: argparse.Namespace) -> int:
    dictionary.install()  # word MOO: secret checks, LEFT
    if args.solo or args.words is not None:
        def read(prompt: str) -> str | None:
            try:
                return input(prompt)
            except EOFError:
                print()
                return None

        def say(text: str) -> None:
            print(text, flush=True)

        if args.words is not None:
            from clients.wordplay import play_words

            return play_words(args, read, say)
        return play_solo(args, read, say)
    return asyncio.run(play_online(args))
