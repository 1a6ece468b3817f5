"""The stored upper bound on adaptive play is checked again, and it brackets the shipped policy.

The bound's figures (``bench/data/adaptive-bound.json``) were once left stale by a new tree:
docs quoted a bound computed from an older guess-count distribution. ``./dev verify`` re-solves
every entry with the exact engine (minutes); here a seeded random sample of the entries is
re-solved and every derived figure recomputed from the stored entries (seconds), so a changed
tree, a changed engine or an edited number fails here too. The seed is new on every run and
named in the failure, so a failure can be repeated (``--sample N --seed S``).
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

from bench.adaptive_bound import DATA_FILE, disagreements, sample_entries, sample_problems
from bots.evaluate import cached_races

ROOT = Path(__file__).resolve().parents[2]
STRATEGIES = ROOT / "docs" / "strategies.md"


def stored() -> dict[str, dict[str, object]]:
    data: dict[str, dict[str, object]] = json.loads(DATA_FILE.read_text())["opponents"]
    return data


#: entries re-solved per run: a few seconds
SAMPLE = 20


def seed() -> int:
    return random.randrange(2**32)


def test_a_sample_of_entries_solved_again_agrees_and_every_derived_figure_too() -> None:
    s = seed()
    assert sample_problems(json.loads(DATA_FILE.read_text()), SAMPLE, s) == [], f"seed {s}"


def test_the_sample_names_a_wrong_entry_it_re_solves() -> None:
    # a sample of one: the entry the seed picks is edited and must be named (the full
    # sample's agreement is the test above; re-solving all of it again proves nothing more)
    s = seed()
    data = json.loads(DATA_FILE.read_text())
    kind, k, key = sample_entries(data, 1, s)[0]
    if kind == "second":
        data["second_round"][str(k)][key] += 2
        where = f"second_round.{k}.{key}"
    else:
        table = data["B"] if key == "1" else data["reveal_B"][key]
        table[str(k)] = str(Fraction(table[str(k)]) + 1)
        where = "B" if key == "1" else f"reveal_B.{key}"
    assert any(p.startswith(where) for p in sample_problems(data, 1, s)), f"seed {s}"


def test_a_derived_figure_left_alone_names_the_edited_entry() -> None:
    """An entry edited outside the sample still changes what is derived from it."""
    data = json.loads(DATA_FILE.read_text())
    data["B"]["7"] = str(Fraction(data["B"]["7"]) + 1)
    problems = sample_problems(data, 1, seed())
    assert any("bound_round_1 is not the sum over B" in p for p in problems)
    data = json.loads(DATA_FILE.read_text())
    data["opponents"]["minimum"]["bound"] = "1/2"
    assert any("minimum.bound is not the sum" in p for p in sample_problems(data, 1, seed()))


def test_the_sample_command_line_says_agrees_with_its_seed() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.adaptive_bound", "--sample", "3", "--seed", "7"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "sampled: adaptive-bound.json agrees (3 entries re-solved, seed 7" in done.stdout


def test_the_bound_lies_above_the_shipped_policy_and_below_full_knowledge_of_the_draw() -> None:
    races = cached_races()
    assert races, "bots/data/races.json does not match today's trees and tables"
    for name, entry in stored().items():
        race = races[f"adaptive|{name}"]
        policy = Fraction(str(race["win"])) + Fraction(str(race["draw"])) / 2
        bound = Fraction(str(entry["bound"]))
        assert policy < bound < Fraction(51, 100)
        floors = {int(m): Fraction(str(v)) for m, v in entry["reveal_floor"].items()}  # type: ignore[attr-defined]
        # Telling the secret later can only lower what the player scores with it.
        assert all(floors[m] >= floors[m + 1] for m in floors if m + 1 in floors)
        # telling it after round 2 instead of before round 1 proves less, but not less than
        # what following strongest's second guess gives in that relaxation
        first = Fraction(str(entry["bound_round_1"]))
        assert floors[2] <= bound < first


def test_docs_quote_the_stored_bounds_as_exact_fractions() -> None:
    """The round-2 bound (verified in CI) in the text, the round-3 bound in the table row (the
    round-4 one is checked by tests/bots/test_adaptive_bound_round4.py)."""
    from bench.adaptive_bound_round3 import OUT_FILE

    section = STRATEGIES.read_text(encoding="utf-8").split("### The ceiling", 1)[1]
    section = section.split("\n### ", 1)[0]
    third = json.loads(OUT_FILE.read_text())["bound"]
    for name, entry in stored().items():
        bound = Fraction(str(entry["bound"]))
        assert f"{float(bound):.7f} ({bound})" in " ".join(section.split())
        row = re.search(rf"^\| `{name}` \| [^\n]*$", section, re.M)  # the first: bounds
        assert row is not None, name
        b3 = Fraction(str(third[name]))
        assert f"{float(b3):.7f} ({b3})" in row.group(0), row.group(0)


def test_a_changed_figure_or_tree_is_named_by_the_comparison() -> None:
    fresh = json.loads(DATA_FILE.read_text())
    assert disagreements(fresh, fresh) == []
    tampered = json.loads(DATA_FILE.read_text())
    tampered["B"]["5"] = "2013"
    tampered["fingerprint"] = "0" * 64
    assert disagreements(tampered, fresh) == ["B", "fingerprint"]
    assert disagreements([], fresh) == sorted(fresh)


def test_the_round_three_bound_is_for_todays_trees_and_between_its_neighbours() -> None:
    """Its full re-solve (``python -m bench.adaptive_bound_round3 --verify``) takes about ten
    minutes of CPU, so CI checks what can be checked fast: computed from today's trees, with
    `strongest`'s second guess solved in every cell, and lying at or below the round-2 bound
    and at or above the round-3 floor (a relaxation's value is at least what following
    `strongest` scores in it)."""
    from bench.adaptive_bound import fingerprint
    from bench.adaptive_bound_round3 import OUT_FILE, star_guesses

    data = json.loads(OUT_FILE.read_text())
    assert data["fingerprint"] == fingerprint()
    solved = set(data["solved"])
    assert {f"{cell}|{g}" for cell, g in star_guesses().items()} <= solved
    for name, entry in stored().items():
        third = Fraction(str(data["bound"][name]))
        floors = entry["reveal_floor"]
        assert Fraction(str(floors["3"])) <= third <= Fraction(str(entry["bound"]))  # type: ignore[index]
