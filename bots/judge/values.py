"""Exact values of positions: the one engine behind the post-match review and the assistant.

A position is the set S of codes still consistent with a player's guesses and responses.
With the secret equally likely to be any of them, W(S) is the least possible total number of
guesses still needed, summed over S (this guess included; the minimum strategy's objective),
and W(S, g) = |S| + the sum of W(P) over the parts P that guess g splits S into, except the
part g solves. Both the review (``loss`` = (W(S, g) - W(S)) / |S|) and the assistant (it
suggests a guess g with W(S, g) = W(S)) ask this module, so they cannot disagree.

Where W comes from:

* 4 of 10 (:class:`MooJudge` with the opening table): positions after at most two guesses
  are looked up in :mod:`bots.judge.opening` (relabelled to the table's canonical guesses;
  a history whose later guesses told nothing new is first reduced to the guesses that did);
  positions of one or two secrets are 1 and 3; the rest (after the third guess, a few dozen
  secrets at most in play that is not deliberately wasteful) are solved by the judge's own
  table-free search (``_search.c``), which starts at once; the larger ones it gives up on go
  to the exact solver (:class:`bots.solver.core.Solver`). Both engines' transposition tables
  keep what they solved for the process.
* Other distinct-symbol MOO rules small enough for the solver: the solver alone, from the
  empty history on.
* Mastermind (:class:`MastermindJudge`): the solver's Mastermind engine, the native
  ``_mastermind`` build of the MOO engine (:func:`bots.solver.table.mastermind_solver` gives
  a :class:`bots.solver.mastermind.MastermindSolver`); the first position is the whole game,
  so the first analysis in a process solves it from the empty history.

The native engines are process-wide state: :func:`judge_for` keeps one judge per process for
the last rules asked, and :func:`reset` forgets it (anything else in the process that builds a
solver must call it).
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from functools import cached_property
from typing import Any, Protocol

from moo.mastermind import MastermindRules
from moo.rules import DEFAULT_RULES, Response, Rules, score

from . import opening

__all__ = ["Judge", "MastermindJudge", "MooJudge", "exact_feasible", "judge_for", "reset"]

#: (guess, response) pairs so far, oldest first
History = Sequence[tuple[str, Response]]

#: Largest position (secrets) the table-free search takes after the opening table; larger
#: ones go to the solver's engine, whose symmetry under the guesses played prunes far more but
#: which costs about a tenth of a second of CPU to build (its 5040 x 5040 response table and
#: capacity bounds; docs/analysis.md).
SEARCH_LIMIT = 40
#: Probes (one-ply scans, about a millisecond each) the table-free search may spend on a
#: larger position while the engine is not built; past them the engine is built and used.
SEARCH_BUDGET = 100

#: Largest distinct-symbol MOO game judged from the empty history by the solver (4 of 9);
#: 4 of 10 has the opening table.
MAX_SOLVED_CODES = 3024


class Judge(Protocol):
    """What the review and the assistant need of a game."""

    rules: Any
    codes: tuple[str, ...]

    def score(self, secret: str, guess: str) -> Response: ...

    def parts(self, cand: Sequence[int], guess: str) -> dict[Response, list[int]]:
        """The parts of S (code indices) by the response to ``guess``."""
        ...

    def best(self, history: History, cand: Sequence[int]) -> tuple[int, str, str]:
        """(W(S), an optimal guess, where W came from: ``table`` or ``solver``)."""
        ...

    def played(self, history: History, cand: Sequence[int], guess: str) -> int:
        """W(S, guess)."""
        ...


def _as_set(indices: Sequence[int]) -> bytes:
    return array.array("H", sorted(indices)).tobytes()


class _Parts:
    """The partition arithmetic both judges share (scores through ``self.score``)."""

    codes: tuple[str, ...]

    def score(self, secret: str, guess: str) -> Response:
        raise NotImplementedError

    def parts(self, cand: Sequence[int], guess: str) -> dict[Response, list[int]]:
        codes = self.codes
        out: dict[Response, list[int]] = {}
        for s in cand:
            out.setdefault(self.score(codes[s], guess), []).append(s)
        return out


class MooJudge(_Parts):
    """Distinct-symbol MOO: the opening table where it applies, the exact solver elsewhere."""

    def __init__(self, rules: Rules = DEFAULT_RULES) -> None:
        if rules.repeats_in_guess:
            raise ValueError("the judge needs distinct-symbol guesses (the solver's game)")
        self.rules = rules
        self.codes = rules.secrets
        self.index = {c: i for i, c in enumerate(self.codes)}
        self.table = None
        if rules == opening.RULES:
            if not opening.TABLE.exists():  # a broken install: solving instead takes minutes
                raise ValueError(f"the judge's opening table is missing ({opening.TABLE}); "
                                 "reinstall moo-arena")
            self.table = opening.load(opening.TABLE)
        self._solved: dict[bytes, tuple[int, str]] = {}

    def score(self, secret: str, guess: str) -> Response:
        return score(secret, guess)

    def parts(self, cand: Sequence[int], guess: str) -> dict[Response, list[int]]:
        """The partition in C (the judge's search module, which needs no tables)."""
        width = self.rules.length + 1
        out: dict[Response, list[int]] = {}
        for rid, data in self.search.partition(_as_set(cand), self.index[guess]).items():
            part = array.array("H")
            part.frombytes(data)
            out[Response(rid // width, rid % width)] = part.tolist()
        return out

    @cached_property
    def solver(self) -> Any:
        """The solver's native engine, for games without the opening table (it solves them
        from the empty history) and for the larger positions of 4 of 10; building it costs a
        response table, about a tenth of a second of CPU for 4 of 10, which pays off only over
        long searches)."""
        from bots.solver.core import Solver, minimum_objective

        return Solver(self.rules, minimum_objective(), tt_log2=21)

    @cached_property
    def search(self) -> Any:
        """The judge's own table-free engine (``_search.c``), for the positions after the
        opening table: nothing to build, so a fresh process starts solving at once."""
        from bots.judge import _search

        _search.init(self.rules.length, len(self.rules.alphabet))
        return _search

    # -- the opening table ---------------------------------------------------------------
    @cached_property
    def _everything(self) -> bytes:
        return _as_set(range(len(self.codes)))

    def _count(self, history: History) -> int:
        """How many codes answer every guess of ``history`` as it was answered: the whole game
        cut down by the C partition, one guess at a time. Nothing is kept between calls (sets
        over the whole game kept per guess grew an export of 1000 matches past a gigabyte),
        and a fresh process needs no array library (importing numpy alone cost more than the
        rest of a typical analysis)."""
        width = self.rules.length + 1
        part = self._everything
        for guess, response in history:
            rid = response[0] * width + response[1]
            part = self.search.partition(part, self.index[guess]).get(rid, b"")
            if not part:
                return 0
        return len(part) // 2

    def _reduced(self, history: History, n: int) -> list[tuple[str, Response]]:
        """The history without the guesses that told nothing the others had not (same S).

        A sub-history's set contains S, so it is S exactly when it has |S| codes.
        """
        kept = list(history)
        if len(kept) <= 1:
            return kept
        i = 0
        while i < len(kept) and len(kept) > 1:
            if self._count(kept[:i] + kept[i + 1:]) == n:
                kept.pop(i)
            else:
                i += 1
        return kept

    def _from_table(self, history: History, n: int) -> tuple[int, str] | None:
        table = self.table
        if table is None:
            return None
        if not history:
            return self._root
        if len(history) > 2:
            if n <= SEARCH_LIMIT:  # searched at once anyway: not worth reducing the history
                return None
            history = self._reduced(history, n)
            if len(history) > 2:
                return None
        if len(history) == 1:
            (g, r), = history
            rel = opening.canonical_pair(g, g)[1]  # g becomes 0123
            hit = table.cell(r)
        else:
            (g1, r1), (g2, r2) = history
            canon, rel = opening.canonical_pair(g1, g2)
            hit = table.pair(canon, r1, r2)
        if hit is None:
            return None
        return hit[0], rel.undo(hit[1])

    @cached_property
    def _root(self) -> tuple[int, str]:
        """W of the whole game: every first guess is 0123 relabelled, so it is any guess's."""
        assert self.table is not None
        total = len(self.codes)
        for r, part in self.parts(range(len(self.codes)), opening.FIRST).items():
            if r != self.rules.solved:
                hit = self.table.cell(r)
                total += hit[0] if hit is not None else 2 * len(part) - 1
        return total, self.codes[0]

    # -- values ----------------------------------------------------------------------------
    def best(self, history: History, cand: Sequence[int]) -> tuple[int, str, str]:
        n = len(cand)
        if n == 0:
            raise ValueError("no code is consistent with these responses")
        if n <= 2:  # guess one of them: 1, or 1 + 2
            return 2 * n - 1, self.codes[min(cand)], "table"
        hit = self._from_table(history, n)
        if hit is not None:
            return hit[0], hit[1], "table"
        key = _as_set(cand)
        got = self._solved.get(key)
        if got is None:
            quick = None
            if self.table is not None and (n <= SEARCH_LIMIT or "solver" not in self.__dict__):
                # small, or the engine not built yet: try the table-free search first, within
                # a budget (unbounded for small sets, where it is never slow)
                quick = self.search.solve(key, 0 if n <= SEARCH_LIMIT else SEARCH_BUDGET)
            if quick is not None:
                value, guess = quick
            elif self.table is not None:  # the engine's symmetry pays off on larger sets
                kept = self._reduced(history, n)
                value, guess = self.solver.best_guess(key, [self.index[g] for g, _ in kept])
                value -= len(kept) * n
            else:
                value, guess = self.solver.best_guess(key, [self.index[g] for g, _ in history])
                value -= len(history) * n
            got = (int(value), self.codes[guess])
            self._solved[key] = got
        return got[0], got[1], "solver"

    def played(self, history: History, cand: Sequence[int], guess: str) -> int:
        n = len(cand)
        total = n
        for r, part in self.parts(cand, guess).items():
            if r != self.rules.solved:
                total += self.best([*history, (guess, r)], part)[0]
        return total


class MastermindJudge(_Parts):
    """Mastermind (repeats allowed): the solver's Mastermind engine, whole game on first use."""

    def __init__(self, rules: MastermindRules) -> None:
        if len(rules.alphabet) ** rules.length > 10_000:
            raise ValueError("Mastermind game too large for exact analysis (over 10000 codes)")
        self.rules = rules
        self.codes = rules.secrets
        self.index = {c: i for i, c in enumerate(self.codes)}

    def score(self, secret: str, guess: str) -> Response:
        return self.rules.score(secret, guess)

    @cached_property
    def solver(self) -> Any:
        from bots.solver.core import minimum_objective
        from bots.solver.table import mastermind_solver

        return mastermind_solver(self.rules, minimum_objective())

    def best(self, history: History, cand: Sequence[int]) -> tuple[int, str, str]:
        n = len(cand)
        if n == 0:
            raise ValueError("no code is consistent with these responses")
        if n == 1:
            return 1, self.codes[cand[0]], "solver"
        hist = [self.index[g] for g, _ in history]
        value, guess = self.solver.best(list(cand), hist)
        return int(value) - len(hist) * n, self.codes[guess], "solver"

    def played(self, history: History, cand: Sequence[int], guess: str) -> int:
        total = len(cand)
        for r, part in self.parts(cand, guess).items():
            if r != self.rules.solved:
                total += self.best([*history, (guess, r)], part)[0]
        return total


def exact_feasible(rules: Rules | MastermindRules) -> str | None:
    """None when the judge gives exact values for ``rules``, else why not (one line)."""
    # moo.variants (the labels) is imported only to word a refusal: it pulls in the word
    # games, which a fresh ``moo analyse`` of a classic match should not pay for.
    if isinstance(rules, MastermindRules):
        if len(rules.alphabet) ** rules.length > 10_000:
            from moo.variants import rules_label

            return f"{rules_label(rules)} is too large for exact analysis (over 10000 codes)"
        return None
    if rules == DEFAULT_RULES:
        return None
    if (rules.repeats_in_guess or len(rules.secrets) > MAX_SOLVED_CODES
            or len(rules.alphabet) > 10):
        from moo.variants import rules_label

        return (f"{rules_label(rules)} is too large for the exact solver, so it is not "
                f"analysed (exact analysis: 4 of 10, and distinct-symbol MOO of at most "
                f"{MAX_SOLVED_CODES} codes and 10 symbols)")
    return None


_current: MooJudge | MastermindJudge | None = None


def reset() -> None:
    """Forget the cached judge (after something else in the process built a solver: the
    native engines are process-wide, so its tables would be someone else's)."""
    global _current
    _current = None


def judge_for(rules: Rules | MastermindRules) -> MooJudge | MastermindJudge:
    """The process's judge for ``rules`` (built on first use; ``ValueError`` with the reason
    for rules it does not handle)."""
    global _current
    why = exact_feasible(rules)
    if why is not None:
        raise ValueError(why)
    if _current is None or _current.rules != rules:
        _current = None
        _current = (MastermindJudge(rules) if isinstance(rules, MastermindRules)
                    else MooJudge(rules))
    return _current
