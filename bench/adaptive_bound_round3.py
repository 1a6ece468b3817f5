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

import itertools
import json
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


def solve_pair(args: tuple[str, str]) -> tuple[str, str, dict[str, dict[str, list[int]]], float]:
    """For own cell ``cell`` and second guess ``second``: per second response (an unsolved
    part) and third guess, [hit, W(4), .., W(7)] with W(k) twice the best score over the part
    when K = k is known from the fourth guess on."""
    cell, second = args
    started = time.perf_counter()
    thirds = third_guesses(second)
    out: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for k in KS:
        solver = race_solver(k)
        first, g2 = solver.index["0123"], solver.index[second]
        cand = {str(r): c for r, c in solver.cells("0123").items()}[cell]
        for rid, part in solver.partition(cand, g2).items():
            if rid == solver.solved_id:
                continue
            r2 = str(solver.response_of(rid))
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
                        twice += 2 * n - solver.value(part3, [first, g2, g3]) // SHIFT
                row = out[r2].setdefault(third, [hit])
                row.append(twice)
    return cell, second, dict(out), time.perf_counter() - started


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


def _matrices(parts: dict[str, dict[str, list[int]]]) -> list[npt.NDArray[np.int64]]:
    """Per part: one row per third guess, [hit, W(4), .., W(7)]."""
    return [np.array(list(rows.values()), dtype=np.int64) for rows in parts.values()]


def value3(qs: npt.NDArray[np.int64], cell: str, second: str,
           mats: list[npt.NDArray[np.int64]]) -> int:
    """Twice the score over own cell ``cell`` with ``second``, summed over opponent cells whose
    K counts are the columns of ``qs`` (rows: K = 1 .. 7), the third guess chosen per part and
    per opponent cell (knowing the opponent's first two responses)."""
    hit2 = 1 if str(score(second, "0123")) == cell else 0
    per_k2 = np.array([0, 1, 2, 2, 2, 2, 2], dtype=np.int64)  # a second-guess hit vs K
    twice = hit2 * int(per_k2 @ qs.sum(axis=1))
    sub = qs[2:7]  # K = 3 .. 7: the part's secrets score nothing if the opponent solved by 2
    for m in mats:
        twice += int((m @ sub).max(axis=0).sum())
    return twice


def _counts(q1: dict[str, dict[int, int]]) -> npt.NDArray[np.int64]:
    """K counts (rows K = 1 .. 7) per opponent depth-2 node (columns)."""
    qs = np.zeros((7, len(q1)), dtype=np.int64)
    for j, q in enumerate(q1.values()):
        for k, c in q.items():
            qs[k - 1, j] = c
    return qs


def combine(name: str, solved: dict[tuple[str, str], dict[str, dict[str, list[int]]]],
            values: dict[int, dict[str, int]]) -> tuple[Fraction, dict[str, list[str]]]:
    """The bound, and per own cell the second guesses whose round-2 value was used but could
    beat the solved ones by more than MARGIN (to solve next)."""
    cells = sorted({key.split("|")[0] for key in values[max(values)]})
    mats = {key: _matrices(parts) for key, parts in solved.items()}
    twice = 0
    gain: dict[tuple[str, str], int] = defaultdict(int)
    for q1 in opponent_cells(name).values():
        qs = _counts(q1)
        q_all = {k + 1: int(c) for k, c in enumerate(qs.sum(axis=1)) if c}
        twice += sum(c * (2 if k > 1 else 1) for k, c in q_all.items())  # our 0123 itself
        for cell in cells:
            exact = [value3(qs, cell, g, mats[(cell, g)])
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


def floor_check(solved: dict[tuple[str, str], dict[str, dict[str, list[int]]]]) -> None:
    """The same machinery with `strongest`'s own second and third guesses forced must give back
    the round-3 floor of bench.adaptive_bound (computed there by other solves: `strongest`'s
    depth-3 cells). `strongest`'s second and third guesses are their classes' representatives,
    so they are among the solved rows."""
    paths = core.load_tree(DATA_DIR / "strongest.txt.gz")
    star = star_guesses()
    third: dict[tuple[str, str], str] = {}
    for secret, path in paths.items():
        if len(path) >= 3:
            third[(str(score(secret, path[0])), str(score(secret, path[1])))] = path[2]
    floors = json.loads(DATA_FILE.read_text())["opponents"]
    for name in OPPONENTS:
        twice = 0
        for q1 in opponent_cells(name).values():
            qs = _counts(q1)
            twice += sum(int(c) * (2 if k > 0 else 1) for k, c in enumerate(qs.sum(axis=1)))
            for cell, second in star.items():
                parts = solved[(cell, second)]
                forced = [np.array([rows[third[(cell, r2)]]], dtype=np.int64)
                          for r2, rows in parts.items()]
                twice += value3(qs, cell, second, forced)
        got = Fraction(twice, 2 * 5040 * 5040)
        want = Fraction(floors[name]["reveal_floor"]["3"])
        if got != want:
            raise SystemExit(f"{name}: strongest's own guesses give {got}, the floor is {want}")


def run(jobs: int, checkpoint: Path | None, log: bool = True) -> dict[str, object]:
    """Solve `strongest`'s second guesses, then every one that could still win, until none
    can by more than MARGIN; the bounds, with what was solved."""
    values = {int(k): v for k, v in json.loads(DATA_FILE.read_text())["second_round"].items()}
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
        bounds: dict[str, str] = {}
        more: set[tuple[str, str]] = set()
        for name in OPPONENTS:
            bound, need = combine(name, solved, values)
            bounds[name] = str(bound)
            more |= {(c, g) for c, gs in need.items() for g in gs}
        todo = more - set(solved)
        if not todo:
            break
    floor_check(solved)
    return {
        "fingerprint": fingerprint(),
        "margin": MARGIN,
        "solved": sorted(f"{c}|{g}" for c, g in solved),
        "bound": bounds,
    }


def main(argv: list[str] | None = None) -> int:
    return relaxation_main(argv, __doc__ or "", OUT_FILE, "adaptive_bound_round3", run)


if __name__ == "__main__":
    sys.exit(main())
