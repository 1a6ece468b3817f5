"""The ``analysis`` request: a finished match's post-match review, from a warm worker process.

The review (:mod:`bots.judge.review`) runs in one child process per server
(:mod:`bots.judge.worker`), started on the first request and kept: it reads a match record per
line on stdin and answers one JSON line on stdout, so after the first request (interpreter
start and imports, well under a second) an answer costs only the review itself (milliseconds
for a classic match: the opening table and the judge's table-free search). A child, not a
thread: the solver's native engines (used for Mastermind and the small MOO variants) are
process-wide state shared with the hosted bots, and a child can be killed when it overruns
:data:`TIME_LIMIT_S` (it is then started afresh on the next request). Requests are served one
at a time; results are kept for the last :data:`CACHE_SIZE` matches (a finished match never
changes). See docs/analysis.md, "On the match page".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections import OrderedDict
from typing import Any

from moo.errors import NotAvailable, NotFinished
from moo.variants import is_words
from server.history import finished_log
from server.storage import Store

__all__ = ["CACHE_SIZE", "TIME_LIMIT_S", "MatchAnalysis", "ReviewWorker"]

CACHE_SIZE = 200
TIME_LIMIT_S = 120.0
#: bytes of one answer line the server reads at most (a review is a few KB)
LINE_LIMIT = 1 << 22


class ReviewWorker:
    """The server's side of the child: one request at a time, restarted after a failure."""

    def __init__(self, time_limit_s: float = TIME_LIMIT_S) -> None:
        self.time_limit_s = time_limit_s
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def _started(self) -> asyncio.subprocess.Process:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bots.judge.worker",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL, limit=LINE_LIMIT,
            )
            self._proc = proc
        return proc

    async def review(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """The ``players`` of the review of ``record``; :class:`NotAvailable` with the reason
        when the record cannot be reviewed, the child failed or it overran its time."""
        async with self._lock:
            proc = await self._started()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(json.dumps(record).encode() + b"\n")
                await proc.stdin.drain()
                line = await asyncio.wait_for(proc.stdout.readline(), self.time_limit_s)
            except TimeoutError:
                await self.close()
                raise NotAvailable(
                    f"the analysis took longer than {self.time_limit_s:g} s; try moo analyse"
                ) from None
            except (ConnectionError, ValueError):  # the child died or wrote garbage
                line = b""
            if not line:
                await self.close()
                raise NotAvailable("the analysis failed (its worker process stopped)")
        answer = json.loads(line)
        if "error" in answer:
            raise NotAvailable(str(answer["error"]))
        players = answer["players"]
        assert isinstance(players, list)
        return players

    async def close(self) -> None:
        """Stop the child (it would also stop by itself at end of input)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        finally:
            # close our end of its input now, while the loop runs (also when the wait is
            # cancelled): left open, it is closed by the garbage collector through a loop
            # that may be gone by then ("Event loop is closed", the suite's stray warning)
            if proc.stdin is not None:
                proc.stdin.close()


class MatchAnalysis:
    """The ``analysis`` request: the finished match's record, reviewed by the worker, cached."""

    def __init__(self, store: Store, time_limit_s: float = TIME_LIMIT_S) -> None:
        self.store = store
        self.worker = ReviewWorker(time_limit_s)
        self._cache: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    async def analysis(self, match_id: str, live: bool) -> dict[str, Any]:
        """The ``analysis`` reply for a finished match (``not_finished`` while it is played)."""
        if live:
            raise NotFinished(f"match {match_id!r} is still being played")
        players = self._cache.get(match_id)
        if players is None:
            players = await self.worker.review(await self._record(match_id))
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

    async def close(self) -> None:
        await self.worker.close()
