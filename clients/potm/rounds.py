"""The POTM's final and playoffs: which words are played, by whom, and who wins.

Pure bookkeeping: how one entry plays one word is given as a function (the referee's
:meth:`~clients.potm.referee.Referee.play_word`, or a table in the tests).

The 1999 rules: "For the finals, three different words will be used and your score will be
the sum of the scores for each of the words. In the event of a tie after three words, those
entries that are tied (and ONLY those entries) will be subjected to another three word
playoff. Ties will continue to be broken in this manner until there is a single winner or the
POTM-master gets tired of running tiebreakers."
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "FAIL_SCORE",
    "PER_ROUND",
    "Entry",
    "Round",
    "Tournament",
    "WordPool",
    "WordResult",
    "entry_names",
    "play_rounds",
]

#: The score of a word an entry failed on (CPU limit, more than 100 guesses, a broken rule).
FAIL_SCORE = 999
#: Words in the final and in each playoff: "three different words".
PER_ROUND = 3


@dataclass(frozen=True)
class Entry:
    """A program to referee: shown as ``name``, run as ``path`` (copied, never modified)."""

    name: str
    path: Path


@dataclass
class WordResult:
    """One entry on one word: the score and why, with every guess."""

    entry: str
    word: str
    score: int
    guesses: list[str] = field(default_factory=list)
    reason: str = "solved"
    cpu_max: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {"entry": self.entry, "word": self.word, "score": self.score,
                "reason": self.reason, "guesses": self.guesses,
                "cpu_max": round(self.cpu_max, 3)}


class WordPool:
    """The words to play: the ``targets`` first, in order, then random words of the list.

    Every round gets :data:`PER_ROUND` *different* words; a word already played comes back
    only once every word has been played. ``seed`` makes the draw repeatable; without it the
    draw is seeded from the operating system.
    """

    def __init__(self, words: Sequence[str], targets: Sequence[str] = (),
                 seed: int | None = None) -> None:
        self.queue = list(targets)
        if len(set(self.queue)) != len(self.queue):
            raise ValueError("a target word is given twice")
        self.pool = sorted(set(words) - set(self.queue))
        distinct = len(self.pool) + len(self.queue)
        if distinct < PER_ROUND:
            raise ValueError(f"{distinct} different words: a round needs {PER_ROUND}")
        self.rng = random.Random(seed)
        self.played: set[str] = set()

    def round(self) -> list[str]:
        out: list[str] = []
        while len(out) < PER_ROUND:
            if self.queue:
                w = self.queue.pop(0)
            else:
                fresh = [w for w in self.pool if w not in self.played and w not in out]
                if not fresh:  # all played: earlier words (targets too) come back
                    fresh = [w for w in sorted(self.played | set(self.pool)) if w not in out]
                w = self.rng.choice(fresh)
            out.append(w)
            self.played.add(w)
        return out


@dataclass
class Round:
    """The final or one playoff: its words and each playing entry's results."""

    name: str
    words: list[str]
    results: dict[str, list[WordResult]]

    def totals(self) -> dict[str, int]:
        return {e: sum(r.score for r in rs) for e, rs in self.results.items()}


@dataclass
class Tournament:
    """A final and its playoffs; the winner is alone at the top of the last round, if any.

    ``confined`` and ``limits`` record how the entries were run (shown with the standings).
    """

    length: int
    rounds: list[Round]
    winner: str | None
    confined: bool = True
    limits: dict[str, float] = field(default_factory=dict)

    def standings(self) -> list[tuple[int, str, list[int]]]:
        """(rank, entry, totals per round played) best first: the final's total decides,
        then the playoffs among those tied (later rounds break earlier ties)."""
        names = list(self.rounds[0].results)

        def key(name: str) -> tuple[int, ...]:
            return tuple(rnd.totals().get(name, 10 ** 9) for rnd in self.rounds)

        ordered = sorted(names, key=key)
        out: list[tuple[int, str, list[int]]] = []
        for pos, name in enumerate(ordered):
            rank = pos + 1
            if pos and key(name) == key(ordered[pos - 1]):
                rank = out[-1][0]
            out.append((rank, name, [r.totals()[name] for r in self.rounds if name in r.results]))
        return out

    def to_dict(self) -> dict[str, object]:
        return {
            "length": self.length,
            "winner": self.winner,
            "confined": self.confined,
            "limits": self.limits,
            "rounds": [
                {"name": r.name, "words": r.words, "totals": r.totals(),
                 "results": [x.to_dict() for rs in r.results.values() for x in rs]}
                for r in self.rounds
            ],
            "standings": [{"rank": rank, "entry": name, "totals": totals}
                          for rank, name, totals in self.standings()],
        }


def entry_names(paths: Sequence[Path]) -> list[Entry]:
    """Entries named by file name; a repeated name gets ``#2``, ``#3``..."""
    seen: dict[str, int] = {}
    out = []
    for p in paths:
        n = seen.get(p.name, 0) + 1
        seen[p.name] = n
        out.append(Entry(p.name if n == 1 else f"{p.name}#{n}", p))
    return out


def play_rounds(
    names: Sequence[str],
    play: Callable[[int, str], WordResult],
    draw: Callable[[], list[str]],
    length: int,
    *,
    max_playoffs: int = 5,
    progress: Callable[[WordResult], None] | None = None,
) -> Tournament:
    """The POTM's final and playoffs, given how entry ``i`` plays a word and a round's words.

    Every entry plays the final's words; if several share the lowest total, only they play a
    round of new words, and so on, at most ``max_playoffs`` times. Ties below the top are
    left as ties (shared rank), as in the contest.
    """
    rounds: list[Round] = []
    playing = list(range(len(names)))
    for number in range(max_playoffs + 1):
        words_now = draw()
        results: dict[str, list[WordResult]] = {names[i]: [] for i in playing}
        for word in words_now:
            for i in playing:
                res = play(i, word)
                results[names[i]].append(res)
                if progress:
                    progress(res)
        rnd = Round("final" if number == 0 else f"playoff {number}", words_now, results)
        rounds.append(rnd)
        totals = rnd.totals()
        best = min(totals.values())
        tied = [i for i in playing if totals[names[i]] == best]
        if len(tied) == 1:
            return Tournament(length, rounds, names[tied[0]])
        playing = tied
    return Tournament(length, rounds, None)
