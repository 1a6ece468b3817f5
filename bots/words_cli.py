"""``moo words``: print word MOO's lists of one length, so anyone can see what the game plays.

``--answers`` prints the answers, the words every secret is drawn from and must be (common
words that hurt nobody: :mod:`bots.answers`); without it, the dictionary's words, which are
all accepted as guesses (a guess may be any letters: the dictionary is what the bots guess).
One word a line, upper case as the game shows them, so ``| wc -l`` counts and ``grep -x``
looks one up; ``--json`` adds how the list was made (the dictionary file; for the answers
also the frequency floor and the tools' versions). The lists are derived on this machine the
way a server derives them.
"""

from __future__ import annotations

import argparse
import json
import sys

from bots.answers import FLOOR, tools
from bots.dictionary import dictionary_file, load_answers, load_words
from moo.errors import NotAvailable, UsageError
from moo.words import MAX_LENGTH, MIN_LENGTH

__all__ = ["configure", "main"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print word MOO's words of one length, one a line: with --answers the answer list "
        "(every secret is one of them: common words, no slurs, vulgarities, proper names or "
        "abbreviations), without it the dictionary (every word of it is accepted as a guess).")
    parser.add_argument("--length", type=int, default=5, metavar="N",
                        help=f"word length, {MIN_LENGTH}-{MAX_LENGTH} (default 5)")
    parser.add_argument("--answers", action="store_true",
                        help="the answer list (the secrets) instead of the accepted guesses")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object: the words, their count and how they were made")


def main(args: argparse.Namespace) -> int:
    n = args.length
    if not MIN_LENGTH <= n <= MAX_LENGTH:
        raise UsageError(f"--length takes {MIN_LENGTH}-{MAX_LENGTH} letters, got {n}")
    words = load_answers(n) if args.answers else load_words(n)  # FileNotFoundError: one line
    kind = "answers" if args.answers else "guesses"
    if not words:
        raise NotAvailable(f"the dictionary ({dictionary_file()}) has no {n}-letter "
                           + ("answers" if args.answers else "words"))
    if args.json:
        made = {"floor": FLOOR, "tools": tools()} if args.answers else {"floor": None,
                                                                        "tools": None}
        print(json.dumps({"length": n, "list": kind, "count": len(words),
                          "dictionary": str(dictionary_file()), **made, "words": list(words)}))
    else:
        sys.stdout.write("".join(w + "\n" for w in words))
    return 0
