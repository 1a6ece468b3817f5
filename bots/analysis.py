"""Post-match analysis: what each guess cost in expected guesses, by the exact solver.

For every guess of a player the position is the set S of secrets still consistent with the
guesses and responses before it (the player cannot know more). With the secret uniformly
distributed over S, the expected number of guesses still needed from there, *this guess
included*, is W(S)/|S|, where W(S) is the optimal total (the minimum strategy's objective):

    W(S)        = min over guesses g of W(S, g)
    W(S, g)     = |S| + sum over the parts P of S under g, except the solved one, of W(P)

``best`` is W(S)/|S|, ``played`` is W(S, g)/|S| for the guess actually played, and their
difference ``loss`` is what the guess cost; it is never negative and is 0 exactly when the
guess is an optimal one. Luck plays no part: the analysis judges the decision, not whether the
secret happened to be in a small part.

Where the values come from (4 of 10, the arena's game): the shipped minimum tree
(``bots/data/minimum.txt.gz``, Tanaka's optimum 26274) gives W(S) for every position it
reaches, after relabelling the digits so that the player's guesses become the tree's wherever
that is possible (a digit gets its tree label when it is first guessed; digits not guessed yet
are interchangeable, so e.g. every first guess is the tree's ``0123``). A subtree of an
optimal tree is optimal for its position, so these are exact. Positions the tree never
reaches (after a guess that differs from the tree's) and the parts of a played guess that
differs from the tree's are solved exactly by the native solver (``bots/solver``), whose
transposition table keeps them for the rest of the analysis. Other distinct-symbol variants
small enough for the exact solver (the tree bots' limit, :func:`bots.variant_trees.
exact_feasible`: at most 3024 codes and 10 symbols, e.g. 3 of 10, 4 of 8, 4 of 9) use the
solver alone, from the empty history: exact, seconds at most. Larger variants (5 and 6 of 10,
4 of hex) and the 1971 repeats rule are refused with a ``ValueError`` saying so: their first
positions are far beyond the solver, and an estimate would not be the exact value the marks
promise. Mastermind uses the generic table engine the same way
(:class:`MastermindAnalyser`; exact). Word MOO is not analysed (no exact solver for it).

Marks (``loss`` in expected guesses; thresholds chosen so that a mark means a real fraction of
a guess, the way chess sites mark centipawn losses):

* ``inaccuracy``: 0.02 <= loss < 0.10
* ``mistake``:    0.10 <= loss < 0.30
* ``blunder``:    loss >= 0.30

A guess that cannot be the secret (ruled out by earlier responses) is judged like any other,
by what it leaves to do: it is often a mistake, but not always.
"""

from __future__ import annotations

import argparse
import array
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from moo.mastermind import MastermindRules
from moo.rules import DEFAULT_RULES, Response, Rules, format_response, score

__all__ = [
    "BLUNDER",
    "INACCURACY",
    "MISTAKE",
    "Analyser",
    "GuessAnalysis",
    "analyse_guesses",
    "from_export",
    "mark",
    "reset",
]

INACCURACY, MISTAKE, BLUNDER = 0.02, 0.10, 0.30
_TREE = Path(__file__).resolve().parent / "data" / "minimum.txt.gz"


def mark(loss: float) -> str | None:
    """The label of a guess that lost ``loss`` expected guesses (None: a good guess)."""
    if loss >= BLUNDER:
        return "blunder"
    if loss >= MISTAKE:
        return "mistake"
    if loss >= INACCURACY:
        return "inaccuracy"
    return None


@dataclass(frozen=True)
class GuessAnalysis:
    """One guess: the position before it, what was best there and what the guess cost."""

    number: int               # 1 for the first guess
    guess: str
    response: str             # Tanaka notation, e.g. 1B2C
    candidates: int           # |S|: secrets still possible before this guess
    best_total: int           # W(S)
    played_total: int         # W(S, guess)
    best_expected: float      # W(S) / |S|
    played_expected: float    # W(S, guess) / |S|
    loss: float               # played_expected - best_expected
    mark: str | None
    best_guess: str           # an optimal guess here (the tree's when the tree reaches it)
    source: str               # "tree" or "solver": where best_total came from

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _as_set(indices: Sequence[int]) -> bytes:
    return array.array("H", sorted(indices)).tobytes()


@cache
def _tree() -> dict[str, list[str]]:
    from bots.solver.core import load_tree

    return load_tree(_TREE)


class Analyser:
    """Exact values of MOO positions for one rule set (one native engine per process)."""

    def __init__(self, rules: Rules = DEFAULT_RULES, tt_log2: int = 21) -> None:
        from bots.solver.core import Solver, minimum_objective

        if rules.repeats_in_guess:
            raise ValueError("analysis needs distinct-symbol guesses (the solver's game)")
        self.rules = rules
        self.solver = Solver(rules, minimum_objective(), tt_log2=tt_log2)
        self.use_tree = rules == DEFAULT_RULES and _TREE.exists()

    # W(S) at depth d by the solver: the engine's value counts absolute guess numbers.
    def _solved(self, cand: Sequence[int], history: Sequence[int]) -> tuple[int, int]:
        if len(cand) == 1:
            return 1, cand[0]
        value, guess = self.solver.best_guess(_as_set(cand), list(history))
        return value - len(history) * len(cand), guess

    def _played(self, cand: Sequence[int], history: Sequence[int], g: int) -> int:
        codes = self.solver.codes
        parts: dict[Response, list[int]] = {}
        for s in cand:
            parts.setdefault(score(codes[s], codes[g]), []).append(s)
        total = len(cand)
        for r, part in parts.items():
            if r != self.rules.solved:
                total += self._solved(part, [*history, g])[0]
        return total

    def analyse(self, secret: str, guesses: Sequence[str]) -> list[GuessAnalysis]:
        """Every guess of one player who was guessing ``secret``, up to the solving one."""
        rules = self.rules
        secret = rules.check_secret(secret)
        played = [rules.check_guess(g) for g in guesses]
        if not played:
            return []
        # Relabel the player's symbols into the tree's, lazily: a symbol gets its tree label
        # when it is first guessed, chosen so that the guess becomes the tree's guess whenever
        # that is possible (symbols never guessed yet are interchangeable, so any choice
        # gives an equivalent position). Responses are invariant under relabelling, so they
        # are computed on the player's own codes.
        to_tree: dict[str, str] = {}
        tree = _tree() if self.use_tree else None
        index = self.solver.index
        codes = self.solver.codes

        def extend(raw: str, target: str | None) -> str:
            """Map ``raw`` into tree labels, towards ``target`` if it is compatible."""
            if target is not None:
                trial = dict(to_tree)
                used = set(trial.values())
                ok = True
                for p, t in zip(raw, target, strict=True):
                    if p in trial:
                        ok = trial[p] == t
                    elif t in used:
                        ok = False
                    else:
                        trial[p] = t
                        used.add(t)
                    if not ok:
                        break
                if ok:
                    to_tree.update(trial)
                    return target
            free = [c for c in rules.alphabet if c not in set(to_tree.values())]
            for p in raw:
                if p not in to_tree:
                    to_tree[p] = free.pop(0)
            return "".join(to_tree[p] for p in raw)

        def back(code: str) -> str:
            """A tree-labelled code in the player's symbols (unmapped ones paired in order)."""
            inv = {v: k for k, v in to_tree.items()}
            spare_p = [c for c in rules.alphabet if c not in to_tree]
            spare_t = [c for c in rules.alphabet if c not in inv]
            inv.update(zip(spare_t, spare_p, strict=True))
            return "".join(inv[c] for c in code)

        cand = list(range(len(codes)))
        history: list[int] = []
        out: list[GuessAnalysis] = []
        for n, raw in enumerate(played, 1):
            d = n - 1
            path = tree[codes[cand[0]]] if tree is not None else None
            on_tree = path is not None and [codes[h] for h in history] == path[:d]
            if on_tree and tree is not None and path is not None:
                best = sum(len(tree[codes[s]]) - d for s in cand)
                best_code = path[d]
                source = "tree"
            else:
                best, best_index = self._solved(cand, history)
                best_code = codes[best_index]
                source = "solver"
            shown_best = back(best_code)  # before the guess fixes more labels
            g = index[extend(raw, best_code)]
            if codes[g] == best_code:  # the guess is the optimal one, relabelled
                value, shown_best = best, raw
            else:
                value = self._played(cand, history, g)
                if value == best:  # another optimal guess: show the player's own
                    shown_best = raw
            response = score(secret, raw)
            loss = (value - best) / len(cand)
            out.append(GuessAnalysis(
                number=n, guess=raw, response=format_response(response),
                candidates=len(cand), best_total=best, played_total=value,
                best_expected=best / len(cand), played_expected=value / len(cand),
                loss=loss, mark=mark(loss), best_guess=shown_best, source=source,
            ))
            if response == rules.solved:
                break
            cand = [s for s in cand if score(codes[s], codes[g]) == response]
            history.append(g)
        return out


class MastermindAnalyser:
    """Exact values of Mastermind positions, from the generic table engine (``_table.c``).

    No tree is shipped: the first analysis solves the whole game (about a second for 4 of 6)
    and the engine's transposition table keeps every value it proved, so positions on or near
    the optimal tree cost nothing more and the others are small searches.
    """

    def __init__(self, rules: MastermindRules) -> None:
        from bots.solver.core import minimum_objective
        from bots.solver.table import mastermind_solver

        if len(rules.alphabet) ** rules.length > 10_000:
            raise ValueError("Mastermind game too large for exact analysis (over 10000 codes)")
        self.rules = rules
        self.solver = mastermind_solver(rules, minimum_objective())

    def _solved(self, cand: Sequence[int], history: Sequence[int]) -> tuple[int, int]:
        if len(cand) == 1:
            return 1, cand[0]
        value, guess = self.solver.best(cand, history)
        return value - len(history) * len(cand), guess

    def analyse(self, secret: str, guesses: Sequence[str]) -> list[GuessAnalysis]:
        """Every guess of one player who was guessing ``secret``, up to the solving one."""
        rules = self.rules
        secret = rules.check_code(secret)
        played = [rules.check_code(g) for g in guesses]
        codes = self.solver.codes
        index = self.solver.index
        cand = list(range(len(codes)))
        history: list[int] = []
        out: list[GuessAnalysis] = []
        for n, raw in enumerate(played, 1):
            g = index[raw]
            best, best_index = self._solved(cand, history)
            if g == best_index:
                value = best
            else:
                value = len(cand)
                for rid, part in self.solver.partition(cand, g).items():
                    if rid != self.solver.solved_id:
                        value += self._solved(part, [*history, g])[0]
            response = rules.score(secret, raw)
            loss = (value - best) / len(cand)
            out.append(GuessAnalysis(
                number=n, guess=raw, response=format_response(response),
                candidates=len(cand), best_total=best, played_total=value,
                best_expected=best / len(cand), played_expected=value / len(cand),
                loss=loss, mark=mark(loss),
                best_guess=raw if value == best else codes[best_index], source="solver",
            ))
            if response == rules.solved:
                break
            cand = [s for s in cand if rules.score(codes[s], raw) == response]
            history.append(g)
        return out


_current: Analyser | MastermindAnalyser | None = None


def reset() -> None:
    """Forget the cached analyser. The native solver is one engine per process: anything else
    that builds a :class:`bots.solver.core.Solver` in this process re-initialises it, after
    which the cached analyser must be rebuilt (its tables would be someone else's)."""
    global _current
    _current = None


def analyse_guesses(rules: Rules | MastermindRules, secret: str,
                    guesses: Sequence[str]) -> list[GuessAnalysis]:
    """The pure entry point (for the server and exports): no I/O but reading the shipped tree.

    One analyser (and so one native engine, about 3 s to build for 4 of 10) is kept per
    process for the last rules used; see :func:`reset`. Raises
    :class:`moo.errors.InvalidCode` for a malformed secret or guess, ``ValueError`` for rules
    the solver does not handle.
    """
    global _current
    if isinstance(rules, Rules) and rules != DEFAULT_RULES:
        from bots.variant_trees import MAX_TREE_CODES, MAX_TREE_SYMBOLS, exact_feasible
        from moo.variants import rules_label

        if not exact_feasible(rules):
            raise ValueError(
                f"{rules_label(rules)} is too large for the exact solver, so it is not analysed "
                f"(exact analysis: 4 of 10, and distinct-symbol MOO of at most "
                f"{MAX_TREE_CODES} codes and {MAX_TREE_SYMBOLS} symbols)"
            )
    if _current is None or _current.rules != rules:
        _current = None
        if isinstance(rules, MastermindRules):
            _current = MastermindAnalyser(rules)
        else:
            _current = Analyser(rules)
    return _current.analyse(secret, guesses)


# -- moo analyse ---------------------------------------------------------------------------------
def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE",
                        help="a match record: JSON {rules, players: [{name, secret, guesses}]} "
                        "or {rules, secret, guesses} (see docs/analysis.md); '-' for stdin")
    parser.add_argument("--json", action="store_true", help="print the analysis as JSON")


def from_export(record: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An export record (``moo-export/1``, docs/export.md) as the analysis input: its rules,
    and per seat the player's name, the code they were guessing (the other seat's secret) and
    their guesses in order."""
    config = record.get("config") or {}
    secrets = record.get("secrets") or [None, None]
    names = record.get("players") or ["player 1", "player 2"]
    guesses = record.get("guesses") or [[], []]
    players = [
        {"name": names[seat], "secret": secrets[1 - seat],
         "guesses": [g.get("guess") for g in guesses[seat]]}
        for seat in (0, 1)
    ]
    return dict(config.get("rules") or {}), players


Players = list[tuple[str, str, list[str]]]


def _load(path: Path) -> tuple[Rules | MastermindRules, Players]:
    text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    if text.lstrip().startswith("{") and "\n{" in text.strip():
        text = text.strip().splitlines()[0]  # an export file (JSON lines): its first match
    return parse_record(json.loads(text))


def parse_record(data: object) -> tuple[Rules | MastermindRules, Players]:
    """A match record (an export record or the simple object of docs/analysis.md) -> its
    rules and, per player, (name, the code they were guessing, their guesses); ``ValueError``
    says what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("the record must be a JSON object")
    if data.get("format") == "moo-export/1":
        if not all(data.get("secrets") or [None]):
            raise ValueError("the exported match has no secrets (it never started)")
        raw, exported = from_export(data)
        data = {"rules": raw, "players": exported}
    raw_rules = data.get("rules", {})
    if not isinstance(raw_rules, dict):
        raise ValueError("'rules' must be an object like {\"length\": 4, \"alphabet\": ...}")
    game = raw_rules.get("game", "moo")
    rules: Rules | MastermindRules
    if game == "mastermind":
        rules = MastermindRules(length=int(raw_rules.get("length", 4)),
                                alphabet=str(raw_rules.get("alphabet", "123456")))
    elif game == "moo":
        rules = Rules.from_dict(raw_rules)
    else:
        raise ValueError(f"only MOO and Mastermind matches can be analysed yet, not {game!r}")
    players = data.get("players")
    if players is None:
        players = [{"name": data.get("name", "player"), "secret": data.get("secret"),
                    "guesses": data.get("guesses")}]
    if not isinstance(players, list) or not players:
        raise ValueError("'players' must be a non-empty list")
    out = []
    for i, p in enumerate(players, 1):
        if not isinstance(p, dict):
            raise ValueError(f"player {i} must be an object")
        secret, guesses = p.get("secret"), p.get("guesses")
        if not isinstance(secret, str):
            raise ValueError(f"player {i}: 'secret' (the code they were guessing) is missing")
        if not isinstance(guesses, list) or not all(isinstance(g, str) for g in guesses):
            raise ValueError(f"player {i}: 'guesses' must be a list of codes")
        out.append((str(p.get("name", f"player {i}")), secret, guesses))
    return rules, out


def main(args: argparse.Namespace) -> int:
    try:
        rules, players = _load(args.file)
        return report(rules, players, args.json)
    except FileNotFoundError:
        print(f"moo analyse: no such file: {args.file}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(f"moo analyse: {args.file} is not JSON ({exc.msg}, line {exc.lineno})",
              file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        print(f"moo analyse: {exc}", file=sys.stderr)
        return 2


def report(rules: Rules | MastermindRules, players: Players, as_json: bool) -> int:
    """Analyse every player and print the tables (or the JSON of ``--json``); the analysis'
    ``ValueError``/``TypeError`` (an illegal code, rules it cannot analyse) propagate."""
    results = [(name, secret, analyse_guesses(rules, secret, guesses))
               for name, secret, guesses in players]
    if as_json:
        print(json.dumps({"rules": rules.to_dict(), "players": [
            {"name": n, "secret": s, "guesses": [a.to_dict() for a in res]}
            for n, s, res in results]}, indent=2))
        return 0
    for name, secret, res in results:
        lost = sum(a.loss for a in res)
        print(f"{name} (secret {secret}): {len(res)} guesses, "
              f"{lost:.3f} expected guesses lost")
        print(f"{'#':>3} {'guess':>6} {'resp':>5} {'left':>5} {'best':>6} {'played':>6} "
              f"{'loss':>6}  {'best guess':<10} mark")
        for a in res:
            line = (f"{a.number:>3} {a.guess:>6} {a.response:>5} {a.candidates:>5} "
                    f"{a.best_expected:>6.3f} {a.played_expected:>6.3f} {a.loss:>6.3f}  "
                    f"{a.best_guess:<10} {a.mark or ''}")
            print(line.rstrip())
    return 0
