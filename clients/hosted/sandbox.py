"""A submitted program kept running for a whole match, confined by bubblewrap, with limits.

The POTM referee (:mod:`clients.potm.sandbox`) starts a fresh sandbox per guess and waits for
it to end; a hosted bot speaks docs/bot-protocol.md and must stay up for a whole match, so
this is the same confinement around a long-lived process driven line by line from asyncio:

* ``bwrap`` with new user, PID, network, IPC, UTS and cgroup namespaces; the program is PID 1
  of its PID namespace (``--as-pid-1``), so when it exits, or when :meth:`close` kills it, the
  kernel kills every process it started: nothing outlives its session;
* it sees the system read-only (``/usr`` as the POTM sandbox shows it: interpreters and their
  libraries, no dictionaries; of ``/etc`` only :data:`ETC_KEPT`), a ``/proc`` of its own
  namespace, a minimal ``/dev``, its program read-only as ``/bot/program`` (copied in from
  memory, so no host path of it is visible), and a size-limited ``tmpfs`` as ``/tmp`` (its
  working directory and ``HOME``): nothing of the project, the database, other bots' files,
  the network (a loopback of its own, where nothing listens) or the host's processes;
* as root it runs under a user id of its own, drawn at random per session, so the kernel's
  per-user process count (RLIMIT_NPROC) is its alone and a pid scan for that id shows whether
  anything is left behind;
* rlimits (``prlimit``): address space (memory) of each process, processes, a per-process
  CPU backstop, file size, open files, no core files. The CPU of the *whole process tree* is
  charged by reading ``/proc`` of the tree (each process's ``utime+stime`` plus the
  ``cutime+cstime`` of the children it reaped) while the program is asked to answer, as the
  POTM reaper charges a guess; their resident memory is summed at the same time, so many
  processes cannot together take more than one may;
* given a worker's :class:`clients.hosted.cpu_cap.CpuCap`, it starts inside that cgroup (from
  its first instruction, children included), whose quota caps the CPU of all the worker's
  programs together.

Per move: the CPU used since the last line sent to it and the wall time of an answer
(:class:`bots.external.ExternalBot` enforces the latter); per match: the total CPU and the
total bytes of output. Every broken limit raises :class:`bots.external.BotFailure` with a
reason (``cpu``, ``memory``, ``processes``, ``output``) and a detail its author can read.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import glob
import json
import os
import shutil
import signal
import time
from dataclasses import dataclass

from bots.external import MAX_LINE, BotFailure
from clients.potm.sandbox import system_argv

from .cpu_cap import CpuCap
from .proctree import CLOCK_TICKS, PAGE, free_uid, live_pids_of_user, process_tree

__all__ = ["ENV", "Limits", "SandboxError", "SandboxedProgram", "live_pids_of_user"]

#: The environment of the program (nothing of the worker's).
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LC_ALL": "C", "PWD": "/tmp"}
#: What of ``/etc`` the program sees: what the dynamic loader, the interpreters and the C
#: library read (Debian's ``/etc/alternatives`` holds ``awk``'s link). Nothing else: a
#: deployment's settings or secrets under ``/etc`` never reach a bot.
ETC_KEPT = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
            "timezone", "passwd", "group", "nsswitch.conf", "perl", "python3*")
#: Where the program is, inside the sandbox.
PROGRAM = "/bot/program"
#: How often the tree's CPU and process count are read while the program is asked to answer.
TICK = 0.02
#: Bytes of the program's standard error kept (the end of it) for its author's error log.
STDERR_KEEP = 4096
#: Seconds the program has to exit after ``quit`` before it is killed (docs/bot-protocol.md).
QUIT_GRACE = 1.0
#: What a program under RLIMIT_AS says when an allocation fails (Python, C, C++, sh, awk).
MEMORY_WORDS = ("MemoryError", "Cannot allocate memory", "out of memory", "bad_alloc",
                "Out of memory")
#: What a program says when a fork fails under RLIMIT_NPROC.
FORK_WORDS = ("Cannot fork", "fork: Resource temporarily unavailable", "BlockingIOError",
              "Resource temporarily unavailable", "can't fork")
#: Seconds bubblewrap has to reap a killed program before it is killed itself (a guard).
KILL_WAIT = 10.0


class SandboxError(Exception):
    """This machine cannot confine programs; the message is one line for a person."""


@dataclass(frozen=True)
class Limits:
    """What one program may use; docs/ladder.md ("What the sandbox allows") lists them."""

    #: CPU seconds (the whole process tree) between one line sent to it and its answer
    move_cpu: float = 2.0
    #: wall seconds for one answer (the protocol's move time limit)
    move_wall: float = 10.0
    #: CPU seconds (the whole process tree) for the whole match, start-up included
    match_cpu: float = 30.0
    #: bytes of standard output in one match (answers and comment lines)
    match_output: int = 1 << 20
    #: address space of each process (RLIMIT_AS), and resident memory of all together, MiB
    memory_mb: int = 256
    #: processes at once, the program included (RLIMIT_NPROC of its own user id)
    processes: int = 16
    #: size of its writable /tmp (tmpfs), MiB; also the largest file (RLIMIT_FSIZE)
    disk_mb: int = 16
    #: open files per process (RLIMIT_NOFILE)
    open_files: int = 64

    def __post_init__(self) -> None:
        for name in ("move_cpu", "move_wall", "match_cpu"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        for name in ("match_output", "memory_mb", "processes", "disk_mb", "open_files"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


def _describe_status(code: int | None) -> str:
    """bwrap's exit status as a person reads it (it reports a signal as 128 + number)."""
    if code is None:
        return "still running"
    if code < 0:
        code = 128 - code
    if code > 128:
        try:
            return f"signal {code - 128} ({signal.Signals(code - 128).name})"
        except ValueError:
            return f"code {code}"
    return f"code {code}"


@functools.cache
def _etc_kept() -> tuple[str, ...]:
    """The entries of :data:`ETC_KEPT` (patterns expanded) that exist here."""
    out: list[str] = []
    for pattern in ETC_KEPT:
        out += sorted(glob.glob(f"/etc/{pattern}"))
    return tuple(out)


def bwrap_argv(bwrap: str, program_fd: int, info_fd: int, limits: Limits) -> list[str]:
    """The bubblewrap command line (the mounts are the POTM sandbox's, docs/potm.md)."""
    a = system_argv(bwrap, "bot", info_fd, ENV)
    for path in _etc_kept():
        if os.path.islink(path):
            a += ["--symlink", os.readlink(path), path]
        else:
            a += ["--ro-bind", path, path]
    a += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
          "--size", str(limits.disk_mb << 20), "--tmpfs", "/tmp",
          "--perms", "0555", "--ro-bind-data", str(program_fd), PROGRAM,
          "--remount-ro", "/", "--chdir", "/tmp", "--", PROGRAM]
    return a


class SandboxedProgram:
    """One run of a submitted program in the sandbox: a :class:`bots.external.Transport`.

    ``program`` is the file's content (a ``#!`` script or a Linux binary); ``cap``, the
    worker's CPU cap (a cgroup) the program starts in, if it has one. Nothing here
    blocks the event loop: the process is an asyncio subprocess, its CPU is read from
    ``/proc`` of its own tree (a few small files) every :data:`TICK` while an answer is
    awaited. :meth:`close` (or :meth:`kill`) leaves no process behind: the program is PID 1 of
    its namespace, and killing it makes the kernel kill and reap all the others before its
    parent, bubblewrap, sees it gone.
    """

    def __init__(self, program: bytes, limits: Limits | None = None,
                 cap: CpuCap | None = None) -> None:
        self.program = program
        self.limits = limits or Limits()
        self.cap = cap
        bwrap = shutil.which("bwrap")
        prlimit = shutil.which("prlimit")
        if bwrap is None:
            raise SandboxError("bubblewrap is not installed (apt-get install bubblewrap)")
        if prlimit is None:
            raise SandboxError("prlimit is not installed (apt-get install util-linux)")
        self._bwrap, self._prlimit = bwrap, prlimit
        #: the user id it runs as (a fresh one per session as root, ours otherwise)
        self.uid: int | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._pidfd: int | None = None  # the program (PID 1 of its namespace)
        self._stderr_task: asyncio.Task[None] | None = None
        self._read_task: asyncio.Task[bytes] | None = None
        self._buffer = bytearray()
        self._stderr_tail = bytearray()
        self._eof = False
        #: bytes of standard output so far
        self.output = 0
        #: resident bytes of all its processes together, when last read
        self.memory = 0
        #: CPU seconds of its tree when the last line was sent to it
        self._move_start = 0.0
        self._last_cpu = 0.0
        self._most_processes = 0
        self._broken: tuple[str, str] | None = None
        #: every host pid its tree was seen to have (bubblewrap's included): for checks that
        #: nothing of it is left
        self.seen: set[int] = set()

    # -- the Transport interface -------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def open(self) -> None:
        """Start the program in a fresh sandbox (a previous run is killed first)."""
        await self.kill()
        lim = self.limits
        self._buffer.clear()
        self._stderr_tail.clear()
        self._eof = False
        self.output = 0
        self._move_start = self._last_cpu = 0.0
        self._most_processes = 0
        self._broken = None
        self.seen.clear()
        root = os.geteuid() == 0
        # (a scan of /proc: off the event loop)
        self.uid = await asyncio.to_thread(free_uid) if root else os.geteuid()
        # RLIMIT_NPROC counts every process of the user id: its own, bubblewrap's one outside
        # the namespace and (not as root) all the others of ours.
        others = 0 if root else len(await asyncio.to_thread(live_pids_of_user, self.uid))
        nproc = lim.processes + 1 + others
        cpu = int(lim.match_cpu) + 1  # per process, a backstop: the tree is charged before
        program_fd = os.memfd_create("bot-program", os.MFD_CLOEXEC)
        info_r, info_w = os.pipe()
        try:
            view = memoryview(self.program)
            while view:
                view = view[os.write(program_fd, view):]
            os.lseek(program_fd, 0, os.SEEK_SET)
            argv = [self._prlimit, f"--as={lim.memory_mb << 20}", f"--nproc={nproc}",
                    f"--cpu={cpu}:{cpu + 1}", f"--fsize={lim.disk_mb << 20}",
                    f"--nofile={lim.open_files}", "--core=0", "--"]
            argv += bwrap_argv(self._bwrap, program_fd, info_w, lim)
            extra = {"user": self.uid, "group": self.uid, "extra_groups": []} if root else {}
            if self.cap is not None:  # the shell joins the cgroup, then (as root) drops to uid
                argv = self.cap.wrap(argv, self.uid if root else None)
                extra = {}
            self._proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, pass_fds=(program_fd, info_w), env={},
                cwd="/", start_new_session=True, **extra)  # type: ignore[arg-type]
        except OSError as exc:
            os.close(info_r)
            raise BotFailure("crash", f"cannot start the sandbox: {exc.strerror or exc}") from None
        finally:
            os.close(program_fd)
            os.close(info_w)
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        pid = await self._read_info(info_r)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                self._pidfd = os.pidfd_open(pid)

    async def send(self, line: bytes, timeout: float) -> bool:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise BotFailure("crash", "the program is not running")
        word = line.split()[0].decode() if line.split() else "its input"
        if proc.returncode is not None:
            # already seen to exit (which a loaded machine may report before the write's
            # broken pipe): the same failure as the broken pipe, with its status
            raise BotFailure("crash", f"the program exited ({await self.exit_status()}) "
                             f"before reading {word!r}")
        self._check_limits(moving=True)
        self._move_start = self._last_cpu
        try:
            proc.stdin.write(line)
            await asyncio.wait_for(proc.stdin.drain(), timeout)
        except (BrokenPipeError, ConnectionResetError):
            status = await self.exit_status()
            raise BotFailure("crash", f"the program exited ({status}) before reading "
                             f"{word!r}") from None
        except TimeoutError:
            return False
        return True

    async def read_line(self, timeout: float) -> bytes | None:
        proc = self._proc
        if proc is None or proc.stdout is None:
            raise BotFailure("crash", "the program is not running")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0 and end <= MAX_LINE:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) > MAX_LINE:  # over-long: the caller calls it garbage
                return bytes(self._buffer[: MAX_LINE + 1])
            if self._eof:
                line = bytes(self._buffer)
                self._buffer.clear()
                return line
            if self._read_task is None:
                self._read_task = asyncio.ensure_future(proc.stdout.read(65536))
            left = deadline - loop.time()
            if left <= 0:
                self._check_limits(moving=True)
                return None
            done, _ = await asyncio.wait({self._read_task}, timeout=min(TICK, left))
            if done:
                chunk = self._read_task.result()
                self._read_task = None
                if not chunk:
                    self._eof = True
                    continue
                self.output += len(chunk)
                if self.output > self.limits.match_output:
                    raise BotFailure("output", f"more than {self.limits.match_output} bytes of "
                                     "output in one match (output limit)")
                self._buffer += chunk
            else:
                self._check_limits(moving=True)

    async def exit_status(self) -> str:
        proc = self._proc
        if proc is None:
            return "not started"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), QUIT_GRACE)
        return _describe_status(proc.returncode)

    def explain(self, reason: str, detail: str) -> tuple[str, str]:
        """Name the limit behind a failure (a crash of a program whose allocation failed is
        the memory limit, a timeout of a program that filled its process table the process
        limit), and add the last line of its standard error to a crash."""
        lim = self.limits
        if reason == "output":
            return reason, detail
        if self._broken is not None and self._broken[0] == "memory":
            return self._broken
        text = self.stderr_tail()
        if any(w in text for w in MEMORY_WORDS):
            return "memory", f"memory limit ({lim.memory_mb} MiB per process) reached; {detail}"
        if self._most_processes >= lim.processes or any(w in text for w in FORK_WORDS):
            return "processes", f"process limit ({lim.processes}) reached; {detail}"
        if self._broken is not None:
            return self._broken
        if reason == "cpu":
            return reason, detail
        if "SIGXCPU" in detail:
            return "cpu", f"CPU limit of one process reached; {detail}"
        if reason == "crash" and text:
            last = text.strip().splitlines()[-1][:200]
            return reason, f"{detail}; its last error line: {last!r}"
        return reason, detail

    async def close(self) -> None:
        """Say ``quit``, wait up to :data:`QUIT_GRACE` for it to exit, then kill the tree."""
        proc = self._proc
        if proc is not None and proc.returncode is None and proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.write(b"quit\n")
                await asyncio.wait_for(proc.stdin.drain(), QUIT_GRACE)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), QUIT_GRACE)
        await self.kill()

    async def kill(self) -> None:
        """Kill every process of the session and wait until none is left."""
        proc, self._proc = self._proc, None
        pidfd, self._pidfd = self._pidfd, None
        if self._read_task is not None:
            self._read_task.cancel()
            self._read_task = None
        if proc is None:
            return
        try:
            if pidfd is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                os.close(pidfd)
                # bubblewrap reaps the program (the kernel has emptied its namespace by then)
                # and exits; killing bubblewrap first would leave the program a zombie of the
                # host's init
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), KILL_WAIT)
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()  # no pid of the program: its --die-with-parent takes it along
            await proc.wait()
            if self._stderr_task is not None:
                with contextlib.suppress(Exception):
                    await self._stderr_task
        finally:
            # close our end of its input now, while the loop runs (also when this wait is
            # cancelled): left to the garbage collector, a pipe still open closes through a
            # loop that may be gone by then
            if proc.stdin is not None:
                proc.stdin.close()
        if proc.stdout is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.stdout.read(), KILL_WAIT)
        # bubblewrap reaped the program, and with it the kernel every process of its
        # namespace; as a last guard kill anything still owned by the session's user id
        if self.uid is not None and self.uid != os.geteuid():
            for pid in await asyncio.to_thread(live_pids_of_user, self.uid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    # -- what it used -------------------------------------------------------------------------
    def cpu(self) -> float:
        """CPU seconds of the whole tree so far (live processes and those they reaped)."""
        proc = self._proc
        if proc is None:
            return self._last_cpu
        tree = process_tree(proc.pid)
        ticks = sum(sum(int(v) for v in f[11:15]) for f in tree.values())
        # the tree includes bubblewrap outside the namespace: not the program's
        self._most_processes = max(self._most_processes, len(tree) - 1)
        self.memory = sum(int(f[21]) for pid, f in tree.items() if pid != proc.pid) * PAGE
        self.seen.update(tree)
        self._last_cpu = max(self._last_cpu, ticks / CLOCK_TICKS)
        return self._last_cpu

    def pids(self) -> list[int]:
        """Host pids of its processes now (bubblewrap's first), zombies included."""
        proc = self._proc
        if proc is None:
            return []
        self.cpu()
        return sorted(process_tree(proc.pid), key=lambda pid: pid != proc.pid)

    def stderr_tail(self) -> str:
        """The end of its standard error (what its author reads in the error log)."""
        return self._stderr_tail.decode("utf-8", "replace")

    def _check_limits(self, *, moving: bool) -> None:
        lim = self.limits
        used = self.cpu()
        if self.memory > lim.memory_mb << 20:
            # rounded up: a tree over the limit by less than a MiB must not read "used 128 MiB
            # (limit 128 MiB)" (seen once in the suite)
            mib = (self.memory + (1 << 20) - 1) >> 20
            self._broken = ("memory", f"its processes together used {mib} MiB "
                            f"of memory (limit {lim.memory_mb} MiB)")
        elif used > lim.match_cpu:
            self._broken = ("cpu", f"used {used:.2f} s of CPU in the match, children "
                            f"included (limit {lim.match_cpu:g} s)")
        elif moving and used - self._move_start > lim.move_cpu:
            self._broken = ("cpu", f"used {used - self._move_start:.2f} s of CPU on one move, "
                            f"children included (limit {lim.move_cpu:g} s)")
        if self._broken is not None:
            raise BotFailure(*self._broken)

    async def _drain_stderr(self) -> None:
        """Keep the end of standard error; a flood of it is read and dropped, never stored."""
        proc = self._proc
        assert proc is not None and proc.stderr is not None
        while chunk := await proc.stderr.read(65536):
            self._stderr_tail += chunk
            del self._stderr_tail[:-STDERR_KEEP]

    async def _read_info(self, fd: int) -> int | None:
        """The program's pid (outside its namespace) from bubblewrap's ``--info-fd``."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0))
        data = b""
        try:
            deadline = time.monotonic() + self.limits.move_wall
            while True:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    return int(json.loads(data)["child-pid"])
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                try:
                    chunk = await asyncio.wait_for(reader.read(4096), left)
                except TimeoutError:
                    return None
                if not chunk:
                    return None
                data += chunk
        finally:
            transport.close()

