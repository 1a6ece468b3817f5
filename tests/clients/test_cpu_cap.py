"""The CPU cap of hosted bots (clients/hosted/cpu_cap.py, docs/ladder.md "The CPU cap").

On this machine (root, a cgroup v1 cpu hierarchy, or on CI a cgroup v2 one) a real cgroup is
made: a CPU burner and its children, in the sandbox, are throttled by the kernel within the
quota (read from the cgroup's own counters, no clock), every process of a program is in the
cgroup from the start, and nothing is left of the cgroup after. The discovery of the
controller, v2 and v1, and the fallback of a worker that finds none, run on fake trees.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import subprocess
from pathlib import Path

import pytest

from bots.registry import create
from clients.hosted.cpu_cap import JOIN, PERIOD_US, PREFIX, CpuCap, NoController, open_cap
from clients.hosted.program import hosted_bot, play_match
from clients.hosted.sandbox import Limits, SandboxedProgram
from clients.hosted.worker import start_cap
from tests.patience import patience

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

ENTRIES = Path(__file__).parent.parent / "hosted_entries"
#: 0.2 of one core
SHARE, CORES = 0.2, 1
#: a program with a child that lives as long as it does
PARENT = (b"#!/bin/sh\nsleep 1000 &\nwhile read -r word rest; do\n"
          b"  [ \"$word\" = moo ] && echo ready parent\ndone\n")


def real_cap() -> CpuCap:
    try:
        return open_cap(SHARE, cores=CORES)
    except NoController as exc:  # the suite runs as root on Linux with a cpu controller
        pytest.fail(f"no CPU controller on this machine: {exc}")


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def cgroup_of(pid: int, cap: CpuCap) -> bool:
    """Whether /proc says ``pid`` is in ``cap``'s cgroup."""
    text = Path(f"/proc/{pid}/cgroup").read_text()
    return any(line.endswith("/" + cap.path.name) for line in text.splitlines())


async def test_a_burner_and_its_children_are_held_to_the_quota() -> None:
    cap = real_cap()
    try:
        assert cap.quota_us == SHARE * CORES * PERIOD_US
        limits = Limits(move_cpu=1.0, move_wall=patience(60.0), match_cpu=5.0)
        bot = hosted_bot((ENTRIES / "burner.sh").read_bytes(), limits, cap)
        report = await play_match(bot, create("random"), random.Random(1))
        # the sandbox's own limit still ends it, children included
        assert report.failure is not None and report.failure.startswith("cpu: used"), report
        transport = bot.transport
        assert isinstance(transport, SandboxedProgram)
        used = transport.cpu()
        stat = cap.stat()
        # three children burn on one move: the kernel throttled them, and all they used is
        # within the quota of the periods they ran in (+1: the first period's full pool;
        # +0.05 s: /proc's times are in clock ticks, rounded per process)
        assert stat["nr_throttled"] > 0, stat
        assert used >= limits.move_cpu
        assert used <= cap.quota_us / 1e6 * (stat["nr_periods"] + 1) + 0.05, (used, stat)
        assert cap.pids() == []
    finally:
        cap.close()
    assert not cap.path.exists()


async def test_every_process_of_a_program_is_in_the_cgroup_from_the_start() -> None:
    cap = real_cap()
    program = SandboxedProgram(PARENT, Limits(move_wall=patience(20.0)), cap)
    try:
        await program.open()
        assert await program.send(b"moo 1\n", patience(20.0))
        assert await program.read_line(patience(20.0)) == b"ready parent\n"
        pids = program.pids()  # bubblewrap, the program and its sleeping child
        assert len(pids) >= 3
        assert set(pids) <= set(cap.pids())
        assert all(cgroup_of(pid, cap) for pid in pids)
        assert not cgroup_of(os.getpid(), cap)  # the worker itself is not capped
        if os.geteuid() == 0:  # the shell dropped to the session's own user id
            assert program.uid is not None and program.uid != 0
            assert all(os.stat(f"/proc/{pid}").st_uid == program.uid for pid in pids)
    finally:
        await program.kill()
        assert cap.pids() == []
        cap.close()
    assert not cap.path.exists()


async def test_close_kills_what_is_left_and_a_dead_workers_cgroup_is_removed() -> None:
    cap = real_cap()
    stale = cap.path.parent / f"{PREFIX}{dead_pid()}"
    cap.close()
    assert not cap.path.exists()
    # a worker that died (SIGKILL) left its cgroup, with a process still in it
    stale.mkdir()
    left = await asyncio.create_subprocess_exec("sleep", "1000")
    try:
        (stale / "cgroup.procs").write_text(f"{left.pid}\n")
        assert stale.is_dir()
        cap = real_cap()  # the next worker removes it, and kills what was in it
        try:
            assert not stale.exists()
            async with asyncio.timeout(patience(30.0)):
                assert await left.wait() == -9
        finally:
            cap.close()
    finally:
        if left.returncode is None:
            left.kill()
            await left.wait()


# -- on fake trees ------------------------------------------------------------------------------
def fake_tree(root: Path, mounts: list[str], own: str, files: dict[str, str]) -> None:
    """A fake ``/``: mountinfo lines (``POINT ROOT FSTYPE OPTIONS``), /proc/self/cgroup, and
    the cgroup files."""
    (root / "proc/self").mkdir(parents=True)
    lines = []
    for n, mount in enumerate(mounts):
        point, mroot, fstype, options = mount.split()
        lines.append(f"{30 + n} 25 0:{40 + n} {mroot} {point} rw,nosuid shared:{n} - {fstype} "
                     f"{fstype} {options}")
    (root / "proc/self/mountinfo").write_text("\n".join(lines) + "\n")
    (root / "proc/self/cgroup").write_text(own)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def test_v2_is_made_where_cpu_is_delegated_and_quota_written_to_cpu_max(tmp_path: Path) -> None:
    cg = "sys/fs/cgroup"
    fake_tree(tmp_path, ["/sys/fs/cgroup / cgroup2 rw,nsdelegate"],
              "0::/system.slice/moo.service\n",
              {f"{cg}/cgroup.controllers": "cpuset cpu io memory pids\n",
               f"{cg}/cgroup.subtree_control": "cpu memory pids\n",
               f"{cg}/system.slice/cgroup.controllers": "cpu memory pids\n",
               f"{cg}/system.slice/cgroup.subtree_control": "memory pids\n",
               f"{cg}/system.slice/moo.service/cgroup.controllers": "memory pids\n",
               f"{cg}/system.slice/moo.service/cgroup.subtree_control": "\n"})
    stale = tmp_path / cg / f"{PREFIX}{dead_pid()}"
    stale.mkdir()
    live = tmp_path / cg / f"{PREFIX}{os.getppid()}"
    live.mkdir()
    cap = open_cap(0.5, root=tmp_path, cores=2, pid=4242)
    assert cap.version == 2
    assert cap.path == tmp_path / cg / f"{PREFIX}4242"  # the root: the nearest with cpu
    assert (cap.path / "cpu.max").read_text() == "100000 100000\n"
    assert cap.cores == 1.0
    assert not stale.exists() and live.is_dir()  # a live worker's cgroup is left alone
    argv = cap.wrap(["prlimit", "--", "bwrap"], 2_000_000_123)
    assert argv[1:4] == ["-c", JOIN, str(cap.path / "cgroup.procs")]
    assert argv[4:] == [cap.setpriv, "--reuid=2000000123", "--regid=2000000123",
                        "--clear-groups", "--", "prlimit", "--", "bwrap"]
    assert cap.wrap(["bwrap"], None)[4:] == ["bwrap"]


def test_v2_enables_cpu_where_it_is_offered(tmp_path: Path) -> None:
    cg = "sys/fs/cgroup"
    fake_tree(tmp_path, ["/sys/fs/cgroup / cgroup2 rw"], "0::/\n",
              {f"{cg}/cgroup.controllers": "cpu memory\n", f"{cg}/cgroup.subtree_control": ""})
    cap = open_cap(0.25, root=tmp_path, cores=2, pid=4242)
    assert (tmp_path / cg / "cgroup.subtree_control").read_text() == "+cpu\n"
    assert (cap.path / "cpu.max").read_text() == "50000 100000\n"


def test_v1_is_made_in_the_own_cpu_cgroup(tmp_path: Path) -> None:
    cpu = "sys/fs/cgroup/cpu,cpuacct"
    fake_tree(tmp_path, ["/sys/fs/cgroup/unified / cgroup2 rw",
                         "/sys/fs/cgroup/memory /docker/abc cgroup rw,memory",
                         "/sys/fs/cgroup/cpu,cpuacct /docker/abc cgroup rw,cpu,cpuacct"],
              "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc/jobs\n0::/\n",
              {"sys/fs/cgroup/unified/cgroup.controllers": "\n",
               f"{cpu}/jobs/cpu.cfs_quota_us": "-1\n"})
    cap = open_cap(0.5, root=tmp_path, cores=4, pid=4242)
    assert (cap.version, cap.path) == (1, tmp_path / cpu / "jobs" / f"{PREFIX}4242")
    assert (cap.path / "cpu.cfs_period_us").read_text() == f"{PERIOD_US}\n"
    assert (cap.path / "cpu.cfs_quota_us").read_text() == "200000\n"
    assert "cpu.cfs_quota_us: 200000 us per 100000 us" in cap.describe()


def test_a_worker_without_a_controller_says_so_once_and_runs_uncapped(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # this machine's own layout, read-only: a cgroup v2 mount with no controller and v1
    # hierarchies without cpu
    fake_tree(tmp_path, ["/sys/fs/cgroup/unified / cgroup2 rw",
                         "/sys/fs/cgroup/memory / cgroup rw,memory",
                         "/sys/fs/cgroup/cpuset / cgroup rw,cpuset"],
              "4:memory:/\n3:cpuset:/\n0::/\n",
              {"sys/fs/cgroup/unified/cgroup.controllers": "\n"})
    with caplog.at_level(logging.INFO, logger="moo.worker"):
        assert start_cap(0.5, root=tmp_path) is None
    lines = [r.getMessage() for r in caplog.records if r.name == "moo.worker"]
    assert lines == [
        "worker: no CPU cap for hosted bots (cgroup v2 at "
        f"{tmp_path}/sys/fs/cgroup/unified offers no cpu controller (cgroup.controllers: "
        "empty); no cgroup v1 cpu hierarchy); they run at this worker's niceness with their "
        "own limits only"]
    assert caplog.records[-1].levelno == logging.WARNING
    assert start_cap(None, root=tmp_path) is None  # no share asked: nothing said


def test_a_cgroup_that_cannot_be_made_is_no_controller(tmp_path: Path) -> None:
    cpu = tmp_path / "sys/fs/cgroup/cpu"
    fake_tree(tmp_path, ["/sys/fs/cgroup/cpu / cgroup ro,cpu"], "1:cpu:/gone\n", {})
    cpu.mkdir(parents=True)
    with pytest.raises(NoController, match=f"cgroup v1: cannot make {cpu}/gone/{PREFIX}42: "):
        open_cap(0.5, root=tmp_path, pid=42)
    assert list(cpu.iterdir()) == []
