"""How long a test waits for an event before it calls the event lost.

Every wait in the suite ends as soon as its event happens; its timeout is only a safety net
that turns a hang into a failure. A net that fires on a machine that is merely busy (CI runs
on a developer's machine, beside other work) is a false failure, so the nets are generous and
all grow with the machine's load: :func:`patience` multiplies a base number of seconds by
``MOO_TEST_PATIENCE`` when it is set, otherwise by the load per core when the session started,
or by twice the suite's own xdist workers per core if that is more (never less than 1).

The load is read once, before the suite's own work begins, yet the suite loads the machine
itself: a worker's tests start servers, cluster nodes and browsers, so one worker keeps more
than a core busy. A fresh-clone run on 2 cores (3 workers) reached a load of 9 with a start
factor of 1, and a 30 s net fired on a test that takes 2 s idle. A generous net costs nothing
while the code works; only a real hang waits it out.
"""

from __future__ import annotations

import os


def factor_for(workers: int) -> float:
    """The multiplier of a test process in a session of ``workers`` xdist workers."""
    given = os.environ.get("MOO_TEST_PATIENCE")
    if given:
        try:
            return max(1.0, float(given))
        except ValueError:
            raise SystemExit(f"MOO_TEST_PATIENCE={given!r} is not a number") from None
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return max(1.0, load / cores, 2.0 * workers / cores)


def _workers() -> int:
    try:
        return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    except ValueError:
        return 1


#: the multiplier for every safety net of this test process (fixed when it starts)
FACTOR = factor_for(_workers())


def patience(seconds: float) -> float:
    """A safety net of ``seconds`` on an idle machine, grown for this one's load."""
    return seconds * FACTOR
