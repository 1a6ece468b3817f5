"""A PostgreSQL server of the tests' own: ``initdb`` in a temporary folder, started and stopped
on demand on a free port.

The session's server (tests/pg_support.py) is one of these unless ``MOO_TEST_PG`` names another;
a test that restarts the database (the server process going down, every connection terminated,
then coming back on the same port, which a cluster has to survive) takes one of its own
(``private_postgres``). Debian's binaries (``/usr/lib/postgresql/<version>/bin``), trust auth
on 127.0.0.1, no fsync (the data is thrown away). Run as root (as CI is), the server runs as
the ``postgres`` user, which PostgreSQL requires. Missing binaries are an error, never a skip:
``./dev test`` installs the package when it runs as root (deploy/debian-packages.txt).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mqtt_support import free_port
from tests.patience import patience

_PREFIX = "moo-test-pg-"


def bindir() -> Path | None:
    """The newest PostgreSQL server binaries installed, or None."""
    root = Path("/usr/lib/postgresql")
    versions = sorted(
        (p for p in root.glob("*/bin") if (p / "initdb").exists() and (p / "pg_ctl").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return versions[-1] if versions else None


def problem() -> str | None:
    """Why a private server cannot run here, or None."""
    if bindir() is None:
        return "PostgreSQL's server binaries are not in /usr/lib/postgresql/*/bin"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, but there is no postgres user to run the server as"
    return None


def _owner_alive(base: Path) -> bool:
    try:
        pid = int((base / "owner").read_text())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class PrivatePostgres:
    """One throw-away PostgreSQL cluster: ``init()``, ``start()``, ``stop()`` (fast shutdown:
    sessions are terminated, as in a real restart), ``start()`` again on the same port,
    ``destroy()``."""

    def __init__(self) -> None:
        found, why = bindir(), problem()
        if found is None or why is not None:
            raise AssertionError(f"{why} (apt-get install postgresql)")
        self.bindir = found
        _sweep()
        # not under pytest's tmp_path: its parents are private to root, and the server runs
        # as ``postgres``
        self.base = Path(tempfile.mkdtemp(prefix=_PREFIX))
        (self.base / "owner").write_text(str(os.getpid()))
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
            cmd, capture_output=True, text=True, timeout=patience(120), cwd=self.base, **kwargs
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
                   " -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
                   " -c max_connections=300")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.base / "log"), "-o", options,
                  "-w", "-t", str(int(patience(60))), "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t",
                  str(int(patience(60))), "stop")

    def destroy(self) -> None:
        _destroy(self.base)


def _destroy(base: Path) -> None:
    data = base / "data"
    if (data / "postmaster.pid").exists() and (found := bindir()) is not None:
        user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        kwargs: dict[str, object] = {}
        if user is not None:
            kwargs = {"user": user.pw_uid, "group": user.pw_gid}
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(  # type: ignore[call-overload]
                [str(found / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True, timeout=60, cwd=base, **kwargs,
            )
    shutil.rmtree(base, ignore_errors=True)


def _sweep() -> None:
    """Stop and remove the servers of test sessions that died without cleaning up (killed)."""
    for base in Path(tempfile.gettempdir()).glob(_PREFIX + "*"):
        if base.is_dir() and (base / "owner").exists() and not _owner_alive(base):
            _destroy(base)


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A server of the test's own, made but not yet initialised; destroyed after the test."""
    pg = PrivatePostgres()
    try:
        yield pg
    finally:
        pg.destroy()
