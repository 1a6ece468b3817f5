"""The adaptive ceiling with the opponent's secret told after round 3 (a tighter bound).

    .venv/bin/python -m bench.adaptive_bound_round3 [--jobs 2]   # solve, store (4 min idle)

The player chooses its second guess knowing its own and the opponent's first responses, its
third knowing both players' first two, and from the fourth guess on plays the best tree for
the revealed K (the round in which the opponent solves). That is a relaxation of adaptive play
(a real player knows less from round 4 on), so its value bounds every adaptive player's score.

Exact where it matters, bounded elsewhere: for each own first-response cell, the second guesses
that can win are solved in full (every third guess, one per class under the relabellings that
fix 0123 and the second guess; the parts it leaves solved exactly per K). A second guess that
is not solved in full is counted with its round-2 value (bench.adaptive_bound's: the secret
told one round earlier), which can only be higher, so the figure stays an upper bound. Which
second guesses are solved: `strongest`'s, then every one whose round-2 value beats the solved
ones' round-3 value for some opponent cell by a margin that matters.
Results go to bench/data/adaptive-bound-round3.json (the bounds and which pairs were
solved); ``--verify`` solves them all again. Every run first checks its machinery:
`strongest`'s own second and third guesses, forced, must give back the round-3 floor that
bench.adaptive_bound computes from other solves (:func:`floor_check`).
"""

from __future__ import annotations

import functools
import itertools
import json
import random
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench.adaptive_bound import (
    DATA_FILE,
    SHIFT,
    fingerprint,
    race_solver,
    relaxation_main,
    second_class,
    second_guesses,
    second_value,
)
from bots.solver import core
from bots.tree import DATA_DIR
from moo.rules import DEFAULT_RULES, score

IntArray = npt.NDArray[np.int64]
OUT_FILE = DATA_FILE.with_name("adaptive-bound-round3.json")
OPPONENTS = ("strongest", "minimum")
#: the K values that need a solve (K <= 3 is settled by whether the third guess hits)
KS = (4, 5, 6, 7)
#: a second guess is solved in full only if its round-2 value can beat the solved ones' by
#: more than this (twice-score units, summed over the opponent's cells): below that, counting
#: its round-2 value costs the bound less than 1e-6
MARGIN = 50


def third_guesses(second: str) -> list[str]:
    """One third guess per class under the relabellings that fix 0123 and ``second``."""
    perms = []
    for perm in itertools.permutations(range(4)):
        digit: dict[int, int] = {d: perm[d] for d in range(4)}  # digits 0-3 go with positions
        ok = True
        for i, ch in enumerate(second):
            d, target = int(ch), int(second[perm[i]])
            if d < 4:
                ok = ok and digit[d] == target
            elif digit.setdefault(d, target) != target or target < 4:
                ok = False
        if ok and len(set(digit.values())) == len(digit):
            perms.append((perm, digit))

    def key(code: str) -> str:
        forms = []
        for perm, digit in perms:
            out = [""] * 4
            for i, ch in enumerate(code):
                d = int(ch)
                out[perm[i]] = str(digit[d]) if d in digit else "?"
            # digits outside 0123 and the second guess are interchangeable: name by order
            names = iter("abcdef")
            forms.append("".join(c if c != "?" else next(names) for c in out))
        return min(forms)

    first: dict[str, str] = {}
    for code in DEFAULT_RULES.secrets:
        first.setdefault(key(code), code)
    return sorted(first.values())


def part_rows(solver: core.Solver, history: list[int], part: bytes,
              thirds: list[str]) -> dict[str, tuple[int, int]]:
    """Per third guess at the own part ``part`` (after ``history``: 0123 and the second
    guess): (hit, W) with W twice the best score over the part when K = k (``solver``'s) is
    known from the fourth guess on."""
    out: dict[str, tuple[int, int]] = {}
    for third in thirds:
        g3 = solver.index[third]
        twice = 0
        hit = 0
        for rid3, part3 in solver.partition(part, g3).items():
            if rid3 == solver.solved_id:
                hit = 1
                twice += 2  # solved at guess 3 < k
            else:
                n = len(part3) // 2
                twice += 2 * n - solver.value(part3, [*history, g3]) // SHIFT
        out[third] = (hit, twice)
    return out


def solve_pair(args: tuple[str, str]) -> tuple[str, str, dict[str, dict[str, list[int]]], float]:
    """For own cell ``cell`` and second guess ``second``: per second response (an unsolved
    part) and third guess, [hit, W(4), .., W(7)] with W(k) twice the best score over the part
    when K = k is known from the fourth guess on."""
    cell, second = args
    started = time.perf_counter()
    thirds = third_guesses(second)
    out: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for k in KS:  # one engine per k: its table of solved sets serves every part
        solver = race_solver(k)
        first, g2 = solver.index["0123"], solver.index[second]
        cand = {str(r): c for r, c in solver.cells("0123").items()}[cell]
        for rid, part in solver.partition(cand, g2).items():
            if rid == solver.solved_id:
                continue
            r2 = str(solver.response_of(rid))
            for third, (hit, twice) in part_rows(solver, [first, g2], part, thirds).items():
                out[r2].setdefault(third, [hit]).append(twice)
    return cell, second, dict(out), time.perf_counter() - started


def solve_part(cell: str, second: str, r2: str) -> dict[str, list[int]]:
    """:func:`solve_pair`'s rows of one part only (the second response ``r2``): what a
    sampled check re-solves."""
    thirds = third_guesses(second)
    out: dict[str, list[int]] = {}
    for k in KS:
        solver = race_solver(k)
        first, g2 = solver.index["0123"], solver.index[second]
        cand = {str(r): c for r, c in solver.cells("0123").items()}[cell]
        part = next(p for rid, p in solver.partition(cand, g2).items()
                    if rid != solver.solved_id and str(solver.response_of(rid)) == r2)
        for third, (hit, twice) in part_rows(solver, [first, g2], part, thirds).items():
            out.setdefault(third, [hit]).append(twice)
    return out


def opponent_cells(name: str) -> dict[str, dict[str, dict[int, int]]]:
    """The opponent's secrets by first response, then by first two responses: K counts."""
    paths = core.load_tree(DATA_DIR / f"{name}.txt.gz")
    out: dict[str, dict[str, dict[int, int]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(int))
    )
    for secret, path in paths.items():
        r1 = str(score(secret, path[0]))
        r2 = "" if len(path) < 2 else str(score(secret, path[1]))
        out[r1][r2][len(path)] += 1
    return out


@functools.cache
def opponent_nodes(name: str) -> tuple[tuple[str, ...], IntArray]:
    """The opponent's depth-2 nodes in a fixed order (sorted by first response, then second;
    the order of the stored vectors): each node's first response, and its K counts as the
    columns of a (7, nodes) array (rows K = 1 .. 7)."""
    cells = opponent_cells(name)
    keys = sorted((r1, r2) for r1, by2 in cells.items() for r2 in by2)
    qs = np.zeros((7, len(keys)), dtype=np.int64)
    for j, (r1, r2) in enumerate(keys):
        for k, c in cells[r1][r2].items():
            qs[k - 1, j] = c
    return tuple(r1 for r1, _r2 in keys), qs


def best_vector(name: str, rows: dict[str, list[int]]) -> list[int]:
    """Per depth-2 node of the opponent ``name``: twice the score over one own part with the
    best third guess for that node (``rows``: [hit, W(4), .., W(7)] per third guess). K <= 2
    nodes score nothing here (the opponent solved before our third guess could draw), and a
    third-guess hit draws against K = 3."""
    _first, qs = opponent_nodes(name)
    m = np.array(list(rows.values()), dtype=np.int64)
    return [int(v) for v in (m @ qs[2:7]).max(axis=0)]


Vectors = dict[str, list[int]]  # second response -> per opponent depth-2 node


def pair_value(name: str, r1: str, cell: str, second: str, parts: Vectors) -> int:
    """Twice the score over own cell ``cell`` with ``second``, summed over the opponent's
    depth-2 nodes under its first response ``r1``, the third guess chosen per part and per node
    (knowing the opponent's first two responses)."""
    first, qs = opponent_nodes(name)
    cols = np.array([j for j, f in enumerate(first) if f == r1], dtype=np.int64)
    hit2 = 1 if str(score(second, "0123")) == cell else 0
    per_k2 = np.array([0, 1, 2, 2, 2, 2, 2], dtype=np.int64)  # a second-guess hit vs K
    twice = hit2 * int(per_k2 @ qs[:, cols].sum(axis=1))
    return twice + sum(int(np.asarray(v, dtype=np.int64)[cols].sum()) for v in parts.values())


def combine(name: str, solved: dict[tuple[str, str], Vectors],
            values: dict[int, dict[str, int]]) -> tuple[Fraction, dict[str, list[str]]]:
    """The bound, and per own cell the second guesses whose round-2 value was used but could
    beat the solved ones by more than MARGIN (to solve next). ``solved``: per (cell, second
    guess) solved in full, :func:`best_vector` of each part against ``name``."""
    cells = sorted({key.split("|")[0] for key in values[max(values)]})
    twice = 0
    gain: dict[tuple[str, str], int] = defaultdict(int)
    for r1, q1 in opponent_cells(name).items():
        q_all: dict[int, int] = defaultdict(int)
        for q in q1.values():
            for k, c in q.items():
                q_all[k] += c
        twice += sum(c * (2 if k > 1 else 1) for k, c in q_all.items())  # our 0123 itself
        for cell in cells:
            exact = [pair_value(name, r1, cell, g, solved[(cell, g)])
                     for g in second_guesses() if (cell, g) in solved]
            best3 = max(exact) if exact else 0
            best = best3
            for g in second_guesses():
                if (cell, g) in solved:
                    continue
                v2 = second_value(q_all, cell, g, values)
                if v2 > best3:
                    gain[(cell, g)] += v2 - best3
                best = max(best, v2)
            twice += best
    todo: dict[str, list[str]] = defaultdict(list)
    for (cell, g), extra in sorted(gain.items()):
        if extra > MARGIN:
            todo[cell].append(g)
    return Fraction(twice, 2 * 5040 * 5040), dict(todo)


def star_guesses() -> dict[str, str]:
    """`strongest`'s second guess in each own cell, as its class's representative."""
    paths = core.load_tree(DATA_DIR / "strongest.txt.gz")
    reps = {second_class(r): r for r in second_guesses()}
    return {
        str(score(secret, path[0])): reps[second_class(path[1])]
        for secret, path in paths.items() if len(path) >= 2
    }


@functools.cache
def star_thirds() -> dict[tuple[str, str], str]:
    """`strongest`'s third guess per own (first, second) response."""
    third: dict[tuple[str, str], str] = {}
    for secret, path in core.load_tree(DATA_DIR / "strongest.txt.gz").items():
        if len(path) >= 3:
            third[(str(score(secret, path[0])), str(score(secret, path[1])))] = path[2]
    return third


def forced_vector(name: str, cell: str, r2: str, rows: dict[str, list[int]]) -> list[int]:
    """:func:`best_vector` with `strongest`'s own third guess in place of the best (its
    second and third guesses are their classes' representatives, so among the rows)."""
    return best_vector(name, {"": rows[star_thirds()[(cell, r2)]]})


def floor_problems(forced: dict[str, dict[str, Vectors]], floors: dict[str, object]) -> list[str]:
    """The same sums with `strongest`'s own second and third guesses forced (``forced``: per
    opponent, per own cell, :func:`forced_vector` of each part) must give back the round-3
    floor that bench.adaptive_bound computes from other solves (`strongest`'s depth-3 cells)."""
    star = star_guesses()
    problems = []
    for name in OPPONENTS:
        twice = 0
        for r1, q1 in opponent_cells(name).items():
            twice += sum(c * (2 if k > 1 else 1) for q in q1.values() for k, c in q.items())
            for cell, second in star.items():
                twice += pair_value(name, r1, cell, second, forced[name][cell])
        got = Fraction(twice, 2 * 5040 * 5040)
        want = Fraction(floors[name]["reveal_floor"]["3"])  # type: ignore[index]
        if got != want:
            problems.append(f"{name}: strongest's own guesses give {got}, the floor is {want}")
    return problems


def vectors_of(solved: dict[tuple[str, str], dict[str, dict[str, list[int]]]]
               ) -> dict[str, dict[str, dict[str, Vectors]]]:
    """What the stored file keeps of the full solves: per opponent, per "cell|second", the
    best vector of each part (``parts``); and the forced vectors of `strongest`'s own pairs
    (``forced``, per opponent and own cell)."""
    star = star_guesses()
    return {
        "parts": {name: {f"{c}|{g}": {r2: best_vector(name, rows) for r2, rows in parts.items()}
                         for (c, g), parts in sorted(solved.items())} for name in OPPONENTS},
        "forced": {name: {c: {r2: forced_vector(name, c, r2, rows)
                              for r2, rows in solved[(c, g)].items()}
                          for c, g in sorted(star.items())} for name in OPPONENTS},
    }


def bounds_of(stored_parts: dict[str, dict[str, Vectors]], values: dict[int, dict[str, int]]
              ) -> tuple[dict[str, str], set[tuple[str, str]]]:
    """The bound per opponent from the stored part vectors, and the second guesses still to
    solve (those that could beat the solved ones by more than MARGIN)."""
    bounds: dict[str, str] = {}
    more: set[tuple[str, str]] = set()
    for name in OPPONENTS:
        solved = {(key.split("|")[0], key.split("|")[1]): parts
                  for key, parts in stored_parts[name].items()}
        bound, need = combine(name, solved, values)
        bounds[name] = str(bound)
        more |= {(c, g) for c, gs in need.items() for g in gs}
    return bounds, more


def round2_values() -> dict[int, dict[str, int]]:
    return {int(k): v for k, v in json.loads(DATA_FILE.read_text())["second_round"].items()}


def run(jobs: int, checkpoint: Path | None, log: bool = True) -> dict[str, object]:
    """Solve `strongest`'s second guesses, then every one that could still win, until none
    can by more than MARGIN; the bounds, with what was solved and each solved part's best
    vector (what :func:`sample_problems` checks)."""
    values = round2_values()
    solved: dict[tuple[str, str], dict[str, dict[str, list[int]]]] = {}
    if checkpoint is not None and checkpoint.exists():
        for key, parts in json.loads(checkpoint.read_text()).items():
            cell, g = key.split("|")
            solved[(cell, g)] = parts
    todo = set(star_guesses().items())
    started = time.perf_counter()
    while True:
        todo -= set(solved)
        if todo:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                for cell, g, parts, secs in pool.map(solve_pair, sorted(todo)):
                    solved[(cell, g)] = parts
                    if checkpoint is not None:
                        checkpoint.parent.mkdir(parents=True, exist_ok=True)
                        checkpoint.write_text(
                            json.dumps({f"{c}|{x}": v for (c, x), v in solved.items()})
                        )
                    if log:
                        print(f"solved cell {cell}, second guess {g}: {secs:.0f} s "
                              f"({time.perf_counter() - started:.0f} s)", flush=True)
        kept = vectors_of(solved)
        bounds, more = bounds_of(kept["parts"], values)
        todo = more - set(solved)
        if not todo:
            break
    floors = json.loads(DATA_FILE.read_text())["opponents"]
    problems = floor_problems(kept["forced"], floors)
    if problems:
        raise SystemExit("; ".join(problems))
    return {
        "fingerprint": fingerprint(),
        "margin": MARGIN,
        "solved": sorted(f"{c}|{g}" for c, g in solved),
        "bound": bounds,
        **kept,
    }


def sample_problems(stored: dict[str, object], count: int, seed: int) -> list[str]:
    """What is wrong with the stored file, checked in seconds (empty: nothing found).

    ``--verify`` solves every pair again (minutes). This recomputes the bounds from the stored
    part vectors and the round-2 file, the floor check from the stored forced vectors, and
    re-solves a seeded random ``count`` of the parts of at most SAMPLE_MAX codes (every third
    guess, every K): their best and forced vectors must be the stored ones."""
    problems: list[str] = []
    if stored.get("fingerprint") != fingerprint():
        problems.append("fingerprint: not computed from today's trees")
    parts: dict[str, dict[str, Vectors]] = stored["parts"]  # type: ignore[assignment]
    forced: dict[str, dict[str, Vectors]] = stored["forced"]  # type: ignore[assignment]
    bounds, more = bounds_of(parts, round2_values())
    if bounds != stored["bound"]:
        problems.append(f"bound: the stored part vectors give {bounds}")
    if more:
        problems.append(f"unsolved second guesses could still win: {sorted(more)}")
    if sorted(parts[OPPONENTS[0]]) != stored["solved"]:
        problems.append("solved: not the pairs whose vectors are stored")
    problems += floor_problems(forced, json.loads(DATA_FILE.read_text())["opponents"])
    star = star_guesses()
    for key, r2 in sample_parts(stored, count, seed):
        cell, second = key.split("|")
        rows = solve_part(cell, second, r2)
        for name in OPPONENTS:
            if best_vector(name, rows) != parts[name][key][r2]:
                problems.append(f"parts.{name}.{key}.{r2}: solved again, the vector differs")
            if star.get(cell) == second and forced_vector(name, cell, r2, rows) != \
                    forced[name][cell][r2]:
                problems.append(f"forced.{name}.{cell}.{r2}: solved again, the vector differs")
    return problems


#: the parts a sampled check may re-solve: up to this many codes (a part of 60 codes takes
#: about a second; the largest, several hundred, take minutes and are left to --verify)
SAMPLE_MAX = 60


def sample_parts(stored: dict[str, object], count: int, seed: int) -> list[tuple[str, str]]:
    """A seeded random ``count`` of the stored ("cell|second", second response) parts of at
    most SAMPLE_MAX codes."""
    solver = race_solver(KS[0])
    cells = {str(r): c for r, c in solver.cells("0123").items()}
    small = []
    for key in sorted(stored["parts"][OPPONENTS[0]]):  # type: ignore[index]
        cell, second = key.split("|")
        for rid, part in sorted(solver.partition(cells[cell], solver.index[second]).items()):
            if rid != solver.solved_id and len(part) // 2 <= SAMPLE_MAX:
                small.append((key, str(solver.response_of(rid))))
    return random.Random(seed).sample(small, min(count, len(small)))


def main(argv: list[str] | None = None) -> int:
    return relaxation_main(argv, __doc__ or "", OUT_FILE, "adaptive_bound_round3", run,
                           sample_problems)


if __name__ == "__main__":
    sys.exit(main())
