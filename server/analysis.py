"""The ``analysis`` request: a finished match's post-match analysis by the exact solver.

The solver's native engines are process-wide state shared with the hosted bots' thread (the
Mastermind trees are solved on first use there), and an analysis can take seconds, so it never
runs in the server process: each one is ``moo analyse - --json`` in a child process, one at a
time, with a time limit. Results are kept for the last :data:`CACHE_SIZE` matches (a finished
match never changes). See docs/analysis.md, "On the match page".
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import OrderedDict
from typing import Any

from moo.errors import NotAvailable, NotFinished
from moo.variants import is_words
from server.history import finished_log
from server.storage import Store

__all__ = ["CACHE_SIZE", "TIME_LIMIT_S", "MatchAnalysis"]

CACHE_SIZE = 200
TIME_LIMIT_S = 120.0


class MatchAnalysis:
    def __init__(self, store: Store, time_limit_s: float = TIME_LIMIT_S) -> None:
        self.store = store
        self.time_limit_s = time_limit_s
        self._cache: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._one_at_a_time = asyncio.Semaphore(1)

    async def analysis(self, match_id: str, live: bool) -> dict[str, Any]:
        """The ``analysis`` reply for a finished match (``not_finished`` while it is played)."""
        if live:
            raise NotFinished(f"match {match_id!r} is still being played")
        players = self._cache.get(match_id)
        if players is None:
            record = await self._record(match_id)
            async with self._one_at_a_time:
                players = self._cache.get(match_id) or await self._run(record)
            self._cache[match_id] = players
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return {"type": "analysis", "match_id": match_id, "players": players}

    async def _record(self, match_id: str) -> dict[str, Any]:
        match, _ = await finished_log(self.store, match_id)
        if is_words(match.config.rules):
            raise NotAvailable("word MOO matches are not analysed (no exact solver for words)")
        seats = match.seats
        if any(s.secret is None for s in seats):
            raise NotAvailable("the match never started: there is nothing to analyse")
        return {
            "rules": match.config.rules.to_dict(),
            "players": [
                {"name": s.name, "secret": seats[1 - i].secret,
                 "guesses": [g for g, _, _ in s.guesses]}
                for i, s in enumerate(seats)
            ],
        }

    async def _run(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli", "analyse", "-", "--json",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(json.dumps(record).encode()), self.time_limit_s
            )
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise NotAvailable(
                f"the analysis took longer than {self.time_limit_s:g} s; try moo analyse"
            ) from None
        if proc.returncode != 0:
            why = err.decode(errors="replace").strip().splitlines()
            raise NotAvailable(why[-1] if why else "the analysis failed")
        players = json.loads(out)["players"]
        assert isinstance(players, list)
        return players
