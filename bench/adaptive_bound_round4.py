"""The adaptive ceiling with the opponent's secret told after round 4 (the tightest bound).

    .venv/bin/python -m bench.adaptive_bound_round4 [--jobs 2]   # solve, store
    .venv/bin/python -m bench.adaptive_bound_round4 --verify     # solve again, compare

The player chooses its second guess knowing both players' first responses, its third knowing
both players' first two, its fourth knowing both players' first three, and from the fifth guess
on plays the best tree for the revealed K (the round in which the opponent solves). A real
player knows less from round 5 on, so this relaxation's value bounds every adaptive player's.

How it is computed. Write sc_j(K) for a secret solved by our j-th guess, doubled (2 if j < K,
1 if j = K, else 0), o1, o2, o3 for the opponent's nodes after its first one, two and three
responses (``q_o(k)``: how many of its secrets there solve at guess k), and S2, S3 for our own
candidate sets after two and three guesses. Then the value is, doubled and summed over all
5040 x 5040 pairs of secrets,

    sum over o1 of [ sum_{t in o1} sc_1(K_t) + sum over our cells c1 of max over g2 of F ]
    F(c1, g2, o1) = [g2 in c1] sum_{t in o1} sc_2(K_t) + sum_{S2} sum_{o2 in o1} max_g3 G
    G(S2, g3, o2) = [g3 in S2] sum_{t in o2} sc_3(K_t)
                    + sum_{S3} sum_{o3 in o2} max over all 5040 g4 of sum_k q_o3(k) V(S3, g4, k)

where V(S3, g4, k) is the best doubled score of S3 when g4 is asked and K = k is known from the
fifth guess on (:mod:`bots.solver.race` enumerates it for every g4 at once, k = 4 .. 7;
`strongest` solves every secret by guess 7). Only the undominated vectors V(S3, g4, .) matter.
Every shortcut below replaces a value by one it cannot exceed, so the figure stays a bound:

- third guesses one per class under the relabellings that fix 0123 and the second guess (they
  map S2 onto itself); each one's value with the secret told after round 3 (the exact
  engine's, ``bench.adaptive_bound_round3.solve_pair``) bounds its round-4 value, so
  `strongest`'s is solved first, the others in decreasing round-3 value, and one whose round-3
  value beats the best so far by at most SKIP in all is counted at its round-3 value (the
  amounts so taken are stored as ``slack``);
- fourth guesses: every one, exactly at S3 sets of up to EXACT7_MAX codes; above, the K = 7
  entry (and above EXACT6_MAX the K = 6 one) of every vector is raised to the set's own best
  for that K, the engine's exact solve;
- second guesses: `strongest`'s are solved after round 4; any other counts with its round-2
  value (bench/data/adaptive-bound.json), its round-3 value once that one could beat the
  solved ones by more than MARGIN, and is solved after round 4 once its round-3 value still
  could.

Checks on every run: with `strongest`'s own second, third and fourth guesses forced, the same
sums give back the round-4 floor that ``bench.adaptive_bound`` computes with the exact engine
(``reveal_floor["4"]``), and with the secret told after round 3 instead, the round-3 floor.
"""

from __future__ import annotations

import functools
import json
import random
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.adaptive_bound import (
    DATA_FILE,
    SHIFT,
    fingerprint,
    race_solver,
    relaxation_main,
    second_guesses,
    second_value,
)
from bench.adaptive_bound_round3 import solve_pair as round3_rows
from bench.adaptive_bound_round3 import solve_part as round3_part
from bench.adaptive_bound_round3 import star_guesses
from bots.solver import core, race
from bots.tree import DATA_DIR
from moo.rules import DEFAULT_RULES, score

OUT_FILE = DATA_FILE.with_name("adaptive-bound-round4.json")
OPPONENTS = ("strongest",)
CODES: list[str] = list(DEFAULT_RULES.secrets)
INDEX = {c: i for i, c in enumerate(CODES)}
SOLVED = 20  # 4 bulls in the table's ids (bulls * 5 + cows)
#: a second guess is solved (after round 3, then after round 4) only while its stand-in value
#: can beat the solved ones' by more than this, doubled and summed over the opponent's cells
MARGIN = 50
#: every fourth guess is enumerated exactly at S3 sets of up to EXACT7_MAX codes; up to K = 6
#: at sets of up to EXACT6_MAX; up to K = 5 beyond (the rest raised to the set's best)
EXACT7_MAX = 30
EXACT6_MAX = 120
#: a third guess is not solved in full when its round-3 value exceeds the best so far by at
#: most this much in all (doubled units, summed over the opponent's depth-2 nodes): the bound
#: takes that value there instead, and the amounts taken are reported (``slack``)
SKIP = 20

IntArray = npt.NDArray[np.int64]


def response_table() -> npt.NDArray[np.uint8]:
    """table[g, s] = bulls * 5 + cows, for every guess and secret.

    Built a position and a byte at a time: bulls * 5 + cows is bulls * 4 + the digits in
    common, and neither needs the 5040 x 5040 x 4 array of wider integers that a one-shot
    comparison makes (5 s against under 1 s; the suite builds it in every worker).
    """
    digits = np.array([[int(ch) for ch in c] for c in CODES], dtype=np.int8)
    bulls = np.zeros((len(CODES), len(CODES)), dtype=np.uint8)
    for p in range(digits.shape[1]):
        bulls += digits[:, None, p] == digits[None, :, p]
    onehot = np.zeros((len(CODES), 10), dtype=np.float32)
    for i, row in enumerate(digits):
        onehot[i, row] = 1
    common = (onehot @ onehot.T).astype(np.uint8)
    out: npt.NDArray[np.uint8] = bulls * 4 + common
    return out


@functools.cache
def table() -> npt.NDArray[np.uint8]:
    """The response table, also loaded into the enumerator (once per process)."""
    t = response_table()
    digits = bytes(int(ch) for code in CODES for ch in code)
    race.init(t.tobytes(), len(CODES), SOLVED, 25, 23, digits, 4)
    return t


@functools.cache
def response_names() -> dict[int, str]:
    """Table id -> the response as moo.rules prints it ("2B1C")."""
    return {int(table()[0, i]): str(score(code, CODES[0])) for i, code in enumerate(CODES)}


def parts(cand: IntArray, guess: int) -> dict[int, IntArray]:
    """``cand`` split by the responses to ``guess`` (table ids), the solved part included."""
    r = table()[guess, cand]
    return {int(k): cand[r == k] for k in np.unique(r)}


def sc(j: int) -> IntArray:
    """Doubled score, per K = 1 .. 7, of a secret solved by our j-th guess."""
    return np.array([2 if j < k else (1 if j == k else 0) for k in range(1, 8)], dtype=np.int64)


@dataclass(frozen=True)
class Opponents:
    """Both opponents' trees as counts of K = 1 .. 7 (rows) per node (columns): depth-3
    nodes, depth-2 nodes (numbered across both opponents) and depth-1 nodes per opponent."""

    q3: IntArray
    node2: IntArray             # per depth-3 node, its depth-2 node
    q2: IntArray
    q1: list[IntArray]          # per opponent
    node1_of2: list[IntArray]   # per opponent: for each depth-2 node (global id) its depth-1


@functools.cache
def opponents() -> Opponents:
    q3s, node2s, q2s, q1s, n1s = [], [], [], [], []
    offset = 0
    for name in OPPONENTS:
        paths = core.load_tree(DATA_DIR / f"{name}.txt.gz")
        groups: dict[tuple[str, ...], list[int]] = defaultdict(lambda: [0] * 7)
        for secret, path in paths.items():
            rs = [str(score(secret, g)) for g in path[:3]]
            groups[tuple(rs + [""] * (3 - len(rs)))][len(path) - 1] += 1
        keys3 = sorted(groups)
        keys2 = sorted({k[:2] for k in keys3})
        keys1 = sorted({k[0] for k in keys3})
        i2 = {k: i for i, k in enumerate(keys2)}
        i1 = {k: i for i, k in enumerate(keys1)}
        q3 = np.array([groups[k] for k in keys3], dtype=np.int64).T
        node2 = np.array([i2[k[:2]] for k in keys3], dtype=np.int64)
        q2 = np.zeros((7, len(keys2)), dtype=np.int64)
        np.add.at(q2.T, node2, q3.T)
        q3s.append(q3)
        node2s.append(node2 + offset)
        q2s.append(q2)
        n1s.append(np.array([i1[k[0]] for k in keys2], dtype=np.int64))
        q1 = np.zeros((7, len(keys1)), dtype=np.int64)
        np.add.at(q1.T, n1s[-1], q2.T)
        q1s.append(q1)
        offset += len(keys2)
    return Opponents(np.concatenate(q3s, axis=1), np.concatenate(node2s),
                     np.concatenate(q2s, axis=1), q1s, n1s)


@functools.cache
def strongest_guesses() -> tuple[dict[tuple[str, ...], str], dict[tuple[str, ...], str]]:
    """`strongest`'s third guess per (own first, second response) and fourth per three."""
    third: dict[tuple[str, ...], str] = {}
    fourth: dict[tuple[str, ...], str] = {}
    for secret, path in core.load_tree(DATA_DIR / "strongest.txt.gz").items():
        rs = tuple(str(score(secret, g)) for g in path)
        if len(path) >= 3:
            third[rs[:2]] = path[2]
        if len(path) >= 4:
            fourth[rs[:3]] = path[3]
    return third, fourth


@functools.cache
def own_cells() -> dict[str, IntArray]:
    """Our candidate sets after 0123, by response (the solved one left out)."""
    names = response_names()
    every = np.arange(len(CODES), dtype=np.int64)
    return {names[r]: p for r, p in parts(every, INDEX["0123"]).items() if r != SOLVED}


def engine_tops(raws: list[bytes], history: list[int]) -> list[list[int]]:
    """The best doubled score of each S3 set when K is told now, for the horizons that
    :func:`front` does not enumerate at its size: K = 7 above EXACT7_MAX codes, K = 6 too
    above EXACT6_MAX, by the exact engine (one solve per set and K; 0 where not needed)."""
    tops = [[0, 0, 0, 0] for _ in raws]
    for k, above in ((7, EXACT7_MAX), (6, EXACT6_MAX)):
        big = [i for i, raw in enumerate(raws) if len(raw) // 2 > above]
        if not big:
            continue
        solver = race_solver(k)
        for i in big:
            n = len(raws[i]) // 2
            tops[i][k - 4] = 2 * n - solver.value(raws[i], history) // SHIFT
    return tops


def front(raw: bytes, top: list[int]) -> IntArray:
    """The undominated vectors of every fourth guess at an S3 set, K = 4 .. 7. Sets of more
    than EXACT7_MAX codes are enumerated up to K = 6 only, more than EXACT6_MAX up to K = 5,
    and every vector's remaining entries are raised to the set's own best there (``top``,
    :func:`engine_tops`), which no fourth guess exceeds: each vector stays an upper bound."""
    n = len(raw) // 2
    exact = 4 if n <= EXACT7_MAX else (3 if n <= EXACT6_MAX else 2)
    m = np.frombuffer(race.pareto(raw, exact), dtype=np.int32).reshape(-1, exact)
    out = np.empty((len(m), 4), dtype=np.int64)
    out[:, :exact] = m
    out[:, exact:] = top[exact:]
    return out


Unit = tuple[str, str, int, str]  # (own cell, second guess, rounds, second response)


@dataclass
class PartResult:
    """One own part S2 = (cell, second guess, second response): per opponent depth-2 node,
    the best doubled value over third guesses (told after ``rounds``), and with `strongest`'s
    own second, third and fourth guesses forced (the floor checks)."""

    unit: Unit
    best: list[int]
    forced4: list[int] | None
    forced3: list[int] | None
    counts: list[int]   # third guesses skipped, what skipping cost (slack), solved
    seconds: float


def units(cell: str, second: str, rounds: int) -> list[Unit]:
    names = response_names()
    return [(cell, second, rounds, names[r])
            for r in parts(own_cells()[cell], INDEX[second]) if r != SOLVED]


Rows = dict[str, list[int]]  # third guess -> [hit, W(4), .., W(7)] (round-3 values)


def told3_of(rows: Rows) -> tuple[list[str], IntArray]:
    """Per third guess, its value with the secret told after round 3, per depth-2 node."""
    opp = opponents()
    thirds = list(rows)
    m = np.array([rows[t] for t in thirds], dtype=np.int64)   # [hit, W4..W7]
    return thirds, m @ opp.q2[2:7]                            # K = 3: a hit draws


def part_set(unit: Unit) -> IntArray:
    """The own candidate set S2 of ``unit`` (cell, second guess, second response)."""
    cell, second, _rounds, r2 = unit
    rid2 = next(r for r, n in response_names().items() if n == r2)
    return parts(own_cells()[cell], INDEX[second])[rid2]


def solve_part(args: tuple[Unit, Rows]) -> PartResult:
    """Every third guess (one per class under the relabellings that fix 0123 and the second
    guess) and every fourth guess for one own part S2, the secret told after round 4.

    ``rows`` are the part's round-3 values (bench.adaptive_bound_round3.solve_pair, the exact
    engine), an upper bound of each third guess's round-4 value. `strongest`'s third guess is
    solved first, then the others by decreasing round-3 value; one whose round-3 value exceeds
    the best so far by at most SKIP in all is not solved: its round-3 value is taken where it
    is higher (``slack`` adds up what that costs)."""
    unit, rows = args
    cell, second, _rounds, r2 = unit
    started = time.perf_counter()
    opp = opponents()
    n2 = opp.q2.shape[1]
    sc3 = sc(3) @ opp.q2                   # a third-guess hit, per depth-2 node
    q3k = opp.q3[3:7]                      # K = 4 .. 7
    names = response_names()
    s2 = part_set(unit)
    star_third, star_fourth = strongest_guesses()
    star = star_guesses().get(cell) == second
    star3 = star_third[(cell, r2)] if star else ""
    thirds, told3 = told3_of(rows)
    order = sorted(range(len(thirds)), key=lambda i: (thirds[i] != star3, -int(told3[i].sum())))
    best = np.full(n2, -1, dtype=np.int64)
    forced4 = forced3 = None
    counts = [0, 0, 0]
    for i in order:
        third = thirds[i]
        if third != star3:
            over = int(np.maximum(told3[i] - best, 0).sum())
            if over <= SKIP:
                np.maximum(best, told3[i], out=best)
                counts[1] += over
                counts[0] += 1
                continue
        else:
            forced3 = told3[i]
        counts[2] += 1
        split = parts(s2, INDEX[third])
        hit = int(SOLVED in split)
        told4 = hit * sc3
        f4 = hit * sc3
        rest = [(k, p.astype(np.uint16).tobytes()) for k, p in split.items() if k != SOLVED]
        tops = engine_tops([raw for _k, raw in rest], [INDEX["0123"], INDEX[second], INDEX[third]])
        for (k, raw), top in zip(rest, tops, strict=True):
            per3 = (front(raw, top) @ q3k).max(axis=0)
            told4 = told4 + np.bincount(opp.node2, weights=per3, minlength=n2).astype(np.int64)
            if third == star3:
                g4 = INDEX[star_fourth[(cell, r2, names[k])]]
                v4 = np.frombuffer(race.vector(raw, g4, 4), dtype=np.int32).astype(np.int64)
                f4 = f4 + np.bincount(opp.node2, weights=v4 @ q3k, minlength=n2).astype(np.int64)
        np.maximum(best, np.minimum(told4, told3[i]), out=best)
        if third == star3:
            forced4 = f4
    return PartResult(
        unit, best.tolist(),
        None if forced4 is None else forced4.tolist(),
        None if forced3 is None else forced3.tolist(),
        counts, time.perf_counter() - started,
    )


def round2_values() -> dict[int, dict[str, int]]:
    data = json.loads(DATA_FILE.read_text())
    return {int(k): v for k, v in data["second_round"].items()}


Solved = dict[tuple[str, str], dict[int, dict[str, list[int]]]]  # (cell, g2) -> rounds -> r2


def pair_value(cell: str, second: str, rows: dict[str, list[int]], q1: IntArray,
               members: IntArray) -> int:
    """F for one opponent depth-1 node: a second-guess hit plus the parts' best values."""
    hit2 = 1 if str(score(second, "0123")) == cell else 0
    return hit2 * int(sc(2) @ q1) + sum(int(np.asarray(v)[members].sum()) for v in rows.values())


def combine(solved: Solved) -> tuple[list[Fraction], dict[tuple[str, str], int]]:
    """The bound per opponent, and per (cell, second guess) not solved after round 4 how much
    its stand-in (its round-3 value if solved so, else its round-2 value) exceeds the best
    solved one, summed over the opponent's first-response nodes (what to solve next)."""
    opp = opponents()
    values = round2_values()
    bounds: list[Fraction] = []
    excess: dict[tuple[str, str], int] = defaultdict(int)
    for oi in range(len(OPPONENTS)):
        q1s, node1 = opp.q1[oi], opp.node1_of2[oi]
        offset = sum(len(x) for x in opp.node1_of2[:oi])
        twice = 0
        for j in range(q1s.shape[1]):
            q1 = q1s[:, j]
            members = np.nonzero(node1 == j)[0] + offset
            q_all = {k + 1: int(c) for k, c in enumerate(q1) if c}
            twice += int(sc(1) @ q1)  # our 0123 itself
            for cell in own_cells():
                exact = max(pair_value(cell, g, by[4], q1, members)
                            for (c, g), by in solved.items() if c == cell and 4 in by)
                top = exact
                for g in second_guesses():
                    by = solved.get((cell, g), {})
                    if 4 in by:
                        continue
                    if 3 in by:
                        v = pair_value(cell, g, by[3], q1, members)
                    else:
                        v = second_value(q_all, cell, g, values)
                    if v > exact:
                        excess[(cell, g)] += v - exact
                    top = max(top, v)
                twice += top
        bounds.append(Fraction(twice, 2 * 5040 * 5040))
    return bounds, dict(excess)


def floors(forced: dict[str, dict[str, list[int]]]) -> list[Fraction]:
    """Per opponent: the reveal-after-round-m value of following `strongest` for m guesses,
    from the forced rows (one set per own cell: `strongest`'s second guess's parts)."""
    opp = opponents()
    star = star_guesses()
    out = []
    for oi in range(len(OPPONENTS)):
        q1s, node1 = opp.q1[oi], opp.node1_of2[oi]
        offset = sum(len(x) for x in opp.node1_of2[:oi])
        twice = 0
        for j in range(q1s.shape[1]):
            members = np.nonzero(node1 == j)[0] + offset
            twice += int(sc(1) @ q1s[:, j])
            for cell in own_cells():
                twice += pair_value(cell, star[cell], forced[cell], q1s[:, j], members)
        out.append(Fraction(twice, 2 * 5040 * 5040))
    return out


def _rows(pair: tuple[str, str]) -> tuple[str, str, dict[str, Rows], float]:
    cell, second = pair
    _c, _g, rows, seconds = round3_rows((cell, second))
    return cell, second, rows, seconds


def unit_key(unit: Unit) -> str:
    return "|".join(map(str, unit))


def solved_of(want: dict[tuple[str, str], int], done: dict[str, dict[str, Any]],
              told3: dict[str, dict[str, list[int]]]) -> Solved:
    """What :func:`combine` takes: per (cell, second guess) solved after round 4 each part's
    ``best`` vector, per one solved after round 3 only each part's round-3 vector."""
    solved: Solved = defaultdict(dict)
    for (c, g), m in want.items():
        if m == 4:
            solved[(c, g)][4] = {u[3]: list(done[unit_key(u)]["best"]) for u in units(c, g, 4)}
        else:
            solved[(c, g)][3] = told3[f"{c}|{g}"]
    return solved


def floor_problems(done: dict[str, dict[str, Any]]) -> list[str]:
    """With `strongest`'s own second, third and fourth guesses forced (the ``forced4`` vectors;
    ``forced3``: the secret told after round 3), the sums must give back the floors that
    bench.adaptive_bound computes with the exact engine alone."""
    star = star_guesses()
    stored = json.loads(DATA_FILE.read_text())["opponents"]
    problems = []
    for m in (3, 4):
        forced = {c: {u[3]: done[unit_key(u)][f"forced{m}"] for u in units(c, g, 4)}
                  for c, g in star.items()}
        for name, got in zip(OPPONENTS, floors(forced), strict=True):
            wanted = Fraction(stored[name]["reveal_floor"][str(m)])
            if got != wanted:
                problems.append(f"{name}: strongest's own guesses give {got} after round {m}, "
                                f"the engine's floor is {wanted}")
    return problems


def run(jobs: int, checkpoint: Path | None, log: bool = True) -> dict[str, object]:
    """Solve `strongest`'s second guesses after round 4; then, while the stand-in of another
    second guess could beat them by more than MARGIN, that second guess after round 3 (the
    exact engine's values), then after round 4. The file keeps every part's vectors, so that
    :func:`sample_problems` can check it in seconds."""
    state: dict[str, dict[str, object]] = {"rows": {}, "parts": {}}
    if checkpoint is not None and checkpoint.exists():
        state = json.loads(checkpoint.read_text())
    rows: dict[str, dict[str, Rows]] = state["rows"]  # type: ignore[assignment]
    done: dict[str, dict[str, Any]] = state["parts"]  # type: ignore[assignment]
    started = time.perf_counter()

    def save() -> None:
        if checkpoint is not None:
            tmp = checkpoint.with_suffix(".tmp")
            tmp.write_text(json.dumps(state))
            tmp.replace(checkpoint)

    def say(text: str) -> None:
        if log:
            print(f"{text} ({time.perf_counter() - started:.0f} s)", flush=True)

    def told3() -> dict[str, dict[str, list[int]]]:
        return {f"{c}|{g}": {r2: told3_of(r)[1].max(axis=0).tolist()
                             for r2, r in rows[f"{c}|{g}"].items()}
                for (c, g), m in want.items() if m == 3}

    want = {(c, g): 4 for c, g in star_guesses().items()}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        while True:
            need = sorted(f"{c}|{g}" for c, g in want if f"{c}|{g}" not in rows)
            pairs = [(k.split("|")[0], k.split("|")[1]) for k in need]
            for cell, second, pair_rows, secs in pool.map(_rows, pairs):
                rows[f"{cell}|{second}"] = pair_rows
                save()
                say(f"round-3 values of cell {cell}, second guess {second}: {secs:.0f} s")
            todo = [(u, rows[f"{u[0]}|{u[1]}"][u[3]]) for (c, g), m in sorted(want.items())
                    if m == 4 for u in units(c, g, 4) if unit_key(u) not in done]
            todo.sort(key=lambda t: -len(part_set(t[0])))
            for res in pool.map(solve_part, todo):
                done[unit_key(res.unit)] = {
                    "best": res.best, "forced4": res.forced4, "forced3": res.forced3,
                    "counts": res.counts, "seconds": res.seconds}
                save()
                say(f"{unit_key(res.unit)}: {res.seconds:.1f} s; solved "
                    f"{res.counts[2]}, skipped {res.counts[0]} third guesses "
                    f"(slack {res.counts[1]})")
            bounds, excess = combine(solved_of(want, done, told3()))
            more = {(c, g): (4 if (c, g) in want else 3)
                    for (c, g), extra in excess.items() if extra > MARGIN}
            say("bound " + ", ".join(f"{float(b):.7f}" for b in bounds)
                + f"; {len(more)} second guesses to solve further")
            if not more:
                break
            want.update(more)
    problems = floor_problems(done)
    if problems:
        raise SystemExit("; ".join(problems))
    slack = sum(int(v["counts"][1]) for v in done.values())
    return {
        "fingerprint": fingerprint(),
        "margin": MARGIN,
        "skip": SKIP,
        "exact_sizes": [EXACT7_MAX, EXACT6_MAX],
        "slack": slack,
        "solved": {f"{c}|{g}": m for (c, g), m in sorted(want.items())},
        "bound": {name: str(b) for name, b in zip(OPPONENTS, bounds, strict=True)},
        "parts": {key: {f: v[f] for f in ("best", "forced4", "forced3", "counts")}
                  for key, v in sorted(done.items())},
        "told3": told3(),
    }


#: the parts a sampled check may re-solve: up to this many codes (such a part takes about a
#: second; the largest, over a thousand, take minutes and are left to --verify)
SAMPLE_MAX = 40


def sample_units(stored: dict[str, object], count: int, seed: int) -> list[Unit]:
    """A seeded random ``count`` of the stored parts (solved after round 4, or after round 3
    only) of at most SAMPLE_MAX codes."""
    small = []
    for key, m in sorted(stored["solved"].items()):  # type: ignore[attr-defined]
        cell, second = key.split("|")
        small += [(*u[:2], m, *u[3:]) for u in units(cell, second, 4)
                  if len(part_set(u)) <= SAMPLE_MAX]
    return random.Random(seed).sample(small, min(count, len(small)))


def sample_problems(stored: dict[str, object], count: int, seed: int) -> list[str]:
    """What is wrong with the stored file, checked in seconds (empty: nothing found).

    ``--verify`` solves everything again (minutes). This recomputes the bound, the slack and
    the floor checks from the stored part vectors, and re-solves a seeded random ``count`` of
    the parts of at most SAMPLE_MAX codes (their round-3 rows with the exact engine, then every
    third and fourth guess): their vectors must be the stored ones."""
    problems: list[str] = []
    if stored.get("fingerprint") != fingerprint():
        problems.append("fingerprint: not computed from today's trees")
    want = {(k.split("|")[0], k.split("|")[1]): int(m)
            for k, m in stored["solved"].items()}  # type: ignore[attr-defined]
    done: dict[str, dict[str, Any]] = stored["parts"]  # type: ignore[assignment]
    told3: dict[str, dict[str, list[int]]] = stored["told3"]  # type: ignore[assignment]
    try:
        bounds, excess = combine(solved_of(want, done, told3))
    except KeyError as exc:
        return [*problems, f"parts: no vectors stored for {exc}"]
    got = {name: str(b) for name, b in zip(OPPONENTS, bounds, strict=True)}
    if got != stored["bound"]:
        problems.append(f"bound: the stored part vectors give {got}")
    if any(extra > MARGIN for extra in excess.values()):
        problems.append("an unsolved second guess could still win by more than the margin")
    if sum(int(v["counts"][1]) for v in done.values()) != stored["slack"]:
        problems.append("slack: not the sum of the parts' slack")
    problems += floor_problems(done)
    for unit in sample_units(stored, count, seed):
        cell, second, m, r2 = unit
        rows = round3_part(cell, second, r2)
        if m == 3:
            if told3_of(rows)[1].max(axis=0).tolist() != told3[f"{cell}|{second}"][r2]:
                problems.append(f"told3.{cell}|{second}.{r2}: solved again, the vector differs")
            continue
        res = solve_part((unit, rows))
        entry = done[unit_key(unit)]
        fresh = {"best": res.best, "forced4": res.forced4, "forced3": res.forced3,
                 "counts": res.counts}
        wrong = [f for f, v in fresh.items() if entry[f] != v]
        if wrong:
            problems.append(f"parts.{unit_key(unit)}: solved again, {', '.join(wrong)} differ")
    return problems


def main(argv: list[str] | None = None) -> int:
    return relaxation_main(argv, __doc__ or "", OUT_FILE, "adaptive_bound_round4", run,
                           sample_problems)


if __name__ == "__main__":
    sys.exit(main())
