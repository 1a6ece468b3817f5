#!/usr/bin/env python3
"""MOO ladder bot "hopeful" (a design of our own): every guess could be the secret.

Standard library only, speaking docs/bot-protocol.md on standard input and output. Where the
look-ahead bots may spend a guess on a code that cannot win in order to learn more, this one
never does: it only guesses codes still consistent with every response (so each guess may end
the game), and among those it picks the one that leaves the fewest codes on average, the
smallest sum of |t|^2 over the parts |t| of its partition (ties: the lowest code). Scoring only
the n possible codes against each other costs n^2 comparisons, not 5040 n, so it needs no
symmetry tricks; in classic MOO that is at most 1440^2, about half a second once. For larger
variants (hex, 5 or 6 positions) only the lowest PAIRS // n candidates are tried as guesses,
so a move stays well inside the ladder's CPU limit.

It is a fixed strategy (its guess depends only on the responses so far), so its exact score is
computable (docs/ladder.md, "Exact scores"). Decisions are remembered by the responses that led
to them, so a game that follows an opening already seen costs dictionary lookups only.
"""

import itertools
import sys
from collections import Counter

#: (guess, candidate) pairs one decision may score
PAIRS = 2_500_000


class Code:
    """A code with its symbols as bit masks: bulls and common symbols by two ANDs."""

    __slots__ = ("places", "symbols", "text")

    def __init__(self, text, alphabet):
        self.text = text
        positions = [alphabet.index(ch) for ch in text]
        self.places = sum(1 << (p * len(text) + i) for i, p in enumerate(positions))
        self.symbols = sum(1 << p for p in positions)


def key_of(secret, guess):
    """bulls * 64 + bulls + cows: one number per response."""
    return ((secret.places & guess.places).bit_count() * 64
            + (secret.symbols & guess.symbols).bit_count())


def choose(candidates):
    """The candidate whose partition of the candidates has the smallest sum of squares."""
    if len(candidates) <= 2:
        return candidates[0]
    best, pick = None, candidates[0]
    for guess in candidates[:max(1, PAIRS // len(candidates))]:
        parts = Counter(key_of(c, guess) for c in candidates)
        value = sum(t * t for t in parts.values())
        if best is None or value < best:
            best, pick = value, guess
            if value == len(candidates):  # every part a single code: nothing is better
                break
    return pick


class Hopeful:
    def __init__(self):
        self.rules = None
        self.memo = {}  # responses so far -> [candidates, choice]
        self.by_text = {}
        self.key = ()

    def new(self, length, alphabet):
        if (length, alphabet) != self.rules:
            self.rules = (length, alphabet)
            codes = [Code("".join(p), alphabet) for p in itertools.permutations(alphabet, length)]
            self.memo = {(): [codes, codes[0]]}  # before any response every code is alike
            self.by_text = {c.text: c for c in codes}
        self.key = ()

    def guess(self):
        node = self.memo[self.key]
        if not node[0]:
            print("# the responses contradict each other", flush=True)
            return self.memo[()][1].text
        if node[1] is None:
            node[1] = choose(node[0])
        return node[1].text

    def result(self, guess, bulls, cows):
        key = (*self.key, (guess, bulls, cows))
        if key not in self.memo:
            before, g = self.memo[self.key][0], self.by_text[guess]
            want = bulls * 64 + bulls + cows
            self.memo[key] = [[c for c in before if key_of(c, g) == want], None]
        self.key = key


def main():
    bot = Hopeful()
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        words = line.split()
        if not words:
            continue
        if words[0] == "moo":
            print("ready hopeful", flush=True)
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
