"""Every command answers every mistake in one or two lines and the right exit status, never a
traceback: 2 for a usage mistake (what the command line says cannot be done), 1 for a failure
at run time (a server that is not there, a bot program that crashes or answers garbage).

Each case runs the real ``moo`` console command in a subprocess, as a person would. The ``cmd:``
bots are the four ways a program can be wrong: missing, not executable, crashing, printing
garbage; each is tried in ``moo tournament`` both ``--local`` and ``--url`` (a server this module
starts), and in the other commands that load a strategy.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli_errors import MOO
from tests.client_support import client_env, moo_serve

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

#: a port nothing listens on (the discard port; loopback only)
NOBODY = "ws://127.0.0.1:9/"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The current folder of every case: the broken bot programs live here."""
    where = tmp_path_factory.mktemp("mistakes")
    programs = {
        # exits before the handshake
        "dies.sh": "#!/bin/sh\nexit 3\n",
        # answers the handshake with garbage
        "garbage.sh": "#!/bin/sh\nread hello\necho 'Good morning!'\n",
        # plays the handshake, then crashes at its first guess
        "crashy.sh": "#!/bin/sh\nread hello\necho ready crashy\nread new\nread guess\nexit 4\n",
    }
    for name, text in programs.items():
        path = where / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    (where / "noexec.sh").write_text("#!/bin/sh\necho ready\n")
    return where


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with moo_serve(tmp_path_factory.mktemp("server")) as found:
        yield found


def moo(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = client_env(folder)
    env.pop("MOO_TRACEBACK", None)
    return subprocess.run([*MOO, *args], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=180)


def check(done: subprocess.CompletedProcess[str], status: int, says: str) -> str:
    """The mistake is told in one or two lines of stderr naming ``says``, with ``status``."""
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2, done.stderr
    assert says in done.stderr, done.stderr
    assert done.returncode == status, (done.returncode, done.stderr)
    return lines[0]


USAGE = [
    (["nosuch"], "invalid choice: 'nosuch'"),
    (["eval", "minimum", "--samples", "-5"], "--samples must be at least 1, got -5"),
    (["eval", "nosuch"], "unknown strategy 'nosuch'"),
    (["eval", "minimum", "--vs", "mypkg.nomod:Bot"], "mypkg.nomod:Bot"),
    (["eval", "cmd:./missing"], "no such program './missing'"),
    (["eval", "minimum", "--seed", "x"], "argument --seed: invalid int value: 'x'"),
    (["tournament", "minimum", "random", "--rounds", "0"], "--rounds must be at least 1"),
    (["tournament", "minimum", "random", "--concurrency", "0"],
     "--concurrency must be at least 1, got 0"),
    (["tournament", "minimum", "random", "first", "--sprt", "0,20"],
     "--sprt compares exactly two bots"),
    (["tournament", "minimum", "random", "--sprt", "20,0"], "--sprt needs elo0 < elo1"),
    (["tournament", "minimum", "random", "--client-rate", "0"], "--client-rate must be above 0"),
    (["tournament", "minimum", "random", "--resume"], "--resume needs --out FILE"),
    (["tournament", "minimum", "--local"], "a tournament needs at least two bots"),
    (["tournament", "minimum", "random", "--rules", "moo:9"], "length must be 3-6"),
    (["tournament", "minimum", "random", "--url", "localhost:8765"], "not a WebSocket URL"),
    (["bot", "minimum", "--games", "0"], "--games and --concurrency must be at least 1"),
    (["bot", "minimum", "--move-timeout", "0"], "--move-timeout must be positive"),
    (["bot", "nosuch"], "unknown strategy 'nosuch'"),
    (["bot"], "name a STRATEGY or give --cmd PROGRAM"),
    (["play", "--rules", "moo:9"], "length must be 3-6"),
    (["play", "--password-file", "nothere.txt", "--bot", "minimum", "--url", NOBODY],
     "cannot read --password-file nothere.txt"),
    (["solve", "minimum", "--jobs", "0"], "--jobs must be at least 1"),
    (["solve", "minimum", "--cell", "zz"], "not a response: 'zz'"),
    (["strategy", "dump", "nosuch"], "unknown strategy 'nosuch'"),
    (["strategy"], "the following arguments are required"),
    (["report", "nosuch", "--only", "--out", "r"], "unknown strategy 'nosuch'"),
    (["report", "--player", "ann"], "--games and --player go together"),
    (["serve", "--port", "-1"], "port must be 0-65535"),
    (["db"], "the following arguments are required"),
    (["watch", "--mqtt", "http://x"], "an MQTT URL starts with mqtt://"),
    (["export", "--db", "x.sqlite3"], "the following arguments are required: --out"),
    (["analyse", "nothere.json"], "no such file: nothere.json"),
    (["potm", "./nothere.sh", "--length", "5"], "one of the arguments"),
]


@pytest.mark.parametrize(("args", "says"), USAGE, ids=[" ".join(a) for a, _ in USAGE])
def test_a_usage_mistake_is_one_line_and_status_2(folder: Path, args: list[str],
                                                  says: str) -> None:
    line = check(moo(folder, *args), 2, says)
    assert line.startswith(f"moo {args[0]}" if args[0] != "nosuch" else "moo: "), line
    assert not (folder / "r").exists()  # a refused command wrote nothing


RUN_TIME = [
    (["bot", "minimum", "--url", NOBODY], "cannot connect to ws://127.0.0.1:9/"),
    (["play", "--bot", "minimum", "--url", NOBODY], "moo play: cannot reach"),
    (["analyse", "m0123456789", "--url", NOBODY], "cannot reach the server"),
    (["export", "--db", "nothere.sqlite3", "--out", "x.jsonl"], "no database at"),
    (["watch", "--mqtt", "mqtt://127.0.0.1:9"], "cannot reach the MQTT broker"),
]


@pytest.mark.parametrize(("args", "says"), RUN_TIME, ids=[" ".join(a) for a, _ in RUN_TIME])
def test_a_failure_at_run_time_is_one_line_and_status_1(folder: Path, args: list[str],
                                                        says: str) -> None:
    check(moo(folder, *args), 1, says)


BROKEN = [
    ("cmd:./missing.sh", 2, "'cmd:./missing.sh': no such program './missing.sh'"),
    ("cmd:./noexec.sh", 2, "'cmd:./noexec.sh': './noexec.sh' is not executable "
                            "(chmod +x ./noexec.sh)"),
    ("cmd:./dies.sh", 1, "cmd:./dies.sh cannot play: crash: the program exited (code 3) "
                         "before the ready handshake"),
    ("cmd:./garbage.sh", 1, "cmd:./garbage.sh cannot play: garbage: expected 'ready', got "
                            "'Good morning!'"),
]


@pytest.mark.parametrize("where", ["--local", "--url"])
@pytest.mark.parametrize(("spec", "status", "says"), BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_bot_program_stops_a_tournament_before_it_starts(
    folder: Path, url: str, where: str, spec: str, status: int, says: str
) -> None:
    out = folder / f"r-{where[2:]}-{spec[6:]}.jsonl"
    done = moo(folder, "tournament", "minimum", spec, *([where] if where == "--local" else
                                                         [where, url]),
               "--rounds", "1", "--out", str(out))
    assert check(done, status, says) == f"moo tournament: {says}"
    assert not out.exists()  # nothing was played


@pytest.mark.parametrize("where", ["--local", "--url"])
def test_a_bot_that_crashes_mid_match_forfeits_with_one_line(folder: Path, url: str,
                                                             where: str) -> None:
    done = moo(folder, "tournament", "minimum", "cmd:./crashy.sh", "--rounds", "2",
               *([where] if where == "--local" else [where, url]))
    first = check(done, 0, "forfeited 4 matches")
    assert first.startswith("moo tournament: cmd:./crashy.sh: crash: the program exited "
                            "(code 4) before 'guess' (it forfeits the match "), first
    assert "minimum " in done.stdout and "4     4     0     0" in done.stdout


@pytest.mark.parametrize("spec", ["cmd:./missing.sh", "cmd:./noexec.sh"])
@pytest.mark.parametrize("command", [["eval"], ["report", "--only", "--out", "r"],
                                     ["strategy", "dump"]])
def test_every_command_that_loads_a_strategy_names_a_missing_program(
    folder: Path, command: list[str], spec: str
) -> None:
    done = moo(folder, command[0], *(command[1:2] if command[0] == "strategy" else []), spec,
               *(command[1:] if command[0] == "report" else []))
    check(done, 2, f"'{spec}': ")


def test_resume_refuses_a_file_written_for_other_bots_or_rules(folder: Path) -> None:
    out = folder / "theirs.jsonl"
    assert moo(folder, "tournament", "first", "random", "--rounds", "1", "--out",
               str(out)).returncode == 0
    before = out.read_bytes()
    other_bots = moo(folder, "tournament", "minimum", "random", "--rounds", "1", "--out",
                     str(out), "--resume")
    check(other_bots, 2, f"{out} was written for bots first, random, not minimum, random")
    other_rules = moo(folder, "tournament", "first", "random", "--rounds", "1", "--out",
                      str(out), "--resume", "--rules", "moo:5")
    check(other_rules, 2, f"{out} was written for rules moo:4:0123456789, not moo:5:")
    assert out.read_bytes() == before


def test_moo_help_lists_every_command_with_one_line(folder: Path) -> None:
    from cli.main import COMMANDS

    done = moo(folder, "--help")
    assert done.returncode == 0
    listed = {line.split()[0]: line for line in done.stdout.splitlines()
              if line.startswith("  ") and line.split()[0] in COMMANDS}
    assert set(listed) == set(COMMANDS)
    for name, (_, text) in COMMANDS.items():
        assert listed[name].split(None, 1)[1] == text
        assert os.linesep not in text


def test_the_bot_says_at_once_that_it_waits_and_how_to_get_an_opponent(
    folder: Path, url: str
) -> None:
    """The first line on stderr, before any wait, names --vs-bot; ``--wait 1`` ends it."""
    done = moo(folder, "bot", "minimum", "--url", url, "--name", "early", "--wait", "1")
    first = done.stderr.splitlines()[0]
    assert first.startswith("early: queued in pool 'any'") and "--vs-bot minimum" in first
    assert done.returncode == 1 and "Traceback" not in done.stderr
