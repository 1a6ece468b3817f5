"""Helpers for the client tests: a real ``moo serve`` in a subprocess, and running ``moo``.

The server listens on a free port (``--port 0``); we learn which from its "listening on" log
line, so tests never guess ports or sleep while it starts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.patience import patience

ROOT = Path(__file__).resolve().parent.parent
LISTENING = re.compile(r"listening on (ws://[\d.]+:\d+/)")


def moo_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "cli", *args]


def client_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["MOO_TOKENS"] = str(tmp_path / "tokens.json")
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextmanager
def moo_serve(
    tmp_path: Path, *extra: str, port: int = 0, timeout: float = 60.0,
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """Run ``moo serve`` (on a free port unless given) with its database in ``tmp_path``.

    Yields its URL; stops it with SIGTERM (a graceful restart: clients get close code 1012).
    """
    proc = subprocess.Popen(
        moo_command("serve", "--port", str(port), "--db", str(tmp_path / "serve.sqlite3"),
                    "--bot-delay-ms", "0", "--log-level", "INFO", *extra),
        cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        env={**client_env(tmp_path), **(env or {})},
    )
    assert proc.stderr is not None
    found = threading.Event()
    url: list[str] = []
    log: list[str] = []

    def pump() -> None:
        # Keep draining stderr for the server's whole life so it never blocks on a full pipe.
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            m = LISTENING.search(line)
            if m and not url:
                url.append(m.group(1))
                found.set()
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        if not found.wait(patience(timeout)) or not url:
            raise RuntimeError("moo serve did not start:\n" + "".join(log[-30:]))
        yield url[0]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
