"""The May 1999 POTM referee: programs guess an English word, one fresh process per guess.

The contest's rules (``docs/potm.md`` quotes them and says how each is applied):

* first run: stdin ``N`` (the word length); later runs: ``GUESS H M`` (the previous guess,
  its hits and misses); each run prints one string of N upper-case letters and exits;
* an entry may keep files whose names begin with ``TEMP`` in its directory, at most 1 MB in
  all, between the runs of one word; temporary files in ``/tmp`` must be removed by the run
  that made them, and "creation of files anywhere else is strictly prohibited";
* more than 10 s of user+sys CPU for one guess: 999 for the word; more than 100 guesses
  without the word: 999.

Every run is confined by :mod:`clients.potm.sandbox` (bubblewrap namespaces around a reaper
that charges the CPU of every process the guess starts); as root, each entry also runs under
a user id of its own. Everything an entry does wrong ends *its* word with 999; nothing it
does can change another entry's score or see the word.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from moo.words import score_hits_misses

from .rounds import FAIL_SCORE, Entry, Tournament, WordPool, WordResult, play_rounds
from .sandbox import Outcome, RunLimits, Sandbox, SandboxError

__all__ = [
    "FAIL_SCORE",
    "MAX_GUESSES",
    "TEMP_CAP",
    "WALL_FACTOR",
    "GuessRun",
    "Limits",
    "Referee",
    "SandboxError",
    "run_tournament",
]

#: "If an entry makes more than 100 guesses and still has not deduced the target word, it will
#: receive a score of 999": guess 101 is judged (and scores 101 if right), a wrong one ends it.
MAX_GUESSES = 100
#: Bytes of stdout read from one run; more ends the word (a guess is at most 10 bytes).
OUTPUT_CAP = 4096
#: "This file should not grow to exceed 1 Meg": the TEMP files of an entry, in all.
TEMP_CAP = 1 << 20
#: The wall-clock guard is this many times the CPU limit unless set.
WALL_FACTOR = 10


@dataclass(frozen=True)
class Limits:
    """What one guess may use. ``cpu`` is the contest's rule; the rest are safety guards.

    ``wall`` (default ``WALL_FACTOR`` × ``cpu``) only stops a run that waits without using
    CPU; ``memory_mb`` (RLIMIT_AS), ``processes`` (RLIMIT_NPROC in the sandbox's user
    namespace), ``file_mb`` (RLIMIT_FSIZE, the largest file), ``open_files`` (RLIMIT_NOFILE)
    and ``disk_mb`` (all files in its directory at any moment) keep a broken or hostile entry
    from hurting the machine; each costs the word 999 and says so.
    """

    cpu: float = 10.0
    wall: float | None = None
    memory_mb: int = 512
    processes: int = 32
    file_mb: int = 2
    open_files: int = 64
    disk_mb: int = 64
    uid_base: int | None = None  # as root: entry i runs as uid/gid uid_base + i (None: a
                                 # random unused block, so referees running at once never meet)

    @property
    def wall_guard(self) -> float:
        return self.wall if self.wall is not None else WALL_FACTOR * self.cpu

    def run_limits(self) -> RunLimits:
        return RunLimits(cpu=self.cpu, wall=self.wall_guard, memory_mb=self.memory_mb,
                         processes=self.processes, file_mb=self.file_mb,
                         open_files=self.open_files, disk_mb=self.disk_mb,
                         output_cap=OUTPUT_CAP)


@dataclass
class GuessRun:
    """One execution of an entry: its guess if valid, else why the word ends here."""

    stdin: str
    output: str | None
    cpu: float
    wall: float
    error: str | None = None


def _free_uid_block(n: int) -> int:
    """The first of ``n`` user ids that no account and no process uses.

    Drawn at random from a range far above any account's (1 000 000 - 2 000 000 000), so two
    referees running at the same time (CI and a person, or parallel tests) get disjoint ids;
    checked against /etc/passwd and the running processes.
    """
    rng = random.SystemRandom()
    live: set[int] = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                live.add(os.stat(f"/proc/{d}").st_uid)
            except OSError:  # the process ended meanwhile
                continue
    try:
        with open("/etc/passwd", encoding="utf-8", errors="replace") as f:
            accounts = {int(line.split(":")[2]) for line in f if line.count(":") >= 3
                        and line.split(":")[2].isdigit()}
    except OSError:
        accounts = set()
    while True:
        base = rng.randrange(1_000_000, 2_000_000_000 - n)
        if not any(base + i in live or base + i in accounts for i in range(n)):
            return base


class Referee:
    """Runs entries on words, each guess in a fresh sandbox.

    Layout (``root`` is a fresh temporary directory, removed by :meth:`close`)::

        root/            0711, the referee's: entries' users can pass through, not list
          prog-I/NAME    0555 copy of entry I's program (the sandbox sees only its own)
          reaper/        0555 copy of the reaper (clients/potm/reaper.py)
          work-I/        entry I's directory for the current word: /tmp in its sandbox

    The constructor checks that the machine can confine entries (one trial run) and raises
    :class:`SandboxError` if not; ``confined=False`` runs them without the sandbox.
    """

    def __init__(self, entries: Sequence[Entry], limits: Limits | None = None, *,
                 confined: bool = True) -> None:
        self.entries = list(entries)
        self.limits = limits or Limits()
        self.confined = confined
        self.as_root = os.geteuid() == 0
        self.uid_base = self.limits.uid_base or _free_uid_block(len(self.entries))
        self.root = Path(tempfile.mkdtemp(prefix="moo-potm-"))
        os.chmod(self.root, 0o711)
        try:
            self.programs: list[Path] = []
            for i, e in enumerate(self.entries):
                d = self.root / f"prog-{i}"
                d.mkdir()
                target = d / e.path.name
                shutil.copyfile(e.path, target)
                os.chmod(target, 0o555)
                os.chmod(d, 0o555)
                self.programs.append(target)
            self.sandbox = Sandbox(self.root, confined=confined)
            self._check_sandbox()
        except BaseException:
            self._remove_tree()
            raise

    def _check_sandbox(self) -> None:
        """One trial run of ``true``: a machine that cannot confine says so before any entry
        runs, in one line, instead of scoring every entry 999."""
        true = shutil.which("true", path="/usr/bin:/bin")
        if true is None:
            raise SandboxError("no /usr/bin/true for the sandbox's trial run")
        work = self._fresh_workdir(0)
        try:
            lim = replace(self.limits.run_limits(), wall=max(self.limits.wall_guard, 60.0))
            out = self.sandbox.run(Path(true), work, b"", lim,
                                   self.uid(0) if self.as_root else None)
        finally:
            remove(work)
        if out.verdict != "exit" or out.status != 0:
            why = out.detail or out.verdict
            raise SandboxError(f"the sandbox's trial run failed: {why}")

    def _remove_tree(self) -> None:
        remove(self.root)

    def close(self) -> None:
        if hasattr(self, "sandbox"):
            self.sandbox.close()
        self._remove_tree()

    def __enter__(self) -> Referee:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one word ---------------------------------------------------------------------------
    def uid(self, i: int) -> int:
        return self.uid_base + i

    def _fresh_workdir(self, i: int) -> Path:
        work = self.root / f"work-{i}"
        remove(work)
        work.mkdir(mode=0o700)
        if self.as_root:
            os.chown(work, self.uid(i), self.uid(i))
        return work

    def play_word(self, i: int, word: str) -> WordResult:
        """Entry ``i`` guesses ``word`` from scratch (fresh directory), to the end."""
        name = self.entries[i].name
        work = self._fresh_workdir(i)
        result = WordResult(name, word, FAIL_SCORE)
        stdin = f"{len(word)}\n"
        try:
            for k in range(1, MAX_GUESSES + 2):
                run = self.run_once(i, work, stdin, len(word))
                result.cpu_max = max(result.cpu_max, run.cpu)
                if run.error is None:
                    run.error = check_files(work)
                if run.error is not None:
                    result.reason = f"guess {k}: {run.error}"
                    return result
                assert run.output is not None
                result.guesses.append(run.output)
                if run.output == word:
                    result.score = k
                    result.reason = "solved"
                    return result
                hits, misses = score_hits_misses(word, run.output)
                stdin = f"{run.output} {hits} {misses}\n"
            result.reason = f"more than {MAX_GUESSES} guesses without the word"
            return result
        finally:
            remove(work)  # the TEMP files go with the word

    # -- one run ----------------------------------------------------------------------------
    def run_once(self, i: int, work: Path, stdin: str, length: int) -> GuessRun:
        """Run entry ``i`` once with ``stdin``; judge its guess of ``length`` letters."""
        out = self.sandbox.run(self.programs[i], work, stdin.encode(),
                               self.limits.run_limits(), self.uid(i) if self.as_root else None)
        run = GuessRun(stdin, None, out.cpu or 0.0, out.wall)
        run.error = self._verdict(out)
        if run.error is None:
            run.output, run.error = judge_output(out.stdout, length)
        return run

    def _verdict(self, out: Outcome) -> str | None:
        lim = self.limits
        if out.verdict == "cpu":
            return f"used {out.cpu or 0:.2f} s of CPU (limit {lim.cpu:g} s)"
        if out.verdict == "wall":
            return (f"still running after {lim.wall_guard:g} s of wall-clock time "
                    "(the referee's safety guard)")
        if out.verdict == "output":
            return f"printed more than {OUTPUT_CAP} bytes"
        if out.verdict == "disk":
            return (f"wrote more than {lim.disk_mb} MB or 10000 files "
                    "(the referee's safety guard)")
        if out.verdict == "exec":
            return f"could not be started ({out.detail})"
        if out.verdict == "failed":
            return f"the sandbox failed ({out.detail})"
        return None


def remove(path: Path) -> None:
    """Remove ``path`` and everything below it, whatever modes an entry left there.

    Run as an ordinary user, entries have the referee's user id: one may ``chmod 000`` a
    directory of its own to make it stick. Root removes it anyway; otherwise the modes are
    set back first (on directories only: a symlink is never followed, so nothing outside is
    touched)."""
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.lexists(path):
        return
    todo: list[tuple[str, list[str]]] = [(str(path), [""])]  # the top itself first
    for dirpath, dirs in todo:
        for d in (os.path.join(dirpath, x) for x in dirs):
            try:
                if stat.S_ISDIR(os.lstat(d).st_mode):
                    os.chmod(d, 0o700)
                    todo.append((d, os.listdir(d)))
            except OSError:
                continue
    shutil.rmtree(path, ignore_errors=True)


_GUESS = re.compile(rb"[A-Z]+\n?")


def judge_output(data: bytes, length: int) -> tuple[str | None, str | None]:
    """(guess, None) if ``data`` is exactly one line of ``length`` letters A-Z, else
    (None, why): "Your program must output one string of upper case letters ... N characters
    long, exactly". Only the final newline may follow the letters."""
    if not data:
        return None, "printed nothing"
    if _GUESS.fullmatch(data) and len(data.rstrip(b"\n")) == length:
        return data.rstrip(b"\n").decode(), None
    shown = data[:40].decode("ascii", errors="replace")
    return None, f"printed {shown!r}, not one line of {length} upper-case letters A-Z"


def check_files(work: Path) -> str | None:
    """After a run only ``TEMP*`` plain files may be left in its directory, 1 MB in all.

    The directory is the sandbox's ``/tmp``: a temporary file there must be gone when the
    run ends ("Temporary files may be created in /tmp, but MUST be removed"), and TEMP files
    are the one state the rules allow between runs.
    """
    total = 0
    try:
        for p in sorted(work.iterdir()):
            st = p.lstat()
            if not p.name.startswith("TEMP"):
                return f"left {p.name!r} in its directory (only TEMP* files may stay)"
            if not stat.S_ISREG(st.st_mode):
                return f"made {p.name!r}, which is not a plain file"
            total += st.st_size
    except OSError as exc:
        return f"its directory is unreadable ({exc.strerror})"
    if total > TEMP_CAP:
        return f"its TEMP files hold {total} bytes (more than 1 MB)"
    return None


def run_tournament(
    entries: Sequence[Entry],
    words: Sequence[str],
    length: int,
    *,
    max_playoffs: int = 5,
    targets: Sequence[str] = (),
    seed: int | None = None,
    limits: Limits | None = None,
    confined: bool = True,
    progress: Callable[[WordResult], None] | None = None,
) -> Tournament:
    """The final (three words, every entry) and playoffs among those tied for first.

    ``targets`` are played first, in order; then words of ``length`` letters are drawn from
    ``words`` (see :class:`WordPool`; ``ValueError`` if there are not three different ones).
    """
    pool = WordPool([w for w in words if len(w) == length], targets, seed)
    lim = limits or Limits()
    with Referee(entries, lim, confined=confined) as ref:
        t = play_rounds([e.name for e in entries], ref.play_word, pool.round, length,
                        max_playoffs=max_playoffs, progress=progress)
    t.confined = confined
    t.limits = {k: v for k, v in asdict(lim).items() if k != "uid_base"}
    t.limits["wall"] = lim.wall_guard
    return t
