"""Post-match review (bots/judge/review.py): tree play costs nothing, figures match the solver."""

from __future__ import annotations

import array
import json
import random
import subprocess
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import pytest

from bots.judge.review import analyse_guesses, mark, reset
from bots.solver.core import Solver, load_tree, minimum_objective
from moo.rules import DEFAULT_RULES, Response, score

TREE = load_tree(Path(__file__).resolve().parents[2] / "bots" / "data" / "minimum.txt.gz")
DIGITS = "0123456789"


def _relabel(code: str, perm: str) -> str:
    return "".join(perm[int(c)] for c in code)


def test_marks() -> None:
    assert [mark(x) for x in (0.0, 0.019, 0.02, 0.099, 0.1, 0.299, 0.3, 2.0)] == [
        None, None, "inaccuracy", "inaccuracy", "mistake", "mistake", "blunder", "blunder"]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_following_the_minimum_tree_costs_nothing(seed: int) -> None:
    rng = random.Random(seed)
    perm = "".join(rng.sample(DIGITS, 10))  # any relabelling of the tree is optimal too
    secret = rng.choice(sorted(TREE))
    guesses = [_relabel(g, perm) for g in TREE[secret]]
    res = analyse_guesses(DEFAULT_RULES, _relabel(secret, perm), guesses)
    assert [a.guess for a in res] == guesses
    assert all(a.loss == 0 and a.mark is None for a in res)
    assert [a.source for a in res[:3]] == ["table"] * 3
    assert res[0].best_total == sum(len(p) for p in TREE.values()) == 26274
    assert res[0].candidates == 5040
    # the tree's own count for this secret: the expected value is an average over S, and for
    # the last guess (|S| secrets left, the tree's guess solves this one) the path ends there
    assert res[-1].response == "4B"
    assert len(res) == len(TREE[secret])


def _solver_value(solver: Solver, cand: Sequence[str], history: Sequence[str]) -> int:
    """W(S) straight from the engine (absolute guess numbers, so the depth is taken off)."""
    if len(cand) == 1:
        return 1
    idx = [solver.index[c] for c in cand]
    data = array.array("H", sorted(idx)).tobytes()
    value = solver.value(data, [solver.index[h] for h in history])
    return value - len(history) * len(cand)


def test_deviating_guess_figures_match_the_solver() -> None:
    # 0123 against 0142 is 2B1C: the cell of 72 secrets, whose tree guess is 0145 (Tanaka).
    secret, guesses = "0142", ["0123", "4567", "0415", "0142"]
    res = analyse_guesses(DEFAULT_RULES, secret, guesses)
    assert [a.response for a in res][:1] == ["2B1C"]
    second = res[1]
    cell = [s for s in DEFAULT_RULES.secrets if score(s, "0123") == Response(2, 1)]
    assert second.candidates == len(cell) == 72
    assert second.source == "table"
    solver = Solver(DEFAULT_RULES, minimum_objective(), tt_log2=18)
    # best: the tree's value of the cell equals the engine's exact value, which is Tanaka's
    # Table 3 subtotal for 2B1C (guesses after the first, summed over the cell)
    assert second.best_total == _solver_value(solver, cell, ["0123"]) == 240
    # played: |S| plus the exact value of each part 4567 leaves
    parts: dict[Response, list[str]] = {}
    for s in cell:
        parts.setdefault(score(s, "4567"), []).append(s)
    played = len(cell) + sum(_solver_value(solver, p, ["0123", "4567"])
                             for r, p in parts.items() if r != DEFAULT_RULES.solved)
    assert second.played_total == played
    assert second.loss == pytest.approx((played - 240) / 72) and second.loss > 0
    assert second.mark == mark(second.loss)
    # the position after two guesses is in the opening table too, whatever the guesses
    third_cand = parts[score(secret, "4567")]
    assert res[2].source == "table"
    assert res[2].best_total == _solver_value(solver, third_cand, ["0123", "4567"])
    assert all(a.loss >= 0 for a in res)
    assert res[-1].response == "4B"
    reset()  # this test built engines of its own


def test_switching_rules_rebuilds_the_engine() -> None:
    from moo.rules import Rules

    small = analyse_guesses(Rules(3, "012345"), "345", ["012", "345"])
    standard = analyse_guesses(DEFAULT_RULES, "0124", TREE["0124"])
    again = analyse_guesses(Rules(3, "012345"), "345", ["012", "345"])
    assert small == again
    assert standard[0].best_total == 26274


def _brute(cand: frozenset[str]) -> int:
    """Plain-Python W(S): every one of the 5040 guesses at every node, no pruning."""

    @cache
    def w(s: frozenset[str]) -> int:
        if len(s) == 1:
            return 1
        best = None
        for g in DEFAULT_RULES.secrets:
            parts: dict[Response, list[str]] = {}
            for x in s:
                parts.setdefault(score(x, g), []).append(x)
            if len(parts) == 1 and g not in s:
                continue
            total = len(s) + sum(w(frozenset(p)) for r, p in parts.items()
                                 if r != DEFAULT_RULES.solved)
            if best is None or total < best:
                best = total
                if best == 2 * len(s) - 1:  # a member splitting the rest: cannot be beaten
                    break
        assert best is not None
        return best

    return w(cand)


def test_small_position_against_brute_force() -> None:
    secret, guesses = "5381", ["1234", "5678", "3581", "5381"]
    res = analyse_guesses(DEFAULT_RULES, secret, guesses)
    # rebuild the candidate set before each guess independently and check the small ones
    cand = list(DEFAULT_RULES.secrets)
    checked = 0
    for a, g in zip(res, guesses, strict=False):
        assert a.candidates == len(cand)
        if len(cand) <= 6:
            assert a.best_total == _brute(frozenset(cand))
            checked += 1
        r = score(secret, g)
        cand = [s for s in cand if score(s, g) == r]
    assert checked >= 1
    # an optimal guess is shown as its own best guess; a costly one names a different one
    assert all((a.best_guess == a.guess) == (a.loss == 0) for a in res)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", "analyse", *args],
                          capture_output=True, text=True)


def test_cli_json_and_table(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({
        "rules": {"length": 4, "alphabet": DIGITS},
        "players": [{"name": "tree", "secret": "0124", "guesses": TREE["0124"]}],
    }))
    proc = _run(str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    rows = data["players"][0]["guesses"]
    assert [r["guess"] for r in rows] == TREE["0124"]
    assert all(r["loss"] == 0 for r in rows)
    single = tmp_path / "s.json"
    single.write_text(json.dumps({"rules": {}, "secret": "0124", "guesses": ["0123", "4567"]}))
    proc = _run(str(single))
    assert proc.returncode == 0, proc.stderr
    assert "player (secret 0124): 2 guesses" in proc.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("{not json", "is not JSON"),
        ('{"secret": "0124", "guesses": ["01"]}', "expected 4 digits"),
        ('{"secret": "0124"}', "'guesses' must be a list"),
        ('{"rules": {"game": "words"}, "secret": "SKUNK", "guesses": []}',
         "only MOO and Mastermind"),
        ('{"rules": {"game": "mastermind"}, "secret": "1127", "guesses": []}', "only symbols"),
        ('{"rules": {"length": 9}, "secret": "0124", "guesses": []}', "length must be 3-6"),
    ],
)
def test_cli_mistakes_get_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "m.json"
    if content is not None:
        path.write_text(content)
    proc = _run(str(path))
    assert proc.returncode == 2
    assert proc.stderr.startswith("moo analyse: ") and proc.stderr.count("\n") == 1
    assert message in proc.stderr


def test_variant_uses_the_solver_from_the_empty_history() -> None:
    from bots.solver.full import solve_cells
    from moo.rules import Rules

    rules = Rules(3, "012345")
    res = analyse_guesses(rules, "345", ["012", "345"])
    assert [a.source for a in res] == ["solver", "solver"]
    # the first position's optimum is the whole game's minimum total, solved independently
    # by the cell-by-cell solve (first guess fixed, every cell searched separately)
    assert res[0].best_total == solve_cells(rules, minimum_objective()).total
    assert res[0].loss == 0  # every first guess is equivalent


def _brute_mastermind(rules: object, cand: frozenset[str]) -> int:
    """Plain-Python W(S) for a small Mastermind game: every code as a guess, no pruning."""
    from moo.mastermind import MastermindRules, mastermind_score

    assert isinstance(rules, MastermindRules)

    @cache
    def w(s: frozenset[str]) -> int:
        if len(s) == 1:
            return 1
        best = None
        for g in rules.secrets:
            parts: dict[Response, list[str]] = {}
            for x in s:
                parts.setdefault(mastermind_score(x, g), []).append(x)
            if len(parts) == 1 and g not in s:
                continue
            total = len(s) + sum(w(frozenset(p)) for r, p in parts.items() if r != rules.solved)
            best = total if best is None else min(best, total)
        assert best is not None
        return best

    return w(cand)


def test_mastermind_figures_against_brute_force() -> None:
    from moo.mastermind import MastermindRules, mastermind_score

    rules = MastermindRules(3, "123")
    secret, guesses = "312", ["111", "223", "312"]
    res = analyse_guesses(rules, secret, guesses)
    cand = list(rules.secrets)
    for a, g in zip(res, guesses, strict=True):
        assert a.candidates == len(cand)
        assert a.best_total == _brute_mastermind(rules, frozenset(cand))
        parts: dict[Response, list[str]] = {}
        for x in cand:
            parts.setdefault(mastermind_score(x, g), []).append(x)
        assert a.played_total == len(cand) + sum(
            _brute_mastermind(rules, frozenset(p)) for r, p in parts.items() if r != rules.solved)
        assert (a.loss == 0) == (a.best_guess == a.guess)
        r = mastermind_score(secret, g)
        cand = [x for x in cand if mastermind_score(x, g) == r]
    assert res[0].loss > 0  # 111 is a poor opening


def test_mastermind_optimal_tree_costs_nothing() -> None:
    from bots.solver.table import mastermind_solver
    from moo.mastermind import MASTERMIND

    tree = mastermind_solver(MASTERMIND, minimum_objective()).solve().paths
    reset()  # the engine was built outside the analyser
    for secret in ("1451", "6666", "1123"):
        res = analyse_guesses(MASTERMIND, secret, tree[secret])
        assert all(a.loss == 0 and a.mark is None for a in res)
        assert res[0].best_total == 5625
