#!/usr/bin/env python3
"""A compliant bot (docs/bot-protocol.md): guesses a random code consistent with every response."""
import itertools
import random
import sys


def score(secret, guess):
    bulls = sum(a == b for a, b in zip(secret, guess))
    return bulls, len(set(secret) & set(guess)) - bulls


def main():
    rng = random.Random()
    left = []
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "moo":
            print("ready consistent-py", flush=True)
        elif words[0] == "new":
            length, alphabet = int(words[1]), words[2]
            left = ["".join(p) for p in itertools.permutations(alphabet, length)]
        elif words[0] == "guess":
            print(rng.choice(left), flush=True)
        elif words[0] == "result":
            guess, bulls, cows = words[1], int(words[2]), int(words[3])
            left = [c for c in left if score(c, guess) == (bulls, cows)]
        elif words[0] == "quit":
            return


main()
