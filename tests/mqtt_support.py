"""A real Mosquitto broker for the tests: own config, free port, stop and restart on demand.

If the binary is missing the tests fail when CI=true (CI installs it: .ci/run) and are skipped
with a visible reason on a developer machine without it; they never pass silently.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

WAIT = 10.0


def mosquitto_binary() -> str:
    found = shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if os.access("/usr/sbin/mosquitto", os.X_OK) else None
    )
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("mosquitto is not installed, and CI must run the MQTT tests")
        pytest.skip("mosquitto is not installed (apt-get install mosquitto)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
