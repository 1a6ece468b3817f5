#!/usr/bin/env python3
"""MOO ladder bot "entropy": the guess whose response tells the most about the secret.

The arena's shipped `entropy` strategy (bots/entropy.py) as one file, standard library only,
speaking docs/bot-protocol.md on standard input and output. One-step look-ahead: every legal
code is scored by how it splits the codes still possible, and the guess with the largest
entropy of that partition (the smallest sum of |t| ln |t| over its parts) is played. Ties, as in
the shipped bot (docs/strategies.md): scores within a relative 1e-12 are equal; prefer a code
that is still possible, then the lowest code.

Pure Python must be frugal where the shipped bot uses numpy, so without changing any decision:

* digits that no guess has used yet are interchangeable: of the codes that differ only by a
  permutation of them, only the lowest is scored (the others split the candidates alike);
* a code that is still possible and splits them into parts of one is the best there is: the
  first such code ends the search;
* each decision is remembered by the responses that led to it.

It is a fixed strategy for classic MOO (4 of the 10 digits), so its exact score is computable
(docs/ladder.md); for other rules it plays the lowest consistent code.
"""

import itertools
import math
import sys
from collections import Counter

CLASSIC = (4, "0123456789")
#: t ln t, looked up so that equal parts always give the same terms
T_LOG_T = [0.0] + [t * math.log(t) for t in range(1, 5041)]


def score(secret, guess):
    """(bulls, cows) of a guess of distinct symbols against a secret of distinct symbols."""
    bulls = sum(s == g for s, g in zip(secret, guess))
    return bulls, len(set(secret) & set(guess)) - bulls


class Codes:
    """The codes of classic MOO as bit masks: bulls and common digits by two ANDs."""

    def __init__(self):
        self.codes = ["".join(p) for p in itertools.permutations("0123456789", 4)]
        self.digits = [[int(ch) for ch in code] for code in self.codes]
        self.places = [sum(1 << (d * 4 + i) for i, d in enumerate(ds)) for ds in self.digits]
        self.sets = [sum(1 << d for d in ds) for ds in self.digits]
        self.index = {code: i for i, code in enumerate(self.codes)}
        self.lowest_by_used = {}

    def key(self, guess, code):
        return ((self.places[guess] & self.places[code]).bit_count() * 8
                + (self.sets[guess] & self.sets[code]).bit_count())

    def lowest_of_classes(self, used):
        """The codes that are the lowest of their class (free digits permuted), ascending."""
        found = self.lowest_by_used.get(used)
        if found is None:
            free = [d for d in range(10) if not used >> d & 1]
            found = []
            for i, ds in enumerate(self.digits):
                order = [d for d in ds if not used >> d & 1]
                if order == free[:len(order)]:
                    found.append(i)
            self.lowest_by_used[used] = found
        return found


def cost(counts):
    """Sum of |t| ln |t| over the parts: lower is a more even split."""
    return sum(T_LOG_T[t] for t in counts)


def choose(codes, candidates, used):
    """Index of the guess to make; ``candidates`` (ascending) is not empty."""
    if len(candidates) <= 2:
        return candidates[0]
    if len(candidates) == len(codes.codes):
        return 0
    possible = set(candidates)
    scored = []  # (cost, index)
    for g in codes.lowest_of_classes(used):
        if g not in possible:
            continue
        value = cost(Counter(codes.key(g, c) for c in candidates).values())
        if value == 0.0:  # a possible code that splits them into parts of one: the best
            return g
        scored.append((value, g))
    for g in codes.lowest_of_classes(used):
        if g in possible:
            continue
        scored.append((cost(Counter(codes.key(g, c) for c in candidates).values()), g))
    best = min(value for value, _ in scored)
    tied = sorted(g for value, g in scored if value <= best + 1e-12 * max(1.0, abs(best)))
    preferred = [g for g in tied if g in possible]
    return (preferred or tied)[0]


class Entropy:
    def __init__(self):
        self.codes = None
        self.memo = {}  # responses so far -> (candidates, digits used, choice)
        self.classic = True
        self.key = ()
        self.others = []

    def new(self, length, alphabet):
        self.classic = (length, alphabet) == CLASSIC
        self.key = ()
        if self.classic and self.codes is None:
            self.codes = Codes()
            self.memo = {(): (list(range(len(self.codes.codes))), 0, None)}
        if not self.classic:
            self.others = ["".join(p) for p in itertools.permutations(alphabet, length)]

    def guess(self):
        if not self.classic:
            return self.others[0] if self.others else "0123"
        candidates, used, choice = self.memo[self.key]
        if not candidates:
            print("# the responses contradict each other", flush=True)
            return "0123"
        if choice is None:
            choice = choose(self.codes, candidates, used)
            self.memo[self.key] = (candidates, used, choice)
        return self.codes.codes[choice]

    def result(self, guess, bulls, cows):
        if not self.classic:
            self.others = [c for c in self.others if score(c, guess) == (bulls, cows)]
            return
        key = (*self.key, (guess, bulls, cows))
        if key not in self.memo:
            candidates, used, _ = self.memo[self.key]
            g = self.codes.index[guess]
            want = bulls * 8 + bulls + cows
            kept = [c for c in candidates if self.codes.key(g, c) == want]
            self.memo[key] = (kept, used | self.codes.sets[g], None)
        self.key = key


def main():
    bot = Entropy()
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        words = line.split()
        if not words:
            continue
        if words[0] == "moo":
            print("ready entropy", flush=True)
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
