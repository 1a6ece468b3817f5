#!/usr/bin/env python3
"""MOO ladder bot "first": the lowest code consistent with every response so far.

The arena's shipped `first` strategy (bots/first.py) as one file, standard library only,
speaking docs/bot-protocol.md on standard input and output. It is a fixed strategy: its guess
depends only on the responses so far, so its exact score is computable (docs/ladder.md,
"Exact scores"). Each decision is remembered by the responses that led to it, so a game that
follows an opening already seen costs dictionary lookups only.
"""

import itertools
import sys


def score(secret, guess):
    """(bulls, cows) of a guess of distinct symbols against a secret of distinct symbols."""
    bulls = sum(s == g for s, g in zip(secret, guess))
    return bulls, len(set(secret) & set(guess)) - bulls


class First:
    def __init__(self):
        self.rules = None
        self.memo = {}  # (rules, responses so far) -> candidates still possible

    def new(self, length, alphabet):
        if (length, alphabet) != self.rules:
            self.rules = (length, alphabet)
            self.memo = {(): ["".join(p) for p in itertools.permutations(alphabet, length)]}
        self.key = ()

    def guess(self):
        candidates = self.memo.get(self.key)
        if not candidates:  # responses that contradict each other: any legal code
            return self.memo[()][0]
        return candidates[0]

    def result(self, guess, bulls, cows):
        key = (*self.key, (guess, bulls, cows))
        if key not in self.memo:
            before = self.memo.get(self.key) or []
            self.memo[key] = [c for c in before if score(c, guess) == (bulls, cows)]
        self.key = key


def main():
    bot = First()
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        words = line.split()
        if not words:
            continue
        if words[0] == "moo":
            print("ready first", flush=True)
        elif words[0] == "new":
            bot.new(int(words[1]), words[2])
        elif words[0] == "guess":
            print(bot.guess(), flush=True)
        elif words[0] == "result":
            bot.result(words[1], int(words[2]), int(words[3]))
        elif words[0] == "quit":
            return
        # "opponent" and "end" need no answer; unknown lines are ignored (docs/bot-protocol.md)


if __name__ == "__main__":
    main()
