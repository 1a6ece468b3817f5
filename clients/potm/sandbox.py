"""One run of an entry, confined: bubblewrap's namespaces around the referee's reaper.

Every guess is a fresh ``bwrap`` (Debian's ``bubblewrap``, the sandbox Flatpak uses) with new
user, PID, mount, network, IPC, UTS and cgroup namespaces. Inside it the entry sees:

* the system read-only: ``/usr`` (but of ``/usr/share`` only :data:`USR_SHARE_KEPT`, which
  interpreters need, so no word list, spelling dictionary or documentation is there; see
  :data:`HIDDEN` for the rest that is masked) and ``/etc``; a fresh ``/proc`` of its own PID
  namespace and a minimal read-only ``/dev``; nothing of ``/home``, ``/root``, ``/var``,
  ``/run``, ``/srv``, ``/opt``, ``/sys``, the host's ``/tmp`` or ``/dev/shm``;
* its own directory, writable, as ``/tmp`` and ``/dev/shm`` (also its working directory,
  ``HOME`` and ``TMPDIR``): the only place it can write; every other place is read-only or
  absent;
* its program, read-only, as ``/potm/entry/NAME``, and the reaper as ``/potm/reaper.py``.

It cannot see the referee's process tree (its PID namespace holds only itself and the
reaper), command line, environment, descriptors (only stdin, stdout and a ``/dev/null``
stderr reach it) or files, the word list, other entries' files, the network (a loopback of
its own; abstract Unix sockets are per network namespace), or create namespaces of its own.

The reaper (:mod:`clients.potm.reaper`) is PID 1 of the namespace: it charges the CPU of every
process the guess starts, stops the guess once the CPU limit is passed and kills and reaps
everything before it reports. The referee adds a wall-clock guard far above the CPU limit
and a cap on the output.

``confined=False`` (``moo potm --unconfined``) runs the same reaper directly, without
bubblewrap: the CPU is still charged in full and every descendant is killed, but the entry
sees and may touch whatever its user may.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HIDDEN", "USR_SHARE_KEPT", "Outcome", "RunLimits", "Sandbox", "SandboxError"]

#: The parts of ``/usr/share`` an entry sees: interpreters' own libraries (Perl, awk, Tcl,
#: Java), time zones, terminal descriptions and ``file``'s magic. The rest (``dict``,
#: hunspell, myspell, docs, man pages, ...) is not mounted at all.
USR_SHARE_KEPT = ("awk", "java", "misc", "perl", "perl5", "tcltk", "terminfo", "zoneinfo")
#: Other places that hold dictionaries (patterns as for :func:`glob.glob`), masked with an
#: empty read-only directory where present.
HIDDEN = (
    "/usr/local/share",
    "/usr/lib/aspell",
    "/usr/lib/ispell",
    "/usr/lib/hunspell",
    "/usr/lib/myspell",
    "/usr/lib/x86_64-linux-gnu/aspell",
    "/usr/lib/aarch64-linux-gnu/aspell",
    "/etc/dictionaries-common",
    # the largest pieces of plain English documentation among the interpreters' libraries
    "/usr/share/perl/*/pod",
    "/usr/lib/python3*/pydoc_data",
)
#: Top-level directories that merged-/usr systems make symlinks into ``/usr``.
TOP_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
#: The environment of every run (nothing of the referee's).
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LC_ALL": "C",
       "PWD": "/tmp"}
#: Seconds to wait for bubblewrap's ``--info-fd`` once the run is over (it is written before
#: the entry starts: a safety bound only).
INFO_WAIT = 10.0
#: bubblewrap's own messages kept for an error line.
STDERR_KEEP = 2000


class SandboxError(Exception):
    """The machine cannot confine entries here; the message is one line for a person."""


@dataclass(frozen=True)
class RunLimits:
    """What one run may use (:class:`clients.potm.referee.Limits` says why each exists)."""

    cpu: float
    wall: float
    memory_mb: int
    processes: int
    file_mb: int
    open_files: int
    disk_mb: int
    output_cap: int


@dataclass
class Outcome:
    """How one run ended, before the referee judges its output.

    ``verdict`` is ``exit`` (its first process ended), ``cpu`` (over the CPU limit), ``disk``
    (its directory grew past the disk guard), ``wall`` (the wall-clock guard), ``output``
    (more than ``output_cap`` bytes on stdout), ``exec`` (the program could not be started;
    ``detail`` says why) or ``failed`` (the sandbox itself failed; ``detail`` has
    bubblewrap's message).
    """

    verdict: str
    stdout: bytes
    cpu: float | None   # user+sys seconds of all its processes; None if it had to be killed
    wall: float
    status: int = -1    # wait status of its first process (-1: none)
    detail: str = ""


def _reaper_python(confined: bool) -> str:
    """The ``python3`` that runs the reaper: the system's, which every entry's user may run and
    the sandbox sees (it has ``/usr`` and no other programs); unconfined, ours will do."""
    for cand in ("/usr/bin/python3", sys.executable):
        real = os.path.realpath(cand)
        if real.startswith("/usr/") and os.access(real, os.X_OK):
            return cand
    if not confined:
        return sys.executable
    raise SandboxError("the sandbox needs a python3 under /usr (apt-get install python3)")


class Sandbox:
    """Runs programs one guess at a time; ``root`` is the referee's private directory."""

    def __init__(self, root: Path, *, confined: bool = True) -> None:
        self.confined = confined
        self.bwrap = shutil.which("bwrap") if confined else None
        if confined and self.bwrap is None:
            raise SandboxError("bubblewrap is not installed (apt-get install bubblewrap)")
        self.python = _reaper_python(confined)
        d = root / "reaper"
        d.mkdir()
        self.reaper = d / "reaper.py"
        shutil.copyfile(Path(__file__).with_name("reaper.py"), self.reaper)
        os.chmod(self.reaper, 0o444)
        os.chmod(d, 0o555)
        # bubblewrap's (and the reaper's) own messages: for the error line of a failed run
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 -- lives as long as we do

    def close(self) -> None:
        self._stderr.close()

    # -- the command --------------------------------------------------------------------------
    def _bwrap_argv(self, program: Path, work: Path, info_fd: int) -> list[str]:
        assert self.bwrap is not None
        a = system_argv(self.bwrap, "potm", info_fd, ENV)
        a += ["--ro-bind", "/etc", "/etc"]
        for path in hidden_dirs():  # /etc's after /etc is mounted
            if path.startswith("/etc/"):
                a += ["--tmpfs", path, "--remount-ro", path]
        a += ["--proc", "/proc", "--dev", "/dev", "--bind", str(work), "/dev/shm",
              "--remount-ro", "/dev", "--bind", str(work), "/tmp",
              "--ro-bind", str(program), f"/potm/entry/{program.name}",
              "--ro-bind", str(self.reaper), "/potm/reaper.py",
              "--remount-ro", "/", "--chdir", "/tmp", "--"]
        return a

    def _reaper_argv(self, reaper: str, program: str, lim: RunLimits, report_fd: int) -> list[str]:
        return [self.python, "-I", "-S", "-B", reaper, str(report_fd),
                str(round(lim.cpu * 1e6)), str(lim.memory_mb << 20), str(lim.processes),
                str(lim.file_mb << 20), str(lim.open_files), str(lim.disk_mb << 20), program]

    # -- one run ------------------------------------------------------------------------------
    def run(self, program: Path, work: Path, stdin: bytes, lim: RunLimits,
            uid: int | None = None) -> Outcome:
        """Run ``program`` once in ``work`` with ``stdin``; as user ``uid`` if given (root)."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        rep_r, rep_w = os.pipe()
        info_r, info_w = os.pipe()
        os.write(in_w, stdin)
        os.close(in_w)
        self._stderr.seek(0)
        self._stderr.truncate()
        if self.confined:
            argv = self._bwrap_argv(program, work, info_w)
            argv += self._reaper_argv("/potm/reaper.py", f"/potm/entry/{program.name}", lim,
                                      rep_w)
            env: dict[str, str] = {}
            cwd = "/"
        else:
            argv = self._reaper_argv(str(self.reaper), str(program), lim, rep_w)
            env = {**ENV, "HOME": str(work), "TMPDIR": str(work), "PWD": str(work)}
            cwd = str(work)
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv, stdin=in_r, stdout=out_w, stderr=self._stderr, pass_fds=(rep_w, info_w),
                close_fds=True, env=env, cwd=cwd, start_new_session=True,
                user=uid, group=uid, extra_groups=[] if uid is not None else None)
        except OSError as exc:
            for fd in (in_r, out_r, out_w, rep_r, rep_w, info_r, info_w):
                os.close(fd)
            return Outcome("failed", b"", None, 0.0, detail=f"cannot start: {exc}")
        for fd in (in_r, out_w, rep_w, info_w):
            os.close(fd)
        try:
            return self._watch(proc, out_r, rep_r, info_r, lim, t0)
        except BaseException:  # the referee is stopped (SIGTERM, Ctrl-C): the run goes too
            if self.confined:
                proc.kill()  # bubblewrap's --die-with-parent kills the sandbox's PID 1
            else:
                proc.send_signal(signal.SIGTERM)
            proc.wait()
            raise
        finally:
            for fd in (out_r, rep_r, info_r):
                os.close(fd)

    def _watch(self, proc: subprocess.Popen[bytes], out_r: int, rep_r: int, info_r: int,
               lim: RunLimits, t0: float) -> Outcome:
        """Collect stdout and the reaper's report until the run ends or a guard stops it."""
        deadline = t0 + lim.wall
        poller = select.poll()
        for fd in (out_r, rep_r, info_r):
            poller.register(fd, select.POLLIN)
        out = bytearray()
        report = bytearray()
        info = bytearray()
        open_fds = {out_r, rep_r, info_r}
        reaper_fd: int | None = None if self.confined else os.pidfd_open(proc.pid)
        verdict: str | None = None
        reported = False
        while open_fds and verdict is None:
            if reported and out_r not in open_fds:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                verdict = "wall"
                break
            for fd, _ev in poller.poll(max(1, int(left * 1000))):
                chunk = os.read(fd, 65536)
                if not chunk:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    if fd == rep_r:
                        reported = True
                    continue
                if fd == out_r:
                    out += chunk
                    if len(out) > lim.output_cap:
                        verdict = "output"
                elif fd == rep_r:
                    report += chunk
                    reported = reported or b"\n" in report
                else:
                    info += chunk
                    if reaper_fd is None:
                        reaper_fd = _reaper_pidfd(info)
            if reported and rep_r in open_fds:  # the line is in: stdout follows at once
                poller.unregister(rep_r)
                open_fds.discard(rep_r)
        if reaper_fd is None and self.confined and info_r in open_fds:
            reaper_fd = _finish_info(info_r, info, time.monotonic() + INFO_WAIT)
        if verdict is not None or proc.poll() is None:
            self._kill(proc, reaper_fd)
        proc.wait()
        if reaper_fd is not None:
            os.close(reaper_fd)
        wall = time.monotonic() - t0
        stdout = bytes(out[: lim.output_cap + 1])
        if verdict is not None:
            return Outcome(verdict, stdout, None, wall)
        parts = bytes(report).decode(errors="replace").split()
        if len(parts) != 3:
            self._stderr.seek(0)
            text = self._stderr.read(STDERR_KEEP).decode(errors="replace").strip()
            line = text.splitlines()[-1] if text else f"exit status {proc.returncode}"
            return Outcome("failed", stdout, None, wall, detail=line)
        status, cpu_us, reason = int(parts[0]), int(parts[1]), parts[2]
        cpu = cpu_us / 1e6
        if reason.startswith("exec:"):
            return Outcome("exec", stdout, cpu, wall, status, reason[5:])
        if reason == "cpu" or cpu > lim.cpu:
            return Outcome("cpu", stdout, cpu, wall, status)
        return Outcome(reason, stdout, cpu, wall, status)

    def _kill(self, proc: subprocess.Popen[bytes], reaper_fd: int | None) -> None:
        """Kill the run and wait until none of its processes is left.

        Confined: killing the sandbox's PID 1 makes the kernel kill and reap the whole
        namespace before PID 1 itself is gone, so once its pidfd says it has exited nothing of
        the run is left; bubblewrap, its parent, then reaps it and exits. Unconfined: the
        reaper is asked (SIGTERM) to kill its descendants, which it does before it exits.
        """
        if not self.confined:
            proc.send_signal(signal.SIGTERM)
            return
        if reaper_fd is None:  # no PID 1 known: bubblewrap's --die-with-parent kills it
            proc.kill()
            return
        try:
            signal.pidfd_send_signal(reaper_fd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        select.select([reaper_fd], [], [])  # bubblewrap reaps it, then exits by itself


@functools.cache
def hidden_dirs() -> tuple[str, ...]:
    """The directories of :data:`HIDDEN` (patterns expanded) that exist here (read once)."""
    out: list[str] = []
    for pattern in HIDDEN:
        out += sorted(p for p in glob.glob(pattern)
                      if os.path.isdir(p) and not os.path.islink(p))
    return tuple(out)


def system_argv(bwrap: str, hostname: str, info_fd: int, env: dict[str, str]) -> list[str]:
    """The start of a bubblewrap command line that both sandboxes share (this referee's and
    the hosted bots', clients/hosted/sandbox.py): new namespaces, no capabilities, a clean
    environment, read-only /usr with /usr/share filtered, the :data:`HIDDEN` directories
    outside /etc hidden, and the top-level library and binary directories. Each adds its own
    /etc, /proc, /dev, /tmp and program after it."""
    a = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
         "--unshare-uts", "--unshare-cgroup", "--disable-userns", "--die-with-parent",
         "--new-session", "--as-pid-1", "--cap-drop", "ALL", "--hostname", hostname,
         "--info-fd", str(info_fd), "--clearenv"]
    for k, v in env.items():
        a += ["--setenv", k, v]
    a += ["--ro-bind", "/usr", "/usr", "--tmpfs", "/usr/share"]
    for name in USR_SHARE_KEPT:
        a += ["--ro-bind-try", f"/usr/share/{name}", f"/usr/share/{name}"]
    a += ["--remount-ro", "/usr/share"]
    for path in hidden_dirs():
        if not path.startswith("/etc/"):
            a += ["--tmpfs", path, "--remount-ro", path]
    for name in TOP_DIRS:
        host = f"/{name}"
        if os.path.islink(host):
            a += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            a += ["--ro-bind", host, host]
    return a


def _finish_info(info_r: int, info: bytearray, deadline: float) -> int | None:
    """Read the rest of bubblewrap's ``--info-fd`` (it is written as soon as the sandbox's
    PID 1 exists, so at once unless bubblewrap failed before) and open a pidfd of PID 1."""
    while True:
        fd = _reaper_pidfd(info)
        if fd is not None:
            return fd
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([info_r], [], [], left)[0]:
            return None
        chunk = os.read(info_r, 4096)
        if not chunk:
            return None
        info += chunk


def _reaper_pidfd(info: bytearray) -> int | None:
    """A pidfd of the sandbox's PID 1 from bubblewrap's ``--info-fd`` JSON, once complete."""
    try:
        pid = int(json.loads(bytes(info))["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None
