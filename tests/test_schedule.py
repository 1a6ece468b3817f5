"""The suite's dealing of slow tests, checked against pytest-xdist's own work-stealing scheduler:
the dealing relies on how that scheduler first splits the collection, which an upgrade of
pytest-xdist could change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xdist.scheduler.worksteal import WorkStealingScheduling

from tests.schedule import NODE_SLOTS, NodeSlots, Slow, deal, slices


class _Config:
    def __init__(self, workers: int) -> None:
        self.workers = workers

    def getvalue(self, name: str) -> Any:
        assert name == "tx"
        return [f"{self.workers}*popen"]


class _Node:
    """A worker as the scheduler sees it: what it was sent, in order."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices

    def send_steal(self, indices: list[int]) -> None:  # pragma: no cover - not reached here
        pass

    def shutdown(self) -> None:  # pragma: no cover - not reached here
        self.shutting_down = True


def _first_split(collection: list[str], workers: int) -> list[list[str]]:
    """What xdist's worksteal scheduler hands each worker first."""
    sched = WorkStealingScheduling(_Config(workers))  # type: ignore[arg-type]
    nodes = [_Node(f"gw{k}") for k in range(workers)]
    for node in nodes:
        sched.add_node(node)  # type: ignore[arg-type]
    for node in nodes:
        sched.add_node_collection(node, collection)  # type: ignore[arg-type]
    sched.schedule()
    return [[collection[i] for i in node.sent] for node in nodes]


#: 8 slow tests among 40 (name -> seconds, starts nodes), the rest fast
SLOW = {"harness": (70, True), "rolling": (45, True), "arena": (45, True), "ladder": (31, False),
        "tls": (31, True), "fork": (21, False), "page": (20, False), "lobby": (20, True)}
ITEMS = [f"fast{i}" for i in range(16)] + list(SLOW) + [f"fast{i}" for i in range(16, 32)]


def _slow(name: str) -> Slow | None:
    if name not in SLOW:
        return None
    seconds, nodes = SLOW[name]
    return Slow(seconds, nodes)


def test_slices_are_worksteals_first_split() -> None:
    for workers in (2, 3, 4):
        for total in (1, 7, 40, 1869):
            got = _first_split([f"t{i}" for i in range(total)], workers)
            assert [len(share) for share in got] == slices(total, workers)


def test_every_worker_starts_with_slow_tests() -> None:
    for workers in (2, 3, 4):
        order = deal(ITEMS, workers, _slow)
        assert sorted(order) == sorted(ITEMS)  # nothing lost or repeated
        shares = _first_split(order, workers)
        heads = [[t for t in share if t in SLOW] for share in shares]
        # the slow tests lead their shares, none after a fast one
        for share, head in zip(shares, heads, strict=True):
            assert share[:len(head)] == head
        assert all(heads)  # each worker has some
        # and the heaviest is never queued behind another test
        assert "harness" in {head[0] for head in heads}


def _run(heads: list[list[str]]) -> tuple[float, int]:
    """The workers' slow tests run in order, a test that starts nodes only while fewer than
    NODE_SLOTS others do (it waits for one to end): when the last ends, and the most that
    started nodes at once."""
    clock = [0.0] * len(heads)
    queue = [list(h) for h in heads]
    running: list[tuple[float, float]] = []  # (start, end) of node tests
    most = 0
    while any(queue):
        k = min((w for w in range(len(heads)) if queue[w]), key=lambda w: clock[w])
        test = queue[k].pop(0)
        seconds, nodes = SLOW[test]
        start = clock[k]
        if nodes:
            while sum(1 for a, b in running if a <= start < b) >= NODE_SLOTS:
                start = min(b for a, b in running if a <= start < b)
            running.append((start, start + seconds))
            most = max(most, sum(1 for a, b in running if a <= start < b))
        clock[k] = start + seconds
    return max(clock), most


def test_node_tests_are_dealt_so_that_few_wait_for_a_slot() -> None:
    total = sum(s for s, _ in SLOW.values())
    for workers in (2, 3, 4):
        heads = [[t for t in share if t in SLOW]
                 for share in _first_split(deal(ITEMS, workers, _slow), workers)]
        ends, most = _run(heads)
        assert most <= NODE_SLOTS
        # as if the work were split evenly, plus at most the longest test
        assert ends <= total / workers + max(s for s, _ in SLOW.values()), (workers, heads)
        # every slow test first on the first worker (the order before): far later
        naive, _ = _run([sorted(SLOW, key=lambda t: -SLOW[t][0])] + [[]] * (workers - 1))
        assert ends < naive


def test_one_worker_gets_the_heaviest_first() -> None:
    order = deal(ITEMS, 1, _slow)
    assert order[:len(SLOW)] == sorted(SLOW, key=lambda t: -SLOW[t][0])
    assert [t for t in order if t not in SLOW] == [t for t in ITEMS if t not in SLOW]


def test_node_slots_let_two_in_and_a_third_only_once_one_leaves(tmp_path: Path) -> None:
    first, second, third = (NodeSlots(tmp_path, 2) for _ in range(3))
    assert first.try_acquire() and second.try_acquire()
    assert first.held is not None and second.held is not None
    assert not third.try_acquire()  # both lock files are held
    first.release()
    assert third.try_acquire()  # the freed one
    assert not first.try_acquire()
    second.release()
    third.release()
    assert first.try_acquire()
    first.release()
