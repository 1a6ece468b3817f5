"""What each test needs from the machine, read from its fixtures, and ``--quick``.

A test that takes one of these fixtures (directly or through another fixture) is marked with
the service it needs:

=============== ======== ======================================================================
fixture         mark     the service
=============== ======== ======================================================================
``postgres``    pg       the session's PostgreSQL (``pg_url`` takes it): tests/pg_support.py
``private_…``   pg       a PostgreSQL server of the test's own: tests/pg_server.py
``mosquitto``   mqtt     Mosquitto (``broker`` takes it): tests/mqtt_support.py
``haproxy``     cluster  the demo cluster's HAProxy, openssl, curl: tests/cluster_support.py
``browser``     browser  headless Chromium through Playwright: tests/browser_support.py
=============== ======== ======================================================================

Every service is started by the tests themselves, on free ports in temporary folders, only
when a test needs it. In the whole suite a missing service is an error of each test that needs
it, never a skip. ``--quick`` (``./dev test --quick``) leaves out every test that needs a
service and every end-to-end test (mark ``e2e``, set by hand on the files that run the ``moo``
command, sandboxes or bots in processes of their own), and says how many of each: what is left
is the in-process suite, a couple of minutes on two cores. ``slow`` is set by hand on the tests
that take tens of seconds, with their seconds on an idle machine; they are dealt to the heads
of the parallel workers' (``-n``) shares, so that the workers finish together, and at most
two tests that start server nodes run at once (tests/schedule.py).
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.web_harness import chromium_problem
from tests import cluster_support, mqtt_support, pg_server, pg_support
from tests.cluster_support import haproxy
from tests.cpu_usage import pytest_runtest_protocol
from tests.mqtt_support import broker, mosquitto
from tests.patience import FACTOR, factor_for
from tests.pg_server import private_postgres
from tests.pg_support import pg_url, postgres
from tests.schedule import NODE_SLOTS, NodeSlots, deal, slow_of, starts_nodes, workers_here

__all__ = ["broker", "haproxy", "mosquitto", "pg_url", "postgres", "private_postgres",
           "pytest_runtest_protocol"]

#: fixture -> the mark of the service it stands for
NEEDS = {
    "postgres": "pg",
    "private_postgres": "pg",
    "mosquitto": "mqtt",
    "haproxy": "cluster",
    "browser": "browser",
}
SERVICES = ("pg", "mqtt", "cluster", "browser")
#: what --quick leaves out: the services, and the tests that start programs of their own
LEFT_OUT = (*SERVICES, "e2e")
_QUICK_KEY = pytest.StashKey[Counter[str]]()


def _problems() -> dict[str, str | None]:
    """Why each service cannot run here (None: it can); cheap checks, no server started."""
    pg = pg_support.problem()
    if pg is None and not pg_support.EXTERNAL:
        pg = pg_server.problem()
    return {
        "pg": pg,
        "mqtt": mqtt_support.problem(),
        "cluster": cluster_support.problem(),
        "browser": chromium_problem(),
    }


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--quick", action="store_true",
        help="leave out every test that needs a service (pg, mqtt, cluster, browser) and the"
             " end-to-end tests (e2e)",
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    pg = f"MOO_TEST_PG={pg_support.EXTERNAL}" if pg_support.EXTERNAL else "a private initdb"
    workers = getattr(config.option, "numprocesses", None)
    factor = factor_for(workers) if isinstance(workers, int) and workers > 0 else FACTOR
    lines = [f"services: pg = {pg}; safety nets x{factor:.1f} (MOO_TEST_PATIENCE)"]
    if config.getoption("quick"):
        lines.append(
            "--quick: the tests that need pg, mqtt, cluster or browser, and the e2e ones, are"
            " left out"
        )
    else:
        missing = {k: v for k, v in _problems().items() if v is not None}
        lines += [f"MISSING {mark}: {why}: its tests will fail" for mark, why in missing.items()]
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture, mark in NEEDS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(mark)
    if config.getoption("quick"):
        kept: list[pytest.Item] = []
        left_out: list[pytest.Item] = []
        for item in items:
            (left_out if _needs(item) else kept).append(item)
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = kept
            counts = Counter(m for it in left_out for m in _needs(it))
            counts["total"] = len(left_out)
            config.stash[_QUICK_KEY] = counts
    # the slow tests dealt to the heads of the workers' first shares, so that they end together
    items[:] = deal(items, workers_here(), slow_of)


@pytest.fixture(autouse=True)
def _node_slot(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that starts server nodes waits, before its other fixtures, until fewer than
    :data:`~tests.schedule.NODE_SLOTS` such tests run in the other workers (tests/schedule.py)."""
    if workers_here() <= NODE_SLOTS or not starts_nodes(request.node):
        yield
        return
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "solo")
    slots = NodeSlots(Path(tempfile.gettempdir()) / f"moo-test-node-slots-{run}")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    slots.acquire(prefer=int(worker.removeprefix("gw") or 0))
    try:
        yield
    finally:
        slots.release()


def _needs(item: pytest.Item) -> list[str]:
    return [m for m in LEFT_OUT if item.get_closest_marker(m) is not None]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a worker of ``-n``: hand the counts of what ``--quick`` left out to the controller,
    which collects nothing itself."""
    counts = session.config.stash.get(_QUICK_KEY, None)
    workeroutput = getattr(session.config, "workeroutput", None)
    if counts is not None and workeroutput is not None:
        workeroutput["moo_quick"] = dict(counts)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """pytest-xdist's hook, in the controller: the counts a worker handed over."""
    counts = getattr(node, "workeroutput", {}).get("moo_quick")
    config = getattr(node, "config", None)
    if counts and config is not None and _QUICK_KEY not in config.stash:
        config.stash[_QUICK_KEY] = Counter(counts)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    counts = config.stash.get(_QUICK_KEY, None)
    if counts:
        per = ", ".join(f"{mark} {counts[mark]}" for mark in LEFT_OUT if counts[mark])
        terminalreporter.write_line(
            f"--quick: {counts['total']} tests left out, for the services they need or as"
            f" end-to-end ({per})"
        )
