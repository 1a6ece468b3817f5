"""Race values of every next guess at a candidate set: the public face of the native ``_race``.

The exact engine (:mod:`bots.solver.core`) proves one optimal guess per objective. The bounds on
adaptive play (``bench/adaptive_bound_round4.py``) need the value of *every* guess for every
round K in which the opponent might solve, because the best guess there depends on what the
player knows about K; ``_race.c`` enumerates them (its header gives the recurrence). Scores are
doubled: 2 for a secret solved before the opponent, 1 in the same round, 0 after.
"""

from __future__ import annotations

from bots.solver._race import init, pareto, stats, value, vector, vectors

__all__ = ["init", "pareto", "stats", "value", "vector", "vectors"]
