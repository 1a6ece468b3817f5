"""Mastermind bots: the exact solver's trees, computed on first use and cached on disk.

Not wired into matches yet (choosing a variant per match is a later step); the bots follow the
same contract as :class:`bots.base.Strategy` (``new_match``, ``next_guess``, ``observe``) with
:class:`moo.mastermind.MastermindRules` in place of :class:`moo.rules.Rules`.

* :class:`MastermindTree` plays the optimal ``minimum`` (or ``strongest``) tree of the rules.
  The tree is solved by the generic table engine (``bots/solver/table.py``, about a second
  for 4 of 6) the first time a process needs it and cached as a dump file (``SECRET: GUESSES``
  lines, gzip) in :func:`tree_cache_dir`; later processes read the file. Each match applies a
  random relabelling (symbol permutation and position permutation), so no secret is a known
  weak spot, exactly as the MOO tree bots do.
* Rules too large for the exact solver (more than 10000 codes) fall back to
  :class:`RandomConsistent`, and the bot says so in :attr:`MastermindTree.note`.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from moo.mastermind import MastermindRules, mastermind_score
from moo.rules import Response

__all__ = ["MAX_EXACT_CODES", "MastermindTree", "RandomConsistent", "tree_cache_dir",
           "tree_for"]

#: The exact solver keeps an N x N response table; beyond this the bots fall back.
MAX_EXACT_CODES = 10_000
_TREES: dict[tuple[MastermindRules, str], dict[tuple[Response, ...], str]] = {}


def tree_cache_dir() -> Path:
    """``$MOO_TREE_CACHE`` if set, else ``$XDG_CACHE_HOME/moo-arena/trees``
    (``~/.cache/moo-arena/trees``)."""
    env = os.environ.get("MOO_TREE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "moo-arena" / "trees"


def _cache_file(rules: MastermindRules, objective: str) -> Path:
    tag = rules.alphabet if rules.alphabet.isalnum() else rules.alphabet.encode().hex()
    return tree_cache_dir() / f"mastermind-{rules.length}-{tag}-{objective}.txt.gz"


def _index(rules: MastermindRules, paths: dict[str, list[str]]) -> dict[tuple[Response, ...],
                                                                           str]:
    """Responses so far -> next guess, checking on the way that the dump is a strategy."""
    if sorted(paths) != sorted(rules.secrets):
        raise ValueError("tree does not cover exactly the codes")
    nxt: dict[tuple[Response, ...], str] = {}
    for secret, guesses in paths.items():
        key: tuple[Response, ...] = ()
        for g in guesses:
            if nxt.setdefault(key, g) != g:
                raise ValueError(f"not a decision tree at {secret}")
            key = (*key, mastermind_score(secret, g))
        if key[-1] != rules.solved:
            raise ValueError(f"{secret}: the path does not end on the secret")
    return nxt


def tree_for(rules: MastermindRules, objective: str = "minimum") -> dict[tuple[Response, ...],
                                                                          str]:
    """The rules' optimal tree as responses-so-far -> guess: memory, then disk, then solve."""
    key = (rules, objective)
    if key in _TREES:
        return _TREES[key]
    from bots.solver.core import dump_tree, load_tree, minimum_objective, strongest_objective
    from bots.solver.table import mastermind_solver

    path = _cache_file(rules, objective)
    paths: dict[str, list[str]] | None = None
    if path.exists():
        try:
            paths = load_tree(path)
            tree = _index(rules, paths)
        except (OSError, ValueError, EOFError):
            paths = None  # a damaged cache file is recomputed, not trusted
    if paths is None:
        if objective == "minimum":
            obj = minimum_objective(tiebreak=True)
        elif objective == "strongest":
            opponent = tree_distribution(rules, tree_for(rules, "minimum"))
            obj = strongest_objective(opponent)
        else:
            raise ValueError(f"objective must be minimum or strongest, not {objective!r}")
        paths = mastermind_solver(rules, obj).solve().paths
        tree = _index(rules, paths)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.gz")
        dump_tree(paths, tmp)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new one
    _TREES[key] = tree
    return tree


def tree_distribution(rules: MastermindRules, tree: dict[tuple[Response, ...], str]) -> list[int]:
    """Counts of codes solved by guess 1, 2, ... when playing ``tree``."""
    out: list[int] = []
    for secret in rules.secrets:
        key: tuple[Response, ...] = ()
        while True:
            g = tree[key]
            r = mastermind_score(secret, g)
            key = (*key, r)
            if r == rules.solved:
                break
        while len(out) < len(key):
            out.append(0)
        out[len(key) - 1] += 1
    return out


class RandomConsistent:
    """A random code still consistent with every answer (works for any size)."""

    name = "mastermind-random"

    def __init__(self) -> None:
        self.rules = MastermindRules()
        self.rng = random.Random(0)
        self.left: list[str] = []

    def new_match(self, rules: MastermindRules, rng: random.Random) -> None:
        self.rules, self.rng = rules, rng
        self.left = list(rules.secrets)

    def next_guess(self) -> str:
        return self.rng.choice(self.left)

    def observe(self, guess: str, response: Response) -> None:
        self.left = self.rules.consistent(self.left, guess, response)

    def observe_opponent(self, count: int, response: Response | None) -> None:
        """The opponent's progress does not change a consistent guess (Strategy's hook)."""

    def observe_opponent_move(
        self, count: int, guess: str | None, response: Response | None
    ) -> None:
        """The runners' hook (bots.base.Strategy): this bot ignores the guess."""
        self.observe_opponent(count, response)


class MastermindTree:
    """The exact solver's tree for the match's rules, relabelled at random per match."""

    def __init__(self, objective: str = "minimum") -> None:
        self.objective = objective
        self.name = f"mastermind-{objective}"
        self.note = ""
        self.rules = MastermindRules()
        self.tree: dict[tuple[Response, ...], str] = {}
        self.key: tuple[Response, ...] = ()
        self.symbols: dict[str, str] = {}
        self.positions: list[int] = []
        self.fallback: RandomConsistent | None = None

    def new_match(self, rules: MastermindRules, rng: random.Random) -> None:
        self.rules = rules
        self.key = ()
        if len(rules.alphabet) ** rules.length > MAX_EXACT_CODES:
            self.note = (f"{rules.length} of {len(rules.alphabet)} is too large for the exact "
                         "solver: playing a random consistent code instead")
            self.fallback = RandomConsistent()
            self.fallback.new_match(rules, rng)
            return
        self.fallback = None
        self.note = ""
        self.tree = tree_for(rules, self.objective)
        shuffled = list(rules.alphabet)
        rng.shuffle(shuffled)
        self.symbols = dict(zip(rules.alphabet, shuffled, strict=True))
        self.positions = list(range(rules.length))
        rng.shuffle(self.positions)

    def next_guess(self) -> str:
        if self.fallback is not None:
            return self.fallback.next_guess()
        g = self.tree[self.key]
        out = [""] * len(g)
        for i, ch in enumerate(g):  # the same relabelling for every guess of the match
            out[self.positions[i]] = self.symbols[ch]
        return "".join(out)

    def observe(self, guess: str, response: Response) -> None:
        if self.fallback is not None:
            self.fallback.observe(guess, response)
            return
        self.key = (*self.key, Response(*response))

    def observe_opponent(self, count: int, response: Response | None) -> None:
        """An optimal tree plays the same whatever the opponent does (Strategy's hook)."""

    def observe_opponent_move(
        self, count: int, guess: str | None, response: Response | None
    ) -> None:
        """The runners' hook (bots.base.Strategy): this bot ignores the guess."""
        self.observe_opponent(count, response)
