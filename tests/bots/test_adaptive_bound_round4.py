"""The round-4 ceiling (the secret told after round 4) is stored from today's trees and is
checked again in seconds.

``bench/data/adaptive-bound-round4.json`` holds the tightest bound on adaptive play, with every
solved part's vectors. ``./dev verify`` solves every figure again (the exact engine's round-3
values, then every third and fourth guess with bots.solver._race: minutes). Here the bound, the
slack and the floor checks (with `strongest`'s own second, third and fourth guesses forced, the
same sums must give back the round-4 and round-3 floors that bench.adaptive_bound computes with
the engine alone) are recomputed from the stored vectors, and a seeded random sample of the
parts is solved again; the seed is new on every run and named in a failure.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction
from pathlib import Path

from bench.adaptive_bound import DATA_FILE, fingerprint
from bench.adaptive_bound_round4 import OUT_FILE, sample_problems, sample_units, unit_key
from bots.evaluate import cached_races

#: parts re-solved per run (each up to SAMPLE_MAX codes: about a second)
SAMPLE = 3

ROOT = Path(__file__).resolve().parents[2]
STRATEGIES = ROOT / "docs" / "strategies.md"


def stored() -> dict[str, object]:
    data: dict[str, object] = json.loads(OUT_FILE.read_text())
    return data


def test_the_stored_bound_was_computed_from_todays_trees() -> None:
    assert stored()["fingerprint"] == fingerprint()


def test_the_bound_lies_between_the_policy_the_round_4_floor_and_the_round_3_bound() -> None:
    races = cached_races()
    assert races, "bots/data/races.json does not match today's trees and tables"
    round3 = json.loads(DATA_FILE.with_name("adaptive-bound-round3.json").read_text())["bound"]
    floors = json.loads(DATA_FILE.read_text())["opponents"]
    for name, text in stored()["bound"].items():  # type: ignore[attr-defined]
        bound = Fraction(text)
        race = races[f"adaptive|{name}"]
        policy = Fraction(str(race["win"])) + Fraction(str(race["draw"])) / 2
        assert policy < bound
        # following strongest for four guesses is one way to play the relaxation
        assert Fraction(floors[name]["reveal_floor"]["4"]) <= bound
        # telling the secret a round later can only lower the relaxation's value
        assert bound < Fraction(round3[name])


def test_docs_quote_the_round_4_bound_as_an_exact_fraction() -> None:
    text = STRATEGIES.read_text()
    for text_bound in stored()["bound"].values():  # type: ignore[attr-defined]
        bound = Fraction(text_bound)
        assert f"{float(bound):.7f} ({bound})" in text


def test_a_sample_of_parts_solved_again_agrees_and_the_bound_and_floors_recompute() -> None:
    seed = random.randrange(2**32)
    assert sample_problems(stored(), SAMPLE, seed) == [], f"seed {seed}"


def test_a_wrong_part_in_the_sample_is_named() -> None:
    seed = random.randrange(2**32)
    data = stored()
    unit = sample_units(data, 1, seed)[0]
    if unit[2] == 3:
        vector = data["told3"][f"{unit[0]}|{unit[1]}"][unit[3]]  # type: ignore[index]
        want = f"told3.{unit[0]}|{unit[1]}.{unit[3]}: solved again, the vector differs"
    else:
        vector = data["parts"][unit_key(unit)]["best"]  # type: ignore[index]
        want = f"parts.{unit_key(unit)}: solved again, best differ"
    vector[0] += 1
    assert want in sample_problems(data, 1, seed), seed


def test_an_edited_bound_slack_or_forced_vector_fails_the_recomputation() -> None:
    data = stored()
    data["bound"]["strongest"] = "1/2"  # type: ignore[index]
    data["slack"] = 0
    problems = sample_problems(data, 1, 0)
    assert any(p.startswith("bound: the stored part vectors give") for p in problems)
    assert "slack: not the sum of the parts' slack" in problems
    data = stored()
    parts: dict[str, dict[str, list[int] | None]] = data["parts"]  # type: ignore[assignment]
    key = next(k for k in sorted(parts) if parts[k]["forced4"] is not None)
    forced4 = parts[key]["forced4"]
    assert forced4 is not None
    forced4[0] += 1
    assert any("after round 4, the engine's floor is" in p for p in sample_problems(data, 1, 0))
