"""A proven upper bound on what any adaptive player scores against a fixed tree, with a verifier.

    .venv/bin/python -m bench.adaptive_bound [--jobs 2]   # solve, print, store (3 min idle)
    .venv/bin/python -m bench.adaptive_bound --verify     # re-solve; exit 1 unless the file agrees
    .venv/bin/python -m bench.adaptive_bound --json       # the stored figures, as data

First relaxation: give the adaptive player the opponent's secret before the first guess. The
opponent's play is then fixed, and only the round ``K`` in which it solves matters, so the best
the player can do is, for each ``K = k``, the fixed tree maximising ``#(T < k) + ½ #(T = k)``
over its own secrets (T = own guesses needed). Any real adaptive player sees less, so

    ceiling <= Σ_k q(k) · B(k) / 5040²,     B(k) = max over trees of #(T < k) + ½ #(T = k)

with q the opponent's guess-count distribution. B(k) does not depend on the opponent, so one
set of solves serves ``strongest`` and ``minimum``. The first guess is 0123 without loss (every
first guess is the same up to relabelling, and the opponent's play does not depend on ours);
each first-response cell is solved exactly by the solver's engine with the per-guess costs
0 (before k), 1 (at k), 2 (after k), plus the guess number as a tie-break far below one unit.
Only the k with q(k) > 0 enter, so B is solved for k = 2 .. the opponents' deepest guess
(B(1) = ½: only the first guess's own secret can be solved in round 1).

The stored bound is tighter: the secret is told after round 2. The second guess is then chosen
knowing what a real player knows at that point (its own first response and the opponent's,
i.e. the distribution of K in the opponent's first-response cell), and the tree from the
third guess on is the best for the revealed K: per own cell, the best second guess of
Σ_k q_cell(k) · (the exact solves of the parts it leaves, per k). One second guess per class
under the relabellings that fix 0123 suffices (:func:`second_guesses`).

Why the bound is not tighter still, measured: revealing the secret after round m gives a
relaxation whose value U_m is at least what the player scores in it by following
``strongest``'s first m guesses and then the best tree for the revealed K. That figure,
``reveal_floor[m]``, is computed here too (B^m(k) per k, the same solves on ``strongest``'s
depth-m cells): no relaxation that tells the secret after round m can prove less.
A bound is needed only to be valid, so every computation is an exact integer count (scores
doubled) and every figure an exact fraction; the file stores them as strings.
"""

from __future__ import annotations

import argparse
import array
import functools
import hashlib
import itertools
import json
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from fractions import Fraction
from pathlib import Path

from bots.evaluate import evaluate
from bots.solver import core
from bots.tree import DATA_DIR
from moo.rules import DEFAULT_RULES, score

SHIFT = 1 << 20
OPPONENTS = ("strongest", "minimum")
#: The reveal rounds reported beside the bound (round 1 is the bound itself).
REVEAL_ROUNDS = (2, 3, 4, 5)
DATA_FILE = Path(__file__).resolve().parent / "data" / "adaptive-bound.json"
#: The tree whose first m guesses the reveal floors follow.
FLOOR_TREE = DATA_DIR / "strongest.txt.gz"


def race_solver(k: int) -> core.Solver:
    costs = [(0 if j < k else (1 if j == k else 2)) * SHIFT + j for j in range(core.NCOSTS)]
    return core.Solver(DEFAULT_RULES, core.Objective(f"race{k}", tuple(costs)), tt_log2=21)


def twice_best(k: int, m: int) -> int:
    """max of 2·#(T < k) + #(T = k) over trees that follow ``strongest`` for the first m guesses.

    m = 1 is the bound's B(k): the first guess is the same for every tree up to relabelling.
    Secrets the fixed part solves count as they fall; every depth-m cell is then solved exactly.
    """
    paths = core.load_tree(FLOOR_TREE)
    twice = 0
    cells: dict[tuple[tuple[str, ...], tuple[object, ...]], list[str]] = defaultdict(list)
    for secret, path in paths.items():
        if len(path) <= m:
            j = len(path)
            twice += 2 if j < k else (1 if j == k else 0)
        else:
            head = tuple(path[:m])
            cells[(head, tuple(score(secret, g) for g in head))].append(secret)
    if k <= m:  # every secret left is solved after round k: it scores 0 whatever the tree
        return twice
    solver = race_solver(k)
    for (head, _responses), members in cells.items():
        cand = array.array("H", sorted(solver.index[s] for s in members)).tobytes()
        twice += 2 * len(members) - solver.value(cand, [solver.index[g] for g in head]) // SHIFT
    return twice


def second_class(code: str) -> str:
    """A name of ``code``'s class under the relabellings that fix 0123.

    Such a relabelling permutes the positions and, with them, the digits 0-3 alike (digit i
    goes where position i goes), and the digits 4-9 freely; it maps every first-response cell
    to itself, so two second guesses of one class split each cell into parts of the same
    values."""
    forms = []
    for perm in itertools.permutations(range(4)):
        out = [""] * 4
        for i, ch in enumerate(code):
            d = int(ch)
            out[perm[i]] = str(perm[d]) if d < 4 else "n"
        forms.append("".join(out))
    return min(forms)


@functools.cache
def second_guesses() -> list[str]:
    """One second guess per class (:func:`second_class`): 20 classes."""
    first: dict[str, str] = {}
    for code in DEFAULT_RULES.secrets:
        first.setdefault(second_class(code), code)
    return sorted(first.values())


def second_entry(solver: core.Solver, k: int, cand: bytes, guess: str) -> int:
    """The most 2·#(T < k) + #(T = k) over one first-response cell ``cand`` of 0123 with this
    second guess, K = k known from the third guess on: the exact solves of the parts it leaves.
    ``solver`` is :func:`race_solver`'s for ``k``."""
    first = solver.index["0123"]
    g = solver.index[guess]
    twice = 0
    for rid, part in solver.partition(cand, g).items():
        if rid == solver.solved_id:  # the second guess itself: T = 2
            twice += 2 if k > 2 else (1 if k == 2 else 0)
        else:
            n = len(part) // 2  # codes are 16-bit indices
            twice += 2 * n - solver.value(part, [first, g]) // SHIFT
    return twice


def second_round(k: int) -> dict[str, int]:
    """For each first-response cell of 0123 and each second guess (one per class), the most
    2·#(T < k) + #(T = k) over the cell's secrets when K = k is known from the third guess
    on (:func:`second_entry`). Keyed "cell|guess"."""
    solver = race_solver(k)
    out: dict[str, int] = {}
    for response, cand in solver.cells("0123").items():
        if response == DEFAULT_RULES.solved:
            continue
        for guess in second_guesses():
            out[f"{response}|{guess}"] = second_entry(solver, k, cand, guess)
    return out


def _job(args: tuple[str, int, int]) -> tuple[str, int, int, object, float]:
    kind, k, m = args
    started = time.perf_counter()
    value: object = twice_best(k, m) if kind == "tree" else second_round(k)
    return kind, k, m, value, time.perf_counter() - started


def second_value(
    q: dict[int, int], cell: str, guess: str, values: dict[int, dict[str, int]]
) -> int:
    """Twice the score over ``cell`` with this second guess, summed over the opponent's secrets
    whose K is distributed as ``q`` (K = 1 scores 0 here: our first guess missed)."""
    hit = 1 if str(score(guess, "0123")) == cell else 0  # K = 2: a draw if it hits
    return sum(
        c * (hit if k == 2 else values[k][f"{cell}|{guess}"]) for k, c in q.items() if k >= 2
    )


def round_two_bound(name: str, values: dict[int, dict[str, int]]) -> Fraction:
    """Reveal the opponent's secret after round 2: the player picks its second guess knowing
    its own first response and the opponent's (which tells the distribution of K), then
    plays the best tree for the revealed K. Exact, from :func:`second_round`'s values."""
    paths = core.load_tree(DATA_DIR / f"{name}.txt.gz")
    by_cell: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for secret, path in paths.items():
        by_cell[str(score(secret, path[0]))][len(path)] += 1
    cells = sorted({key.split("|")[0] for key in values[max(values)]})
    guesses = second_guesses()
    twice = 0
    for q in by_cell.values():
        twice += sum(c * (2 if k > 1 else 1) for k, c in q.items())  # our 0123 itself
        for cell in cells:
            twice += max(second_value(q, cell, guess, values) for guess in guesses)
    return Fraction(twice, 2 * 5040 * 5040)


def fingerprint() -> str:
    digest = hashlib.sha256()
    for name in OPPONENTS:
        digest.update((DATA_DIR / f"{name}.txt.gz").read_bytes())
    return digest.hexdigest()


def compute(jobs: int = 1, log: bool = True) -> dict[str, object]:
    """Every figure of the data file, solved from scratch."""
    dists = {name: evaluate(name, show_progress=False).distribution for name in OPPONENTS}
    deepest = max(max(d) for d in dists.values())
    # the longest solves first, so that two processes end together
    work = [("second", k, 2) for k in range(deepest, 2, -1)]
    work += [("tree", k, m) for m in (1, *REVEAL_ROUNDS) for k in range(2, deepest + 1) if k > m]
    twice: dict[tuple[int, int], int] = {}
    second: dict[int, dict[str, int]] = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for kind, k, m, value, seconds in pool.map(_job, work):
            if kind == "second":
                assert isinstance(value, dict)
                second[k] = value
                if log:
                    print(f"second guesses, k={k}: {len(value)} cell solves ({seconds:.1f} s)",
                          flush=True)
                continue
            assert isinstance(value, int)
            twice[(k, m)] = value
            if log:
                print(f"round {m} reveal, k={k}: 2B = {value}  ({seconds:.1f} s)", flush=True)

    def best(k: int, m: int) -> Fraction:
        if k == 1:
            return Fraction(1, 2)  # the first guess's own secret, a draw against K = 1
        if k <= m:
            return Fraction(twice_best(k, m), 2)  # fixed by the followed tree: no solve
        return Fraction(twice[(k, m)], 2)

    pairs = 5040 * 5040
    out: dict[str, object] = {
        "fingerprint": fingerprint(),
        "B": {str(k): str(best(k, 1)) for k in range(1, deepest + 1)},
        "reveal_B": {
            str(m): {str(k): str(best(k, m)) for k in range(1, deepest + 1)} for m in REVEAL_ROUNDS
        },
        "second_round": {str(k): second[k] for k in sorted(second)},
        "opponents": {},
    }
    for name, q in dists.items():
        first = sum((c * best(k, 1) for k, c in q.items()), Fraction(0)) / pairs
        bound = round_two_bound(name, second)
        floors = {
            str(m): str(sum((c * best(k, m) for k, c in q.items()), Fraction(0)) / pairs)
            for m in REVEAL_ROUNDS
        }
        out["opponents"][name] = {  # type: ignore[index]
            "distribution": {str(k): c for k, c in sorted(q.items())},
            "bound_round_1": str(first),
            "bound": str(min(bound, first)),
            "reveal_floor": floors,
        }
    return out


def disagreements(stored: object, fresh: dict[str, object]) -> list[str]:
    """The top-level keys whose stored value differs from the fresh solve (all, if unreadable)."""
    if not isinstance(stored, dict):
        return sorted(fresh)
    return sorted(key for key in fresh if stored.get(key) != fresh[key])


def matches_stored(path: Path, fresh: dict[str, object], prog: str) -> bool:
    """Whether the file at ``path`` holds exactly ``fresh``; if not, one line on stderr says
    which keys differ (or why the file cannot be read)."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"{prog}: cannot read {path}: {exc}", file=sys.stderr)
        return False
    wrong = disagreements(stored, fresh)
    if wrong:
        print(f"{prog}: {path.name} disagrees with the solves in: {', '.join(wrong)}",
              file=sys.stderr)
    return not wrong


def tree_distribution(name: str) -> dict[int, int]:
    """How many of the 5040 secrets the shipped tree ``name`` solves at each guess, read off
    the tree itself (the same figure as ``evaluate``'s, without playing the games)."""
    counts: dict[int, int] = defaultdict(int)
    for path in core.load_tree(DATA_DIR / f"{name}.txt.gz").values():
        counts[len(path)] += 1
    return dict(counts)


#: (k, m) pairs of B^m(k) that take tens of seconds to solve: only ``--verify`` re-solves them
#: (the relaxation's cells are the big first- and second-response ones there)
COSTLY_TREES = frozenset((k, m) for k in (6, 7) for m in (1, 2))


def sample_entries(stored: dict[str, object], count: int, seed: int) -> list[tuple[str, int, str]]:
    """The entries :func:`sample_problems` re-solves: ("second", k, "cell|guess") of
    ``second_round`` and ("tree", k, m) of B (m = 1) and ``reveal_B``, the costly ones left
    to ``--verify``; a seeded random ``count`` of them."""
    second: dict[str, dict[str, int]] = stored["second_round"]  # type: ignore[assignment]
    entries = [("second", int(k), key) for k in sorted(second) for key in sorted(second[k])]
    trees: dict[str, dict[str, str]] = {"1": stored["B"], **stored["reveal_B"]}  # type: ignore[dict-item]
    entries += [("tree", int(k), m) for m in sorted(trees) for k in sorted(trees[m])
                if int(k) > max(int(m), 1) and (int(k), int(m)) not in COSTLY_TREES]
    return random.Random(seed).sample(entries, min(count, len(entries)))


def sample_problems(stored: dict[str, object], count: int, seed: int) -> list[str]:
    """What is wrong with the stored round-2 file, checked in seconds (empty: nothing found).

    Whole-result verification (``--verify``, minutes) re-solves every entry; this re-solves a
    seeded random ``count`` of the ``second_round`` entries and of the cheap B^m(k) entries,
    and recomputes every derived figure from the stored entries: the distributions from
    today's trees, the round-1 bound and the reveal floors from B, the bound from
    ``second_round``. A wrong stored figure is caught either by the sample or, if the figures
    derived from it were left alone, by the recomputation."""
    problems: list[str] = []
    if stored.get("fingerprint") != fingerprint():
        problems.append("fingerprint: not computed from today's trees")
    second = {int(k): v for k, v in stored["second_round"].items()}  # type: ignore[attr-defined]
    bees: dict[int, dict[str, str]] = {1: stored["B"]}  # type: ignore[dict-item]
    bees.update({int(m): v for m, v in stored["reveal_B"].items()})  # type: ignore[attr-defined]
    pairs = 5040 * 5040
    for name, entry in stored["opponents"].items():  # type: ignore[attr-defined]
        q = tree_distribution(name)
        if entry["distribution"] != {str(k): c for k, c in sorted(q.items())}:
            problems.append(f"opponents.{name}.distribution differs from the tree's")
        first = sum((c * Fraction(bees[1][str(k)]) for k, c in q.items()), Fraction(0)) / pairs
        if entry["bound_round_1"] != str(first):
            problems.append(f"opponents.{name}.bound_round_1 is not the sum over B: {first}")
        bound = min(round_two_bound(name, second), first)
        if entry["bound"] != str(bound):
            problems.append(f"opponents.{name}.bound is not the sum over second_round: {bound}")
        for m in REVEAL_ROUNDS:
            floor = sum((c * Fraction(bees[m][str(k)]) for k, c in q.items()),
                        Fraction(0)) / pairs
            if entry["reveal_floor"][str(m)] != str(floor):
                problems.append(f"opponents.{name}.reveal_floor.{m} is not the sum over "
                                f"reveal_B: {floor}")
    picked = sorted(sample_entries(stored, count, seed))
    # the engine's costs are process-wide (one Solver at a time): solve the picks grouped by k
    for (kind, k), group in itertools.groupby(picked, key=lambda e: (e[0], e[1])):
        if kind == "tree":
            for _kind, _k, key in group:
                m = int(key)
                got = Fraction(twice_best(k, m), 2)
                if str(got) != bees[m][str(k)]:
                    where = "B" if m == 1 else f"reveal_B.{m}"
                    problems.append(f"{where}.{k} is {bees[m][str(k)]}, solved again: {got}")
            continue
        solver = race_solver(k)
        cells = {str(r): c for r, c in solver.cells("0123").items()}
        for _kind, _k, key in group:
            cell, guess = key.split("|")
            got2 = second_entry(solver, k, cells[cell], guess)
            if got2 != second[k][key]:
                problems.append(f"second_round.{k}.{key} is {second[k][key]}, "
                                f"solved again: {got2}")
    return problems


def add_sample_options(parser: argparse.ArgumentParser) -> None:
    """``--sample N`` and ``--seed S``, shared by the bound scripts."""
    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError("must be at least 1")
        return value

    parser.add_argument("--sample", type=count, default=None, metavar="N",
                        help="check the stored file in seconds: re-solve N entries at random "
                             "and recompute every figure derived from them")
    parser.add_argument("--seed", type=int, default=None,
                        help="the sample's seed (default: a new one, printed)")


def sample_main(prog: str, out_file: Path, count: int, seed: int | None,
                check: Callable[[dict[str, object], int, int], list[str]]) -> int:
    """``--sample N [--seed S]`` of every bound script: ``check(stored, N, S)`` in seconds,
    one line per problem on stderr; the seed is printed so a failure can be repeated."""
    seed = random.randrange(2**32) if seed is None else seed
    started = time.perf_counter()
    try:
        stored = json.loads(out_file.read_text())
    except (OSError, ValueError) as exc:
        print(f"{prog}: cannot read {out_file}: {exc}", file=sys.stderr)
        return 1
    problems = check(stored, count, seed) if isinstance(stored, dict) else ["not an object"]
    for problem in problems:
        print(f"{prog}: {out_file.name}: {problem} (--seed {seed})", file=sys.stderr)
    if problems:
        return 1
    print(f"sampled: {out_file.name} agrees ({count} entries re-solved, seed {seed}, "
          f"{time.perf_counter() - started:.1f} s)")
    return 0


def relaxation_main(argv: Sequence[str] | None, doc: str, out_file: Path, prog: str,
                    run: Callable[[int, Path | None], dict[str, object]],
                    check: Callable[[dict[str, object], int, int], list[str]]) -> int:
    """The command line of a later-reveal bound script (bench.adaptive_bound_round3 and
    _round4): ``run(jobs, checkpoint)`` solves; print the bounds, then store them or, with
    --verify, solve from scratch and compare with ``out_file``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1, help="solver processes (default 1)")
    parser.add_argument("--verify", action="store_true",
                        help="solve everything again and compare with the stored file")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="keep what is solved here, and resume from it")
    add_sample_options(parser)
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.sample is not None:
        return sample_main(prog, out_file, args.sample, args.seed, check)
    started = time.perf_counter()
    data = run(args.jobs, None if args.verify else args.checkpoint)
    for name, bound in data["bound"].items():  # type: ignore[attr-defined]
        b = Fraction(bound)
        print(f"ceiling against {name} <= {float(b):.7f} ({b})")
    if args.verify:
        if not matches_stored(out_file, data, prog):
            return 1
        print(f"verified: {out_file.name} matches every solve "
              f"({time.perf_counter() - started:.0f} s)")
        return 0
    # compact: the later-reveal files keep a vector per solved part (what --sample checks)
    out_file.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"wrote {out_file} ({time.perf_counter() - started:.0f} s)")
    return 0


def _table(data: dict[str, object]) -> str:
    head = "| opponent | proven bound (reveal after round 2) | reveal before round 1 | "
    lines = [head + " | ".join(f"floor after round {m}" for m in REVEAL_ROUNDS) + " |"]
    lines.append("| --- | ---: | ---: |" + " ---: |" * len(REVEAL_ROUNDS))
    for name, entry in data["opponents"].items():  # type: ignore[attr-defined]
        bound, first = Fraction(entry["bound"]), Fraction(entry["bound_round_1"])
        cells = [f"{float(Fraction(entry['reveal_floor'][str(m)])):.7f}" for m in REVEAL_ROUNDS]
        lines.append(
            f"| `{name}` | {float(bound):.7f} ({bound}) | {float(first):.7f} ({first}) | "
            + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--verify",
        action="store_true",
        help="solve again and compare with the stored file (exit 1 on any difference)",
    )
    parser.add_argument("--json", action="store_true", help="print the stored figures as JSON")
    parser.add_argument("--jobs", type=int, default=1, help="solver processes (default 1)")
    add_sample_options(parser)
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.sample is not None:
        return sample_main("adaptive_bound", DATA_FILE, args.sample, args.seed, sample_problems)
    if args.json:
        try:
            print(DATA_FILE.read_text(), end="")
        except OSError as exc:
            print(f"adaptive_bound: cannot read {DATA_FILE}: {exc.strerror}", file=sys.stderr)
            return 1
        return 0
    started = time.perf_counter()
    data = compute(args.jobs)
    if args.verify:
        if not matches_stored(DATA_FILE, data, "adaptive_bound"):
            return 1
        print(_table(data))
        print(
            f"verified: {DATA_FILE.name} matches every solve and today's trees "
            f"({time.perf_counter() - started:.0f} s)"
        )
        return 0
    DATA_FILE.parent.mkdir(exist_ok=True)
    DATA_FILE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(_table(data))
    print(f"wrote {DATA_FILE} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
