"""The round-4 ceiling (the secret told after round 4) is stored from today's trees and is proven
again by its verifier.

``bench/data/adaptive-bound-round4.json`` holds the tightest bound on adaptive play. The
verifier solves every figure again (the exact engine's round-3 values, then every third and
fourth guess with bots.solver._race) and checks its machinery on the way: with `strongest`'s own
second, third and fourth guesses forced, the same sums must give back the round-4 and round-3
floors that bench.adaptive_bound computes with the engine alone.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

from bench.adaptive_bound import DATA_FILE, fingerprint
from bench.adaptive_bound_round4 import OUT_FILE
from bots.evaluate import cached_races
from tests.bots.test_adaptive_bound import verify

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


def test_the_verifier_solves_everything_again_and_agrees() -> None:
    done = verify("bench.adaptive_bound_round4")
    assert done.returncode == 0, done.stderr
    assert "verified: adaptive-bound-round4.json matches every solve" in done.stdout
