"""A PostgreSQL server of the test's own: ``initdb`` in a temporary folder, started and stopped
on demand on a free port.

The machine's shared server (tests/pg_support.py) must never be stopped by a test, yet a real
database restart (the server process going down, every connection terminated, then coming back
on the same port) is what a cluster has to survive. This starts a private one with Debian's
binaries (``/usr/lib/postgresql/<version>/bin``), trust auth on 127.0.0.1, no fsync (its data is
thrown away). Run as root (as CI is), the server runs as the ``postgres`` user, which PostgreSQL
requires. Missing binaries fail the test: CI installs the package (``.ci/run``).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.mqtt_support import free_port


def _bindir() -> Path:
    root = Path("/usr/lib/postgresql")
    versions = sorted(
        (p for p in root.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not versions:
        raise AssertionError(
            "PostgreSQL's server binaries are not in /usr/lib/postgresql/*/bin"
            " (apt-get install postgresql; .ci/run does)"
        )
    return versions[-1]


class PrivatePostgres:
    """One throw-away PostgreSQL cluster: ``start()``, ``stop()`` (fast shutdown: sessions are
    terminated, as in a real restart), ``start()`` again on the same port, ``destroy()``."""

    def __init__(self) -> None:
        self.bindir = _bindir()
        # not under pytest's tmp_path: its parents are private to root, and the server runs
        # as ``postgres``
        self.base = Path(tempfile.mkdtemp(prefix="moo-test-pg-"))
        self.data = self.base / "data"
        self.port = free_port()
        as_root = os.geteuid() == 0
        self._user: pwd.struct_passwd | None = pwd.getpwnam("postgres") if as_root else None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        cmd = [str(self.bindir / argv[0]), *argv[1:]]
        kwargs: dict[str, object] = {}
        if self._user is not None:  # PostgreSQL refuses to run as root
            kwargs = {"user": self._user.pw_uid, "group": self._user.pw_gid}
        done = subprocess.run(  # type: ignore[call-overload]
            cmd, capture_output=True, text=True, timeout=60, cwd=self.base, **kwargs
        )
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(argv[:2])} failed: {done.stdout}{done.stderr}")

    def init(self) -> None:
        if self._user is not None:
            os.chown(self.base, self._user.pw_uid, self._user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--no-sync", "-E", "UTF8")

    def start(self) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.base}"
                   " -c fsync=off -c full_page_writes=off")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.base / "log"), "-o", options,
                  "-w", "-t", "30", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop")

    def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            except AssertionError:
                pass
        shutil.rmtree(self.base, ignore_errors=True)
