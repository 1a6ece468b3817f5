"""Average guesses and time per move of the hosted bots on MOO variants (docs/variants.md,
"Hosted bots per variant", and docs/benchmarks.md, "Bots on MOO variants").

    python bench/variant_bots.py --games 100 --seed 1
    python bench/variant_bots.py --variants moo:6 --bots entropy,random --games 20

Each bot plays the same ``--games`` secrets per variant (drawn with ``--seed``), through
``bots.variants.create_for`` exactly as the server hosts it (with its per-match relabelling,
seeded too). Time per move is wall-clock per ``next_guess`` call; ``max`` is the slowest
decision of the run (the deterministic bots remember decisions, so a first-time decision is
what it measures), ``first`` the slowest decision of the very first game (nothing remembered).
Tree bots need their trees: they are solved (and cached, ``$MOO_TREE_CACHE``) before timing.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bots.variant_trees import exact_feasible, tree_for
from bots.variants import bot_note, create_for
from moo.rules import Rules, score
from moo.variants import parse_rules_spec, rules_label

VARIANTS = ["moo:3", "moo:4:01234567", "moo:5", "moo:6", "moo:4:hex", "moo:3:digits:repeats"]
BOTS = ["random", "first", "entropy", "expected", "minimax", "parts", "larmouth", "minimum",
        "strongest"]


def run(spec: str, bot: str, games: int, seed: int) -> tuple[float, int, float, float, float]:
    rules = parse_rules_spec(spec)
    assert isinstance(rules, Rules)
    if bot in ("minimum", "strongest") and exact_feasible(rules):
        tree_for(rules, bot)  # solve first: the timing is of moves, not of the solve
    pick = random.Random(seed)
    secrets = [pick.choice(rules.secrets) for _ in range(games)]
    strategy = create_for(bot, rules)
    total, worst, times, first = 0, 0, [], 0.0
    for n, secret in enumerate(secrets):
        strategy.new_match(rules, random.Random(seed * 1000 + n))
        count = 0
        while count < 64:
            count += 1
            t0 = time.perf_counter()
            guess = strategy.next_guess()
            spent = time.perf_counter() - t0
            times.append(spent)
            if n == 0:
                first = max(first, spent)
            response = score(secret, guess)
            strategy.observe(guess, response)
            if response == rules.solved:
                break
        total += count
        worst = max(worst, count)
    return total / games, worst, sum(times) / len(times), max(times), first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--bots", default=",".join(BOTS))
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print("| variant | bot | mean guesses | worst | mean s/move | max s/move | max s/move, "
          "game 1 | note |\n|---|---|---|---|---|---|---|---|")
    for spec in args.variants.split(","):
        rules = parse_rules_spec(spec)
        for bot in args.bots.split(","):
            mean, worst, avg, top, first = run(spec, bot, args.games, args.seed)
            note = bot_note(bot, rules)
            print(f"| {rules_label(rules)} | {bot} | {mean:.2f} | {worst} | {avg:.3f} | "
                  f"{top:.3f} | {first:.3f} | {'entropy (fallback)' if note else ''} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
