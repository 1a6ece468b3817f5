"""The reaper: the first process of every POTM sandbox, which runs the entry once and charges it.

It is copied into the referee's private directory and executed by the *system* ``python3``
inside the sandbox (``python3 -I -S -B reaper.py ...``), so it imports nothing but the
standard library and must run on any Python from 3.9 on.

Why a process of our own instead of bubblewrap's: the contest charges an entry's *whole* CPU
time for a guess ("10 seconds sys+user time"), children included, and the kernel adds a child's
CPU time to its parent's ``RUSAGE_CHILDREN`` only when the parent *waits* for it. bubblewrap's
own PID 1 exits as soon as the entry does, and the kernel then reaps the rest of the namespace
without charging anyone. This reaper is PID 1 of the sandbox's PID namespace (``bwrap
--as-pid-1``): every orphan is re-parented to it, it waits for each one, and after the entry's
first process exits it kills everything left in the namespace and waits for that too, so its
``RUSAGE_CHILDREN`` is the CPU of every process the guess ever started. While the guess runs it
sums the live processes' times every few milliseconds and kills the lot once the limit is
passed, so a child burning CPU in the background costs the limit, not the wall-clock guard.

The entry runs under the same user id as the reaper, so the reaper makes itself non-dumpable
first: the entry can then neither ``ptrace`` it nor open ``/proc/1/mem`` or its descriptors,
and, being PID 1 of the namespace, it receives no signal it has no handler for.

Outside a sandbox (``moo potm --unconfined``) it is not PID 1: it becomes a *child subreaper*
(orphans come to it all the same) and kills its descendants one by one instead of ``kill(-1)``.

Usage::

    reaper.py REPORT_FD CPU_US MEMORY_BYTES PROCESSES FILE_BYTES OPEN_FILES DISK_BYTES PROGRAM

It writes one line to ``REPORT_FD`` when the guess is over: ``STATUS CPU_US REASON``, where
``STATUS`` is the entry's wait status (or -1), ``CPU_US`` the user+sys microseconds of all its
processes, and ``REASON`` one of ``exit`` (the entry's first process ended), ``cpu`` (the
limit was passed while it ran), ``disk`` (its directory grew past ``DISK_BYTES``) or
``exec:ERROR`` (the program could not be started) or ``stopped`` (unconfined only: the
referee sent SIGTERM because one of its own guards fired).
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import select
import signal
import sys

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
#: How often the live processes' CPU and the directory's size are checked while a guess runs.
TICK_MS = 10
#: A directory with more entries than this is treated as over the disk limit (it is not
#: walked further: a million empty files should not make the check itself expensive).
MAX_FILES = 10_000
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first); None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _descendants(me: int) -> dict[int, list[bytes]]:
    """Every process below ``me`` (zombies included), with its stat fields."""
    stats: dict[int, list[bytes]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat_fields(int(name))
            if fields is not None:
                stats[int(name)] = fields
    children: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(pid)
    out: dict[int, list[bytes]] = {}
    todo = list(children.get(me, ()))
    while todo:
        pid = todo.pop()
        if pid not in out:
            out[pid] = stats[pid]
            todo.extend(children.get(pid, ()))
    return out


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _live_cpu(me: int) -> float:
    """CPU of the processes still alive (or not yet reaped) below ``me``: their own time and
    that of the children they waited for. With :func:`_children_cpu` this is the whole tree
    (to the clock tick: it is the guard, the final figure comes from the kernel's rusage)."""
    ticks = 0
    for fields in _descendants(me).values():
        ticks += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return ticks / CLOCK_TICKS


def _disk_bytes(top: str) -> int:
    """Bytes the files under ``top`` occupy (symlinks not followed); over the cap if huge."""
    total = 0
    seen = 0
    todo = [top]
    while todo:
        try:
            with os.scandir(todo.pop()) as it:
                for e in it:
                    seen += 1
                    if seen > MAX_FILES:
                        return sys.maxsize
                    st = e.stat(follow_symlinks=False)
                    total += st.st_blocks * 512
                    if e.is_dir(follow_symlinks=False):
                        todo.append(e.path)
        except OSError:
            continue
    return total


def _reap(main: int) -> int | None:
    """Wait for every child that has ended; the main process's status if it was one."""
    status = None
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == main:
            status = st


def _kill_everything(me: int) -> None:
    """Kill every process of the guess and wait for each, so that all their CPU is charged.

    As PID 1 of the namespace ``kill(-1)`` reaches exactly the sandbox's processes (the
    kernel refuses new forks to a process with a pending SIGKILL, so one round suffices; the
    loop repeats it anyway). Outside a sandbox only our descendants may be touched.
    """
    while True:
        if me == 1:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            for pid in _descendants(me):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            if me == 1 or not _descendants(me):
                return


def _start(program: str, limits: list[int], nproc: int) -> tuple[int, str | None]:
    """fork + exec the entry with its limits; (pid, None) or (-1, why it could not start)."""
    cpu_us, memory, _nproc, file_bytes, open_files = limits
    cpu_soft = cpu_us // 1_000_000 + 2  # a backstop per process: the guard acts long before
    r, w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the entry: never return into the reaper
        try:
            os.close(r)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_soft, cpu_soft + 1))
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            os.umask(0o077)
            os.execv(program, [program])
        except BaseException as exc:  # whatever failed, say so and never run on
            code = getattr(exc, "errno", None) or errno.EINVAL
            os.write(w, errno.errorcode.get(code, str(code)).encode())
            os._exit(127)
    os.close(w)
    failed = os.read(r, 64)
    os.close(r)
    if failed:
        os.waitpid(pid, 0)
        return -1, failed.decode(errors="replace")
    return pid, None


def _own_processes() -> int:
    uid = os.getuid()
    n = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                n += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                continue
    return n


def main(argv: list[str]) -> int:
    report_fd = int(argv[0])
    cpu_us, memory, processes, file_bytes, open_files, disk = (int(v) for v in argv[1:7])
    program = argv[7]
    me = os.getpid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # PID 1: then no signal from inside reaches us
    _prctl(PR_SET_DUMPABLE, 0)
    stop: list[int] = []
    if me != 1:  # unconfined: the referee asks with SIGTERM when one of its guards fires
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        signal.signal(signal.SIGTERM, lambda signum, _frame: stop.append(signum))
    os.closerange(3, report_fd)  # nothing of bubblewrap's or the referee's reaches the entry
    os.closerange(report_fd + 1, 1 << 16)
    os.set_inheritable(report_fd, False)
    # The kernel counts the processes of a user (per user namespace): in the sandbox that is
    # the reaper and the entry's; outside, all of the user's processes, so leave room for them.
    nproc = processes + (1 if me == 1 else _own_processes())
    main_pid, error = _start(program, [cpu_us, memory, processes, file_bytes, open_files], nproc)
    if main_pid < 0:
        os.write(report_fd, f"-1 0 exec:{error}\n".encode())
        return 0
    os.close(0)
    os.close(1)
    limit = cpu_us / 1e6
    reason = "exit"
    status = -1
    pidfd = os.pidfd_open(main_pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    while True:
        got = _reap(main_pid)
        if got is not None:
            status = got
            break
        if stop:
            reason = "stopped"
            break
        if _children_cpu() + _live_cpu(me) > limit:
            reason = "cpu"
            break
        if _disk_bytes(".") > disk:
            reason = "disk"
            break
        poller.poll(TICK_MS)
    _kill_everything(me)
    if reason == "exit" and _disk_bytes(".") > disk:
        reason = "disk"
    used = round(_children_cpu() * 1e6)
    os.write(report_fd, f"{status} {used} {reason}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
