"""Post-match review: what each guess of a player cost, in expected guesses, by exact values.

For every guess the position is the set S of secrets still consistent with the guesses and
responses before it (the player cannot know more). With the secret uniformly distributed over
S, the expected number of guesses still needed, *this guess included*, is W(S)/|S|
(:mod:`bots.judge.values`). ``best`` is W(S)/|S|, ``played`` is W(S, g)/|S| for the guess
actually played, and their difference ``loss`` is what the guess cost: never negative, and 0
exactly when the guess was an optimal one. Luck plays no part: the review judges the decision,
not whether the secret happened to be in a small part.

Marks (``loss`` in expected guesses; thresholds chosen so that a mark means a real fraction of
a guess, the way chess sites mark centipawn losses):

* ``inaccuracy``: 0.02 <= loss < 0.10
* ``mistake``:    0.10 <= loss < 0.30
* ``blunder``:    loss >= 0.30

Which rules are reviewed, and where the values come from, is :mod:`bots.judge.values`
(docs/analysis.md): 4 of 10 from the shipped opening table and the solver, small MOO variants
and Mastermind from the solver; word MOO, larger MOO variants and the 1971 repeats rule are
refused with a ``ValueError`` saying why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from moo.mastermind import MastermindRules
from moo.rules import Response, Rules, format_response

from .values import judge_for, reset

__all__ = [
    "BLUNDER",
    "INACCURACY",
    "MISTAKE",
    "GuessAnalysis",
    "Players",
    "analyse_guesses",
    "from_export",
    "mark",
    "parse_record",
    "reset",
]

INACCURACY, MISTAKE, BLUNDER = 0.02, 0.10, 0.30


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
    best_guess: str           # an optimal guess here: the player's own when it was one
    source: str               # "table" or "solver": where best_total came from

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def analyse_guesses(rules: Rules | MastermindRules, secret: str,
                    guesses: Sequence[str]) -> list[GuessAnalysis]:
    """Every guess of one player who was guessing ``secret``, up to the solving one.

    Pure apart from reading the shipped table once; raises :class:`moo.errors.InvalidCode`
    for a malformed secret or guess and ``ValueError`` for rules the judge does not handle.
    """
    judge = judge_for(rules)
    # The judge's own rules (equal to ``rules``) check the codes: their table of legal codes
    # is built once per process, where a record's fresh Rules would build it again for every
    # match of an export (5040 codes, a few milliseconds each time).
    rules = judge.rules
    if isinstance(rules, MastermindRules):
        secret = rules.check_code(secret)
        played = [rules.check_code(g) for g in guesses]
    else:
        secret = rules.check_secret(secret)
        played = [rules.check_guess(g) for g in guesses]
    cand = list(range(len(judge.codes)))
    history: list[tuple[str, Response]] = []
    out: list[GuessAnalysis] = []
    for n, guess in enumerate(played, 1):
        best, best_guess, source = judge.best(history, cand)
        parts = judge.parts(cand, guess)
        if guess == best_guess or _unsolved(parts, rules.solved) == _unsolved(
                judge.parts(cand, best_guess), rules.solved):
            value = best
        else:
            value = judge.played(history, cand, guess)
        response = judge.score(secret, guess)
        loss = (value - best) / len(cand)
        out.append(GuessAnalysis(
            number=n, guess=guess, response=format_response(response),
            candidates=len(cand), best_total=best, played_total=value,
            best_expected=best / len(cand), played_expected=value / len(cand),
            loss=loss, mark=mark(loss), best_guess=guess if value == best else best_guess,
            source=source,
        ))
        if response == rules.solved:
            break
        cand = parts.get(response, [])
        history.append((guess, response))
    return out


def _unsolved(parts: dict[Response, list[int]], solved: Response) -> list[tuple[int, ...]]:
    """The parts W(S, g) sums over: every part but the one the guess solves. Two guesses with
    the same such parts are worth the same, whatever their labels."""
    return sorted(tuple(p) for r, p in parts.items() if r != solved)


# -- match records ------------------------------------------------------------------------------
#: per player: (name, the code they were guessing, their guesses)
Players = list[tuple[str, str, list[str]]]


def from_export(record: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An export record (``moo-export/1``, docs/export.md) as the review's input: its rules,
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


def review_players(rules: Rules | MastermindRules, players: Players
                   ) -> list[dict[str, Any]]:
    """The ``players`` list of ``moo analyse --json`` and of the ``analysis`` reply."""
    return [{"name": name, "secret": secret,
             "guesses": [a.to_dict() for a in analyse_guesses(rules, secret, guesses)]}
            for name, secret, guesses in players]
