"""A proven upper bound on what any adaptive player scores against a fixed tree.

    .venv/bin/python -m bench.adaptive_bound            # ~15 min of CPU on the loaded 2 cores

Relaxation: give the adaptive player the opponent's secret before the first guess. The
opponent's play is then fixed, and only the round ``K`` in which it solves matters, so the best
the player can do is, for each ``K = k``, the fixed tree maximising ``#(T < k) + ½ #(T = k)``
over its own secrets (T = own guesses needed). Any real adaptive player sees less, so

    ceiling <= Σ_k q(k) · B(k) / 5040²,     B(k) = max over trees of #(T < k) + ½ #(T = k)

with q the opponent's guess-count distribution. B(k) does not depend on the opponent, so one
set of solves serves ``strongest`` and ``minimum``. The first guess is 0123 without loss (every
first guess is the same up to relabelling, and the opponent's play does not depend on ours);
each first-response cell is solved exactly by the solver's engine with the per-guess costs
0 (before k), 1 (at k), 2 (after k), plus the guess number as a tie-break far below one unit.
"""

from __future__ import annotations

import time
from fractions import Fraction

from bots.evaluate import evaluate
from bots.solver import core
from moo.rules import DEFAULT_RULES

SHIFT = 1 << 20


def twice_best(k: int) -> int:
    """max over trees of 2·#(T < k) + #(T = k), the first guess's own secret excluded."""
    costs = [(0 if j < k else (1 if j == k else 2)) * SHIFT + j for j in range(core.NCOSTS)]
    solver = core.Solver(DEFAULT_RULES, core.Objective(f"race{k}", tuple(costs)), tt_log2=21)
    total = 0
    for response, cand in solver.cells().items():
        if response == DEFAULT_RULES.solved:
            continue
        n = len(cand) // 2
        total += 2 * n - solver.value(cand, [0]) // SHIFT
    return total


def main() -> int:
    started = time.perf_counter()
    best: dict[int, Fraction] = {}
    for k in range(1, 9):
        first = Fraction(1, 2) if k == 1 else Fraction(1)  # the secret 0123 itself, T = 1
        best[k] = first + (Fraction(twice_best(k), 2) if k > 1 else 0)
        print(f"B({k}) = {best[k]}  ({time.perf_counter() - started:.0f} s)", flush=True)
    for name in ("strongest", "minimum"):
        q = evaluate(name, show_progress=False).distribution
        if max(q) > 8:
            raise SystemExit(f"{name} needs more than 8 guesses: extend the range of k")
        bound = sum(c * best[k] for k, c in q.items()) / Fraction(5040 * 5040)
        print(f"ceiling against {name} <= {float(bound):.7f} ({bound})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
