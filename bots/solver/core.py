"""Python side of the exact solver: objectives, cells, tree extraction and the dump format.

The search itself lives in the C extension (``_native.c``); this module decides *what* is
optimised (a per-depth cost table), splits the game into the independent first-response cells
after the fixed first guess, and turns the native engine's node answers into a full strategy.
Keeping the objective a plain cost table means ``minimum`` and ``strongest`` share every bound
and every pruning rule: the engine only needs the costs to grow with depth.
"""

from __future__ import annotations

import array
import gzip
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bots.solver import _native
from moo.rules import Response, Rules

__all__ = [
    "CellResult",
    "Objective",
    "Solver",
    "distribution",
    "dump_tree",
    "gamma",
    "load_tree",
    "minimum_objective",
    "score_vs",
    "strongest_objective",
]

NCOSTS: int = _native.NCOSTS
#: Room left for the secondary criterion under the primary one in the strongest costs.
_STRONGEST_SHIFT = 1 << 20
#: Room for the minimum tie-break (deep secrets penalised geometrically).
_MINIMUM_SHIFT = 1 << 40
_TIEBREAK_BASE = 8


@dataclass(frozen=True)
class Objective:
    """A cost per guess number; a secret solved by guess k adds ``costs[k]``."""

    name: str
    costs: tuple[int, ...]
    opponent: tuple[int, ...] = ()


def minimum_objective(tiebreak: bool = False) -> Objective:
    """Fewest total guesses; with ``tiebreak`` equal totals prefer fewer secrets deep down.

    The secondary term grows by a factor 8 per level, which makes it behave almost like
    "fewest secrets at the deepest level, then the next one" while staying far below one
    whole guess (5040 * 8**8 < 2**40) so it can never trade a guess for a shallower tree.
    """
    if not tiebreak:
        return Objective("minimum", tuple(range(NCOSTS)))
    costs = [k * _MINIMUM_SHIFT + _TIEBREAK_BASE ** min(k, 9) + k for k in range(NCOSTS)]
    return Objective("minimum", tuple(costs))


def gamma(opponent: Sequence[int], k: int) -> int:
    """Tanaka's Gamma: opponent secrets needing more guesses than k minus those needing fewer.

    ``opponent[i]`` is the number of the opponent's secrets solved by guess ``i + 1``.
    """
    more = sum(c for i, c in enumerate(opponent) if i + 1 > k)
    fewer = sum(c for i, c in enumerate(opponent) if i + 1 < k)
    return more - fewer


def strongest_objective(opponent: Sequence[int]) -> Objective:
    """Maximise sum of Gamma (win rate against ``opponent``), then fewest guesses.

    cost[k] = (total - Gamma(k)) * 2**20 + k is increasing in k because Gamma never increases
    with k, so the engine's capacity bound stays admissible.
    """
    total = sum(opponent)
    costs = [(total - gamma(opponent, k)) * _STRONGEST_SHIFT + k for k in range(NCOSTS)]
    return Objective("strongest", tuple(costs), tuple(opponent))


def distribution(depths: Iterable[int]) -> list[int]:
    """Counts of secrets solved by guess 1, 2, ... (index 0 is guess 1)."""
    out: list[int] = []
    for k in depths:
        while len(out) < k:
            out.append(0)
        out[k - 1] += 1
    return out


def score_vs(ours: Sequence[int], opponent: Sequence[int]) -> tuple[int, float]:
    """(sum of Gamma, win rate with draws as half) of distribution ``ours`` vs ``opponent``."""
    s = sum(c * gamma(opponent, i + 1) for i, c in enumerate(ours))
    n_ours, n_opp = sum(ours), sum(opponent)
    return s, 0.5 + s / (2 * n_ours * n_opp)


@dataclass
class CellResult:
    """One first-response cell: its second guess, cost and the guess paths of its secrets."""

    response: Response
    size: int
    second_guess: str | None
    value: int
    paths: dict[str, list[str]]
    seconds: float = 0.0
    nodes: int = 0

    @property
    def subtotal(self) -> int:
        """Guesses after the first, summed over the cell (Tanaka's Table 3 convention)."""
        return sum(len(p) - 1 for p in self.paths.values())


def _as_set(indices: Iterable[int]) -> bytes:
    return array.array("H", sorted(indices)).tobytes()


def _from_set(data: bytes) -> list[int]:
    a = array.array("H")
    a.frombytes(data)
    return list(a)


class Solver:
    """One game size and one objective bound to the (process-wide) native engine.

    The native engine keeps its tables in module state, so there is one live Solver per
    process; parallel solving uses processes (see :mod:`bots.solver.parallel`).
    """

    def __init__(self, rules: Rules, objective: Objective, tt_log2: int = 23) -> None:
        if rules.repeats_in_guess:
            raise ValueError("the solver handles distinct-symbol guesses only")
        self.rules = rules
        self.objective = objective
        self.codes = rules.secrets
        self.index = {c: i for i, c in enumerate(self.codes)}
        self.caps: list[int] = _native.init(
            rules.length, len(rules.alphabet), list(objective.costs), tt_log2
        )
        self.solved_id = rules.length * (rules.length + 1)

    def response_of(self, rid: int) -> Response:
        return Response(rid // (self.rules.length + 1), rid % (self.rules.length + 1))

    def response_id(self, response: Response | tuple[int, int]) -> int:
        return response[0] * (self.rules.length + 1) + response[1]

    def cells(self, first_guess: str | None = None) -> dict[Response, bytes]:
        """The candidate sets after the first guess, by response."""
        g = self.index[first_guess or self.codes[0]]
        parts = _native.partition(_as_set(range(len(self.codes))), g)
        return {self.response_of(rid): data for rid, data in parts.items()}

    def partition(self, cand: bytes, guess: int) -> dict[int, bytes]:
        """``cand`` split by the responses to ``guess`` (response id -> candidate set)."""
        return _native.partition(cand, guess)

    def value(self, cand: bytes, history: Sequence[int], beta: int | None = None) -> int:
        value, _guess, _exact = _native.solve(cand, list(history), beta)
        return int(value)

    def best_guess(self, cand: bytes, history: Sequence[int]) -> tuple[int, int]:
        value, guess, exact = _native.solve(cand, list(history))
        if not exact or guess < 0:
            raise RuntimeError("engine returned no exact answer")
        return int(value), int(guess)

    def paths(self, cand: bytes, history: Sequence[int]) -> dict[str, list[str]]:
        """Guess sequences (after ``history``) that the optimal tree asks for each secret."""
        out: dict[str, list[str]] = {}
        stack: list[tuple[bytes, list[int]]] = [(cand, list(history))]
        depth0 = len(history)
        while stack:
            s, hist = stack.pop()
            if not s:
                continue
            _value, g = self.best_guess(s, hist)
            for rid, part in _native.partition(s, g).items():
                nxt = [*hist, g]
                if rid == self.solved_id:
                    out[self.codes[g]] = [self.codes[i] for i in nxt[depth0:]]
                else:
                    stack.append((part, nxt))
        return out

    def solve_cell(self, response: Response, first_guess: str | None = None) -> CellResult:
        """Solve one first-response cell and read its optimal subtree back from the engine."""
        first = first_guess or self.codes[0]
        cand = self.cells(first)[response]
        t0 = time.perf_counter()
        before = _native.stats()["nodes"]
        if response == self.rules.solved:  # the first guess itself: nothing to search
            value, paths = self.objective.costs[1], {first: [first]}
        else:
            value = self.value(cand, [self.index[first]])
            tail = self.paths(cand, [self.index[first]])
            paths = {s: [first, *p] for s, p in tail.items()}
        # The tree read back node by node must cost exactly what the search proved optimal.
        tree_cost = sum(self.objective.costs[len(p)] for p in paths.values())
        if tree_cost != value:
            raise RuntimeError(f"cell {response}: tree costs {tree_cost}, search said {value}")
        second = None
        if response != self.rules.solved:
            second = next(iter(paths.values()))[1]
        return CellResult(
            response=response,
            size=len(cand) // 2,
            second_guess=second,
            value=value,
            paths=paths,
            seconds=time.perf_counter() - t0,
            nodes=_native.stats()["nodes"] - before,
        )


def dump_tree(paths: dict[str, list[str]], out: Path) -> None:
    """Write ``SECRET: GUESS1 ... GUESSn`` lines, secrets ascending; gzip if name ends .gz."""
    text = "".join(f"{s}: {' '.join(paths[s])}\n" for s in sorted(paths))
    if out.suffix == ".gz":
        # No name and mtime=0 in the header: the same tree always gives the same bytes.
        with (
            open(out, "wb") as raw,
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as f,
        ):
            f.write(text.encode())
    else:
        out.write_text(text)


def load_tree(path: Path) -> dict[str, list[str]]:
    """Inverse of :func:`dump_tree`."""
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    out: dict[str, list[str]] = {}
    for line in data.decode().splitlines():
        if not line.strip():
            continue
        secret, _, rest = line.partition(":")
        out[secret.strip()] = rest.split()
    return out
