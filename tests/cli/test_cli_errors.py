"""A person's mistake on the command line is one clear line and a non-zero status, never a
traceback, and changes nothing; checked on the real ``moo`` console command in subprocesses.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from server.cli import Footprint, ServeError, check_db
from tests.client_support import client_env, moo_serve

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

_SCRIPT = Path(sys.executable).with_name("moo")
#: the installed console script when there is one (what people run), else the same entry point
MOO = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli"]


def moo(tmp_path: Path, *args: str, cwd: Path | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MOO, *args], cwd=cwd or tmp_path, env=client_env(tmp_path),
                          capture_output=True, text=True, timeout=timeout)


def one_line(done: subprocess.CompletedProcess[str], command: str) -> str:
    """The failure's whole stderr: exactly one line, starting with the command's name."""
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"moo {command}: "), lines[0]
    return lines[0]


def entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


# -- --url of bot, play, tournament ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "meant"),
    [("localhost:8765", "ws://localhost:8765/"), ("http://127.0.0.1:8765/", "ws://127.0.0.1:8765/"),
     ("https://arena.example/moo", "wss://arena.example/moo")],
)
@pytest.mark.parametrize(
    "command", [["bot", "minimum"], ["play", "--bot", "minimum"],
                ["tournament", "minimum", "first", "--rounds", "1"]],
)
def test_a_url_that_is_not_websocket_is_one_line(tmp_path: Path, command: list[str], url: str,
                                                 meant: str) -> None:
    done = moo(tmp_path, *command, "--url", url)
    line = one_line(done, command[0])
    assert done.returncode == 2
    assert f"{url!r} is not a WebSocket URL" in line and f"did you mean {meant}?" in line


# -- moo serve ------------------------------------------------------------------------------------


def test_serve_refuses_a_bogus_log_level(tmp_path: Path) -> None:
    line = one_line(moo(tmp_path, "serve", "--port", "0", "--log-level", "bogus"), "serve")
    assert "'bogus'" in line and "DEBUG, INFO, WARNING, ERROR" in line
    assert entries(tmp_path) == set()  # no var/, no database


def test_serve_refuses_an_mqtt_url_that_is_not_mqtt(tmp_path: Path) -> None:
    line = one_line(moo(tmp_path, "serve", "--port", "0", "--mqtt", "http://x"), "serve")
    assert "mqtt://" in line and "'http://x'" in line
    assert entries(tmp_path) == set()


def test_serve_refuses_a_db_whose_folder_is_missing_and_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "no" / "such" / "x.sqlite3"
    line = one_line(moo(tmp_path, "serve", "--port", "0", "--db", str(db)), "serve")
    assert f"directory {db.parent} does not exist ({tmp_path / 'no'} is missing)" in line
    assert entries(tmp_path) == set()


def test_serve_refuses_a_directory_as_db(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    line = one_line(moo(tmp_path, "serve", "--port", "0", "--db", "d"), "serve")
    assert line == "moo serve: database d is a directory, not a database file"
    assert entries(tmp_path) == {"d"} and entries(tmp_path / "d") == set()


def test_serve_refuses_a_file_that_is_not_sqlite(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("my notes\n")
    line = one_line(moo(tmp_path, "serve", "--port", "0", "--db", "notes.txt"), "serve")
    assert line == "moo serve: database notes.txt is not an SQLite database file"
    assert (tmp_path / "notes.txt").read_text() == "my notes\n"
    assert entries(tmp_path) == {"notes.txt"}


def test_serve_refuses_a_ratings_file_that_is_not_sqlite(tmp_path: Path) -> None:
    (tmp_path / "m.ratings.sqlite3").write_text("junk")
    line = one_line(moo(tmp_path, "serve", "--port", "0", "--db", "m.sqlite3"), "serve")
    assert "m.ratings.sqlite3 (beside database m.sqlite3) is not an SQLite database" in line
    assert entries(tmp_path) == {"m.ratings.sqlite3"}


@pytest.mark.parametrize(
    ("denied", "expected"),
    [(os.R_OK, "cannot read database {db} (permission denied)"),
     (os.W_OK, "database {db} is read-only; the server writes every move to it")],
)
def test_unreadable_and_read_only_databases_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, denied: int, expected: str
) -> None:
    """Permissions as an ordinary user sees them (the suite may run as root, who reads all)."""
    db = tmp_path / "m.sqlite3"
    db.write_bytes(b"SQLite format 3\x00" + bytes(84))
    real_access = os.access

    def access(path: object, mode: int) -> bool:
        if Path(str(path)) == db and mode & denied:
            return False
        return real_access(path, mode)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    with pytest.raises(ServeError) as caught:
        check_db(str(db))
    assert str(caught.value) == expected.format(db=db)


def test_an_existing_sqlite_db_and_a_fresh_one_pass(tmp_path: Path) -> None:
    existing = tmp_path / "old.sqlite3"
    with sqlite3.connect(existing) as conn:
        conn.execute("CREATE TABLE t (x)")
    check_db(str(existing))
    check_db(str(tmp_path / "new.sqlite3"))
    check_db(":memory:")
    assert entries(tmp_path) == {"old.sqlite3"}  # checking creates nothing


def test_serve_on_a_taken_port_leaves_no_var_behind(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = moo(tmp_path, "serve", "--port", str(port))  # default db: var/moo.sqlite3
    line = one_line(done, "serve")
    assert line == f"moo serve: cannot listen on 127.0.0.1:{port}: address already in use"
    assert done.returncode == 1
    assert entries(tmp_path) == set()


def test_a_failed_start_removes_exactly_what_it_created(tmp_path: Path) -> None:
    """The clean-up behind the port check, for failures found only once the store is open."""
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "m.sqlite3-wal").write_text("someone else's")
    made = tmp_path / "keep" / "new" / "deeper"
    footprint = Footprint(str(made / "m.sqlite3"))
    made.mkdir(parents=True)
    for name in ("m.sqlite3", "m.sqlite3-wal", "m.ratings.sqlite3"):
        (made / name).write_text("")
    footprint.remove_new()
    assert not (tmp_path / "keep" / "new").exists()
    assert entries(tmp_path / "keep") == {"m.sqlite3-wal"}

    db = tmp_path / "keep" / "m.sqlite3"
    footprint = Footprint(str(db))
    db.write_text("")
    footprint.remove_new()
    assert entries(tmp_path / "keep") == {"m.sqlite3-wal"}  # the old WAL file stays


# -- moo solve ------------------------------------------------------------------------------------


def test_solve_with_a_bad_cell_is_one_line(tmp_path: Path) -> None:
    line = one_line(moo(tmp_path, "solve", "minimum", "--cell", "xyz"), "solve")
    assert line == ("moo solve: --cell: not a response: 'xyz' "
                    "(expected e.g. 2B1C, 3B, 1C, 0C)")


def test_solve_json_is_one_parseable_document(tmp_path: Path) -> None:
    done = moo(tmp_path, "solve", "minimum", "--cell", "2B1C", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # the whole output, nothing after it
    (cell,) = doc["cells"]
    assert cell["response"] == "2B1C" and cell["subtotal"] == 240  # Tanaka's Table 3


# -- moo bot --------------------------------------------------------------------------------------


def test_bot_with_a_missing_program_fails_before_joining(tmp_path: Path) -> None:
    # Nothing listens on this URL: had it tried to connect, it would say so (and exit 1).
    done = moo(tmp_path, "bot", "--cmd", "./missing.sh", "--url", "ws://127.0.0.1:9/")
    line = one_line(done, "bot")
    assert done.returncode == 2
    assert "'./missing.sh'" in line and "No such file" in line
    assert "cannot connect" not in done.stdout + done.stderr


def test_bot_says_where_it_waits_and_gives_up_clearly(tmp_path: Path) -> None:
    with moo_serve(tmp_path) as url:
        done = moo(tmp_path, "bot", "minimum", "--url", url, "--games", "2", "--name", "lone",
                   "--wait", "1")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    err = done.stderr.splitlines()
    assert err[0] == ("lone: queued in pool 'any' (lockstep), waiting for an opponent; "
                      "to play the server's bot instead, add --vs-bot minimum")
    assert err[-1] == ("lone: no opponent came in pool 'any' (lockstep) in 1 s; start another "
                       "bot, or add --vs-bot minimum to play the server's bot")
    assert done.stdout == ""  # no "0 matches" summary after the error (issue 32)


def test_bot_shows_progress_on_stderr_and_is_quiet_with_json(tmp_path: Path) -> None:
    with moo_serve(tmp_path) as url:
        text = moo(tmp_path, "bot", "minimum", "--url", url, "--games", "2", "--name", "pro",
                   "--vs-bot", "random")
        js = moo(tmp_path, "bot", "minimum", "--url", url, "--games", "2", "--name", "pjs",
                 "--vs-bot", "random", "--json")
    assert text.returncode == 0, text.stderr
    err = text.stderr.splitlines()
    assert err[0] == "pro: playing the server's bot random"
    assert err[1].startswith("[##########..........] 1/2 matches: ")
    assert err[2].startswith("[####################] 2/2 matches: ")
    assert js.returncode == 0, js.stderr
    assert js.stderr == ""
    assert [json.loads(line)["type"] for line in js.stdout.splitlines()] == [
        "match", "match", "summary"]


# -- one plug-in loader for every command ---------------------------------------------------------


@pytest.fixture
def plugins(tmp_path: Path) -> Path:
    """A file strategy and a package strategy in the current folder (a user's own code)."""
    (tmp_path / "mybot.py").write_text(
        "from bots.tree import Minimum\n\n\nclass MyBot(Minimum):\n    name = 'mybot'\n"
    )
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "mybot.py").write_text(
        "from bots.tree import Minimum\n\n\nclass PkgBot(Minimum):\n    name = 'pkgbot'\n"
    )
    return tmp_path


SPECS = ["./mybot.py:MyBot", "mypkg.mybot:PkgBot"]


@pytest.mark.parametrize("spec", SPECS)
def test_eval_loads_file_and_package_strategies(plugins: Path, spec: str) -> None:
    done = moo(plugins, "eval", spec, "--vs", "minimum", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["total"] == 26274 and out["score"] == 0.5  # the minimum tree against itself


def test_report_and_tournament_load_the_same_specs(plugins: Path) -> None:
    report = moo(plugins, "report", *SPECS, "--only", "--out", "rep")
    assert report.returncode == 0, report.stderr
    assert {"MyBot", "PkgBot"} <= {
        s["name"] for s in json.loads((plugins / "rep" / "report.json").read_text())
        ["strategies"]}
    tour = moo(plugins, "tournament", *SPECS, "--local", "--rounds", "1", "--out", "r.jsonl")
    assert tour.returncode == 0, tour.stderr
    records = [json.loads(line) for line in (plugins / "r.jsonl").read_text().splitlines()]
    players = {p for r in records if r.get("type", "match") == "match"
               for p in r.get("players", [])}
    assert {"MyBot", "PkgBot"} <= players, records[:2]


def test_bot_loads_the_same_specs(plugins: Path) -> None:
    with moo_serve(plugins) as url:
        for spec in SPECS:
            done = moo(plugins, "bot", spec, "--url", url, "--vs-bot", "random", "--json")
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout.splitlines()[-1])["matches"] == 1


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("./nope.py:X", "cannot load strategy file './nope.py': no such file"),
     ("mypkg.nope:X", "No module named 'mypkg.nope'"),
     ("./mybot.py:Nope", "has no 'Nope'")],
)
@pytest.mark.parametrize("command", ["eval", "bot", "tournament"])
def test_a_spec_that_does_not_load_is_one_line(plugins: Path, command: str, spec: str,
                                               expected: str) -> None:
    extra = {"eval": [], "bot": ["--url", "ws://127.0.0.1:9/"],
             "tournament": ["minimum", "--local", "--rounds", "1"]}[command]
    line = one_line(moo(plugins, command, spec, *extra), command)
    assert expected in line


def test_tournament_out_in_a_missing_folder_creates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "no" / "r.jsonl"
    line = one_line(moo(tmp_path, "tournament", "minimum", "first", "--local", "--rounds", "1",
                        "--out", str(out)), "tournament")
    assert line == f"moo tournament: --out {out}: directory {out.parent} does not exist"
    assert entries(tmp_path) == set()
