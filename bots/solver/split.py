"""One search split into tasks for worker processes: the top of the tree, scheduled by the parent.

The native engine (``_native.c``, built as ``_native`` for MOO and ``_mastermind``) searches one
node at a time in one process. To use several cores, the parent plays the top levels itself,
the way the engine would, and hands the subtrees below to workers:

* A **node** (a candidate set after a history) lists its guesses in the engine's own order
  (``candidates``: bound order, symmetry-reduced). Its first guess is evaluated first, which
  gives the value to beat; then every other guess whose bound is below that value.
* An **evaluation** of one guess splits the set into parts. Each part is a **leaf task**
  (``solve`` with a cutoff, in a worker) or, when it is big and near the top, a node of its own.
* Cutoffs are **dynamic**: a task's cutoff is computed when it is handed to a worker, from the
  best value its node has so far and what is known of its sibling parts (their exact values or
  lower bounds), so later tasks prune with everything learnt before. An evaluation whose lower
  bound reaches its cutoff is dropped; its tasks not yet handed out are never run.

The parent hands out at most ``jobs`` tasks at a time, first guesses before the others, big
parts before small ones. A node's answer is the smallest exact value, ties to the earlier guess
in the engine's order: the one-process search's choice, so the tree does not depend on
``jobs`` (the engine's answer for a set is a function of the set, whatever its table holds).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import multiprocessing
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol, cast

__all__ = ["Engine", "Root", "run"]

INF = 1 << 62
#: Parts this small are solved by the parent itself (the engine answers them without search).
TINY = 3

#: Paths of a subtree: secret -> the guesses from the subtree's root on (the last is the secret).
Paths = dict[str, list[str]]


class Engine(Protocol):
    """What the split needs from the native engine module (``_native`` or ``_mastermind``)."""

    def solve(self, cands: bytes, history: Sequence[int], beta: int | None = ...,
              probe: bool = ...) -> tuple[int, int, bool]: ...
    def candidates(self, cands: bytes, history: Sequence[int],
                   beta: int | None = ...) -> list[tuple[int, int]]: ...
    def partition(self, cands: bytes, guess: int) -> dict[int, bytes]: ...
    def lower_bound(self, n: int, depth: int) -> int: ...
    def stats(self) -> dict[str, int]: ...


# --------------------------------------------------------------------------------------------
# Worker side
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Game:
    engine: ModuleType
    codes: Sequence[str]
    solved_id: int


_game: _Game | None = None
_inherited: _Game | None = None


def _init_worker() -> None:
    """Use the engine tables inherited through fork (built once, in the parent)."""
    global _game
    _game = _inherited


def subtree(engine: Any, codes: Sequence[str], solved_id: int, cand: bytes,
            history: Sequence[int]) -> Paths:
    """The optimal subtree of ``cand`` after ``history``, read back from the engine's table:
    secret -> the guesses after ``history``."""
    out: Paths = {}
    stack: list[tuple[bytes, list[int]]] = [(cand, list(history))]
    depth0 = len(history)
    while stack:
        s, hist = stack.pop()
        if not s:
            continue
        _v, g, exact = engine.solve(s, hist)
        if not exact or g < 0:
            raise RuntimeError("engine returned no exact answer")
        for rid, part in engine.partition(s, g).items():
            nxt = [*hist, g]
            if rid == solved_id:
                out[codes[g]] = [codes[i] for i in nxt[depth0:]]
            else:
                stack.append((part, nxt))
    return out


def _leaf(history: list[int], part: bytes, beta: int) -> tuple[int, bool, Paths | None, int]:
    """Solve one part with a cutoff: (value or lower bound, exact, subtree if exact, nodes)."""
    assert _game is not None
    engine = _game.engine
    before = int(engine.stats()["nodes"])
    value, _g, exact = engine.solve(part, history, beta if beta < INF else None)
    paths = subtree(engine, _game.codes, _game.solved_id, part, history) if exact else None
    return int(value), bool(exact), paths, int(engine.stats()["nodes"]) - before


# --------------------------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------------------------
@dataclass(eq=False)
class _Part:
    ev: _Eval
    cand: bytes
    size: int
    lb: int
    value: int | None = None     # exact value once known
    node: _Node | None = None    # when split further


@dataclass(eq=False)
class _Eval:
    """One guess at one node: the sum of its parts' values."""

    node: _Node
    index: int
    guess: int
    hit: int
    parts: list[_Part] = field(default_factory=list)
    pending: int = 0             # parts not finished yet (queued, running or split)
    dead: bool = False           # proved >= its cutoff
    paths: Paths = field(default_factory=dict)

    def cutoff(self) -> int:
        return self.node.cutoff_for(self.index)

    def known(self) -> int:
        """Lower bound of the total: exact values where known, bounds elsewhere."""
        return self.hit + sum(p.value if p.value is not None else p.lb for p in self.parts)


@dataclass(eq=False)
class _Node:
    """A candidate set searched by the parent (see the module docstring)."""

    history: list[int]
    cand: bytes
    beta: Callable[[], int]
    done: Callable[[_Node], None]
    root: Root
    candidates: list[tuple[int, int]] = field(default_factory=list)
    evals: dict[int, _Eval] = field(default_factory=dict)
    best: int = INF
    best_index: int = -1
    opened: bool = False         # the other guesses have been started
    starting: bool = False       # in the middle of starting them
    result: tuple[int, bool, int, Paths] | None = None   # value, exact, guess, paths

    def cutoff_for(self, index: int) -> int:
        """Guess ``index`` must come out below this to be chosen (ties go to the earlier)."""
        beta = self.beta()
        if self.best_index < 0:
            return beta
        return min(beta, self.best if self.best_index < index else self.best + 1)


@dataclass
class Root:
    """One independent search: the set, its history, and what to call with the answer."""

    cand: bytes
    history: list[int]
    on_done: Callable[[int, int, Paths], None]   # value, first guess, paths from it on
    split: bool = True
    nodes: int = 0               # engine nodes spent on it, all processes


@dataclass
class _Sched:
    engine: Any
    codes: Sequence[str]
    solved_id: int
    costs: Sequence[int]
    split_min: int
    split_depth: int
    heap: list[tuple[tuple[int, ...], int, _Part]] = field(default_factory=list)
    seq: itertools.count[int] = field(default_factory=itertools.count)
    done: int = 0
    total: int = 0
    nodes: int = 0

    def push(self, part: _Part, priority: tuple[int, ...]) -> None:
        self.total += 1
        heapq.heappush(self.heap, (priority, next(self.seq), part))

    # ---- nodes ----
    def open_node(self, node: _Node) -> None:
        beta = node.beta()
        node.candidates = self.engine.candidates(node.cand, node.history,
                                                 beta if beta < INF else None)
        if not node.candidates:
            self.finish_node(node)
            return
        self.start_eval(node, 0)

    def start_eval(self, node: _Node, index: int) -> None:
        guess = node.candidates[index][1]
        depth = len(node.history) + 1
        nxt = [*node.history, guess]
        parts = self.engine.partition(node.cand, guess)
        hit = self.costs[depth] if self.solved_id in parts else 0
        ev = _Eval(node, index, guess, hit)
        node.evals[index] = ev
        if hit:
            ev.paths[self.codes[guess]] = [self.codes[guess]]
        for rid, data in parts.items():
            if rid != self.solved_id:
                n = len(data) // 2
                ev.parts.append(_Part(ev, data, n, self.engine.lower_bound(n, depth)))
        ev.parts.sort(key=lambda p: -p.size)
        # The engine's pass 1: one-ply bounds of the parts, cheap next to their searches.
        for p in ev.parts:
            if ev.known() >= ev.cutoff():
                break
            if p.size > 3:
                slack = ev.cutoff() - (ev.known() - p.lb)
                v, _g, _e = self.engine.solve(p.cand, nxt, slack, True)
                p.lb = max(p.lb, int(v))
        ev.pending = len(ev.parts)
        if ev.known() >= ev.cutoff():
            ev.dead = True
            ev.pending = 0
            self.eval_done(ev)
            return
        for p in ev.parts:
            if ev.dead:
                ev.pending -= 1
            elif p.size <= TINY:  # solved on the spot: cheaper than a round trip to a worker
                v, _g, _e = self.engine.solve(p.cand, nxt)
                tail = subtree(self.engine, self.codes, self.solved_id, p.cand, nxt)
                ev.pending += 1  # part_done counts it off again
                self.part_done(p, int(v), True, tail)
                ev.pending -= 1
            elif depth <= self.split_depth and p.size >= self.split_min:
                self.open_child(p, nxt)
            else:
                self.push(p, (0 if index == 0 else 1, len(node.history), index, -p.size))
        if ev.pending == 0:
            self.eval_done(ev)

    def open_child(self, part: _Part, history: list[int]) -> None:
        ev = part.ev

        def beta() -> int:
            return ev.cutoff() - (ev.known() - part.lb) if not ev.dead else 0

        child = _Node(history, part.cand, beta, lambda n: self.child_done(part, n),
                      ev.node.root)
        part.node = child
        self.open_node(child)

    def child_done(self, part: _Part, child: _Node) -> None:
        assert child.result is not None
        value, exact, _guess, paths = child.result
        self.part_done(part, value, exact, paths)

    def part_done(self, part: _Part, value: int, exact: bool, paths: Paths | None) -> None:
        ev = part.ev
        if exact:
            part.value = value
            if not ev.dead and paths is not None:
                g = self.codes[ev.guess]
                ev.paths.update({s: [g, *p] for s, p in paths.items()})
        else:
            part.lb = max(part.lb, value)
        if not ev.dead and ev.known() >= ev.cutoff():
            ev.dead = True
        ev.pending -= 1
        if ev.pending == 0:
            self.eval_done(ev)

    def eval_done(self, ev: _Eval) -> None:
        node = ev.node
        if not ev.dead and ev.known() < ev.cutoff():
            total = ev.known()
            if node.best_index < 0 or total < node.best or (
                    total == node.best and ev.index < node.best_index):
                node.best, node.best_index = total, ev.index
        if not node.opened:
            node.opened = node.starting = True
            cut = node.cutoff_for(len(node.candidates))
            for i in range(1, len(node.candidates)):
                if node.candidates[i][0] >= cut:
                    break
                self.start_eval(node, i)
            node.starting = False
        if not node.starting and all(e.pending == 0 for e in node.evals.values()):
            self.finish_node(node)

    def finish_node(self, node: _Node) -> None:
        if node.result is not None:
            return
        beta = node.beta()
        if node.best_index >= 0 and node.best < beta:
            ev = node.evals[node.best_index]
            node.result = (node.best, True, ev.guess, ev.paths)
        else:
            node.result = (max(beta, node.best if node.best_index >= 0 else beta), False, -1, {})
        node.done(node)

    # ---- tasks ----
    def next_task(self) -> tuple[_Part, int] | None:
        """The next part worth solving and its cutoff now (dropping the dead ones)."""
        while self.heap:
            _prio, _s, part = heapq.heappop(self.heap)
            ev = part.ev
            if not ev.dead and ev.known() >= ev.cutoff():
                ev.dead = True   # its node found better meanwhile, or a sibling failed
            if ev.dead:
                self.done += 1
                ev.pending -= 1
                if ev.pending == 0:
                    self.eval_done(ev)
                continue
            beta = ev.cutoff() - (ev.known() - part.lb)
            return part, beta
        return None


def run(engine: Any, codes: Sequence[str], solved_id: int, costs: Sequence[int],
        roots: list[Root], jobs: int,
        progress: Callable[[int, int], None] | None = None, split_min: int = 300,
        split_depth: int = 1, heartbeat: float = 5.0) -> int:
    """Solve every root with ``jobs`` worker processes; returns the engines' node count.

    Each root's ``on_done`` is called (in this process) as soon as it is solved. Nodes are
    split down to ``split_depth`` guesses below a root, for sets of ``split_min`` or more.
    ``progress(done, total)`` counts tasks, every ``heartbeat`` seconds and per task.
    """
    global _inherited
    sched = _Sched(engine, codes, solved_id, costs, split_min, split_depth)
    game = _Game(engine, codes, solved_id)
    results: list[tuple[_Part, object]] = []
    cond = threading.Condition()
    stop = threading.Event()

    def report() -> None:
        if progress:
            progress(sched.done, sched.total)

    def beat() -> None:
        while not stop.wait(heartbeat):
            report()

    remaining = [len(roots)]
    for root in roots:
        def done(node: _Node, root: Root = root) -> None:
            assert node.result is not None
            value, exact, guess, paths = node.result
            if not exact:
                raise RuntimeError("a root search failed without a cutoff")
            remaining[0] -= 1
            root.on_done(value, guess, paths)

        node = _Node(list(root.history), root.cand, lambda: INF, done, root)
        if root.split:
            sched.open_node(node)
        else:  # one task: a part with no guess before it
            part = _Part(_Eval(node, 0, -1, 0), root.cand, len(root.cand) // 2, 0)
            part.ev.parts.append(part)
            part.ev.pending = 1
            node.evals[0] = part.ev
            sched.push(part, (0, -1, 0, -part.size))
    _inherited = game
    # fork: the workers inherit the engine's tables (response table, bounds) from this process.
    ctx = multiprocessing.get_context("fork")
    ticker = threading.Thread(target=beat, daemon=True)
    try:
        with ctx.Pool(jobs, initializer=_init_worker) as pool:
            running = 0

            def finished(part: _Part, res: object) -> None:
                with cond:
                    results.append((part, res))
                    cond.notify()

            report()
            ticker.start()
            while remaining[0]:
                while running < jobs:
                    task = sched.next_task()
                    if task is None:
                        break
                    part, beta = task
                    history = [*part.ev.node.history, part.ev.guess] \
                        if part.ev.guess >= 0 else list(part.ev.node.history)
                    pool.apply_async(
                        _leaf, (history, part.cand, beta),
                        callback=functools.partial(finished, part),
                        error_callback=functools.partial(finished, part),
                    )
                    running += 1
                if running == 0 and remaining[0]:
                    raise RuntimeError("split search stalled")
                with cond:
                    while not results:
                        cond.wait()
                    part, res = results.pop(0)
                running -= 1
                sched.done += 1
                if isinstance(res, BaseException):
                    raise res
                value, exact, paths, nodes = cast(tuple[int, bool, Paths | None, int], res)
                sched.nodes += nodes
                part.ev.node.root.nodes += nodes
                if part.ev.guess < 0:  # a whole root solved as one task
                    node = part.ev.node
                    node.result = (value, exact, -1, paths or {})
                    node.done(node)
                else:
                    sched.part_done(part, value, exact, paths)
                report()
    finally:
        _inherited = None
        stop.set()
    return sched.nodes
