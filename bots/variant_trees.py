"""The tree bots ``minimum`` and ``strongest`` for MOO rules other than 4 of 10.

4 of 10 ships its optimal trees (``bots/data``, :mod:`bots.tree`). For other distinct-symbol
MOO rules small enough for the exact solver (:data:`MAX_TREE_CODES` secrets, at most 10
symbols: the native engine's limit) the tree is computed on first use by ``moo solve`` in a
child process and cached on disk beside the Mastermind trees (:func:`bots.mastermind.
tree_cache_dir`: ``$MOO_TREE_CACHE`` or ``~/.cache/moo-arena/trees``), as
``moo-LENGTH-ALPHABET-OBJECTIVE.txt.gz``. A child process, because the native engine is
process-wide state (the server's post-match analysis and the Mastermind trees use engines too)
and holds the interpreter while it searches: the server's event loop and its other bots keep
running meanwhile.

A bot that needs a tree waits for it at most :data:`TREE_WAIT_S` (3 of 10 takes about a
second, process start included); if the solve takes longer, that match is played by the best
heuristic (:data:`FALLBACK`) and the solve goes on in the background for the next match.
Rules too large for the exact solver (5 and 6 of 10, 4 of hex, the 1971 repeats rule: see
docs/variants.md for the measurements) always play :data:`FALLBACK`, and the bot says so:
:func:`fallback_note` is shown to players (``bot_note`` in the ``match`` message, an info line
of ``moo bot``).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

from bots.base import Strategy
from bots.mastermind import tree_cache_dir
from bots.registry import create
from bots.tree import DecisionTree, InvalidTree, TreeKey, TreeUnavailable, load_tree
from moo.rules import DEFAULT_RULES, Response, Rules
from moo.variants import rules_label

__all__ = [
    "FALLBACK",
    "MAX_TREE_CODES",
    "OBJECTIVES",
    "TREE_WAIT_S",
    "VariantTree",
    "cache_file",
    "exact_feasible",
    "fallback_note",
    "tree_for",
]

OBJECTIVES = ("minimum", "strongest")
#: Largest game solved on first use: 4 of 9 (3024 secrets) takes 4.5 s for the minimum tree
#: with tie-break and 3.1 s more for strongest (docs/variants.md); 4 of 10 takes a minute
#: and ships its trees; 5 of 10 (30240) did not finish its first cell in minutes.
MAX_TREE_CODES = 3024
#: The native MOO engine handles alphabets of at most this many symbols.
MAX_TREE_SYMBOLS = 10
#: How long a bot waits for a tree being computed before it plays :data:`FALLBACK` instead.
TREE_WAIT_S = 2.0
#: The heuristic played where no tree can be: the lowest mean of the heuristics on 5 and 6 of
#: 10 and 4 of hex in bench/variant_bots.py's sample (docs/variants.md).
FALLBACK = "entropy"
#: A solve that runs longer than this is abandoned (then the fallback goes on playing).
SOLVE_TIMEOUT_S = 600.0

_LOCK = threading.Lock()
_JOBS: dict[tuple[Rules, str], threading.Thread] = {}
_TREES: dict[tuple[Rules, str], DecisionTree] = {}
_FAILED: dict[tuple[Rules, str], str] = {}


def exact_feasible(rules: Rules) -> bool:
    """True when the exact solver computes these rules' trees on first use in seconds."""
    return (
        not rules.repeats_in_guess
        and rules != DEFAULT_RULES
        and len(rules.alphabet) <= MAX_TREE_SYMBOLS
        and len(rules.secrets) <= MAX_TREE_CODES
    )


def fallback_note(strategy: str, rules: Rules) -> str:
    """What players are told when ``strategy`` cannot play its exact tree for ``rules``
    ("" when it can, or when ``strategy`` is not a tree bot)."""
    if strategy not in OBJECTIVES or rules == DEFAULT_RULES or exact_feasible(rules):
        return ""
    why = ("the 1971 repeats rule is too large for the exact solver"
           if rules.repeats_in_guess else "too large for the exact solver")
    return (f"{strategy} plays the {FALLBACK} heuristic for {rules_label(rules)}: {why}, "
            "so there is no optimal tree")


def cache_file(rules: Rules, objective: str) -> Path:
    tag = rules.alphabet if rules.alphabet.isalnum() else rules.alphabet.encode().hex()
    return tree_cache_dir() / f"moo-{rules.length}-{tag}-{objective}.txt.gz"


def _solve(rules: Rules, objective: str) -> None:
    """Run ``moo solve`` for the tree (and for ``strongest``, the minimum tree first)."""
    path = cache_file(rules, objective)
    cmd = [sys.executable, "-m", "cli", "solve", objective, "--length", str(rules.length),
           "--alphabet", rules.alphabet, "--quiet"]
    if objective == "minimum":
        cmd.append("--tiebreak")  # the same choice as the shipped 4-of-10 tree
    else:
        opponent = cache_file(rules, "minimum")
        if not _usable(rules, opponent):
            _solve(rules, "minimum")
        cmd += ["--vs", str(opponent)]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp.gz")
    try:
        done = subprocess.run([*cmd, "--out", str(tmp)], capture_output=True, text=True,
                              timeout=SOLVE_TIMEOUT_S, check=False)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            raise RuntimeError(lines[-1] if lines else f"moo solve exited {done.returncode}")
        os.replace(tmp, path)  # atomic: a concurrent reader sees no file or the whole one
    finally:
        tmp.unlink(missing_ok=True)


def _usable(rules: Rules, path: Path) -> bool:
    try:
        load_tree(path, rules)
    except (TreeUnavailable, InvalidTree, OSError, EOFError, ValueError):
        return False
    return True


def _run_job(rules: Rules, objective: str) -> None:
    key = (rules, objective)
    try:
        _solve(rules, objective)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        with _LOCK:
            _FAILED[key] = str(exc)
    finally:
        with _LOCK:
            _JOBS.pop(key, None)


def tree_for(rules: Rules, objective: str, wait: float | None = None) -> DecisionTree | None:
    """The rules' tree: from memory, from the cache file, or solved in a child process.

    ``wait`` is how long to wait for a solve (None: until it ends); the tree is None when it
    is not ready by then (the solve goes on in the background) or when the solve failed.
    A cache file that does not validate as a tree for the rules is solved again.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be minimum or strongest, not {objective!r}")
    if not exact_feasible(rules):
        raise ValueError(f"{rules_label(rules)} is too large for the exact solver")
    key = (rules, objective)
    with _LOCK:
        if key in _TREES:
            return _TREES[key]
    path = cache_file(rules, objective)
    if not _usable(rules, path):
        with _LOCK:
            job = _JOBS.get(key)
            if job is None:
                _FAILED.pop(key, None)
                job = threading.Thread(target=_run_job, args=(rules, objective),
                                       name=f"moo-tree-{objective}", daemon=True)
                _JOBS[key] = job
                job.start()
        job.join(wait)
        if job.is_alive() or not _usable(rules, path):
            return None
    tree = load_tree(path, rules)
    with _LOCK:
        _TREES[key] = tree
    return tree


class VariantTree(Strategy):
    """``minimum`` or ``strongest`` for MOO rules other than 4 of 10 (module docstring).

    Plays the exact tree when there is one, else :data:`FALLBACK`; :attr:`note` says which
    (empty when the tree plays).
    """
    share_openings = False  # see bots.base.Strategy: its tables would be copied at each fork


    name: ClassVar[str] = "variant-tree"
    summary: ClassVar[str] = ("the exact solver's tree for the rules, computed on first use; "
                              f"{FALLBACK} where the rules are too large")
    deterministic: ClassVar[bool] = True

    def __init__(self, objective: str = "minimum") -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be minimum or strongest, not {objective!r}")
        self.objective = objective
        self.note = ""
        self.tree: DecisionTree | None = None
        self.fallback: Strategy | None = None
        self._key: TreeKey = ()
        self.wait = TREE_WAIT_S

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self._key = ()
        self.tree = tree_for(rules, self.objective, self.wait) if exact_feasible(rules) else None
        if self.tree is not None:
            self.fallback, self.note = None, ""
            return
        self.note = fallback_note(self.objective, rules) or (
            f"{self.objective} plays the {FALLBACK} heuristic in this match: the exact tree "
            f"for {rules_label(rules)} is still being computed"
            + (f" (failed: {_FAILED[(rules, self.objective)]})"
               if (rules, self.objective) in _FAILED else "")
        )
        self.fallback = create(FALLBACK, relabel=False)
        self.fallback.new_match(rules, rng)

    def next_guess(self) -> str:
        if self.fallback is not None:
            return self.fallback.next_guess()
        assert self.tree is not None
        try:
            return self.tree.moves[self._key]
        except KeyError:
            raise RuntimeError(
                "the responses so far are not in the tree: they contradict each other"
            ) from None

    def observe(self, guess: str, response: Response) -> None:
        if self.fallback is not None:
            self.fallback.observe(guess, response)
            return
        self._key = (*self._key, Response(*response))
