"""Where the suite's CPU goes, test by test: ``MOO_TEST_CPU=FILE`` (off without it).

The suite's wall time on two cores is set by the CPU its tests take more than by their wall
times, which a busy machine stretches (a test that waits for a core looks slow in
``--durations``). With ``MOO_TEST_CPU`` set, every test appends one JSON line to the file:
its node id, its wall seconds, the CPU of the test process (all its threads) and of the
children it reaped meanwhile (servers, bots, brokers, Chromium: counted when they exit, so a
module's shared server or browser is charged to the test whose teardown stops it). Workers
of ``-n`` append to the same file, a line at a time. ``bench/suite_cpu.py`` sums it up.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator

import pytest

__all__ = ["pytest_runtest_protocol"]

_FILE = os.environ.get("MOO_TEST_CPU", "")


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    if not _FILE:
        yield
        return
    wall, own, kids = time.perf_counter(), time.process_time(), _children()
    yield
    line = json.dumps({
        "test": item.nodeid,
        "wall": round(time.perf_counter() - wall, 3),
        "cpu": round(time.process_time() - own, 3),
        "children": round(_children() - kids, 3),
    })
    # one write of one line with O_APPEND: lines of parallel workers never interleave
    fd = os.open(_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
