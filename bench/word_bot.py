"""Time per answer of the word-MOO bot (``bots/words.py``) on 9-letter words.

The secrets are drawn from the answer list, as every word-MOO secret is, and the bot plays as
it does in a match (its candidates are the answers).

One answer = the bot's ``observe`` of the previous answer plus its ``next_guess`` (the filter
runs inside ``next_guess``, under the bot's own wall-clock budget). Both wall time
(``time.perf_counter``: what a referee or a player waits) and the process's CPU time
(``time.process_time``: what the bot costs, independent of the machine's load) are reported,
with the load average, because this machine is shared.

    python -m bench.word_bot [--length 9] [--games 20] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

from bots.dictionary import install, load_answers
from bots.words import WordBot
from moo.words import SCORINGS, WordRules


def run(length: int, games: int, seed: int) -> list[str]:
    lines = [f"load average before: {os.getloadavg()[0]:.1f}"]
    install()
    words = load_answers(length)
    for scoring in SCORINGS:
        rules = WordRules(length, scoring)
        bot = WordBot()
        rng = random.Random(seed)
        walls: list[float] = []
        cpus: list[float] = []
        counts: list[int] = []
        for secret in rng.sample(words, games):
            bot.new_match(rules, random.Random(rng.random()))
            for k in range(1, 101):
                w0, c0 = time.perf_counter(), time.process_time()
                guess = bot.next_guess()
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
                answer = rules.score(secret, guess)
                w0, c0 = time.perf_counter(), time.process_time()
                bot.observe(guess, answer)
                walls[-1] += time.perf_counter() - w0
                cpus[-1] += time.process_time() - c0
                if guess == secret:
                    counts.append(k)
                    break
            else:
                raise AssertionError(f"{secret}: not solved in 100 guesses")
        lines.append(
            f"{scoring}: {len(words)} answers of {length}, {games} games, "
            f"mean {statistics.mean(counts):.2f} guesses (max {max(counts)}); per answer "
            f"wall max {max(walls):.3f} s mean {statistics.mean(walls):.3f} s, "
            f"CPU max {max(cpus):.3f} s mean {statistics.mean(cpus):.3f} s"
        )
    lines.append(f"load average after: {os.getloadavg()[0]:.1f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=9)
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print("\n".join(run(args.length, args.games, args.seed)))


if __name__ == "__main__":
    main()
