"""``moo play --solo``: the computer picks the secret, as in the 1971 BASIC program.

Kept apart from online play: it needs no server, no event loop and no screen object, only a
``read`` and a ``say`` function, so tests drive it with lists of lines.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

from bots.judge.assistant import assist
from clients.terminal.text import (
    ANTISOCIAL,
    YES,
    Tally,
    average_text,
    choices_left,
    choices_text,
    is_digits,
    parse_entry,
    rules_page,
    secret_words,
    show_response,
)
from clients.wordplay import ambiguous_text, play_words
from moo.mastermind import MastermindRules
from moo.rules import DEFAULT_RULES, Response
from moo.variants import GameRules
from moo.words import WordRules


def play_solo(args: argparse.Namespace, read: Callable[[str], str | None],
              say: Callable[[str], None]) -> int:
    rules: GameRules = getattr(args, "rules", None) or DEFAULT_RULES
    if isinstance(rules, WordRules):  # the offline word game, as moo play --words N
        args.words, args.scoring = rules.length, rules.scoring
        return play_words(args, read, say)
    rng = random.Random(args.seed)
    tally = Tally()
    title = "MASTERMIND" if isinstance(rules, MastermindRules) else "MOO"
    say(f"{title}\nI WILL THINK OF {secret_words(rules)}. TRY TO GUESS THEM.")
    say("TYPE '?RULES' FOR THE RULES, '?LEFT' FOR THE CHOICES LEFT, '?QUIT' TO STOP.")
    while True:
        secret = rng.choice(rules.secrets)
        turns: list[tuple[str, Response]] = []
        if getattr(args, "assist", False):  # the APL helper counts before the first guess too
            say(f"     ASSISTANT: {assist(rules, []).text()}")
        while True:
            line = read(f"\nTYPE {rules.length} SYMBOLS? " if not is_digits(rules)
                        else f"\nTYPE {rules.length} NUMBERS? ")
            if line is None:  # end of input: nothing more can be typed
                if turns:
                    say(f"\nTHE NUMBER WAS {secret}.")
                return _goodbye(say, tally)
            entry = parse_entry(line, rules)
            if entry.kind == "empty":
                continue
            if entry.kind == "error":
                say(f"  {entry.value}: not counted, try again.")
                continue
            if entry.kind == "ambiguous":
                say(ambiguous_text(entry.value))
                continue
            if entry.kind == "command":
                if entry.value == "quit":
                    if not turns:
                        return _goodbye(say, tally)
                    say("\n" + ANTISOCIAL)
                    answer = read("DO YOU REALLY WANT TO GIVE UP THIS GAME (YES OR NO)? ")
                    if answer is not None and answer.strip().lower() in YES:
                        say(f"THE NUMBER WAS {secret}. THIS GAME DOES NOT COUNT.")
                        break
                    say("PLEASE CONTINUE.")
                elif entry.value == "rules":
                    say(rules_page(rules))
                elif entry.value == "left":
                    say(choices_text(choices_left(rules, turns)))
                elif entry.value == "history":
                    say(_history_solo(turns))
                else:
                    say("THERE IS NO CLOCK IN SOLO PLAY: TAKE YOUR TIME.")
                continue
            response = rules.score(secret, entry.value)
            turns.append((entry.value, response))
            say(f"  -> {show_response(response)}")
            if getattr(args, "assist", False) and response != rules.solved:
                say(f"     ASSISTANT: {assist(rules, turns).text()}")
            elif args.helper and response != rules.solved:
                say(f"     {choices_text(choices_left(rules, turns))}")
            if response == rules.solved:
                say("\n" + tally.add(len(turns)))
                break


def _history_solo(turns: list[tuple[str, Response]]) -> str:
    if not turns:
        return "NO GUESSES YET."
    return "\n".join(f"  {i:>2}. {g}  {show_response(r)}" for i, (g, r) in enumerate(turns, 1))


def _goodbye(say: Callable[[str], None], tally: Tally) -> int:
    if tally.games:
        say(f"\n{tally.games} GAME{'S' if tally.games != 1 else ''} PLAYED, AVERAGE "
            f"{average_text(tally.tries, tally.games)} TRIES. GOODBYE.")
    else:
        say("GOODBYE.")
    return 0
