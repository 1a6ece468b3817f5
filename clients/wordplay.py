"""``moo play --words N``: word MOO for a person at a terminal, offline.

The computer picks a common English word of N letters from the answer list (the words every
word-MOO secret is drawn from: ``bots.answers``) and the player guesses it, scored either as
the UNIX game's bulls and cows or as the 1999 POTM's hits and misses (``--scoring``). Any N
letters may be guessed, as in the contest (a guess need not be a word: every dictionary word
is a guess); a guess that is not N letters A-Z is refused and not counted. Commands start
with ``?`` (``?left``, ``?hint``, ``?rules``, ``?quit``) because any bare word of N letters,
LEFT included, is a guess; ``=WORD`` is always a guess. A bare quitting word (``QUIT``,
``EXIT``...) is asked about when it is also a guess, and quits when it cannot be one, as in
every game of ``moo play`` (clients/terminal/text.py). ``?left`` counts the answers still
possible.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable

from bots.dictionary import load_answers
from moo.errors import InvalidCode
from moo.words import MAX_LENGTH, MIN_LENGTH, WordRules

__all__ = ["QUIT_WORDS", "ambiguous_text", "describe_answer", "play_words"]

YES = {"y", "yes"}
#: the bare words that quit, in every game of ``moo play`` (clients/terminal/text.py takes
#: them from here); where one could also be a guess it is asked about, never obeyed or played
QUIT_WORDS = frozenset({"quit", "q", "exit", "resign", "bye"})


def ambiguous_text(word: str) -> str:
    """What is said when a bare quitting word is also a legal guess (word MOO's QUIT)."""
    return (f"{word.upper()} IS A GUESS HERE AS WELL AS A COMMAND: TYPE ?QUIT TO QUIT, OR "
            f"={word.upper()} TO PLAY IT AS A GUESS (NOTHING WAS SENT).")


def describe_answer(rules: WordRules, answer: tuple[int, int]) -> str:
    """``2 BULLS, 1 COW`` or ``2 HITS, 3 MISSES``."""
    a, b = answer
    if rules.scoring == "hits_misses":
        names = ("HIT", "HITS"), ("MISS", "MISSES")
    else:
        names = ("BULL", "BULLS"), ("COW", "COWS")
    return f"{a} {names[0][a != 1]}, {b} {names[1][b != 1]}"


def _rules_page(rules: WordRules) -> str:
    if rules.scoring == "hits_misses":
        how = ("A HIT IS A LETTER IN THE RIGHT PLACE. A MISS IS A GUESSED LETTER THAT IS NOT\n"
               "IN THE WORD AT ALL (THE MAY 1999 POTM).")
    else:
        how = ("A BULL IS A LETTER IN THE RIGHT PLACE. A COW IS A LETTER OF THE WORD IN THE\n"
               "WRONG PLACE, EACH LETTER COUNTED AT MOST AS OFTEN AS IT IS IN BOTH WORDS.")
    return (f"I THINK OF A COMMON ENGLISH WORD OF {rules.length} LETTERS (LETTERS MAY REPEAT).\n"
            f"{how}\nCOMMANDS START WITH ? (A WORD LIKE LEFT IS A GUESS): ?LEFT FOR THE NUMBER "
            "OF\nWORDS STILL POSSIBLE, ?HINT FOR A WORD TO TRY, ?RULES, ?QUIT TO STOP\n(A BARE "
            "QUIT THAT IS ALSO A GUESS IS ASKED ABOUT; =QUIT PLAYS IT).")


def play_words(args: argparse.Namespace, read: Callable[[str], str | None],
               say: Callable[[str], None]) -> int:
    n = args.words
    if not MIN_LENGTH <= n <= MAX_LENGTH:
        return _fail(f"--words takes a length of {MIN_LENGTH}-{MAX_LENGTH} letters, got {n}")
    try:
        words = load_answers(n)
    except OSError as exc:
        return _fail(str(exc))
    if not words:
        return _fail(f"the answer list has no {n}-letter words")
    rules = WordRules(n, args.scoring, words)
    rng = random.Random(args.seed)
    say("WORD MOO\n" + _rules_page(rules))
    games: list[int] = []
    while True:
        secret = rng.choice(words)
        left = list(words)
        count = 0
        while True:
            line = read(f"\nYOUR GUESS ({n} LETTERS)? ")
            text = "?quit" if line is None else line.strip().lower()
            if text.startswith("=") and len(text) > 1:
                text = text[1:].strip()  # always a guess
            elif text in QUIT_WORDS:
                try:
                    rules.check_guess(text)
                except InvalidCode:
                    text = "?quit"  # cannot be a guess here: it quits
                else:
                    say(ambiguous_text(text))
                    continue
            if text in ("?quit", "?q", "?exit"):
                say(f"THE WORD WAS {secret}.")
                return _goodbye(say, games)
            if not text:
                continue
            if text in ("?", "?rules", "?help"):
                say(_rules_page(rules))
                continue
            if text == "?left":
                say(f"{len(left)} WORDS STILL POSSIBLE.")
                continue
            if text == "?hint":  # the APL note's helper: what is left, and a guess to try
                say(f"TRY {_suggest(rules, left, rng)} ({len(left)} WORDS STILL POSSIBLE).")
                continue
            try:
                guess = rules.check_guess(text)
            except InvalidCode as exc:
                say(f"  {exc}: not counted, try again.")
                continue
            count += 1
            answer = rules.score(secret, guess)
            left = rules.consistent(left, guess, answer)
            say(f"  -> {describe_answer(rules, answer)}")
            if args.helper and guess != secret:
                say(f"     {len(left)} WORDS STILL POSSIBLE.")
            if guess == secret:
                games.append(count)
                say(f"\nYOU GOT IT IN {count} GUESSES.")
                break
        again = read("ANOTHER WORD (YES OR NO)? ")
        if again is None or again.strip().lower() not in YES:
            return _goodbye(say, games)


def _suggest(rules: WordRules, left: list[str], rng: random.Random) -> str:
    """The word bot's choice among the answers still possible (bots/words.py)."""
    from bots.words import WordBot

    bot = WordBot()
    bot.new_match(WordRules(rules.length, rules.scoring, tuple(left)), random.Random(rng.random()))
    return bot.next_guess()


def _fail(text: str) -> int:
    print(f"moo play: {text}", file=sys.stderr)
    return 2


def _goodbye(say: Callable[[str], None], games: list[int]) -> int:
    if games:
        say(f"{len(games)} WORDS, AVERAGE {sum(games) / len(games):.2f} GUESSES.")
    say("GOODBYE.")
    return 0
