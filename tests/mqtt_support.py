"""A real Mosquitto broker for the tests: own config, free port, stop and restart on demand.

A test that needs one takes the ``broker`` fixture (configured, not started: the test starts,
stops and restarts it; the fixture kills what is left). Without the binary that is an error,
never a skip: ``./dev test`` installs the package when it runs as root, and
``./dev test --quick`` leaves these tests out, counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness import services
from bench.harness.services import free_port
from tests.patience import patience

__all__ = ["Broker", "broker", "free_port", "mosquitto"]

WAIT = patience(30.0)


def find_mosquitto() -> str | None:
    return services.mosquitto_binary()


def problem() -> str | None:
    return None if find_mosquitto() else "mosquitto is not installed"


def mosquitto_binary() -> str:
    found = find_mosquitto()
    if found is None:
        pytest.fail("mosquitto is not installed (apt-get install mosquitto; ./dev test does"
                    " as root)", pytrace=False)
    return found


@pytest.fixture(scope="session")
def mosquitto() -> str:
    """The broker's binary: what marks a test ``mqtt``."""
    return mosquitto_binary()


@pytest.fixture
def broker(mosquitto: str, tmp_path: Path) -> Iterator[Broker]:
    """A broker of the test's own on a free port, not started yet; killed after the test."""
    b = Broker(tmp_path)
    try:
        yield b
    finally:
        b.kill()


class Broker(services.Broker):
    """bench/harness/services.py's broker, waiting as patiently as the tests do."""

    def __init__(self, tmp_path: Path, port: int | None = None) -> None:
        super().__init__(tmp_path, port, timeout=WAIT)
