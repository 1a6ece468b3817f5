"""A real Mosquitto broker for the tests: own config, free port, stop and restart on demand.

A test that needs one takes the ``broker`` fixture (configured, not started: the test starts,
stops and restarts it; the fixture kills what is left). Without the binary that is an error,
never a skip: ``./dev test`` installs the package when it runs as root, and
``./dev test --quick`` leaves these tests out, counted.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.patience import patience

WAIT = patience(30.0)


def find_mosquitto() -> str | None:
    return shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if os.access("/usr/sbin/mosquitto", os.X_OK) else None
    )


def problem() -> str | None:
    return None if find_mosquitto() else "mosquitto is not installed"


def mosquitto_binary() -> str:
    found = find_mosquitto()
    if found is None:
        pytest.fail("mosquitto is not installed (apt-get install mosquitto; ./dev test does"
                    " as root)", pytrace=False)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


class Broker:
    """``mosquitto -c CONF`` on 127.0.0.1:PORT; anonymous, no persistence."""

    def __init__(self, tmp_path: Path, port: int | None = None) -> None:
        self.binary = mosquitto_binary()
        self.port = port or free_port()
        self.conf = tmp_path / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
            "log_dest stderr\nlog_type error\n"
        )
        self.log = tmp_path / "mosquitto.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    async def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "-c", str(self.conf)], stdout=log, stderr=log
            )
        deadline = time.monotonic() + WAIT
        while True:  # ready when the port accepts a connection
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                await writer.wait_closed()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"mosquitto did not start: {self.log.read_text(errors='replace')}"
                    ) from None
                await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            await asyncio.to_thread(self.proc.wait, WAIT)
        self.proc = None

    def kill(self) -> None:
        """Stop at once, from anywhere (the fixture's teardown has no event loop)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)
        self.proc = None
