"""Mastermind: the scoring rule, the native table, and the exact solver (generic engine)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
import pytest

from bots.solver import _table
from bots.solver.core import minimum_objective, score_vs, strongest_objective
from bots.solver.full import verify_paths
from bots.solver.table import mastermind_solver
from moo.errors import UnknownSymbol, WrongLength
from moo.mastermind import MASTERMIND, MastermindRules, mastermind_score
from moo.rules import Response
from tests.fresh_process import in_a_fresh_process


def test_exhaustive_4_of_6_against_independent_formulation() -> None:
    codes = MASTERMIND.secrets
    assert len(codes) == 1296
    blacks, whites = _independent_all(codes)
    for i, s in enumerate(codes):
        row_b, row_w = blacks[i].tolist(), whites[i].tolist()
        for j, g in enumerate(codes):
            assert mastermind_score(s, g) == (row_b[j], row_w[j]), (s, g)
    # the score is symmetric
    assert (blacks == blacks.T).all() and (whites == whites.T).all()
    seen = set(zip(blacks.ravel().tolist(), whites.ravel().tolist(), strict=True))
    assert seen == set(MASTERMIND.responses)
    assert len(seen) == 14


def _independent_all(codes: Sequence[str]) -> tuple[Any, Any]:
    """Knuth's formulation for every (secret, guess) pair at once: whites = sum over colours of
    min(counts) - blacks, as two 1296 x 1296 matrices.

    Written differently on purpose (per-colour counts over the alphabet, no dict walk; numpy
    over all pairs) so a shared mistake is unlikely.
    """
    pegs = np.array([[int(c) for c in code] for code in codes])
    blacks = (pegs[:, None, :] == pegs[None, :, :]).sum(axis=2)
    counts = np.stack([(pegs == c).sum(axis=1) for c in range(1, 7)], axis=1)
    total = np.minimum(counts[:, None, :], counts[None, :, :]).sum(axis=2)
    return blacks, total - blacks


@pytest.mark.parametrize(
    ("guess", "hint"),
    # The APL note's table for the code ABBA: * is a black peg, + a white one.
    [("EACD", "+"), ("CDEF", ""), ("BACD", "++"), ("AAAD", "*+"), ("BAAB", "++++"),
     ("BABA", "**++"), ("AAAA", "**"), ("ABBA", "****")],
)
def test_apl_note_examples(guess: str, hint: str) -> None:
    assert mastermind_score("ABBA", guess) == Response(hint.count("*"), hint.count("+"))


def test_apl_note_game() -> None:
    # The note's example game against ADEA: FECF +, BABC +, EBDB ++, DDFB *, ADEA ****.
    game = [("FECF", (0, 1)), ("BABC", (0, 1)), ("EBDB", (0, 2)), ("DDFB", (1, 0)),
            ("ADEA", (4, 0))]
    for guess, want in game:
        assert mastermind_score("ADEA", guess) == want


def test_native_table_matches_python() -> None:
    codes = MASTERMIND.secrets
    packed = bytes(int(ch) - 1 for c in codes for ch in c)
    table = _table.mastermind_table(packed, 4, 6)
    n = len(codes)
    for g in range(0, n, 7):  # every 7th guess row against all secrets (1/7 of 1.7 M)
        for s in range(n):
            b, w = divmod(table[g * n + s], 5)
            assert (b, w) == mastermind_score(codes[s], codes[g])


def test_check_code() -> None:
    assert MASTERMIND.check_code("1123") == "1123"
    # nothing is trimmed, as for MOO codes in the protocol: a space is a symbol not in the set
    with pytest.raises(UnknownSymbol, match="not ' '"):
        MASTERMIND.check_code(" 1123 ")
    with pytest.raises(WrongLength):
        MASTERMIND.check_code("112")
    with pytest.raises(UnknownSymbol):
        MASTERMIND.check_code("1127")
    with pytest.raises(ValueError):
        MastermindRules(4, "1123")


def _brute_minimum(rules: MastermindRules) -> int:
    """Plain-Python exhaustive minimum total (every guess at every node, no pruning)."""
    codes = rules.secrets

    @cache
    def value(cand: frozenset[str]) -> int:
        # guesses needed from here, summed over cand
        if len(cand) == 1:
            return 1
        best = None
        for g in codes:
            parts: dict[Response, list[str]] = {}
            for s in cand:
                parts.setdefault(mastermind_score(s, g), []).append(s)
            if len(parts) == 1 and g not in cand:
                continue
            total = len(cand)
            for r, p in parts.items():
                if r != rules.solved:
                    total += value(frozenset(p))
            if best is None or total < best:
                best = total
        assert best is not None
        return best

    return value(frozenset(codes))


@pytest.mark.parametrize(("length", "alphabet"), [(2, "1234"), (3, "123"), (2, "12345")])
def test_solver_matches_brute_force(length: int, alphabet: str) -> None:
    rules = MastermindRules(length, alphabet)
    res = mastermind_solver(rules, minimum_objective()).solve()
    assert res.total == _brute_minimum(rules)
    verify_paths(rules, res.paths, mastermind_score)


def test_solver_with_and_without_symmetry_agree() -> None:
    from bots.solver.table import TableSolver

    rules = MastermindRules(3, "1234")
    with_sym = mastermind_solver(rules, minimum_objective()).solve()
    without = TableSolver(rules, minimum_objective(), symmetry=False).solve()
    assert with_sym.total == without.total


def test_full_4_of_6_minimum_and_strongest() -> None:
    """The known optimum 5625 (Koyama and Lai 1993) is found by search, not supplied."""
    res = mastermind_solver(MASTERMIND, minimum_objective()).solve()
    assert res.total == 5625
    verify_paths(MASTERMIND, res.paths, mastermind_score)
    assert sum(res.distribution) == 1296
    opponent = res.distribution
    strong = mastermind_solver(MASTERMIND, strongest_objective(opponent)).solve()
    verify_paths(MASTERMIND, strong.paths, mastermind_score)
    gsum, rate = score_vs(strong.distribution, opponent)
    # Best response to the minimum tree: strictly better than a draw-level 50 %, and at least
    # as good as playing the minimum tree itself (Gamma sum 0 against itself).
    assert gsum > 0 and rate > 0.5
    assert score_vs(res.distribution, opponent)[0] == 0


def test_cli_prints_total_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cli", "solve", "minimum", "--game", "mastermind", "--length",
         "3", "--alphabet", "123", "--quiet"],
        capture_output=True, text=True, check=True,
    ).stdout
    brute = _brute_minimum(MastermindRules(3, "123"))  # (the brute force is exponential)
    assert f"total {brute} over 27 secrets" in out


def test_cli_rejects_cell_and_bad_alphabet() -> None:
    for extra in (["--cell", "1B"], ["--alphabet", "1123"],
                  ["--length", "6", "--alphabet", "123456789"]):
        proc = subprocess.run(
            [sys.executable, "-m", "cli", "solve", "minimum", "--game", "mastermind", *extra],
            capture_output=True, text=True,
        )
        assert proc.returncode == 2
        assert proc.stderr.startswith("moo solve:") and "Traceback" not in proc.stderr



# -- the engine shared with MOO (bots/solver/mastermind.py on _mastermind) -----------------------


def test_engines_agree_on_4_of_4() -> None:
    """The MOO engine built for repeats and the generic table engine are separate C code: the
    same optimal total from both, each tree replayed with the Python scoring."""
    from bots.solver.mastermind import MastermindSolver
    from bots.solver.table import TableSolver

    rules = MastermindRules(4, "1234")
    fast = MastermindSolver(rules, minimum_objective()).solve()
    generic = TableSolver(rules, minimum_objective()).solve()
    assert fast.total == generic.total == fast.value
    verify_paths(rules, fast.paths, mastermind_score)


def test_split_gives_the_one_process_tree() -> None:
    """--jobs plays the first and second guesses in the parent and the rest in workers, with
    cutoffs that depend on timing; the tree must still be exactly the one-process tree (in a
    fresh process: the workers are forked, tests/fresh_process.py)."""
    got = in_a_fresh_process("""
import json
from bots.solver import mastermind
from bots.solver.core import minimum_objective
from moo.mastermind import MastermindRules
rules = MastermindRules(4, "12345")
one = mastermind.MastermindSolver(rules, minimum_objective()).solve()
mastermind.SPLIT_MIN = 20  # split every first cell of 20+
two = mastermind.MastermindSolver(rules, minimum_objective()).solve(jobs=2)
print(json.dumps({"paths": two.paths == one.paths, "first": two.first_guess == one.first_guess,
                  "total": two.total == one.total}))
""")
    assert got == {"paths": True, "first": True, "total": True}


def test_moo_and_mastermind_engines_coexist() -> None:
    """Two builds of one C file: starting the Mastermind engine leaves the MOO one's tables
    alone (a process can analyse both games)."""
    from bots.solver.core import Solver
    from bots.solver.mastermind import MastermindSolver
    from moo.rules import Rules

    moo = Solver(Rules(length=3, alphabet="012345"), minimum_objective())
    cells = moo.cells()
    before = {r: moo.value(c, [0]) for r, c in cells.items() if r != moo.rules.solved}
    MastermindSolver(MastermindRules(4, "123456"), minimum_objective()).best(range(1296), [])
    after = {r: moo.value(c, [0]) for r, c in cells.items() if r != moo.rules.solved}
    assert after == before


SHIPPED = [("1234567", 2401, 11228), ("12345678", 4096, 20471)]


@pytest.mark.parametrize(("alphabet", "n", "published"), SHIPPED)
def test_shipped_optimal_trees_replay(alphabet: str, n: int, published: int) -> None:
    """The shipped 4-of-7 and 4-of-8 trees (``moo solve minimum --rules mastermind:4:...``)
    replayed with the Python scoring: a decision tree over every code, whose total is at most
    the published optimum (Ville 2013: 11228; arfst23: 20471)."""
    from pathlib import Path

    from bots.solver.core import load_tree

    rules = MastermindRules(4, alphabet)
    path = (Path(__file__).resolve().parents[2] / "bots" / "data"
            / f"mastermind-4-{alphabet}-minimum.txt.gz")
    paths = load_tree(path)
    assert len(paths) == n
    verify_paths(rules, paths, mastermind_score)
    total = sum(len(p) for p in paths.values())
    assert total <= published
    # An optimal total cannot be below what the engine's admissible bound allows.
    from bots.solver import _mastermind

    _mastermind.init(4, len(alphabet), list(minimum_objective().costs), 16, True)
    assert total >= _mastermind.lower_bound(n, 0)


def test_4_of_7_solves_to_villes_optimum() -> None:
    """The whole 4-of-7 game from the empty history, one process: Ville's optimal total."""
    from bots.solver.mastermind import MastermindSolver

    rules = MastermindRules(4, "1234567")
    res = MastermindSolver(rules, minimum_objective()).solve()
    assert res.total == res.value == 11228
    verify_paths(rules, res.paths, mastermind_score)
