"""The POTM referee (clients/potm): the 1999 rules, the sandbox, hostile entries, playoffs.

Hostile entries are in tests/potm_entries/ (each says in its header what it tries). A test
asserts what the entry gained (nothing) and, where the channel exists outside the sandbox,
that the same entry run ``--unconfined`` does get through, so the test can fail.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.potm.referee import (
    FAIL_SCORE,
    MAX_GUESSES,
    GuessRun,
    Limits,
    Referee,
    check_files,
    judge_output,
)
from clients.potm.rounds import Entry, WordPool, WordResult, play_rounds
from moo.words import score_hits_misses

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent
REPO = HERE.parents[1]
ENTRIES = HERE.parent / "potm_entries"
EXAMPLE = REPO / "examples" / "potm" / "letterwise.sh"
#: Small limits keep hostile entries cheap on a shared machine; the rules are the same. The
#: wall-clock guard is far above the CPU limit, as by default: no test depends on speed.
FAST = Limits(cpu=0.3, wall=60.0, memory_mb=256, processes=16)
AS_ROOT = os.geteuid() == 0


def _entry(name: str) -> Entry:
    path = EXAMPLE if name == "letterwise.sh" else ENTRIES / name
    return Entry(name, path)


def _script(directory: Path, name: str, text: str) -> Entry:
    path = directory / name
    path.write_text(text)
    path.chmod(0o755)
    return Entry(name, path)


def _marked_processes(mark: str) -> list[int]:
    """Host processes whose command line holds ``mark``."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if mark.encode() in Path(f"/proc/{d}/cmdline").read_bytes():
                    out.append(int(d))
            except OSError:
                continue
    return out


def _marked_files(mark: str, *places: Path) -> list[Path]:
    """Files whose name holds ``mark`` in the host's shared writable places (and ``places``)."""
    found = []
    for top in (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/"), Path("/run"),
                *places):
        try:
            names = list(top.iterdir())
        except OSError:
            continue
        found += [p for p in names if mark in p.name]
    return found


@pytest.fixture
def referee(request: pytest.FixtureRequest) -> Iterator[Referee]:
    names: list[str] = request.param
    ref = Referee([_entry(n) for n in names], FAST)
    try:
        yield ref
    finally:
        root = ref.root
        ref.close()
        assert not root.exists()


# -- the game -------------------------------------------------------------------------------
@pytest.mark.parametrize("referee", [["letterwise.sh"]], indirect=True)
@pytest.mark.parametrize("word", ["SKUNK", "AAAA", "QUIZZICAL"])
def test_example_entry_solves_and_every_answer_follows_the_rules(referee: Referee,
                                                                 word: str) -> None:
    res = referee.play_word(0, word)
    assert res.reason == "solved"
    assert res.guesses[-1] == word
    assert res.score == len(res.guesses) <= 100
    assert all(len(g) == len(word) and g.isupper() for g in res.guesses)


@pytest.mark.parametrize("referee", [["protocol.sh"]], indirect=True)
def test_stdin_is_n_then_guess_hits_misses(referee: Referee) -> None:
    # protocol.sh prints "wrong" (ending the word) unless stdin is exactly the POTM's.
    res = referee.play_word(0, "SKUNK")
    assert res.guesses == ["ABCDE", "SKIPS", "GUPPY", "SKUNK"]
    assert res.score == 4
    assert score_hits_misses("SKUNK", "SKIPS") == (2, 2)


@pytest.mark.parametrize("referee", [["tempok.sh"]], indirect=True)
def test_temp_files_kept_within_a_word_and_removed_between_words(referee: Referee) -> None:
    first = referee.play_word(0, "SKUNK")
    second = referee.play_word(0, "SKUNK")  # prints LEAKED if TEMP.count survived
    assert (first.score, second.score) == (3, 3)


@pytest.mark.parametrize("referee", [["mktemp.sh"]], indirect=True)
def test_a_removed_temporary_file_costs_nothing(referee: Referee) -> None:
    # mktemp in $TMPDIR (/tmp, its own directory), removed before it exits: the 1999 rules.
    res = referee.play_word(0, "SKUNK")
    assert (res.score, res.reason) == (1, "solved")


@pytest.mark.parametrize(
    ("data", "guess"),
    [(b"SKUNK\n", "SKUNK"), (b"SKUNK", "SKUNK"), (b" SKUNK\n", None), (b"SKUNK \n", None),
     (b"SKUNK\n\n", None), (b"SKUNK\r\n", None), (b"skunk\n", None), (b"SKUN\n", None),
     (b"SKUNKS\n", None), (b"SKUNK\nSKUNK\n", None), (b"", None)],
)
def test_output_must_be_exactly_one_line_of_n_capitals(data: bytes, guess: str | None) -> None:
    got, why = judge_output(data, 5)
    assert got == guess
    assert (why is None) == (guess is not None)
    if not data:
        assert why == "printed nothing"


def test_temp_rule_is_on_the_total_and_on_names(tmp_path: Path) -> None:
    (tmp_path / "TEMP.a").write_bytes(b"x" * 600_000)
    assert check_files(tmp_path) is None
    (tmp_path / "TEMP.b").write_bytes(b"x" * 600_000)
    assert "more than 1 MB" in (check_files(tmp_path) or "")
    (tmp_path / "TEMP.b").unlink()
    (tmp_path / "tmpXYZ").write_text("left behind")
    assert "left 'tmpXYZ'" in (check_files(tmp_path) or "")
    (tmp_path / "tmpXYZ").unlink()
    (tmp_path / "TEMP.link").symlink_to("/etc/passwd")
    assert "not a plain file" in (check_files(tmp_path) or "")


class _Scripted(Referee):
    """A referee whose runs are a list of outputs (for the guess-count rule without 100
    processes): the real checks, no program."""

    outputs: list[str]
    seen: list[str]

    def run_once(self, i: int, work: Path, stdin: str, length: int) -> GuessRun:
        k = len(self.seen)
        self.seen.append(stdin)
        out, err = judge_output(self.outputs[k].encode() + b"\n", length)
        return GuessRun(stdin, out, 0.0, 0.0, err)


@pytest.mark.parametrize(("right_at", "score"), [(100, 100), (101, 101), (None, FAIL_SCORE)])
def test_more_than_100_guesses_without_the_word_scores_999(right_at: int | None,
                                                            score: int) -> None:
    ref = _Scripted([_entry("same.sh")], FAST)
    try:
        ref.seen = []
        ref.outputs = ["AAAAA"] * 200
        if right_at:
            ref.outputs[right_at - 1] = "SKUNK"
        res = ref.play_word(0, "SKUNK")
    finally:
        ref.close()
    assert res.score == score
    assert len(res.guesses) == min(right_at or MAX_GUESSES + 1, MAX_GUESSES + 1)
    if right_at is None:
        assert res.reason == "more than 100 guesses without the word"


def test_guess_101_is_judged_with_a_real_program() -> None:
    with Referee([_entry("late.sh")], FAST) as ref:
        res = ref.play_word(0, "SKUNK")
    assert (res.score, res.reason) == (101, "solved")


# -- hostile entries: the rules' 999 and the referee's guards -------------------------------
HOSTILE = [
    ("loop.sh", "s of CPU (limit 0.3 s)"),
    ("burner.sh", "s of CPU (limit 0.3 s)"),
    ("poolburn.py", "s of CPU (limit 0.3 s)"),
    ("flood.sh", "more than 4096 bytes"),
    ("garbage.sh", "not one line of 5 upper-case letters"),
    ("lowercase.sh", "not one line of 5 upper-case letters"),
    ("spaces.sh", "not one line of 5 upper-case letters"),
    ("hog.py", "printed nothing"),
    ("litter.sh", "left 'notes.txt' in its directory"),
    ("bigtemp.sh", "more than 1 MB"),
    ("twotemps.sh", "more than 1 MB"),
    ("forkbomb.sh", "printed nothing"),
]


@pytest.mark.parametrize(("name", "why"), HOSTILE)
def test_hostile_entry_costs_only_its_own_score(name: str, why: str) -> None:
    with Referee([_entry("protocol.sh"), _entry(name)], FAST) as ref:
        before = ref.play_word(0, "SKUNK")
        bad = ref.play_word(1, "SKUNK")
        after = ref.play_word(0, "SKUNK")
        assert bad.score == FAIL_SCORE
        assert bad.reason.startswith("guess 1: ")
        assert why in bad.reason
        assert before.score == after.score == 4
        if ref.as_root:  # nothing of the hostile entry is left running
            assert not [p for p in os.listdir("/proc")
                        if p.isdigit() and _owner(p) == ref.uid(1)]


def _owner(pid: str) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


def test_idle_entry_is_stopped_by_the_wall_clock_guard_reported_as_such() -> None:
    with Referee([_entry("sleeper.sh")], Limits(cpu=0.3, wall=1.0)) as ref:
        res = ref.play_word(0, "SKUNK")
    assert res.score == FAIL_SCORE
    assert "wall-clock time (the referee's safety guard)" in res.reason


def test_a_directory_filling_up_is_stopped_by_the_disk_guard() -> None:
    with Referee([_entry("diskfill.sh")], Limits(cpu=2.0, wall=120.0, disk_mb=8)) as ref:
        res = ref.play_word(0, "SKUNK")
        assert res.score == FAIL_SCORE
        assert "wrote more than 8 MB or 10000 files (the referee's safety guard)" in res.reason
        assert not (ref.root / "work-0").exists()


def test_default_wall_guard_is_ten_times_the_cpu_limit() -> None:
    assert Limits().wall_guard == 100.0
    assert Limits(cpu=2).wall_guard == 20.0
    assert Limits(cpu=2, wall=5).wall_guard == 5.0


@pytest.mark.parametrize("confined", [True, False])
def test_cpu_of_children_never_waited_for_is_charged(confined: bool) -> None:
    # orphan.py: a setsid grandchild burns 0.5 s (its own count) before the entry answers and
    # exits without waiting; the grandchild is still burning. All of it is the guess's CPU.
    with Referee([_entry("orphan.py")], Limits(cpu=5.0, wall=120.0, memory_mb=256),
                 confined=confined) as ref:
        res = ref.play_word(0, "SKUNK")
    assert (res.score, res.reason) == (1, "solved")
    assert res.cpu_max >= 0.5
    with Referee([_entry("orphan.py")], FAST, confined=confined) as ref:
        res = ref.play_word(0, "SKUNK")
    assert res.score == FAIL_SCORE
    assert "s of CPU (limit 0.3 s)" in res.reason


@pytest.mark.parametrize("confined", [True, False])
def test_daemons_and_double_forks_do_not_outlive_the_guess(tmp_path: Path,
                                                           confined: bool) -> None:
    mark = f"potm-daemon-{uuid.uuid4().hex[:12]}"
    entry = _script(tmp_path, "daemon.sh", f"""#!/bin/sh
# Hostile: leaves processes behind in every way a shell can, then answers.
setsid sh -c 'trap "" HUP TERM INT; while :; do sleep 1; done' {mark}-a &
( setsid sh -c 'while :; do sleep 1; done' {mark}-b & ) &
nohup sh -c 'while :; do sleep 1; done' {mark}-c >/dev/null 2>&1 &
echo SKUNK
""")
    with Referee([entry], FAST, confined=confined) as ref:
        res = ref.play_word(0, "SKUNK")
        assert (res.score, res.reason) == (1, "solved")
        assert _marked_processes(mark) == []


def test_nothing_is_left_outside_its_directory(tmp_path: Path) -> None:
    mark = f"potm-litter-{uuid.uuid4().hex[:12]}"
    entry = _script(tmp_path, "litter_all.sh", f"""#!/bin/sh
# Hostile: writes files everywhere it might, then answers right.
for d in /var/tmp /dev/shm / /run /dev .. "$(dirname "$0")" /usr /etc /proc /sys; do
    echo x > "$d/{mark}" 2>/dev/null
done
echo x > "/tmp/{mark}"
echo SKUNK
""")
    with Referee([entry], FAST) as ref:
        res = ref.play_word(0, "SKUNK")
        assert res.score == FAIL_SCORE  # its own /tmp file stayed: the 1999 rules
        assert f"left '{mark}' in its directory" in res.reason
        assert _marked_files(mark, *ref.root.iterdir()) == []
    assert _marked_files(mark) == []


def test_writes_outside_its_directory_fail_quietly(tmp_path: Path) -> None:
    with Referee([_entry("escape.sh"), _entry("protocol.sh")], FAST) as ref:
        res = ref.play_word(0, "SKUNK")
        assert (res.score, res.reason) == (1, "solved")
        assert sorted(p.name for p in ref.root.rglob("ESCAPED*")) == []
        assert ref.play_word(1, "SKUNK").score == 4
    assert _marked_files("ESCAPED") == []


# -- the sandbox: every way out, closed -------------------------------------------------------
PROBES = ["dict", "others", "network", "reaper", "fds", "env", "system", "write", "caps",
          "userns"]
#: The probes whose way out is open without the sandbox here (the test shows they would work).
OPEN_UNCONFINED = ["dict", "others", "network", "system"]


@pytest.fixture
def abstract_listener() -> Iterator[None]:
    """An abstract Unix socket of the host's network namespace for the network probe."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind("\0moo-potm-probe")
        s.listen(8)
    except OSError:  # another run of the tests holds it: it is there all the same
        pass
    try:
        yield
    finally:
        s.close()


def _probe(tmp_path: Path, check: str, confined: bool) -> WordResult:
    probe = tmp_path / f"probe-{check}.py"
    shutil.copyfile(ENTRIES / "probe.py", probe)
    probe.chmod(0o755)
    with Referee([Entry(probe.name, probe), _entry("victim.sh")],
                 Limits(cpu=2.0, wall=120.0, memory_mb=256), confined=confined) as ref:
        victim = ref._fresh_workdir(1)  # the victim is mid-word: its TEMP file is there
        (victim / "TEMP.secret").write_text("POTM-VICTIM-SECRET\n")
        if ref.as_root:
            os.chown(victim / "TEMP.secret", ref.uid(1), ref.uid(1))
        return ref.play_word(0, "NNNNN")


@pytest.mark.parametrize("check", PROBES)
def test_sandbox_closes_every_way_out(tmp_path: Path, check: str,
                                      abstract_listener: None) -> None:
    res = _probe(tmp_path, check, confined=True)
    assert res.guesses == ["NNNNN"], res.reason
    assert res.score == 1


@pytest.mark.parametrize("check", OPEN_UNCONFINED)
def test_the_probes_do_find_a_way_out_when_unconfined(tmp_path: Path, check: str,
                                                      abstract_listener: None) -> None:
    if check == "dict" and not Path("/usr/share/dict/american-english").exists():
        pytest.skip("no /usr/share/dict/american-english here (CI installs wamerican)")
    res = _probe(tmp_path, check, confined=False)
    assert res.guesses[:1] == ["YYYYY"], res.reason


def _moo(*args: str, cwd: Path | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", "potm", *args], capture_output=True,
                          text=True, cwd=cwd, env=env)


def _words(directory: Path) -> Path:
    words = directory / "words.txt"
    words.write_text("skunk\nmoose\nhouse\ncan't\nzebra\nhorse\n")
    words.chmod(0o644)
    return words


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user may read (pytest's tmp_path is the owner's only)."""
    d = Path(tempfile.mkdtemp(prefix="moo-potm-test-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("confined", [True, False])
def test_the_referees_command_line_word_list_and_seed_stay_hidden(shared_dir: Path,
                                                                  confined: bool) -> None:
    # spy.py guesses every 5-letter word of every command line, environment and named file it
    # can read (the referee's --target, its --words list). Confined it finds none of them;
    # unconfined (the list readable by all, as most are) it solves every word.
    words = _words(shared_dir)
    flags = [] if confined else ["--unconfined"]
    proc = _moo(str(ENTRIES / "spy.py"), "--length", "5", "--words", str(words),
                "--target", "skunk", "--seed", "3", "--cpu", "2", "--wall", "120", "--json",
                "--quiet", *flags)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["confined"] is confined
    results = data["rounds"][0]["results"]
    assert data["rounds"][0]["words"][0] == "SKUNK"
    if confined:
        for r in results:
            assert r["score"] == FAIL_SCORE
            assert r["word"] not in r["guesses"]
            assert "printed 'nothing" in r["reason"]
    else:  # the same program, unconfined, reads them all
        assert all(r["reason"] == "solved" for r in results)


# -- the command line -----------------------------------------------------------------------
def test_cli_standings_with_example_and_hostile_entries(tmp_path: Path) -> None:
    words = _words(tmp_path)
    proc = _moo(str(EXAMPLE), str(ENTRIES / "garbage.sh"), str(ENTRIES / "loop.sh"),
                "--length", "5", "--words", str(words), "--seed", "7", "--cpu", "0.3",
                "--wall", "120", "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    final = data["rounds"][0]
    assert len(set(final["words"])) == 3 and set(final["words"]) <= {
        "SKUNK", "MOOSE", "HOUSE", "ZEBRA", "HORSE"}
    assert final["totals"]["garbage.sh"] == final["totals"]["loop.sh"] == 3 * FAIL_SCORE
    assert final["totals"]["letterwise.sh"] < 3 * 100
    assert data["winner"] == "letterwise.sh"
    assert [s["entry"] for s in data["standings"]] == ["letterwise.sh", "garbage.sh", "loop.sh"]
    assert [s["rank"] for s in data["standings"]] == [1, 2, 2]
    assert data["limits"]["cpu"] == 0.3 and data["limits"]["wall"] == 120
    text = _moo(str(ENTRIES / "protocol.sh"), str(ENTRIES / "garbage.sh"), "--length", "5",
                "--words", str(words), "--target", "skunk", "--target", "moose", "--target",
                "house", "--quiet")
    assert text.returncode == 0
    assert "final: SKUNK MOOSE HOUSE" in text.stdout
    assert "each guess in a sandbox; 10 s CPU per guess (wall-clock safety guard 100 s)" \
        in text.stdout
    assert "winner: protocol.sh" in text.stdout


def test_cli_says_when_entries_ran_unconfined(tmp_path: Path) -> None:
    proc = _moo(str(ENTRIES / "protocol.sh"), "--length", "5", "--words", str(_words(tmp_path)),
                "--unconfined", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "UNCONFINED: entries ran without a sandbox (--unconfined)" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope.sh", "--length", "5", "--dictionary"], "no such entry"),
        ([str(HERE / "test_potm.py"), "--length", "5", "--dictionary"], "not executable"),
        ([str(EXAMPLE), "--length", "10", "--dictionary"], "--length must be 4-9"),
        ([str(EXAMPLE), "--length", "5", "--dictionary", "--target", "SKUN"], "not 5 letters"),
        ([str(EXAMPLE), "--length", "5", "--words", "/nonexistent/w.txt"], "cannot read"),
        ([str(EXAMPLE), "--length", "5", "--dictionary", "--target", "SKUNK", "--target",
          "skunk"], "--target SKUNK is given twice"),
    ],
)
def test_cli_mistakes_get_one_line(args: list[str], message: str) -> None:
    proc = _moo(*args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr
    assert proc.stderr.startswith("moo potm: ")


def test_cli_refuses_a_word_list_too_short_for_three_different_words(tmp_path: Path) -> None:
    words = tmp_path / "w.txt"
    words.write_text("skunk\nelephant\nskunk\n")
    proc = _moo(str(EXAMPLE), "--length", "5", "--words", str(words), "--target", "moose")
    assert proc.returncode == 2
    assert proc.stderr == ("moo potm: only 2 different 5-letter words in the list and the "
                           "--target words: the final and each playoff play 3 different "
                           "words\n")


def test_cli_refuses_to_run_without_a_sandbox(shared_dir: Path) -> None:
    words = _words(shared_dir)
    nobwrap = shared_dir / "bin"
    nobwrap.mkdir(mode=0o755)
    env = {**os.environ, "PATH": str(nobwrap)}
    proc = _moo(str(EXAMPLE), "--length", "5", "--words", str(words), env=env)
    assert proc.returncode == 1
    assert proc.stderr == ("moo potm: cannot confine the entries: bubblewrap is not installed "
                           "(apt-get install bubblewrap) (--unconfined runs entries you trust "
                           "without a sandbox)\n")
    # a bwrap that cannot make namespaces (as where user namespaces are off): its own words
    fake = nobwrap / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    proc = _moo(str(EXAMPLE), "--length", "5", "--words", str(words), env=env)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1
    assert "the sandbox's trial run failed: bwrap: No permissions to create a new namespace" \
        in proc.stderr


def test_an_unprivileged_referee_confines_entries_the_same(shared_dir: Path) -> None:
    """As root (CI), the referee itself runs as ``nobody`` here (the system python3 and the
    checkout, both readable by all): no uid of its own for the entries, user namespaces only.
    As an ordinary user the test runs it as that user."""
    mark = f"potm-daemon-{uuid.uuid4().hex[:12]}"
    words = _words(shared_dir)
    daemon = _script(shared_dir, "daemon.sh", f"""#!/bin/sh
read -r guess hits misses
[ -n "$hits" ] && {{ echo done; exit 0; }}  # SKUNK was not the word: end it at once
setsid sh -c 'while :; do sleep 1; done' {mark} &
echo x > /tmp/{mark}; rm /tmp/{mark}; echo x > /dev/shm/{mark}; rm /dev/shm/{mark}
echo x > /var/tmp/{mark}
echo SKUNK
""").path
    # what nobody needs, where nobody may read it (the checkout may be in a private place)
    src = shared_dir / "src"
    for package in ("cli", "moo", "clients/potm"):
        shutil.copytree(REPO / package, src / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for module in ("clients/__init__.py", "bots/__init__.py", "bots/dictionary.py"):
        (src / module).parent.mkdir(exist_ok=True)
        shutil.copyfile(REPO / module, src / module)
    for name in ("spy.py", "burner.sh", "lockout.sh"):
        shutil.copyfile(ENTRIES / name, shared_dir / name)
        (shared_dir / name).chmod(0o755)
    for d in (shared_dir, *src.rglob("*")):
        d.chmod(0o755 if d.is_dir() else 0o644)
    argv = ["-m", "cli", "potm", str(shared_dir / "spy.py"), str(shared_dir / "burner.sh"),
            str(daemon), str(shared_dir / "lockout.sh"), "--length", "5", "--words", str(words),
            "--target", "skunk", "--cpu", "0.3", "--wall", "120", "--json", "--quiet"]
    if AS_ROOT:
        if not Path("/usr/bin/python3").exists():
            pytest.fail("the unprivileged run needs /usr/bin/python3")
        cmd = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
               "/usr/bin/python3", *argv]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(shared_dir), "PYTHONPATH": str(src)}
    else:
        cmd, env = [sys.executable, *argv], {**os.environ, "PYTHONPATH": str(src)}
    private = shared_dir / "tmp"  # the referee's own directory goes here ($TMPDIR)
    private.mkdir()
    if AS_ROOT:
        os.chown(private, 65534, 65534)
    env["TMPDIR"] = str(private)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=shared_dir, env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    by_entry: dict[str, list[dict[str, object]]] = {}
    for r in data["rounds"][0]["results"]:
        by_entry.setdefault(str(r["entry"]), []).append(r)
    assert all(r["score"] == FAIL_SCORE and "printed 'nothing" in str(r["reason"])
               for r in by_entry["spy.py"])
    assert all("s of CPU (limit 0.3 s)" in str(r["reason"]) for r in by_entry["burner.sh"])
    assert [r["score"] for r in by_entry["daemon.sh"]][:1] == [1]  # SKUNK is first
    assert all(r["score"] == FAIL_SCORE for r in by_entry["lockout.sh"])
    assert _marked_processes(mark) == []
    assert _marked_files(mark) == []
    assert list(private.iterdir()) == []  # lockout.sh's directory too is gone


def test_a_referee_stopped_with_sigterm_leaves_nothing(shared_dir: Path) -> None:
    mark = f"potm-stopped-{uuid.uuid4().hex[:12]}"
    entry = _script(shared_dir, "stuck.sh", f"#!/bin/sh\nexec sh -c 'sleep 1000' {mark}\n")
    private = shared_dir / "tmp"  # the referee's own directory goes here ($TMPDIR)
    private.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "cli", "potm", str(entry.path), "--length",
                             "5", "--words", str(_words(shared_dir)), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(private)})
    try:
        for _ in range(6000):  # wait for the event: the entry is running in its sandbox
            if _marked_processes(mark) or proc.poll() is not None:
                break
            time.sleep(0.01)
        assert _marked_processes(mark), proc.communicate()
        proc.terminate()
        assert proc.wait(timeout=120) == 128 + 15
    finally:
        proc.kill()
        proc.communicate()
    for _ in range(6000):  # the sandbox's PID 1 goes with bubblewrap, as the kernel gets to it
        if not _marked_processes(mark):
            break
        time.sleep(0.01)
    assert _marked_processes(mark) == []
    assert list(private.iterdir()) == []


# -- finals and playoffs --------------------------------------------------------------------
def test_each_round_has_three_different_words() -> None:
    pool = WordPool(["AAAAA", "BBBBB", "CCCCC", "DDDDD"], ["SKUNK"], seed=1)
    first = pool.round()
    assert first[0] == "SKUNK" and len(set(first)) == 3
    second = pool.round()  # two unplayed words left: they come first, then one played before
    assert len(set(second)) == 3
    assert {"AAAAA", "BBBBB", "CCCCC", "DDDDD", "SKUNK"} - set(first) <= set(second)
    for _ in range(20):
        assert len(set(pool.round())) == 3
    with pytest.raises(ValueError, match="2 different words"):
        WordPool(["AAAAA"], ["SKUNK"])
    with pytest.raises(ValueError, match="twice"):
        WordPool(["AAAAA", "BBBBB"], ["SKUNK", "SKUNK"])
    assert WordPool(["AAAAA", "BBBBB", "CCCCC"], seed=4).round() == \
        WordPool(["CCCCC", "BBBBB", "AAAAA"], seed=4).round()


def _three(words: Iterator[str]) -> list[str]:
    return [next(words) for _ in range(3)]


def test_playoffs_only_between_entries_tied_first() -> None:
    scores = {  # entry -> scores of successive words
        0: [5, 5, 5, 4, 4, 4, 9, 9, 9],
        1: [5, 5, 5, 4, 4, 4, 3, 3, 3],
        2: [3, 3, 3],       # best final total (9): wins without a playoff
        3: [9, 9, 9],
    }
    played: dict[int, list[str]] = {i: [] for i in scores}
    words = iter(f"W{k:04}" for k in range(100))

    def play(i: int, word: str) -> WordResult:
        played[i].append(word)
        return WordResult(str(i), word, scores[i][len(played[i]) - 1])

    t = play_rounds(["0", "1", "2", "3"], play, lambda: _three(words), 5)
    assert t.winner == "2" and len(t.rounds) == 1
    assert [(r, n) for r, n, _ in t.standings()] == [(1, "2"), (2, "0"), (2, "1"), (4, "3")]

    scores[2] = [9, 9, 9]
    played = {i: [] for i in scores}
    t = play_rounds(["0", "1", "2", "3"], play, lambda: _three(words), 5, max_playoffs=5)
    assert t.winner == "1"
    assert [r.name for r in t.rounds] == ["final", "playoff 1", "playoff 2"]
    assert set(t.rounds[1].results) == {"0", "1"}  # only those tied first
    assert len(played[2]) == len(played[3]) == 3
    ranks = [(r, n) for r, n, _ in t.standings()]
    assert ranks == [(1, "1"), (2, "0"), (3, "2"), (3, "3")]


def test_playoffs_stop_at_the_limit_without_a_winner() -> None:
    words = iter(f"W{k:04}" for k in range(100))
    t = play_rounds(["a", "b", "c"], lambda i, w: WordResult("abc"[i], w, 4 if i < 2 else 7),
                    lambda: _three(words), 5, max_playoffs=2)
    assert t.winner is None
    assert [set(r.results) for r in t.rounds] == [{"a", "b", "c"}, {"a", "b"}, {"a", "b"}]


def test_entries_are_copies() -> None:
    # The referee runs a private copy: an entry cannot be swapped or edited mid-contest.
    with Referee([_entry("letterwise.sh")], FAST) as ref:
        copy = ref.programs[0]
        assert copy != EXAMPLE and copy.read_bytes() == EXAMPLE.read_bytes()
        assert os.stat(copy).st_uid == os.geteuid()


@pytest.mark.parametrize("referee", [["netcheck.sh"]], indirect=True)
def test_entries_have_no_network_but_their_own_loopback(referee: Referee) -> None:
    assert referee.play_word(0, "SKUNK").score == 1  # it saw only the loopback interface


def test_referees_at_the_same_time_use_disjoint_user_ids() -> None:
    entries = [_entry("protocol.sh"), _entry("same.sh")]
    with Referee(entries, FAST) as a, Referee(entries, FAST) as b:
        ids_a = {a.uid(0), a.uid(1)}
        ids_b = {b.uid(0), b.uid(1)}
        assert not ids_a & ids_b
        assert min(ids_a | ids_b) >= 1_000_000
        assert a.play_word(0, "SKUNK").reason == "solved"
        assert b.play_word(0, "SKUNK").reason == "solved"
    with Referee(entries, Limits(uid_base=1_234_000)) as c:
        assert (c.uid(0), c.uid(1)) == (1_234_000, 1_234_001)
