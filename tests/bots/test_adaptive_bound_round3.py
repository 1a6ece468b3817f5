"""The round-3 ceiling's stored file is checked in seconds: its bound is recomputed from the
stored part vectors, the floor check from the forced ones, and a seeded random sample of the
parts is solved again (``./dev verify`` solves every part: minutes).

The seed is new on every run and named in the failure (``--sample N --seed S`` repeats it).
"""

from __future__ import annotations

import json
import random

from bench.adaptive_bound_round3 import OUT_FILE, sample_parts, sample_problems

#: parts re-solved per run (each up to SAMPLE_MAX codes: about a second)
SAMPLE = 3


def stored() -> dict[str, object]:
    data: dict[str, object] = json.loads(OUT_FILE.read_text())
    return data


def test_a_sample_of_parts_solved_again_agrees_and_the_bound_and_floors_recompute() -> None:
    seed = random.randrange(2**32)
    assert sample_problems(stored(), SAMPLE, seed) == [], f"seed {seed}"


def test_a_wrong_vector_in_the_sample_is_named() -> None:
    seed = random.randrange(2**32)
    data = stored()
    key, r2 = sample_parts(data, 1, seed)[0]
    vector = data["parts"]["minimum"][key][r2]  # type: ignore[index]
    vector[0] -= 1
    problems = sample_problems(data, 1, seed)
    assert f"parts.minimum.{key}.{r2}: solved again, the vector differs" in problems, seed


def test_an_edited_bound_or_vector_outside_the_sample_fails_the_recomputation() -> None:
    data = stored()
    data["bound"]["strongest"] = "1/2"  # type: ignore[index]
    assert any(p.startswith("bound: the stored part vectors give") for p in
               sample_problems(data, 1, 0))
    data = stored()
    forced = data["forced"]["strongest"]  # type: ignore[index]
    cell = sorted(forced)[0]
    r2 = sorted(forced[cell])[0]
    forced[cell][r2] = [v + 1 for v in forced[cell][r2]]
    assert any("strongest's own guesses give" in p for p in sample_problems(data, 1, 0))
