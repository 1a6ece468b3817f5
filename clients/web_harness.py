"""Drive the browser client for tests and screenshots: a real ``moo serve`` and headless Chromium.

The server runs as a subprocess on a free port with its database in a directory the caller owns,
serving ``clients/web/``; Chromium is Debian's ``/usr/bin/chromium`` driven by Playwright (never a
browser that Playwright downloads). Nothing here sleeps to wait: the server is ready when it logs
the address it listens on, and pages are awaited through Playwright's selectors and conditions.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "ROOT",
    "WEB_DIR",
    "MooServer",
    "chromium_problem",
    "free_port",
    "launch_chromium",
]

ROOT = Path(__file__).resolve().parent.parent
WEB_DIR = ROOT / "clients" / "web"
CHROMIUM = os.environ.get("MOO_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
_LISTENING = re.compile(r"listening on ws://[^:]+:(\d+)/")


def chromium_problem() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the 'playwright' package is not installed (pip install -e '.[dev]')"
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    return None


def launch_chromium(playwright: Any) -> Any:
    """A headless Debian Chromium under Playwright's control."""
    return playwright.chromium.launch(
        executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MooServer:
    """``moo serve`` as a subprocess; ``start()`` returns once it listens.

    ``stop()`` sends SIGTERM (a graceful restart: clients are closed with 1012), ``kill()``
    SIGKILL (a crash: sockets just break), and ``start()`` may be called again on the same
    port and database, which is how tests restart it mid-match.
    """

    def __init__(
        self,
        db: Path,
        *,
        port: int = 0,
        extra: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.db = db
        self.port = port
        self.extra = list(extra or [])
        self.env = dict(env or {})
        self.proc: subprocess.Popen[str] | None = None
        self.log: list[str] = []
        self._reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 60.0) -> MooServer:
        cmd = [
            sys.executable, "-m", "cli", "serve",
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--db", str(self.db),
            "--static-dir", str(WEB_DIR),
            *self.extra,
        ]
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**os.environ, **self.env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self.proc.stderr is not None
        found = threading.Event()
        stream = self.proc.stderr

        def read() -> None:
            for line in stream:
                self.log.append(line)
                match = _LISTENING.search(line)
                if match and not found.is_set():
                    self.port = int(match.group(1))
                    found.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while not found.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("moo serve did not start:\n" + "".join(self.log))
        return self

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL: a crash (or a cluster node's death): sockets break with no close frame."""
        self.stop(timeout, crash=True)

    def stop(self, timeout: float = 10.0, *, crash: bool = False) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            if crash:
                proc.kill()
            else:
                proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._reader is not None:
            self._reader.join(timeout)

    def __enter__(self) -> MooServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
