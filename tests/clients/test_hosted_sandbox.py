"""Hosted bots (clients/hosted): a submitted program in the sandbox for a whole match.

Hostile submissions are in tests/hosted_entries/ (each says in its header what it tries).
Each test asserts the reason the match is lost, what the entry gained (nothing) and that no
process of it is left; where the channel exists outside the sandbox, the same entry run
unconfined (a plain :class:`bots.external.ExternalBot`) does get through, so the test can fail.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from bots.external import BotFailure, ExternalBot
from bots.registry import create
from clients.hosted.compliance import check_file, check_submission
from clients.hosted.program import MatchReport, hosted_bot, play_match
from clients.hosted.sandbox import ENV, ETC_KEPT, Limits, SandboxedProgram, live_pids_of_user
from tests.cli.test_cli_errors import MOO
from tests.client_support import client_env
from tests.patience import patience

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent
REPO = HERE.parents[1]
ENTRIES = HERE.parent / "hosted_entries"
SH_EXAMPLE = REPO / "examples" / "bots" / "first_consistent.sh"
AS_ROOT = os.geteuid() == 0
#: Small limits keep hostile entries cheap on a shared machine. Wall-clock limits are far above
#: what a move needs (they are safety nets, grown with the load), except where the test is
#: about a program that never answers.
FAST = Limits(move_cpu=0.5, move_wall=patience(20.0), match_cpu=5.0, match_output=64 << 10,
              memory_mb=256, processes=8, disk_mb=4)


def entry(name: str, **fill: str) -> bytes:
    """The entry's bytes, with its ``"@NAME@"`` placeholders filled in."""
    text = (ENTRIES / name).read_text()
    for key, value in fill.items():
        text = text.replace(f'"@{key}@"', value)
    return text.encode()


def left_behind(bot: ExternalBot) -> list[int]:
    """Processes of the bot's last sandbox that still exist (zombies included)."""
    transport = bot.transport
    assert isinstance(transport, SandboxedProgram)
    alive = [pid for pid in transport.seen if os.path.exists(f"/proc/{pid}")]
    if AS_ROOT:  # its own user id: anything of it, seen or not
        assert transport.uid is not None and transport.uid != 0
        alive += live_pids_of_user(transport.uid)
    return alive


async def play(program: bytes, limits: Limits = FAST, seed: int = 1) -> tuple[MatchReport,
                                                                              ExternalBot]:
    bot = hosted_bot(program, limits)
    report = await play_match(bot, create("random"), random.Random(seed))
    return report, bot


# -- compliance --------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [ENTRIES / "consistent.py", SH_EXAMPLE],
                         ids=["python3", "sh+awk"])
async def test_a_compliant_program_is_accepted(path):
    verdict = await check_submission(path.read_bytes(), limits=FAST, rng=random.Random(3))
    assert verdict.accepted, verdict.reason
    assert verdict.reason == ""
    assert verdict.name in ("consistent-py", "first-consistent-awk")
    assert len(verdict.games) == 3
    for game in verdict.games:
        assert game.failure is None
        assert game.reason in ("solved", "guess_cap")
        assert game.guesses and game.guesses[-1]  # it played legal guesses to the end


@pytest.mark.parametrize(
    ("program", "words"),
    [
        (b"", "the file is empty"),
        (b"#!/bin/sh\n" + b"#" * 200, "the file has 210 bytes; the limit is 100"),
        (b"print('ready')\n", "neither a script starting with #! nor a Linux binary"),
        (b"#!\n", "names no interpreter"),
        (b"#!/usr/bin/no-such-interpreter\n", "no interpreter '/usr/bin/no-such-interpreter'"),
        (b"#!/usr/bin/env no-such-interpreter\n", "no interpreter 'no-such-interpreter'"),
        (b"#!/usr/bin/env\n", "runs env without a program"),
        (b"#!/work/bin/python3\n", "no interpreter '/work/bin/python3'"),
    ],
    ids=["empty", "too-big", "no-hashbang", "blank-hashbang", "unknown", "env-unknown",
         "env-alone", "outside"],
)
async def test_a_file_that_cannot_run_is_refused_before_it_runs(program, words):
    assert words in (check_file(program, max_bytes=100) or "")
    verdict = await check_submission(program, max_bytes=100)
    assert not verdict.accepted and words in verdict.reason and verdict.games == []


@pytest.mark.parametrize(
    ("program", "words"),
    [
        (b"#!/bin/sh\nread line\necho hello\n", "garbage: expected 'ready', got 'hello'"),
        (b"#!/bin/sh\nexit 3\n", "crash: the program exited (code 3) before the ready handshake"),
        (b"#!/bin/sh\necho 'ready x'\nwhile read w r; do [ $w = guess ] && echo 01; done\n",
         "garbage: '01' is not a legal guess"),
        (b"#!/usr/bin/python3\nimport sys\nprint('ready', flush=True)\nsys.stdin.readline()\n"
         b"raise SystemExit('I give up')\n", "its last error line: 'I give up'"),
        (b"#!/usr/bin/python3\nimport ctypes, sys\nprint('ready', flush=True)\n"
         b"for line in sys.stdin:\n    if line.startswith('guess'): ctypes.string_at(0)\n",
         "crash: the program exited (signal 11 (SIGSEGV)) before 'guess'"),
    ],
    ids=["no-ready", "exits", "illegal-guess", "stderr-quoted", "segfault"],
)
async def test_a_broken_program_is_refused_with_the_reason(program, words):
    verdict = await check_submission(program, limits=FAST)
    assert not verdict.accepted
    assert verdict.reason.startswith("game 1 of 3 against random: ")
    assert words in verdict.reason


async def test_a_linux_binary_runs_without_an_interpreter():
    # /usr/bin/true is an ELF program: it starts (no #! needed) and exits without 'ready'
    program = Path("/usr/bin/true").read_bytes()
    assert check_file(program, max_bytes=1 << 30) is None
    verdict = await check_submission(program, limits=FAST, max_bytes=1 << 30)
    assert not verdict.accepted
    assert "crash: the program exited (code 0) before the ready handshake" in verdict.reason


@pytest.mark.parametrize("field", ["move_cpu", "move_wall", "match_cpu", "match_output",
                                   "memory_mb", "processes", "disk_mb", "open_files"])
def test_limits_must_be_positive(field):
    with pytest.raises(ValueError, match=field):
        Limits(**{field: 0})


async def test_a_large_program_is_copied_in_whole():
    # a script of 1 MiB (its size limit): the sandbox's copy must hold every byte of it
    tail = b"#" * ((1 << 20) - 200) + b"\nprint('ready whole', flush=True)\n"
    program = b"#!/usr/bin/python3\n" + tail
    assert len(program) <= 1 << 20
    verdict = await check_submission(program, limits=FAST, games=1)
    assert verdict.name == "whole"  # its last line ran


# -- hostile entries ---------------------------------------------------------------------------
async def test_fork_bomb_loses_on_the_process_limit():
    limits = Limits(move_cpu=30.0, move_wall=patience(2.0), match_cpu=60.0, processes=8)
    report, bot = await play(entry("forkbomb.sh"), limits)
    assert report.outcome == "loss" and report.reason == "resign"
    assert report.failure is not None and report.failure.startswith("processes: process limit "
                                                                    "(8) reached")
    assert "Cannot fork" in report.stderr
    assert left_behind(bot) == []


async def test_cpu_burner_is_charged_for_its_children():
    report, bot = await play(entry("burner.sh"))
    assert report.failure is not None
    assert report.failure.startswith("cpu: used ")
    assert "of CPU on one move, children included (limit 0.5 s)" in report.failure
    assert left_behind(bot) == []


async def test_the_match_cpu_total_is_charged_across_moves():
    # each answer burns 0.15 s (under the move limit of 0.5 s); the match allows 0.6 s
    program = (b"#!/usr/bin/python3\nimport sys, time\n"
               b"for line in sys.stdin:\n"
               b"    if line.startswith('moo'): print('ready', flush=True)\n"
               b"    elif line.startswith('guess'):\n"
               b"        t = time.process_time()\n"
               b"        while time.process_time() - t < 0.15: pass\n"
               b"        print('0123', flush=True)\n")
    limits = Limits(move_cpu=0.5, move_wall=patience(20.0), match_cpu=0.6)
    report, bot = await play(program, limits)
    assert report.failure is not None
    assert report.failure.startswith("cpu: used ")
    assert "of CPU in the match, children included (limit 0.6 s)" in report.failure
    assert 3 <= len(report.guesses) <= 5
    assert left_behind(bot) == []


async def test_memory_hog_loses_on_the_memory_limit():
    report, bot = await play(entry("hog.py"))
    assert report.failure is not None
    assert report.failure.startswith("memory: memory limit (256 MiB per process) reached; "
                                     "the program exited (code 1)")
    assert "MemoryError" in report.stderr
    assert left_behind(bot) == []


async def test_a_herd_of_processes_is_charged_its_memory_together():
    # six children of 48 MiB each: every one under the limit of 128 MiB, together far over
    limits = Limits(move_cpu=30.0, move_wall=patience(20.0), match_cpu=60.0, memory_mb=128,
                    processes=8)
    report, bot = await play(entry("herd.py"), limits)
    assert report.failure is not None
    assert report.failure.startswith("memory: its processes together used ")
    assert report.failure.endswith(" MiB of memory (limit 128 MiB)")
    used = int(report.failure.split(" used ")[1].split()[0])
    assert 128 < used < 6 * 48 + 64
    assert left_behind(bot) == []


async def test_a_program_that_never_answers_times_out():
    limits = Limits(move_wall=patience(2.0))
    report, bot = await play(entry("sleeper.sh"), limits)
    assert report.failure == f"timeout: no answer to 'guess' within {limits.move_wall:g} s"
    assert left_behind(bot) == []


async def test_100_mb_of_output_stops_at_the_output_limit():
    # 100 comment lines are 6 kB of it: a 4 kB output limit stops it first
    limits = Limits(move_cpu=0.5, move_wall=patience(20.0), match_output=4096)
    report, bot = await play(entry("flood.sh"), limits)
    assert report.failure == ("output: more than 4096 bytes of output in one match "
                              "(output limit)")
    assert left_behind(bot) == []


async def test_nothing_outlives_its_match():
    program = entry("orphan.py")
    session = SandboxedProgram(program, FAST)
    await session.open()
    try:
        assert await session.send(b"moo 1\n", FAST.move_wall)
        assert await session.read_line(FAST.move_wall) == b"ready orphan\n"
        # bubblewrap, the program and its daemon (the intermediate child has exited)
        during = session.pids()
        assert len(during) == 3
    finally:
        await session.close()
    assert [pid for pid in during if os.path.exists(f"/proc/{pid}")] == []
    if AS_ROOT:
        assert session.uid is not None and live_pids_of_user(session.uid) == []
    # and a whole match of it: played legally, then nothing left
    report, bot = await play(program)
    assert report.failure is None and len(report.guesses) >= 1
    assert left_behind(bot) == []


def _host_address() -> str:
    """An address of this machine other than loopback (where a route to elsewhere leaves)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # TEST-NET: nothing is sent
        address = s.getsockname()[0]
    assert not address.startswith("127."), address
    return str(address)


async def test_network_probes_reach_nothing():
    seen: list[str] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(str(writer.get_extra_info("peername")))
        writer.close()

    server = await asyncio.start_server(on_connect, "0.0.0.0", 0)
    port = server.sockets[0].getsockname()[1]
    datagrams: list[bytes] = []
    two_datagrams = asyncio.Event()

    class Listener(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr: object) -> None:
            datagrams.append(data)
            if len(datagrams) >= 2:
                two_datagrams.set()

    udp, _ = await asyncio.get_running_loop().create_datagram_endpoint(
        Listener, local_addr=("0.0.0.0", port))
    host = _host_address()
    targets = [f"127.0.0.1:{port}", f"{host}:{port}", "127.0.0.1:5432", f"{host}:5432"]
    program = entry("netprobe.py", TARGETS=", ".join(json.dumps(t) for t in targets))
    try:
        report, bot = await play(program)
        assert report.failure is not None
        assert report.failure.startswith("garbage: 'net closed' is not a legal guess")
        for target in targets:
            assert f"probe {target} tcp closed (" in report.stderr
        assert seen == [] and datagrams == []
        assert left_behind(bot) == []
        # the same program unconfined reaches the listener: the probe itself works
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"netprobe-{uuid.uuid4().hex}.py"
        path.write_bytes(program)
        path.chmod(0o755)
        try:
            free = ExternalBot([str(path)], move_timeout=patience(20.0),
                               stderr=subprocess.DEVNULL)
            free_report = await play_match(free, create("random"), random.Random(1))
        finally:
            path.unlink()
        assert free_report.failure is not None and "'net OPEN'" in free_report.failure
        assert len(seen) >= 2  # loopback and the host's address
        await asyncio.wait_for(two_datagrams.wait(), patience(10.0))  # loopback, host address
    finally:
        udp.close()
        server.close()
        await server.wait_closed()


async def test_a_spy_reads_nothing_of_the_host(tmp_path):
    marker = f"HOSTED-SECRET-{uuid.uuid4().hex}"
    other = tmp_path / "bots" / "other-bot.py"
    other.parent.mkdir()
    other.write_text(f"#!/usr/bin/env python3\n# {marker}\n")
    db = tmp_path / "arena.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("create table secrets (word text)")
        conn.execute("insert into secrets values (?)", (marker,))
    (REPO / "pyproject.toml").read_text()  # the checkout is there to be read
    paths = [str(other), str(other.parent), str(db), str(REPO), str(REPO / "pyproject.toml"),
             "/var/lib/postgresql", f"/proc/{os.getpid()}/environ"]
    program = entry("spy.py", PATHS=", ".join(json.dumps(p) for p in paths),
                    MARKER=json.dumps(marker))
    # a host process that carries the marker in its command line and environment
    victim = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", marker],
                              stdin=subprocess.PIPE, env={**os.environ, "SECRET": marker})
    try:
        report, bot = await play(program)
        assert report.failure is not None
        assert report.failure.startswith("garbage: 'seen 0' is not a legal guess")
        for path in paths:
            assert f"no {path}\n" in report.stderr
        assert "pids 1\n" in report.stderr  # its own PID namespace: itself only
        assert left_behind(bot) == []
        # unconfined, the same spy finds the marker (files, the victim's /proc entries)
        spy = tmp_path / "spy.py"
        spy.write_bytes(program)
        spy.chmod(0o755)
        free = ExternalBot([str(spy)], move_timeout=patience(20.0), stderr=subprocess.DEVNULL)
        free_report = await play_match(free, create("random"), random.Random(1))
        assert free_report.failure is not None
        assert "'seen 0'" not in free_report.failure and "'seen " in free_report.failure
    finally:
        assert victim.stdin is not None
        victim.stdin.close()
        victim.wait()


# -- what the program sees ---------------------------------------------------------------------
LOOK = b"""#!/usr/bin/python3
import json, os, socket
def writable(path):
    try:
        with open(os.path.join(path, "probe"), "w") as f:
            f.write("x")
        return True
    except OSError:
        return False
def fill():
    try:
        with open("/tmp/big", "wb") as f:
            for _ in range(64):
                f.write(b"x" * (1 << 20))
        return "filled"
    except OSError as exc:
        return exc.__class__.__name__
seen = {"root": sorted(os.listdir("/")), "env": dict(os.environ),
        "pids": os.listdir("/proc"), "cwd": os.getcwd(),
        "hostname": socket.gethostname(), "fds": sorted(os.listdir("/proc/self/fd")),
        "usr": writable("/usr"), "bot": writable("/bot"), "tmp": writable("/tmp"),
        "fill": fill(), "share": sorted(os.listdir("/usr/share")),
        "etc": sorted(os.listdir("/etc")), "etc_writable": writable("/etc")}
for key, value in seen.items():  # a line each: a line may have at most 1024 bytes
    print(json.dumps([key, value]), flush=True)
print(json.dumps(["end", None]), flush=True)
"""


async def test_a_program_already_seen_to_exit_fails_with_its_status():
    """A send after the exit was noticed (a loaded machine may report the exit before the
    write's broken pipe) names the exit status as the broken pipe does: it said only "the
    program is not running" (seen once beside two busy loops, stop 51, in test_exact)."""
    session = SandboxedProgram(b"#!/bin/sh\nexit 3\n", FAST)
    await session.open()
    try:
        assert await session.exit_status() == "code 3"  # (waits for the exit to be seen)
        with pytest.raises(BotFailure) as failed:
            await session.send(b"guess\n", FAST.move_wall)
        assert failed.value.reason == "crash"
        assert failed.value.detail == "the program exited (code 3) before reading 'guess'"
    finally:
        await session.close()


async def test_the_program_sees_only_its_sandbox():
    session = SandboxedProgram(LOOK, FAST)
    await session.open()
    seen: dict[str, Any] = {}
    try:
        while "end" not in seen:
            line = await session.read_line(FAST.move_wall)
            assert line, seen
            key, value = json.loads(line)
            seen[key] = value
    finally:
        await session.close()
    assert set(seen["root"]) <= {"bin", "lib", "lib32", "lib64", "libx32", "sbin", "usr",
                                 "etc", "proc", "dev", "tmp", "bot"}
    assert seen["env"] == ENV
    assert [p for p in seen["pids"] if p.isdigit()] == ["1"]
    assert seen["cwd"] == "/tmp" and seen["hostname"] == "bot"
    assert seen["fds"] == ["0", "1", "2", "3"]  # stdin, stdout, stderr; 3: the listing itself
    assert (seen["usr"], seen["etc_writable"], seen["bot"], seen["tmp"]) == (False, False, False,
                                                                             True)
    # of /etc only what loaders and interpreters read: no settings, no secrets
    assert seen["etc"] and all(any(fnmatch.fnmatch(name, p) for p in ETC_KEPT)
                               for name in seen["etc"])
    assert "shadow" not in seen["etc"] and "hostname" not in seen["etc"]
    assert seen["fill"] == "OSError"  # a 4 MiB /tmp: no room for 64 MiB
    assert "dict" not in seen["share"]
    assert session.running is False


# -- moo ladder check --------------------------------------------------------------------------
def _moo(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = client_env(folder)
    env.pop("MOO_TRACEBACK", None)
    return subprocess.run([*MOO, *args], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=patience(120.0))


def test_moo_ladder_check_accepts_and_refuses(tmp_path):
    done = _moo(tmp_path, "ladder", "check", str(ENTRIES / "consistent.py"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("accepted: consistent-py (3 games against random: ")
    assert done.stderr == ""
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/sh\nread hello\necho hello\n")
    done = _moo(tmp_path, "ladder", "check", str(bad))
    assert done.returncode == 1
    assert done.stdout == ("refused: game 1 of 3 against random: garbage: expected 'ready', "
                           "got 'hello'\n")
    crash = tmp_path / "crash.py"
    crash.write_text("#!/usr/bin/env python3\nimport sys\nprint('oops', file=sys.stderr)\n"
                     "sys.exit(5)\n")
    done = _moo(tmp_path, "ladder", "check", str(crash), "--json", "--games", "1")
    assert done.returncode == 1
    verdict = json.loads(done.stdout)
    assert verdict["accepted"] is False and verdict["name"] == "program"
    assert verdict["reason"].startswith("game 1 of 1 against random: crash: the program exited "
                                        "(code 5)")
    assert [g["stderr"] for g in verdict["games"]] == ["oops\n"]
    big = tmp_path / "big.sh"
    big.write_bytes(b"#!/bin/sh\n" + b"#" * (1 << 20))
    done = _moo(tmp_path, "ladder", "check", str(big))
    assert (done.returncode, done.stdout) == (1, f"refused: the file has {(1 << 20) + 10} "
                                                 "bytes; the limit is 1048576\n")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ((), "moo ladder: name an action: check, submit, mine, pause, resume, withdraw, show, log"
             " (docs/ladder.md)"),
        (("frobnicate",), "moo ladder: unknown action 'frobnicate': the actions are check, "
                          "submit, mine, pause, resume, withdraw, show, log (docs/ladder.md)"),
        (("check", "nope.py"), "moo ladder check: no such file: nope.py"),
        (("check", "."), "moo ladder check: no such file: ."),
        (("check", "x", "--games", "0"), "moo ladder check: --games must be 1-100, got 0"),
        (("check",), "moo ladder check: the following arguments are required: FILE"),
    ],
    ids=["no-action", "unknown-action", "missing", "directory", "games", "no-file"],
)
def test_moo_ladder_mistakes_are_one_line(tmp_path, args, line):
    done = _moo(tmp_path, "ladder", *args)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(line)


async def test_hostile_bots_do_not_disturb_a_match_played_beside_them():
    # one event loop, four sandboxes at once: the compliant bot's match is played in full
    # while the others burn CPU, fork, flood and sleep, each stopped for its own reason
    sleepy = Limits(move_cpu=0.5, move_wall=patience(3.0), match_cpu=5.0, processes=8)
    results = await asyncio.gather(
        play(entry("consistent.py")), play(entry("burner.sh")), play(entry("forkbomb.sh"),
                                                                     sleepy),
        play(entry("flood.sh"), Limits(move_wall=patience(20.0), match_output=4096)))
    (good, _), (burner, _), (bomb, _), (flood, _) = results
    assert good.failure is None and good.reason in ("solved", "guess_cap")
    assert burner.failure is not None and burner.failure.startswith("cpu: ")
    assert bomb.failure is not None and bomb.failure.startswith("processes: ")
    assert flood.failure is not None and flood.failure.startswith("output: ")
    for _, bot in results:
        assert left_behind(bot) == []
