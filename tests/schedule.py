"""The order the suite's tests are handed to pytest-xdist's workers in, so that they end together.

``./dev test`` runs ``--dist worksteal``. That scheduler splits the collection into one
contiguous run per worker, in order (worker *k* gets the *k*-th ``len // workers`` slice), and
a worker that runs out takes the second half of the longest queue left. A test at the head of
a slice is therefore run first by its worker and is never taken away; a test near its end is
what an idle worker takes.

Putting every ``slow`` test first (as the suite did until 2026-11-30) put them all at the head
of the first worker's slice: that worker ran them one after another, and the others took the
rest of them only once their own slices were done, late, so the suite ended with one worker
still in a one- or two-minute test while the others waited.

:func:`deal` instead spreads the slow tests over the heads of all the slices, heaviest first,
each to the worker whose slow tests end first (longest processing time first, the classic
greedy), with every other test after them in collection order. A slow test's mark carries its
seconds on an idle machine (``@pytest.mark.slow(60)``); the estimate only orders the dealing,
so it need not be precise. Tests that start a cluster of server nodes (the ``tests/cluster``
folder, or ``slow(..., nodes=True)``) load the machine most (three nodes, a broker and bots
each; two workers per core once made a node miss its lease renewals): at most
:data:`NODE_SLOTS` of them run at once (:class:`NodeSlots`, a worker waits for a slot), and
the dealing counts that wait, so that such tests are spread out rather than queued behind one
another.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

__all__ = ["DEFAULT_SECONDS", "NODE_SLOTS", "NodeSlots", "Slow", "deal", "slices", "slow_of",
           "starts_nodes", "workers_here"]

#: a slow test whose mark gives no seconds
DEFAULT_SECONDS = 20.0

T = TypeVar("T")


@dataclass(frozen=True)
class Slow:
    """What the dealing needs to know of a slow test."""

    seconds: float
    nodes: bool


def slow_of(item: pytest.Item) -> Slow | None:
    """The slow mark of ``item`` read (None: not slow)."""
    mark = item.get_closest_marker("slow")
    if mark is None:
        return None
    seconds = float(mark.args[0]) if mark.args else DEFAULT_SECONDS
    nodes = bool(mark.kwargs.get("nodes", False)) or item.nodeid.startswith("tests/cluster/")
    return Slow(seconds, nodes)


def workers_here() -> int:
    """How many xdist workers this session has (1 without xdist, as in the controller)."""
    try:
        return max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return 1


def slices(total: int, workers: int) -> list[int]:
    """The sizes of worksteal's first split of ``total`` tests over ``workers`` (in order)."""
    sizes = []
    left = total
    for k in range(workers):
        size = left // (workers - k)
        sizes.append(size)
        left -= size
    return sizes


@dataclass
class _Worker:
    size: int
    #: the indexes of the slow tests dealt to the head of its slice
    head: list[int] = field(default_factory=list)
    ends: float = 0.0
    #: (start, end) of its tests that start server nodes, in estimated seconds
    clusters: list[tuple[float, float]] = field(default_factory=list)


def _crowd(start: float, end: float, spans: Sequence[tuple[float, float]]) -> int:
    """The most of ``spans`` running at once at some time in ``[start, end)``."""
    points = [start, *(a for a, _b in spans if start < a < end)]
    return max(sum(1 for a, b in spans if a <= x < b) for x in points)


def _slot_free(start: float, seconds: float, spans: Sequence[tuple[float, float]]) -> float:
    """When a test that starts nodes, ready at ``start``, gets a slot (:data:`NODE_SLOTS`)
    for all of its ``seconds``, with the other workers' such tests running in ``spans``."""
    while _crowd(start, start + seconds, spans) >= NODE_SLOTS:
        start = min(b for a, b in spans if b > start and a < start + seconds)
    return start


def _start_on(pool: Sequence[_Worker], k: int, mark: Slow) -> float:
    """When a slow test would start as worker ``k``'s next: when its slow tests so far end,
    or later for one that starts nodes, which waits for a slot (the worker idle meanwhile)."""
    ready = pool[k].ends
    if not mark.nodes:
        return ready
    others = [span for j, o in enumerate(pool) if j != k for span in o.clusters]
    return _slot_free(ready, mark.seconds, others)


def deal(items: Sequence[T], workers: int, slow: Callable[[T], Slow | None]) -> list[T]:
    """``items`` reordered: the slow ones dealt to the heads of worksteal's slices for
    ``workers`` workers, the rest after them in their order. With one worker: the slow tests
    first, heaviest first."""
    marks = {i: m for i, it in enumerate(items) if (m := slow(it)) is not None}
    heavy = sorted(marks, key=lambda i: -marks[i].seconds)  # stable: ties keep their order
    rest = [i for i in range(len(items)) if i not in marks]
    if workers <= 1:
        return [items[i] for i in (*heavy, *rest)]
    pool = [_Worker(size) for size in slices(len(items), workers)]
    for i in heavy:
        mark = marks[i]
        # where it would start on each worker with room left; it goes where it ends soonest
        start, k = min((_start_on(pool, k, mark), k) for k, w in enumerate(pool)
                       if len(w.head) < w.size)
        chosen = pool[k]
        if mark.nodes:
            chosen.clusters.append((start, start + mark.seconds))
        chosen.ends = start + mark.seconds
        chosen.head.append(i)
    order: list[int] = []
    taken = 0
    for w in pool:
        fill = w.size - len(w.head)
        order += [*w.head, *rest[taken:taken + fill]]
        taken += fill
    return [items[i] for i in order]


#: how many tests that start server nodes may run at once across the workers: two such tests
#: at once are the most an idle 2-core machine has carried without a node missing its lease
#: renewals (docs/benchmarks.md, "The test suite")
NODE_SLOTS = 2


def starts_nodes(item: pytest.Item) -> bool:
    """Whether ``item`` starts server nodes of its own: a cluster test with a database (the
    nodes need one), or a slow test marked ``nodes``."""
    mark = slow_of(item)
    if mark is not None and mark.nodes:
        return True
    names = getattr(item, "fixturenames", ())
    return item.nodeid.startswith("tests/cluster/") and any(
        name in names for name in ("pg_url", "private_postgres", "haproxy"))


class NodeSlots:
    """A semaphore of :data:`NODE_SLOTS` across the worker processes of one run: one lock file
    per slot, held with ``flock`` (the kernel lets it go if the worker dies)."""

    def __init__(self, folder: Path, slots: int = NODE_SLOTS) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.paths = [folder / f"slot{k}" for k in range(slots)]
        self.held: int | None = None

    def try_acquire(self) -> bool:
        """Take a free slot if there is one."""
        assert self.held is None
        for path in self.paths:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.held = fd
            return True
        return False

    def acquire(self, prefer: int = 0) -> None:
        """Take a free slot, or wait for the slot ``prefer`` picks (blocks: the worker has
        nothing else to do meanwhile, its next tests being taken by the others)."""
        if self.try_acquire():
            return
        fd = os.open(self.paths[prefer % len(self.paths)], os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.held = fd

    def release(self) -> None:
        if self.held is not None:
            fcntl.flock(self.held, fcntl.LOCK_UN)
            os.close(self.held)
            self.held = None
