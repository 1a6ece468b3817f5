"""The judge (bots/judge): the shipped opening table against the solver, the table-free search
against the solver, relabelling, and the practice assistant, whose every suggestion the
post-match review rates best (loss 0) in every variant it covers."""

from __future__ import annotations

import array
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from bots.judge import _search, opening
from bots.judge.assistant import assist
from bots.judge.review import analyse_guesses
from bots.judge.values import MooJudge, exact_feasible, judge_for, reset
from bots.solver.core import Solver, load_tree, minimum_objective
from moo.mastermind import MastermindRules
from moo.rules import DEFAULT_RULES, Response, Rules, score

DATA = Path(__file__).resolve().parents[2] / "bots" / "data"


def _value(solver: Solver, cand: Sequence[str], history: Sequence[str]) -> int:
    """W(S) from the solver's engine (absolute guess numbers, so the depth is taken off)."""
    if len(cand) == 1:
        return 1
    data = array.array("H", sorted(solver.index[c] for c in cand)).tobytes()
    return solver.value(data, [solver.index[h] for h in history]) - len(history) * len(cand)


def test_table_cells_are_the_minimum_trees() -> None:
    """Each first-response cell's value is the shipped minimum tree's subtotal of that cell
    (a subtree of an optimal tree is optimal), and the root adds up to the tree's total."""
    tree = load_tree(DATA / "minimum.txt.gz")
    table = opening.load()
    first = {p[0] for p in tree.values()}
    assert first == {"0123"}
    cells: dict[Response, int] = {}
    for secret, path in tree.items():
        r = score(secret, "0123")
        if r != DEFAULT_RULES.solved:
            cells[r] = cells.get(r, 0) + len(path) - 1
    for r, subtotal in cells.items():
        hit = table.cell(r)
        assert hit is not None and hit[0] == subtotal, r
    judge = judge_for(DEFAULT_RULES)
    assert judge.best([], range(5040))[0] == sum(len(p) for p in tree.values())


def test_table_sample_against_the_solver() -> None:
    """A sample of the shipped positions solved again by the solver's engine; the shipped guess
    reaches the shipped value (its parts solved by the engine too). All of them:
    python -m bench.judge_table --verify."""
    table = opening.load()
    entries = [e for e in opening.positions() if len(e[2]) <= 60 and len(e[1]) == 2]
    sample = random.Random(7).sample(entries, 12)
    solver = Solver(DEFAULT_RULES, minimum_objective(), tt_log2=18)
    try:
        for key, history, secrets in sample:
            value, guess = table.entries[key]
            assert _value(solver, secrets, history) == value, key
            parts: dict[Response, list[str]] = {}
            for s in secrets:
                parts.setdefault(score(s, guess), []).append(s)
            assert len(secrets) + sum(_value(solver, p, [*history, guess])
                                      for r, p in parts.items()
                                      if r != DEFAULT_RULES.solved) == value, key
    finally:
        reset()  # the engine built here is process-wide


def test_search_agrees_with_the_solver() -> None:
    """The judge's table-free search and the solver's engine on positions after three random
    guesses (values and an optimal guess)."""
    rng = random.Random(11)
    solver = Solver(DEFAULT_RULES, minimum_objective(), tt_log2=18)
    _search.init(4, 10)
    codes = DEFAULT_RULES.secrets
    try:
        checked = 0
        while checked < 15:
            secret = rng.choice(codes)
            history = ["0123", rng.choice(codes), rng.choice(codes)]
            cand = [c for c in codes if all(score(c, g) == score(secret, g) for g in history)]
            if not 3 <= len(cand) <= 60:
                continue
            data = array.array("H", sorted(solver.index[c] for c in cand)).tobytes()
            solved = _search.solve(data)
            assert solved is not None
            value, guess = solved
            assert value == _value(solver, cand, history)
            parts: dict[Response, list[str]] = {}
            for s in cand:
                parts.setdefault(score(s, codes[guess]), []).append(s)
            assert len(cand) + sum(_value(solver, p, [*history, codes[guess]])
                                   for r, p in parts.items()
                                   if r != DEFAULT_RULES.solved) == value
            checked += 1
    finally:
        reset()


def test_relabelling_keeps_responses() -> None:
    rng = random.Random(3)
    codes = DEFAULT_RULES.secrets
    classes = set(opening.second_classes())
    assert len(classes) == 20
    for _ in range(200):
        a, b, x, y = (rng.choice(codes) for _ in range(4))
        canon, rel = opening.canonical_pair(a, b)
        assert rel.apply(a) == "0123" and rel.apply(b) == canon and canon in classes
        assert rel.undo(rel.apply(x)) == x
        assert score(rel.apply(x), rel.apply(y)) == score(x, y)


def _follow(rules: Rules | MastermindRules, secret: str, rng: random.Random,
            free: int) -> list[str]:
    """Guesses of a player who plays ``free`` random codes, then the assistant's suggestion at
    every step; at each suggestion the judge's W(S, suggestion) must equal W(S)."""
    judge = judge_for(rules)
    guesses: list[str] = []
    history: list[tuple[str, Response]] = []
    while not guesses or guesses[-1] != secret:
        said = assist(rules, history)
        assert said.suggestion is not None
        cand = [i for i, c in enumerate(judge.codes)
                if all(rules.score(c, g) == r for g, r in history)]
        assert said.left == len(cand)
        if len(guesses) < free:
            guess = rng.choice(rules.secrets)
        else:
            guess = said.suggestion
            best = judge.best(history, cand)[0]
            assert judge.played(history, cand, guess) == best  # computed from its parts
        guesses.append(guess)
        history.append((guess, rules.score(secret, guess)))
        assert len(guesses) <= 12
    return guesses


@pytest.mark.parametrize(("rules", "matches"), [
    (DEFAULT_RULES, 40),
    (Rules(3, "0123456789"), 10),
    (MastermindRules(), 10),
])
def test_assistant_suggestions_lose_nothing(rules: Rules | MastermindRules,
                                            matches: int) -> None:
    """Play the assistant's suggestion at every step of many matches (after 0-2 random
    guesses, so positions off the optimal line are covered too): the review finds loss 0 for
    every suggested guess."""
    rng = random.Random(5)
    try:
        for m in range(matches):
            secret = rng.choice(rules.secrets)
            free = m % 3
            guesses = _follow(rules, secret, rng, free)
            review = analyse_guesses(rules, secret, guesses)
            assert len(review) == len(guesses)
            assert all(a.loss == 0 and a.mark is None for a in review[free:])
    finally:
        reset()


def test_assistant_counts_before_the_first_guess() -> None:
    said = assist(DEFAULT_RULES, [])
    assert said.left == 5040 and said.first
    assert said.text() == f"AT FIRST 5040 POSSIBLE CODES; TRY {said.suggestion}"
    mm = assist(MastermindRules(), [])
    assert mm.left == 1296 and mm.text().startswith("AT FIRST 1296 POSSIBLE CODES; TRY ")
    after = assist(DEFAULT_RULES, [("0123", 0, 0)])
    assert after.left == 360 and after.text().startswith("360 CODES STILL POSSIBLE; TRY ")
    reset()


def test_assistant_only_counts_where_nothing_is_exact() -> None:
    big = Rules(5, "0123456789")
    assert exact_feasible(big) is not None
    said = assist(big, [("01234", 0, 0)])
    assert said.suggestion is None and said.text() == f"{said.left} CODES STILL POSSIBLE."
    assert assist(DEFAULT_RULES, [("0123", 4, 0)]).text() == "ONE CODE IS POSSIBLE: 0123"
    assert assist(DEFAULT_RULES, [("0123", 0, 0), ("0123", 4, 0)]).left == 0


def test_missing_table_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(opening, "TABLE", tmp_path / "none.txt.gz")
    with pytest.raises(ValueError, match="opening table is missing"):
        MooJudge(DEFAULT_RULES)


def test_a_classic_review_needs_no_solver_engine() -> None:
    """A fresh process reviews a classic match from the table and the table-free search: the
    solver's engine (a second of response table to build) is never imported."""
    code = ("import sys; from bots.judge.review import analyse_guesses; "
            "from moo.rules import DEFAULT_RULES as R; "
            "r = analyse_guesses(R, '5381', ['1234', '5678', '3581', '9012', '5381']); "
            "assert r[-1].response == '4B'; "
            "assert 'bots.solver._native' not in sys.modules, 'engine built'; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
