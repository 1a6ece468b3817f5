#!/usr/bin/env python3
"""A compliant bot that signals to turncoat.py: its first six guesses are the same code
(unless it solves at once), then it guesses the lowest code consistent with every response."""
import itertools
import sys


def score(secret, guess):
    bulls = sum(a == b for a, b in zip(secret, guess))
    return bulls, len(set(secret) & set(guess)) - bulls


def main():
    left: list[str] = []
    made = 0
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "moo":
            print("ready beacon", flush=True)
        elif words[0] == "new":
            if left:  # a second game in one process: the exact evaluation, which the test
                return  # does not need (it would hold the worker's only slot for minutes)
            length, alphabet = int(words[1]), words[2]
            left = ["".join(p) for p in itertools.permutations(alphabet, length)]
            made = 0
        elif words[0] == "guess":
            made += 1
            print(alphabet[:length] if made <= 6 else left[0], flush=True)
        elif words[0] == "result":
            guess, bulls, cows = words[1], int(words[2]), int(words[3])
            left = [c for c in left if score(c, guess) == (bulls, cows)]
        elif words[0] == "quit":
            return


main()
