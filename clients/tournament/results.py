"""Match records, the JSON-lines results file, and standings computed from records.

One JSON object per line and per match, appended and flushed as each match finishes, so a
crash loses at most the matches in flight. ``--resume`` reads the file back, cuts off a torn
last line, and skips every match whose stable ``key`` is already there; standings are always
computed from the records (never from in-memory counters), so a resumed tournament prints the
same standings as one that was never interrupted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from moo.stats import (
    Interval,
    elo_interval_pentanomial,
    elo_interval_trinomial,
    los,
)
from moo.variants import CLASSIC_SPEC

__all__ = [
    "MatchRecord",
    "PairStanding",
    "PlayerStanding",
    "ResultsFile",
    "pair_standings",
    "player_standings",
]


@dataclass
class MatchRecord:
    """Everything about one finished match; ``players[i]`` sat in seat ``i``.

    ``secrets[i]`` is the secret seat ``i`` set (the one its opponent had to find);
    ``guesses[i]`` the guesses seat ``i`` made; ``winner`` the winning seat or None for a draw.
    ``rules`` is the game's spec (docs/variants.md); ``forfeit`` says why a bot lost the match by
    failing (a program that crashed, a strategy that raised), None when both played it out.
    """

    key: str
    seed: int
    round: int
    leg: int
    players: list[str]
    secrets: list[str]
    guesses: list[list[str]]
    counts: list[int]
    winner: int | None
    reason: str
    mode: str
    started_ms: int
    finished_ms: int
    match_id: str | None = None
    #: the pair of bots in plan order (index into the bot list), so standings know who is who
    pair: list[int] = field(default_factory=lambda: [0, 1])
    rules: str = CLASSIC_SPEC
    forfeit: str | None = None

    @property
    def result(self) -> str:
        return "1/2-1/2" if self.winner is None else ("1-0" if self.winner == 0 else "0-1")

    def score(self, seat: int) -> float:
        """Points of ``seat``: 1 win, 1/2 draw, 0 loss."""
        if self.winner is None:
            return 0.5
        return 1.0 if self.winner == seat else 0.0

    def to_json(self) -> str:
        data = asdict(self)
        data["result"] = self.result
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MatchRecord:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


class ResultsFile:
    """Append-only JSONL file of :class:`MatchRecord`; ``None`` path keeps records in memory."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self._fh: Any = None

    def load(self) -> list[MatchRecord]:
        """Read the records, repairing a torn final line left by a crash (it is cut off)."""
        if self.path is None or not self.path.exists():
            return []
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(end)
        out = []
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            try:
                out.append(MatchRecord.from_dict(json.loads(line)))
            except (ValueError, TypeError):
                continue  # a damaged line is simply played again
        return out

    def open(self, *, append: bool) -> None:
        if self.path is None:
            return
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115

    def write(self, record: MatchRecord) -> None:
        if self._fh is None:
            return
        self._fh.write(record.to_json() + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


# -- standings ----------------------------------------------------------------------------------


@dataclass
class PairStanding:
    """Bot ``a`` against bot ``b`` from ``a``'s side (indices into the bot list)."""

    a: int
    b: int
    wins: int = 0
    draws: int = 0
    losses: int = 0
    #: pentanomial counts over complete pairs (pair points 0, 1/2, 1, 3/2, 2)
    penta: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.5

    @property
    def interval(self) -> Interval:
        """Over game pairs when there are complete pairs with some spread, else per game.

        A handful of identical pair scores (e.g. three 1-1 pairs) has zero pentanomial
        variance, which would print a zero-width interval; the per-game variance is the
        honest (wider) fallback until the pairs disagree.
        """
        if sum(self.penta):
            iv = elo_interval_pentanomial(self.penta)
            if iv.stderr > 0 or self.wins + self.losses == 0:
                return iv
        return elo_interval_trinomial(self.wins, self.draws, self.losses)

    @property
    def los(self) -> float:
        return los(self.wins, self.losses)


@dataclass
class PlayerStanding:
    index: int
    name: str
    wins: int = 0
    draws: int = 0
    losses: int = 0
    guesses_total: int = 0
    solved: int = 0

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.5

    @property
    def avg_guesses(self) -> float | None:
        return self.guesses_total / self.solved if self.solved else None

    @property
    def interval(self) -> Interval:
        return elo_interval_trinomial(self.wins, self.draws, self.losses)

    @property
    def los(self) -> float:
        return los(self.wins, self.losses)


def _pair_id(record: MatchRecord) -> tuple[int, int]:
    a, b = record.pair
    return (a, b)


def pair_standings(records: Iterable[MatchRecord]) -> dict[tuple[int, int], PairStanding]:
    """W/D/L and pentanomial counts per pair of bots, from the first bot's side.

    In every record the pair's first bot sits in seat 0 (the runner's convention); a pair of
    games is complete when both legs of the same round are present.
    """
    out: dict[tuple[int, int], PairStanding] = {}
    legs: dict[tuple[int, int, int], list[float]] = {}
    for r in records:
        pid = _pair_id(r)
        st = out.setdefault(pid, PairStanding(*pid))
        points = r.score(0)
        if points == 1.0:
            st.wins += 1
        elif points == 0.0:
            st.losses += 1
        else:
            st.draws += 1
        legs.setdefault((pid[0], pid[1], r.round), []).append(points)
    for (a, b, _), pair_points in legs.items():
        if len(pair_points) == 2:
            out[(a, b)].penta[round(sum(pair_points) * 2)] += 1
    return out


def player_standings(
    records: Iterable[MatchRecord], names: Sequence[str]
) -> list[PlayerStanding]:
    """Each bot's totals over all its games, best score first."""
    table = [PlayerStanding(i, n) for i, n in enumerate(names)]
    for r in records:
        for seat, index in enumerate(r.pair):
            st = table[index]
            points = r.score(seat)
            if points == 1.0:
                st.wins += 1
            elif points == 0.0:
                st.losses += 1
            else:
                st.draws += 1
            guesses = r.guesses[seat] if seat < len(r.guesses) else []
            if guesses and r.counts[seat] == len(guesses) and _solved(r, seat):
                st.solved += 1
                st.guesses_total += r.counts[seat]
    return sorted(table, key=lambda s: (-s.score, s.index))


def _solved(record: MatchRecord, seat: int) -> bool:
    guesses = record.guesses[seat]
    return bool(guesses) and guesses[-1] == record.secrets[1 - seat]
