"""Table bots: play a precomputed decision tree read from a dump file.

The exact solver's optimal strategies (``minimum``: fewest guesses in total; ``strongest``:
best win rate, Tanaka 1996 §6) are far too expensive to recompute per move, so they ship as
dumps in the same format ``moo strategy dump`` prints, one line per secret, ascending::

    0123: 0123
    0124: 0123 0145 1024 0124

The file is read and validated once per process into a dict from the responses seen so far to
the next guess, so a move is one dict lookup (microseconds). Validation replays every line with
:func:`moo.rules.score`: the last guess must be the secret and no earlier one, every secret
must appear once, and two lines sharing the same responses so far must agree on the next guess
(otherwise the file is not a strategy at all).
"""

from __future__ import annotations

import gzip
import os
import random
from pathlib import Path
from typing import ClassVar

from bots.base import Strategy
from moo.errors import InvalidCode, MooError, NotAvailable
from moo.rules import DEFAULT_RULES, Response, Rules, score

__all__ = [
    "DATA_DIR",
    "DecisionTree",
    "InvalidTree",
    "Minimum",
    "Strongest",
    "TreeStrategy",
    "TreeUnavailable",
    "format_dump_line",
    "load_tree",
    "read_dump",
    "shipped_distribution",
]

DATA_DIR = Path(__file__).resolve().parent / "data"

Path_ = str | os.PathLike[str]
TreeKey = tuple[Response, ...]


class TreeUnavailable(NotAvailable):
    """The strategy's tree file is missing (e.g. the solver's output is not installed yet)."""


class InvalidTree(MooError, ValueError):
    """A dump file that is not a valid strategy for the rules."""

    code = "invalid_tree"


def format_dump_line(secret: str, guesses: tuple[str, ...] | list[str]) -> str:
    return f"{secret}: {' '.join(guesses)}"


def _open_text(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="ascii") as fh:
        return fh.read().splitlines()


def read_dump(path: Path_, rules: Rules = DEFAULT_RULES) -> list[tuple[str, tuple[str, ...]]]:
    """Every line of a dump as (secret, guesses), checked line by line (not as a tree).

    Checks: ``SECRET: G1 ... Gn`` syntax, legal codes, the secrets are exactly
    ``rules.secrets`` in ascending order, and the game ends at the last guess and not before.
    Random strategies' dumps pass too; :func:`load_tree` adds the tree check.
    """
    path = Path(path)
    if not path.exists():
        raise TreeUnavailable(f"no dump file at {path}")
    lines = [line for line in _open_text(path) if line.strip()]
    out: list[tuple[str, tuple[str, ...]]] = []
    for number, line in enumerate(lines, 1):
        where = f"{path}:{number}"
        head, sep, tail = line.partition(":")
        guesses = tuple(tail.split())
        if not sep or not guesses:
            raise InvalidTree(f"{where}: expected 'SECRET: GUESS1 ... GUESSn', got {line!r}")
        try:
            secret = rules.check_secret(head)
            for guess in guesses:
                rules.check_guess(guess)
        except InvalidCode as exc:
            raise InvalidTree(f"{where}: {exc}") from exc
        if guesses[-1] != secret:
            raise InvalidTree(f"{where}: the last guess {guesses[-1]} is not the secret {secret}")
        if secret in guesses[:-1]:
            raise InvalidTree(f"{where}: {secret} is guessed before the end of the game")
        out.append((secret, guesses))
    secrets = tuple(s for s, _ in out)
    if secrets != rules.secrets:
        missing = sorted(set(rules.secrets) - set(secrets))[:3]
        problem = f"missing {', '.join(missing)}" if missing else "repeated or out of order"
        raise InvalidTree(
            f"{path}: expected the {len(rules.secrets)} secrets once each in ascending order, "
            f"got {len(secrets)} lines ({problem})"
        )
    return out


class DecisionTree:
    """A fixed strategy as a dict: responses so far -> next guess."""

    def __init__(
        self, moves: dict[TreeKey, str], counts: dict[str, int], rules: Rules, source: str
    ) -> None:
        self.moves = moves
        #: guesses needed for each secret
        self.counts = counts
        self.rules = rules
        self.source = source

    @classmethod
    def from_dump(
        cls, lines: list[tuple[str, tuple[str, ...]]], rules: Rules, source: str
    ) -> DecisionTree:
        moves: dict[TreeKey, str] = {}
        counts: dict[str, int] = {}
        for number, (secret, guesses) in enumerate(lines, 1):
            key: TreeKey = ()
            for guess in guesses:
                known = moves.setdefault(key, guess)
                if known != guess:
                    shown = " ".join(str(r) for r in key) or "(start)"
                    raise InvalidTree(
                        f"{source}:{number}: after {shown} this line guesses {guess} but an "
                        f"earlier line guesses {known}: not a function of the history"
                    )
                key = (*key, score(secret, guess))
            counts[secret] = len(guesses)
        return cls(moves, counts, rules, source)


_TREES: dict[tuple[str, int, int, Rules], DecisionTree] = {}


def load_tree(path: Path_, rules: Rules = DEFAULT_RULES) -> DecisionTree:
    """The validated tree in ``path``, read once per process (re-read if the file changes)."""
    resolved = Path(path).resolve()
    if not resolved.exists():
        raise TreeUnavailable(f"no dump file at {resolved}")
    stat = resolved.stat()
    key = (str(resolved), stat.st_mtime_ns, stat.st_size, rules)
    tree = _TREES.get(key)
    if tree is None:
        tree = DecisionTree.from_dump(read_dump(resolved, rules), rules, str(resolved))
        _TREES[key] = tree
    return tree


def shipped_distribution(tree_name: str = "minimum") -> dict[int, int]:
    """Guesses needed -> number of secrets, for a tree shipped in ``bots/data/``.

    The exact distribution the score-against-minimum estimate (:mod:`bots.estimator`)
    compares players with; read (and validated) once per process.
    """
    path = DATA_DIR / f"{tree_name}.txt.gz"
    if not path.exists():
        raise TreeUnavailable(f"the decision tree {path} is missing")
    counts: dict[int, int] = {}
    for n in load_tree(path).counts.values():
        counts[n] = counts.get(n, 0) + 1
    return dict(sorted(counts.items()))


class TreeStrategy(Strategy):
    """Plays the decision tree in a dump file (``file:PATH`` on the command line)."""
    share_openings = False  # see bots.base.Strategy: its tables would be copied at each fork


    name = "file"
    summary = "a fixed strategy read from a 'SECRET: GUESS1 ... GUESSn' dump file"
    deterministic = True
    #: the built-in tree ``bots/data/<tree_name>.txt.gz`` used when no path is given
    tree_name: ClassVar[str] = ""

    def __init__(self, path: Path_ | None = None, rules: Rules = DEFAULT_RULES) -> None:
        if path is None:
            if not self.tree_name:
                raise TreeUnavailable("a tree strategy needs the path of its dump file")
            path = DATA_DIR / f"{self.tree_name}.txt.gz"
            if not Path(path).exists():
                raise TreeUnavailable(
                    f"strategy {self.name!r} needs its decision tree {path}, which is missing; "
                    "it is produced by the exact solver (any 'moo strategy dump' output "
                    "can be played meanwhile as file:PATH)"
                )
        self.tree = load_tree(path, rules)
        self._key: TreeKey = ()

    @classmethod
    def unavailable(cls) -> str:
        """Why the built-in tree cannot be played ("" when it can), for listings."""
        if cls.tree_name and not (DATA_DIR / f"{cls.tree_name}.txt.gz").exists():
            return f"tree file bots/data/{cls.tree_name}.txt.gz missing"
        return ""

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        if rules != self.tree.rules:
            raise TreeUnavailable(
                f"the tree {self.tree.source} is for {self.tree.rules.length} of "
                f"{self.tree.rules.symbols_text}, not these rules"
            )
        self._key = ()

    def next_guess(self) -> str:
        try:
            return self.tree.moves[self._key]
        except KeyError:
            raise RuntimeError(
                "the responses so far are not in the tree: they contradict each other"
            ) from None

    def observe(self, guess: str, response: Response) -> None:
        self._key = (*self._key, Response(*response))


class Minimum(TreeStrategy):
    name = "minimum"
    summary = "exact minimum total guesses (Tanaka 1996: 26274), from bots/data/minimum.txt.gz"
    tree_name = "minimum"


class Strongest(TreeStrategy):
    name = "strongest"
    summary = "exact strongest fixed strategy (Tanaka 1996), from bots/data/strongest.txt.gz"
    tree_name = "strongest"
