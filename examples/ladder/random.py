#!/usr/bin/env python3
"""MOO ladder bot "random": a uniformly random code consistent with every response so far.

The arena's shipped `random` strategy (bots/random_consistent.py, Appleyard's random
consistent guesser) as one file, standard library only, speaking docs/bot-protocol.md on
standard input and output. It draws from the operating system's randomness, so it plays a
different tree every match: it has no exact score, and the ladder says why
(docs/ladder.md, "Exact scores").
"""

import itertools
import random
import sys


def score(secret, guess):
    """(bulls, cows) of a guess of distinct symbols against a secret of distinct symbols."""
    bulls = sum(s == g for s, g in zip(secret, guess))
    return bulls, len(set(secret) & set(guess)) - bulls


class RandomConsistent:
    def __init__(self):
        self.rng = random.SystemRandom()
        self.rules = None
        self.codes = []
        self.candidates = []

    def new(self, length, alphabet):
        if (length, alphabet) != self.rules:
            self.rules = (length, alphabet)
            self.codes = ["".join(p) for p in itertools.permutations(alphabet, length)]
        self.candidates = self.codes

    def guess(self):
        return self.rng.choice(self.candidates or self.codes)

    def result(self, guess, bulls, cows):
        self.candidates = [c for c in self.candidates if score(c, guess) == (bulls, cows)]


def main():
    bot = RandomConsistent()
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        words = line.split()
        if not words:
            continue
        if words[0] == "moo":
            print("ready random", flush=True)
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
