"""The harness's own pauses: measured, and kept short.

The harness process runs every client and every TCP relay between the nodes and the broker or
the database (bench/harness/services.py). When it stops for a while, every link stalls at
once and every client reads late: the checker would count the server's events as stalls,
although no server did anything wrong. The 2-hour run of 2026-11-30 met exactly that: at
+6953 s the commits on all three nodes took 6.4 s at the same moment, and two nodes' broker
links went 5 s without an acknowledgement, while those nodes' own event loops kept running
(they logged the broker's timeout a second before their commits came back): the relays,
that is the harness, had stopped. The likeliest cause, not yet measured: the harness holds
every event every client received, so late in a long run its heap has millions of objects,
and each of the collector's full passes walks all of them.

So (1) the objects the run has made so far are moved out of the collector's reach every
``FREEZE_S`` (``gc.freeze()``: they are never freed, which costs nothing here, the harness
keeps them to the end anyway), so that no pass walks more than that many seconds' worth, and
(2) the event loop's lateness and the collector's passes are measured and reported
(``pauses`` in the report): a run whose harness paused for a second or more says so.
"""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass, field
from typing import Any

#: how often the objects made so far are frozen out of the collector's passes
FREEZE_S = 30.0
#: how often the loop's lateness is sampled
TICK_S = 0.1
#: a pause at least this long is listed (seconds after the run's start)
LISTED_S = 0.5


@dataclass
class Pauses:
    """Started with the run; ``report()`` at its end."""

    t0: float = field(default_factory=time.time)
    loop_max_s: float = 0.0
    loop_listed: list[tuple[float, float]] = field(default_factory=list)
    gc_max_s: float = 0.0
    gc_listed: list[tuple[float, int, float]] = field(default_factory=list)
    freezes: int = 0
    _gc_started: float = 0.0
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _watch(self) -> None:
        last_freeze = time.monotonic()
        while True:
            before = time.monotonic()
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            late = now - before - TICK_S
            self.loop_max_s = max(self.loop_max_s, late)
            if late >= LISTED_S:
                self.loop_listed.append((round(time.time() - self.t0 - late, 1), round(late, 3)))
            if now - last_freeze >= FREEZE_S:
                gc.freeze()
                self.freezes += 1
                last_freeze = now

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        took = time.perf_counter() - self._gc_started
        self.gc_max_s = max(self.gc_max_s, took)
        if took >= LISTED_S:
            self.gc_listed.append(
                (round(time.time() - self.t0, 1), int(info.get("generation", -1)), round(took, 3)))

    def report(self) -> dict[str, Any]:
        return {
            "loop_max_s": round(self.loop_max_s, 3),
            "loop_late": self.loop_listed[:50],
            "gc_max_s": round(self.gc_max_s, 3),
            "gc_slow": self.gc_listed[:50],
            "freezes": self.freezes,
            "frozen_objects": gc.get_freeze_count(),
        }
