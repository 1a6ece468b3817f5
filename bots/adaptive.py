"""``adaptive``: a race strategy that watches the opponent's progress (issue 14).

A fixed strategy ignores the opponent; in a race that wastes information. Every round both
players see the other's response (and guess, when the server shows guesses), so a player can
tell how close the opponent is to four bulls. Behind, a guess that may solve now is worth a
risk; ahead, a guess that splits the candidates best is safer.

How this bot plays (all in the bot's own relabelled frame, see :mod:`bots.relabel`):

* Its first guesses are those of the ``strongest`` tree (the fixed point of the race: no
  fixed strategy beats it): the first always, the second unless its own candidate set holds
  at most :data:`PLAN_FROM` codes already (issue 21: re-planning those from the second guess
  pays), and no later one.
* From then on it chooses by dynamic programming over (own candidate set ``S``, opponent's node
  ``v`` in a model tree)::

      V(S, v) = max_g  Σ_r Σ_r'  P(r | S, g) · P(r' | v) · outcome

  where the race rule decides each end (one solver wins: 1, both: 1/2, the opponent alone: 0)
  and otherwise the value is ``V(S_r, v_r')``. Exact win + ½ draw is maximised, not the number
  of guesses. The opponent's node matters only through the shape of its subtree (how many of
  its codes end where), so nodes are merged by a *signature* (250 classes for ``strongest``),
  and V(S, ·) is computed for every signature at once (:class:`Planner`).
  The choice of ``g`` is restricted (:class:`Options`): the ``strongest`` tree's guess while
  ``S`` is still one of its nodes (so the policy can only improve on the fixed point); below
  :data:`WIDE_FROM` codes every candidate and the :data:`K_INFO` best other guesses; from
  there on the :data:`K_CAND` candidates leaving the smallest Σ|part|² and the
  :data:`WIDE_INFO` best other guesses. Guesses that split ``S`` the same way are one
  option.
* The model tree is ``strongest`` unless the opponent's visible guesses show it is ``minimum``
  (consistent with that tree under some relabelling, and not with ``strongest``). A model is
  used only while the opponent's responses are a path of its tree; otherwise the bot falls
  back to the ``strongest`` tree's move while ``S`` is still one of its nodes, and to the
  candidate-preferring fewest-expected-left guess when it is not.

Live play is a table lookup: the decisions of the program for every state reachable against
the model trees are computed once (``python -m bench.adaptive_table``, minutes) and shipped in
``bots/data/adaptive-<tree>.txt.gz``; a state missing from the table is planned on the spot
only when ``S`` is small (bounded work), otherwise the fallback above plays.
"""

from __future__ import annotations

import gzip
import itertools
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from bots.base import Strategy
from bots.table import ResponseTable, table_for
from bots.tree import DATA_DIR, DecisionTree, TreeUnavailable, load_tree
from moo.rules import DEFAULT_RULES, Response, Rules

__all__ = [
    "Adaptive",
    "OpponentTree",
    "Planner",
    "read_table",
    "write_table",
]

#: Own guesses taken from the ``strongest`` tree before the program takes over, unless the
#: own candidate set is already at most PLAN_FROM codes (then the program decides earlier).
START_DEPTH = 2
PLAN_FROM = 240
#: Options per decision besides the base tree's guess (see :class:`Options`).
K_INFO = 2
#: Own candidate sets at least this large (the early decisions) get wider options.
WIDE_FROM = 20
#: Below WIDE_FROM codes every candidate is an option (K_CAND >= the set's size), and from
#: there the K_CAND best (Options.widths takes the larger of K_CAND and WIDE_CAND): which code
#: to try matters in a race (issue 21: +0.00009 against either model tree).
K_CAND = WIDE_FROM
WIDE_INFO = 6
WIDE_CAND = 6
#: From this many codes on: every candidate and ALL_INFO other guesses (issue 21).
ALL_FROM = 0
ALL_INFO = 20
#: Largest own candidate set planned on the spot when a state is not in the shipped table.
LIVE_PLAN_LIMIT = 6
#: The trees the bot can model, in order of preference when both fit what it saw.
MODELS = ("strongest", "minimum")

OwnKey = tuple[tuple[int, int], ...]  # (guess index, response id) per own guess
Part = tuple[int, ...]  # sorted secret indexes


# -- the opponent as a tree ------------------------------------------------------------------
class OpponentTree:
    """A fixed tree seen from across the table: per node its code set, guess and signature.

    Nodes are keyed by the tuple of response ids so far (what the other player sees).
    ``sig[key]`` numbers the node's subtree *shape* (sizes, whether the node's guess can solve,
    and the children's shapes with their sizes): two nodes with the same signature finish at
    the same times with the same probabilities after every visible response sequence, so the
    race against them has the same value.
    """

    def __init__(self, tree: DecisionTree, table: ResponseTable) -> None:
        self.tree = tree
        self.table = table
        codes: dict[tuple[int, ...], list[int]] = defaultdict(list)
        guess: dict[tuple[int, ...], int] = {}
        solved = table.solved_id
        for si in range(len(table.secrets)):
            key: tuple[int, ...] = ()
            history: tuple[Response, ...] = ()
            while True:
                g = tree.moves[history]
                gi = table.guess_index[g]
                codes[key].append(si)
                guess[key] = gi
                r = int(table.against(gi, np.array([si], dtype=np.intp))[0])
                if r == solved:
                    break
                key = (*key, r)
                history = (*history, table.responses[r])
                if len(key) > 64:
                    raise ValueError("the tree does not solve every secret")
        self.codes = {k: tuple(v) for k, v in codes.items()}
        self.guess = guess
        self.children: dict[tuple[int, ...], list[tuple[int, tuple[int, ...]]]] = {}
        self.solves: dict[tuple[int, ...], int] = {}
        for key, members in self.codes.items():
            rs = table.against(guess[key], np.array(members, dtype=np.intp))
            values, counts = np.unique(rs, return_counts=True)
            kids = []
            b = 0
            for r, c in zip(values.tolist(), counts.tolist(), strict=True):
                if r == solved:
                    b = c
                else:
                    kids.append((c, (*key, r)))
            self.children[key] = kids
            self.solves[key] = b
        shapes: dict[tuple[object, ...], int] = {}
        self.sig: dict[tuple[int, ...], int] = {}
        #: signature -> (codes, codes solved now, [(codes, child signature)])
        self.info: list[tuple[int, int, list[tuple[int, int]]]] = []
        for key in sorted(self.codes, key=lambda k: (-len(k), k)):
            kids_sig = sorted((c, self.sig[k]) for c, k in self.children[key])
            shape = (len(self.codes[key]), self.solves[key], tuple(kids_sig))
            number = shapes.get(shape)
            if number is None:
                number = shapes[shape] = len(self.info)
                self.info.append((len(self.codes[key]), self.solves[key], kids_sig))
            self.sig[key] = number


_OPPONENTS: dict[tuple[str, Rules], OpponentTree] = {}


def opponent_tree(name: str, rules: Rules = DEFAULT_RULES) -> OpponentTree:
    """The shipped tree ``name`` as an :class:`OpponentTree`, built once per process."""
    got = _OPPONENTS.get((name, rules))
    if got is None:
        path = DATA_DIR / f"{name}.txt.gz"
        if not path.exists():
            raise TreeUnavailable(f"the adaptive bot needs the tree {path}, which is missing")
        got = _OPPONENTS[(name, rules)] = OpponentTree(load_tree(path, rules), table_for(rules))
    return got


# -- the dynamic program ---------------------------------------------------------------------
@dataclass(frozen=True)
class Options:
    """Which guesses the program weighs at an own candidate set of ``n`` codes.

    Always the base tree's guess while the set is one of its nodes (so the policy can only
    improve on the fixed point). Below ``wide_from`` codes: the ``k_cand`` candidates leaving
    the smallest Σ|part|² (every one when ``k_cand >= n``, as shipped: which code to try
    matters in a race, while more non-candidates there no longer pay) and the ``k_info`` best
    other guesses. From ``wide_from`` codes on (the early decisions): the larger of ``k_cand``
    and ``wide_cand`` best candidates and the ``wide_info`` best other guesses; from
    ``all_from`` codes on (if set) every candidate and ``all_info`` others. Guesses splitting
    the set the same way (the same parts, the same code solved) are one option.
    """

    k_info: int = K_INFO
    k_cand: int = K_CAND
    wide_from: int = WIDE_FROM
    wide_info: int = WIDE_INFO
    wide_cand: int = WIDE_CAND
    #: from this many codes on (0: never), every candidate and ``all_info`` other guesses
    all_from: int = 0
    all_info: int = 20

    def widths(self, n: int) -> tuple[int, int]:
        if self.all_from and n >= self.all_from:
            return max(self.k_info, self.wide_info, self.all_info), n
        if n >= self.wide_from:
            return max(self.k_info, self.wide_info), max(self.k_cand, self.wide_cand)
        return self.k_info, self.k_cand


#: The options of the shipped policy (see docs/strategies.md for how they were chosen).
OPTIONS = Options(
    k_info=K_INFO,
    k_cand=K_CAND,
    wide_from=WIDE_FROM,
    wide_info=WIDE_INFO,
    wide_cand=WIDE_CAND,
    all_from=ALL_FROM,
    all_info=ALL_INFO,
)

Vector = npt.NDArray[np.float64]
#: Sets up to this size rank guesses by counting pairs of codes (cheaper than part counts).
SMALL_SET = 12


def _smallest(cost: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.intp]:
    """Indexes of the ``k`` smallest costs, by cost then lowest index (a stable sort's order)."""
    if k >= len(cost):
        return np.argsort(cost, kind="stable")
    if k <= 0:
        return np.zeros(0, dtype=np.intp)
    threshold = np.partition(cost, k - 1)[k - 1]
    within = np.flatnonzero(cost <= threshold)
    return within[np.lexsort((within, cost[within]))][:k]
Choice = npt.NDArray[np.int16]


class Planner:
    """V(S, v) of the module docstring, memoised per own set S for every opponent class at once.

    V(S, ·) is a vector over the model's signatures: with ``now[w]`` the value of solving this
    round against w (1, or ½ when it may solve too) and ``T[w, w']`` the chance that w moves
    to a node of signature w' without solving,

        V(S, ·) = max_g  hit(g)/|S| · now  +  T · Σ_parts |P|/|S| · V(P, ·)

    (the max taken per signature), so one set costs one matrix product over its options
    whichever opponent node it meets, and sets of one or two codes have closed forms (guess a
    code: now, resp. (now + T·now)/2). Ties go to the earliest option: the base tree's guess,
    then by Σ|part|², then the lowest guess.
    """

    def __init__(self, model: OpponentTree, base: OpponentTree, options: Options = OPTIONS) -> None:
        self.model = model
        self.table = model.table
        self.options_config = options
        #: by_secret[s, g]: response id of guess g against secret s
        self.by_secret = np.ascontiguousarray(self.table.rows(self.table.all_secrets()))
        self.nresp = len(self.table.responses)
        self.solved = self.table.solved_id
        self.as_guess = np.asarray(self.table.secret_as_guess, dtype=np.intp)
        nsig = len(model.info)
        self.now: Vector = np.array([1.0 - b / m / 2.0 for m, b, _ in model.info])
        trans = np.zeros((nsig, nsig))
        for w, (m, _, kids) in enumerate(model.info):
            for c, w2 in kids:
                trans[w, w2] += c / m
        #: row vector @ trans_t == (trans @ column vector).T
        self.trans_t = np.ascontiguousarray(trans.T)
        self.two: Vector = (self.now + self.now @ self.trans_t) / 2.0
        #: own candidate set (int16 bytes) -> the base tree's guess there
        self.on_tree: dict[bytes, int] = {
            np.array(sorted(codes), dtype=np.int16).tobytes(): base.guess[key]
            for key, codes in base.codes.items()
        }
        self.memo: dict[bytes, tuple[Vector, Choice]] = {}

    def value(self, s: Part, w: int) -> tuple[float, int]:
        """(value, guess index) for own candidates ``s`` against a node of signature ``w``."""
        values, guesses = self.solve(np.array(sorted(s), dtype=np.int16))
        return float(values[w]), int(guesses[w])

    def solve(self, s: npt.NDArray[np.int16]) -> tuple[Vector, Choice]:
        """(V(S, ·), best guess per signature) for a sorted own set ``s``."""
        n = len(s)
        if n <= 2:
            vec = self.now if n == 1 else self.two
            return vec, np.full(len(vec), self.as_guess[int(s[0])], dtype=np.int16)
        key = s.tobytes()
        got = self.memo.get(key)
        if got is not None:
            return got
        got = self.memo[key] = self._plan(s, key)
        return got

    def option_guesses(self, s: npt.NDArray[np.int16], key: bytes) -> npt.NDArray[np.intp]:
        """The guesses weighed at ``s`` (before merging equal splits), preferred first."""
        n = len(s)
        rows = self.by_secret[s.astype(np.intp)]  # n x guesses
        nguess = rows.shape[1]
        if n <= SMALL_SET:
            # Σ|part|² is n plus twice the pairs of codes a guess does not tell apart.
            same = np.zeros(nguess, dtype=np.int32)
            for i in range(1, n):
                same += (rows[:i] == rows[i]).sum(axis=0, dtype=np.int32)
            solved_here = rows == self.solved
            hits = solved_here.any(axis=0)
            # the solved code is its own part: its pairs were not counted (it matches no one)
            cost = (n + 2.0 * same) - hits * 1.5
            useless = (same == n * (n - 1) // 2) & ~hits
        else:
            flat = rows.astype(np.intp) * nguess + np.arange(nguess, dtype=np.intp)[None, :]
            counts = np.bincount(flat.ravel(), minlength=nguess * self.nresp).reshape(-1, nguess)
            hits = counts[self.solved] > 0
            counts[self.solved] = 0
            cost = (counts.astype(np.float64) ** 2).sum(axis=0) - 0.5 * hits
            useless = (counts.max(axis=0) == n) & ~hits
        cost = cost.astype(np.float64)
        cost[useless] = np.inf  # splits nothing, solves nothing
        k_info, k_cand = self.options_config.widths(n)
        cands = self.as_guess[s.astype(np.intp)]
        if k_cand < n:
            cands = cands[_smallest(cost[cands], k_cand)]
        rest = cost.copy()
        rest[cands] = np.inf
        best = _smallest(rest, k_info)
        best = best[np.isfinite(rest[best])]
        picked = np.unique(np.concatenate([best, cands]))
        picked = picked[np.lexsort((picked, cost[picked]))]
        base = self.on_tree.get(key)
        if base is not None:
            picked = np.concatenate([[base], picked[picked != base]])
        return picked.astype(np.intp)

    def _plan(self, s: npt.NDArray[np.int16], key: bytes) -> tuple[Vector, Choice]:
        n = len(s)
        guesses = self.option_guesses(s, key)
        resp = self.by_secret[s.astype(np.intp)][:, guesses].T  # options x n
        # Group each option's codes by response: a stable sort keeps codes ascending within a
        # part; labelling each code by its part's first code makes equal splits equal rows.
        order = np.argsort(resp, axis=1, kind="stable")
        sresp = np.take_along_axis(resp, order, axis=1)
        starts = np.ones(resp.shape, dtype=bool)
        starts[:, 1:] = sresp[:, 1:] != sresp[:, :-1]
        pos = np.where(starts, np.arange(n)[None, :], 0)
        np.maximum.accumulate(pos, axis=1, out=pos)
        first = np.take_along_axis(order, pos, axis=1)
        first[sresp == self.solved] = n
        labels = np.empty_like(first)
        np.put_along_axis(labels, order, first, axis=1)
        seen: set[bytes] = set()
        keep_list = []
        for i in range(len(guesses)):
            split = labels[i].tobytes()
            if split not in seen:
                seen.add(split)
                keep_list.append(i)
        keep = np.array(keep_list, dtype=np.intp)
        acc = np.zeros((len(keep), len(self.now)))
        hit = np.zeros(len(keep))
        for row, i in enumerate(keep.tolist()):
            bounds = [*np.flatnonzero(starts[i]).tolist(), n]
            o = order[i]
            sr = sresp[i]
            total = acc[row]
            for a, b in itertools.pairwise(bounds):
                if sr[a] == self.solved:
                    hit[row] = 1.0
                    continue
                if b - a == 1:
                    total += self.now
                elif b - a == 2:
                    total += 2.0 * self.two
                else:
                    total += (b - a) * self.solve(s[o[a:b]])[0]
        values = (hit[:, None] * self.now[None, :] + acc @ self.trans_t) / n
        top = values.max(axis=0)
        pick = (values >= top - 1e-12).argmax(axis=0)
        cols = np.arange(values.shape[1])
        return values[pick, cols], guesses[keep][pick].astype(np.int16)


# -- decision tables -------------------------------------------------------------------------
def _encode_key(hist: OwnKey) -> str:
    return ".".join(f"{g}-{r}" for g, r in hist)


def write_table(path: Path, decisions: dict[OwnKey, dict[int, int]], header: str) -> None:
    """``# header`` then one line per own history: ``G-R.G-R... DEFAULT SIG:GUESS ...``.

    The most common guess of a history is written once as its default; only the opponent
    signatures that change it are listed, which keeps the shipped file small.
    """
    lines = [f"# {header}"]
    for hist in sorted(decisions):
        per = decisions[hist]
        counts: dict[int, int] = defaultdict(int)
        for g in per.values():
            counts[g] += 1
        default = max(sorted(counts), key=lambda g: counts[g])
        extra = " ".join(f"{w}:{g}" for w, g in sorted(per.items()) if g != default)
        lines.append(f"{_encode_key(hist) or '-'} {default} {extra}".rstrip())
    with gzip.open(path, "wt", encoding="ascii") as fh:
        fh.write("\n".join(lines) + "\n")


@dataclass
class DecisionTable:
    """A shipped table: own history -> (default guess, {signature: guess})."""

    header: str
    rows: dict[OwnKey, tuple[int, dict[int, int]]]

    def lookup(self, hist: OwnKey, w: int) -> int | None:
        row = self.rows.get(hist)
        if row is None:
            return None
        return row[1].get(w, row[0])


def read_table(path: Path) -> DecisionTable:
    rows: dict[OwnKey, tuple[int, dict[int, int]]] = {}
    header = ""
    with gzip.open(path, "rt", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("#"):
                header = line[1:].strip()
                continue
            parts = line.split()
            if not parts:
                continue
            hist: OwnKey = ()
            if parts[0] != "-":
                hist = tuple(
                    (int(a), int(b))
                    for a, b in (item.split("-") for item in parts[0].split("."))
                )
            extra = {int(w): int(g) for w, g in (p.split(":") for p in parts[2:])}
            rows[hist] = (int(parts[1]), extra)
    return DecisionTable(header, rows)


_TABLES: dict[str, DecisionTable | None] = {}


def decision_table(model: str) -> DecisionTable | None:
    """The shipped decisions against ``model`` (None if the file is absent)."""
    if model not in _TABLES:
        path = DATA_DIR / f"adaptive-{model}.txt.gz"
        _TABLES[model] = read_table(path) if path.exists() else None
    return _TABLES[model]


# -- recognising the opponent ----------------------------------------------------------------
def _relabellings(length: int) -> list[tuple[int, ...]]:
    return list(itertools.permutations(range(length)))


def consistent_relabelling(
    tree_guesses: Iterable[str], seen: Iterable[str], perms: list[tuple[int, ...]]
) -> bool:
    """Is there one renaming σ of symbols and reordering π of positions with
    seen[i][p] = σ(tree[i][π[p]]) for every guess i? (the :mod:`bots.relabel` map)."""
    pairs = list(zip(tree_guesses, seen, strict=True))
    for perm in perms:
        forward: dict[str, str] = {}
        backward: dict[str, str] = {}
        ok = True
        for t, o in pairs:
            for p, q in enumerate(perm):
                a, b = t[q], o[p]
                if forward.setdefault(a, b) != b or backward.setdefault(b, a) != a:
                    ok = False
                    break
            if not ok:
                break
        if ok:
            return True
    return False


# -- the strategy ----------------------------------------------------------------------------
class Adaptive(Strategy):
    """Plays ``strongest`` at first, then the race program (module docstring)."""
    share_openings = False  # see bots.base.Strategy: its tables would be copied at each fork


    name = "adaptive"
    summary = (
        "adapts to the opponent's visible progress (race DP over own candidates x the "
        "opponent's node); beats strongest"
    )
    deterministic = False
    adaptive = True
    #: Table builders set this: a state missing from the table is planned whatever its size,
    #: and every decision taken from the program is recorded here (model -> history -> sig).
    recording: ClassVar[dict[str, dict[OwnKey, dict[int, int]]] | None] = None
    _planners: ClassVar[dict[str, Planner]] = {}
    _fit_cache: ClassVar[dict[tuple[str, tuple[int, ...], tuple[str | None, ...]], bool]] = {}
    _cands_cache: ClassVar[dict[OwnKey, tuple[int, ...]]] = {}

    def __init__(self, rules: Rules = DEFAULT_RULES) -> None:
        if rules != DEFAULT_RULES:
            raise TreeUnavailable("the adaptive bot plays the standard 4 of 10 game only")
        self.rules = rules
        self.table = table_for(rules)
        self.base = opponent_tree("strongest", rules)
        self._trees = {name: opponent_tree(name, rules) for name in MODELS}
        #: response (a (bulls, cows) tuple) -> response id, without building a Response
        self._rid: dict[tuple[int, int], int] = {
            (r.bulls, r.cows): i for i, r in enumerate(self.table.responses)
        }
        self._perms = _relabellings(rules.length)
        self._reset()

    @classmethod
    def unavailable(cls) -> str:
        for name in MODELS:
            if not (DATA_DIR / f"{name}.txt.gz").exists():
                return f"tree file bots/data/{name}.txt.gz missing"
        return ""

    def _reset(self) -> None:
        self.own: OwnKey = ()
        self.own_key: tuple[int, ...] = ()
        self.opp_responses: tuple[int, ...] = ()
        self.opp_guesses: tuple[str | None, ...] = ()
        #: models still consistent with the opponent's visible guesses
        self.models: tuple[str, ...] = MODELS

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        if rules != self.rules:
            raise TreeUnavailable("the adaptive bot plays the standard 4 of 10 game only")
        self._reset()

    def fork(self) -> Adaptive:
        """An independent copy in the same state (all fields are immutable): cheap."""
        clone = object.__new__(Adaptive)
        clone.__dict__.update(self.__dict__)
        return clone

    # -- what it sees ----------------------------------------------------------------------
    def observe(self, guess: str, response: Response) -> None:
        g = self.table.guess_index[guess]
        r = self._rid[response]
        self.own = (*self.own, (g, r))
        self.own_key = (*self.own_key, r)

    def observe_opponent_move(
        self, count: int, guess: str | None, response: Response | None
    ) -> None:
        if response is None or count != len(self.opp_responses) + 1:
            return  # hidden or out of order: keep what is known
        self.opp_responses = (*self.opp_responses, self._rid[response])
        self.opp_guesses = (*self.opp_guesses, guess)
        if guess is not None and self.models:
            self.models = tuple(m for m in self.models if self._fits(m))

    def _fits(self, name: str) -> bool:
        key = (name, self.opp_responses, self.opp_guesses)
        got = self._fit_cache.get(key)
        if got is None:
            got = self._fit_cache[key] = self._check_fit(name)
        return got

    def _check_fit(self, name: str) -> bool:
        tree = self._trees[name]
        keys = [self.opp_responses[:i] for i in range(len(self.opp_responses))]
        if any(k not in tree.guess for k in keys):
            return False
        shown = [(self.table.guesses[tree.guess[k]], g) for k, g in
                 zip(keys, self.opp_guesses, strict=True) if g is not None]
        return consistent_relabelling([a for a, _ in shown], [b for _, b in shown], self._perms)

    @property
    def candidates(self) -> tuple[int, ...]:
        """Own candidate set (secret indexes), from the own history; cached per history."""
        got = self._cands_cache.get(self.own)
        if got is None:
            cands = self.table.all_secrets()
            for g, r in self.own:
                cands = self.table.filter(cands, g, r)
            got = tuple(cands.tolist())
            if len(self._cands_cache) > 200_000:
                self._cands_cache.clear()
            self._cands_cache[self.own] = got
        return got

    @property
    def choices_left(self) -> int:
        return len(self.candidates)

    # -- what it plays ---------------------------------------------------------------------
    def next_guess(self) -> str:
        return self.table.guesses[self._choose()]

    def _model(self) -> tuple[str, int] | None:
        """(model tree, signature of the opponent's node in it), or None without a model.

        A tree whose guesses fit what was shown is preferred; if none fits (another kind of
        bot, or a person) the opponent is modelled as ``strongest`` from its responses alone,
        as long as they are a path of that tree.
        """
        depth = len(self.own)
        opp = self.opp_responses[:depth]  # free pacing may show more: keep lockstep's view
        if len(opp) != depth:
            return None
        if not self.models and self._on_base_tree():
            # Its guesses fit no model: it is another bot or a person, whose future the
            # program cannot predict. While still on the fixed point's tree, stay there.
            return None
        for name in (*self.models, "strongest"):
            w = self._trees[name].sig.get(opp)
            if w is not None:
                return name, w
        return None

    def plans(self) -> bool:
        """Does the race program choose the next guess (rather than the ``strongest`` tree)?

        From guess START_DEPTH + 1 on, and earlier (from the second guess) once the own
        candidate set holds at most PLAN_FROM codes.
        """
        depth = len(self.own)
        if depth >= START_DEPTH or self.own_key not in self.base.guess:
            return True
        return depth >= 1 and len(self.candidates) <= PLAN_FROM

    def _choose(self) -> int:
        if not self.plans():
            return self.base.guess[self.own_key]
        model = self._model()
        if model is not None:
            name, w = model
            table = decision_table(name)
            if table is not None:
                got = table.lookup(self.own, w)
                if got is not None:
                    return got
            record = self.recording
            cands = self.candidates
            if record is not None or len(cands) <= LIVE_PLAN_LIMIT:
                g = self._planner(name).value(cands, w)[1]
                if record is not None:
                    record.setdefault(name, {}).setdefault(self.own, {})[w] = g
                return g
        return self._fallback()

    def _planner(self, name: str) -> Planner:
        got = self._planners.get(name)
        if got is None:
            got = self._planners[name] = Planner(opponent_tree(name, self.rules), self.base)
        return got

    def _fallback(self) -> int:
        if self.own_key in self.base.guess and self._on_base_tree():
            return self.base.guess[self.own_key]
        # Off the tree: the program's most common move here over all opponent states, if
        # the table has this history; else a one-step heuristic.
        for name in MODELS:
            table = decision_table(name)
            row = table.rows.get(self.own) if table is not None else None
            if row is not None:
                return row[0]
        cands = np.array(self.candidates, dtype=np.intp)
        if len(cands) <= 2:
            return int(self.table.secret_as_guess[cands[0]])
        counts = self.table.partition_counts(cands)
        cost = (counts.astype(np.float64) ** 2).sum(axis=1) - 0.5 * self.table.candidate_mask(
            cands
        )
        return int(np.argmin(cost))

    def _on_base_tree(self) -> bool:
        """Did every own guess so far follow the base tree (then ``S`` is its node's set)?"""
        return all(self.base.guess.get(self.own_key[:i]) == g for i, (g, _) in enumerate(self.own))
