"""A hard CPU cap for hosted bots: one cgroup per bot worker (docs/ladder.md, "The CPU cap").

A worker given a share of the machine (``moo worker --cpu-share F``) makes a cgroup of its own,
``moo-worker-PID``, with a CFS bandwidth quota of ``F x cores x period`` per period, and starts
every sandboxed program inside it (:meth:`CpuCap.wrap`): the kernel then throttles the programs
together, children included, whatever they do, and the worker's own process stays outside.

Two kinds of controller are found, from ``/proc/self/mountinfo`` and ``/proc/self/cgroup``:

* **cgroup v2** (a ``cgroup2`` mount whose ``cgroup.controllers`` offers ``cpu``): the worker's
  cgroup is made in the nearest cgroup, from the worker's own up to the root, whose
  ``cgroup.subtree_control`` has ``cpu``, or failing that one where ``+cpu`` can be enabled;
  the cap is ``cpu.max`` (``QUOTA PERIOD``);
* **cgroup v1** (a ``cgroup`` mount with the ``cpu`` controller): made in the worker's own cpu
  cgroup; the cap is ``cpu.cfs_period_us`` and ``cpu.cfs_quota_us``.

v2 is tried first. Where neither can be used (not root, no cpu controller, a read-only
mount), :func:`open_cap` raises :class:`NoController` with the reasons, in one line.

A program joins the cgroup before its first instruction: its command line starts with
``sh -c 'echo $$ > PROCS && exec "$@"'``, the shell writing its own pid to the cgroup's
``cgroup.procs`` before it becomes the sandbox (``prlimit``, then ``bwrap``), so everything the
program ever starts is born inside. As root the shell runs as root (moving a process between
cgroups takes write access to them) and drops to the session's user id with ``setpriv`` right
after. The cgroup is removed when the worker ends (:meth:`CpuCap.close`: anything still in it is
killed first), and those of workers that died without removing theirs are removed when the next
worker starts in the same place.

``root`` is where ``/proc`` and ``/sys`` are looked for: ``/`` except in tests, which point it
at a fake tree.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PERIOD_US", "PREFIX", "CpuCap", "NoController", "open_cap"]

#: the CFS period, microseconds (the kernel's default)
PERIOD_US = 100_000
#: the smallest quota the kernel accepts, microseconds
MIN_QUOTA_US = 1000
#: the name of a worker's cgroup is this and the worker's pid
PREFIX = "moo-worker-"
#: what the shell in front of a program runs: ``sh -c JOIN PROCS ARGV...`` writes its own pid
#: to PROCS (its ``$0``) and becomes ARGV
JOIN = 'echo $$ > "$0" && exec "$@"'
#: seconds to wait for the processes killed in a cgroup that is being removed
KILL_WAIT = 5.0


class NoController(Exception):
    """No CPU controller this process can use here; the message says why, in one line."""


@dataclass(frozen=True)
class _Mount:
    fstype: str  # "cgroup" (v1) or "cgroup2"
    options: frozenset[str]  # the super options: a v1 mount's controllers are among them
    root: str  # the mount's root within its hierarchy
    point: Path  # where it is mounted (under ``root`` of :func:`open_cap`)


def _unescape(field: str) -> str:
    """A mountinfo path (space, tab, newline and backslash are written as ``\\ooo``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mounts(root: Path) -> list[_Mount]:
    """The cgroup file systems mounted here, in mountinfo's order."""
    out = []
    for line in (root / "proc/self/mountinfo").read_text().splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        out.append(_Mount(tail[0], frozenset(tail[2].split(",")), _unescape(fields[3]),
                          root / _unescape(fields[4]).lstrip("/")))
    return out


def _own_cgroups(root: Path) -> dict[str, str]:
    """This process's cgroup in each hierarchy: v1 controller (``cpu``...) or ``""`` for the
    v2 hierarchy -> its path in that hierarchy."""
    out: dict[str, str] = {}
    for line in (root / "proc/self/cgroup").read_text().splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for name in parts[1].split(",") if parts[1] else [""]:
                out[name] = parts[2]
    return out


def _inside(mount: _Mount, path: str) -> Path | None:
    """Where the cgroup ``path`` of the mount's hierarchy is in the file system, if mounted."""
    if mount.root != "/":
        if path != mount.root and not path.startswith(mount.root + "/"):
            return None
        path = path[len(mount.root):]
    return mount.point / path.lstrip("/")


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def _v2_parent(mount: _Mount, own: Path) -> Path:
    """The cgroup a v2 worker's cgroup is made in (see the module's docstring)."""
    chain = [own, *(p for p in own.parents if p.is_relative_to(mount.point))]
    for cgroup in chain:
        if "cpu" in _words(cgroup / "cgroup.subtree_control"):
            return cgroup
    for cgroup in chain:
        if "cpu" in _words(cgroup / "cgroup.controllers"):
            try:
                (cgroup / "cgroup.subtree_control").write_text("+cpu\n")
            except OSError:
                continue  # one with processes of its own (not the root) cannot
            return cgroup
    offered = _words(mount.point / "cgroup.controllers")
    raise NoController(f"cgroup v2 at {mount.point} offers no cpu controller (cgroup."
                       f"controllers: {' '.join(offered) or 'empty'})" if "cpu" not in offered
                       else f"cgroup v2 at {mount.point}: cpu cannot be enabled for {own}")


def _places(root: Path) -> tuple[list[tuple[int, Path]], list[str]]:
    """Where a worker's cgroup could be made, v2 first: (version, parent cgroup); and why
    each mount that is not one cannot be used."""
    own = _own_cgroups(root)
    places: list[tuple[int, Path]] = []
    why: list[str] = []
    mounts = _mounts(root)
    for mount in (m for m in mounts if m.fstype == "cgroup2"):
        path = _inside(mount, own.get("", "/"))
        if path is None:
            why.append(f"cgroup v2 at {mount.point} does not show this process's cgroup")
            continue
        try:
            places.append((2, _v2_parent(mount, path)))
        except NoController as exc:
            why.append(str(exc))
    v1 = [m for m in mounts if m.fstype == "cgroup" and "cpu" in m.options]
    for mount in v1:
        path = _inside(mount, own.get("cpu", "/"))
        if path is None:
            why.append(f"cgroup v1 cpu at {mount.point} does not show this process's cgroup")
        else:
            places.append((1, path))
    if not mounts:
        why.append("no cgroup file system is mounted")
    elif not v1:
        why.append("no cgroup v1 cpu hierarchy")
    return places, why


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pids(cgroup: Path) -> list[int]:
    return [int(w) for w in _words(cgroup / "cgroup.procs") if w.isdigit()]


def _remove(cgroup: Path) -> None:
    """Kill whatever is in ``cgroup``, wait for it to exit, and remove the cgroup (raises
    OSError when it cannot be removed)."""
    error = OSError(f"cannot remove {cgroup}")
    for _ in range(3):
        fds = []
        for pid in _pids(cgroup):
            with contextlib.suppress(ProcessLookupError):
                fd = os.pidfd_open(pid)
                fds.append(fd)
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        try:  # a pidfd is readable once its process has exited (and left its cgroup)
            poll = select.poll()
            for fd in fds:
                poll.register(fd, select.POLLIN)
            left, deadline = len(fds), time.monotonic() + KILL_WAIT
            while left and time.monotonic() < deadline:
                for fd, _ in poll.poll(max(1, int((deadline - time.monotonic()) * 1000))):
                    poll.unregister(fd)
                    left -= 1
        finally:
            for fd in fds:
                os.close(fd)
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            error = exc
    raise error


def _clean_stale(parent: Path, me: int) -> None:
    """Remove the cgroups of workers that ended without removing theirs (their pid is gone)."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            pid = entry.name[len(PREFIX):]
            if (entry.name.startswith(PREFIX) and pid.isdigit() and int(pid) != me
                    and not _alive(int(pid))):
                with contextlib.suppress(OSError):
                    _remove(entry)


@dataclass(frozen=True)
class CpuCap:
    """A worker's cgroup: its programs together get ``quota_us`` of CPU per ``period_us``."""

    #: the cgroup's directory
    path: Path
    #: 1 or 2: the cgroup version
    version: int
    quota_us: int
    period_us: int
    #: ``sh`` and, as root, ``setpriv`` (which drops to the session's user id)
    shell: str
    setpriv: str | None

    @property
    def cores(self) -> float:
        """How many cores' worth of CPU the programs may use together."""
        return self.quota_us / self.period_us

    def describe(self) -> str:
        """The cap as the worker's log line says it."""
        files = "cpu.max" if self.version == 2 else "cpu.cfs_quota_us"
        return (f"cgroup v{self.version} {self.path}, {files}: {self.quota_us} us per "
                f"{self.period_us} us")

    def wrap(self, argv: list[str], uid: int | None) -> list[str]:
        """``argv`` started inside the cgroup; with ``uid``, the shell (run as root) becomes
        that user id, groups cleared, before it runs ``argv``."""
        out = [self.shell, "-c", JOIN, str(self.path / "cgroup.procs")]
        if uid is not None:
            if self.setpriv is None:
                raise NoController("setpriv is not installed (util-linux)")
            out += [self.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        return out + argv

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        return _pids(self.path)

    def stat(self) -> dict[str, int]:
        """The cgroup's ``cpu.stat`` (``nr_periods``, ``nr_throttled``, ...)."""
        words = _words(self.path / "cpu.stat")
        return {k: int(v) for k, v in zip(words[::2], words[1::2], strict=False)
                if v.lstrip("-").isdigit()}

    def close(self) -> None:
        """Kill whatever is still in the cgroup and remove it (OSError when it cannot)."""
        if self.path.is_dir():
            _remove(self.path)


def open_cap(share: float, *, root: Path = Path("/"), cores: int | None = None,
             pid: int | None = None) -> CpuCap:
    """Make the cgroup of the worker ``pid`` (this process) with a cap of ``share`` of
    ``cores`` (the cores this process may run on), stale ones of dead workers removed first;
    :class:`NoController` says why there is none."""
    if not 0 < share <= 1:
        raise ValueError(f"the share must be in (0, 1], got {share}")
    cores = cores or len(os.sched_getaffinity(0))
    pid = pid or os.getpid()
    quota = max(MIN_QUOTA_US, round(share * cores * PERIOD_US))
    shell = shutil.which("sh")
    setpriv = shutil.which("setpriv")
    if shell is None:
        raise NoController("no sh on PATH")
    if os.geteuid() == 0 and setpriv is None:
        raise NoController("setpriv is not installed (util-linux)")
    try:
        places, why = _places(root)
    except OSError as exc:
        raise NoController(f"cannot read {exc.filename}: {exc.strerror}") from None
    for version, parent in places:
        _clean_stale(parent, pid)
        path = parent / f"{PREFIX}{pid}"
        try:
            if path.is_dir():
                _remove(path)
            path.mkdir()
        except OSError as exc:
            why.append(f"cgroup v{version}: cannot make {path}: {exc.strerror}")
            continue
        try:
            if version == 2:
                (path / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
            else:
                (path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
                (path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        except OSError as exc:
            with contextlib.suppress(OSError):
                path.rmdir()
            why.append(f"cgroup v{version}: cannot set the quota of {path}: {exc.strerror}")
            continue
        return CpuCap(path, version, quota, PERIOD_US, shell, setpriv)
    raise NoController("; ".join(why) or "no usable cgroup")
