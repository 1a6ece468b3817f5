"""The May 1999 POTM referee: programs guess an English word, one fresh process per guess.

The contest rules (``docs/potm.md`` has them in full, with what this referee adds):

* first run: stdin ``N`` (the word length); later runs: ``GUESS H M`` (the previous guess,
  its hits and misses); each run prints one upper-case string of N letters and exits;
* an entry may keep ``TEMP*`` files in its working directory between runs of one word;
* more than 10 s of user+sys CPU for one guess, or more than 100 guesses: 999 for the word;
* three words per final, the sum is the score; entries tied for first play three more words
  (only they), until one wins or the playoff limit is reached.

Entries are untrusted programs, so each run is confined (see :class:`Limits`): its own working
directory, CPU, address-space, file-size, open-file and process-count limits, a wall-clock cap,
a capped stdout, and, when the referee runs as root, a user id of its own (so it can neither
touch other entries' files nor the referee's, and its process limit counts only its own
processes). Everything an entry does wrong ends *its* word with 999; nothing it does can
change another entry's score.
"""

from __future__ import annotations

import ctypes
import math
import os
import random
import resource
import select
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from moo.words import score_hits_misses

__all__ = [
    "FAIL_SCORE",
    "Entry",
    "GuessRun",
    "Limits",
    "Referee",
    "Round",
    "Tournament",
    "WordResult",
]

#: The score of a word an entry failed on (time limit, too many guesses, a broken rule).
FAIL_SCORE = 999
MAX_GUESSES = 100
#: Bytes of stdout read from one run; more is a broken rule (one word is at most 9 letters).
OUTPUT_CAP = 4096
#: The POTM's limit on the TEMP file.
TEMP_CAP = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Per-run confinement. ``cpu`` is the contest's 10 s of user+sys; the rest are ours."""

    cpu: float = 10.0            # seconds of user+sys CPU for one guess (over it: 999)
    wall: float = 30.0           # seconds of wall-clock time for one guess (over it: 999)
    memory_mb: int = 512         # RLIMIT_AS
    processes: int = 32          # RLIMIT_NPROC, counted per entry user when run as root
    file_mb: int = 2             # RLIMIT_FSIZE: the largest file a run may write (TEMP, stdout)
    open_files: int = 64         # RLIMIT_NOFILE
    uid_base: int | None = None  # as root: entry i runs as uid/gid uid_base + i (None: a
                                 # random unused block, so referees running at once never meet)


@dataclass(frozen=True)
class Entry:
    """A program to referee: shown as ``name``, run as ``path`` (copied, never modified)."""

    name: str
    path: Path


@dataclass
class GuessRun:
    """One execution of an entry."""

    stdin: str
    output: str | None          # the guess, when valid
    cpu: float                  # user+sys seconds of the run and the children it waited for
    wall: float
    error: str | None = None    # why the word ends here, if it does


@dataclass
class WordResult:
    """One entry on one word: the score and why, with every guess."""

    entry: str
    word: str
    score: int
    guesses: list[str] = field(default_factory=list)
    reason: str = "solved"
    cpu_max: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {"entry": self.entry, "word": self.word, "score": self.score,
                "reason": self.reason, "guesses": self.guesses,
                "cpu_max": round(self.cpu_max, 3)}


def _libc_unshare_net() -> bool:
    """Put the calling (child) process in a new network namespace: no network at all."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.unshare(0x40000000)) == 0  # CLONE_NEWNET
    except (OSError, AttributeError):
        return False


def _free_uid_block(n: int) -> int:
    """The first of ``n`` user ids that no account and no process uses.

    Drawn at random from a range far above any account's (1 000 000 - 2 000 000 000), so two
    referees running at the same time (CI and a person, or parallel tests) get disjoint ids and
    never sweep each other's entries; checked against /etc/passwd and the running processes.
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


def _processes_of(uid: int) -> list[int]:
    """Live processes (zombies excluded: they are dead, only waiting for a parent to reap
    them) owned by ``uid``, read from /proc."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.stat(f"/proc/{d}").st_uid != uid:
                continue
            with open(f"/proc/{d}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            out.append(int(d))
    return out


class Referee:
    """Runs entries on words under :class:`Limits` in a private directory tree.

    Layout (``root`` is a fresh temporary directory, removed by :meth:`close`)::

        root/            0711, the referee's: entries can pass through, not list or write
          prog-I/NAME    0555 copy of entry I's program, in a 0555 directory
          io/            0700, the referee's: each run's stdin and stdout files
          work-I/        entry I's working directory for the current word (its user, 0700)
    """

    def __init__(self, entries: Sequence[Entry], limits: Limits | None = None) -> None:
        self.entries = list(entries)
        self.limits = limits or Limits()
        self.as_root = os.geteuid() == 0
        self.uid_base = self.limits.uid_base or _free_uid_block(len(self.entries))
        self.root = Path(tempfile.mkdtemp(prefix="moo-potm-"))
        os.chmod(self.root, 0o711)
        self.io = self.root / "io"
        self.io.mkdir(mode=0o700)
        self.programs: list[Path] = []
        for i, e in enumerate(self.entries):
            d = self.root / f"prog-{i}"
            d.mkdir()
            target = d / e.path.name
            shutil.copyfile(e.path, target)
            os.chmod(target, 0o555)
            os.chmod(d, 0o555)  # nobody writes here, not even an entry run as our own user
            self.programs.append(target)

    def close(self) -> None:
        for i in range(len(self.entries)):
            self._kill_all(i)
            prog = self.root / f"prog-{i}"
            if prog.is_dir():
                os.chmod(prog, 0o755)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Referee:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one word ---------------------------------------------------------------------------
    def uid(self, i: int) -> int:
        return self.uid_base + i

    def _fresh_workdir(self, i: int) -> Path:
        work = self.root / f"work-{i}"
        shutil.rmtree(work, ignore_errors=True)
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
            for k in range(1, MAX_GUESSES + 1):
                run = self.run_once(i, work, stdin, len(word))
                result.cpu_max = max(result.cpu_max, run.cpu)
                if run.error is None:
                    run.error = self._check_files(work)
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
            result.reason = f"not solved in {MAX_GUESSES} guesses"
            return result
        finally:
            self._kill_all(i)
            shutil.rmtree(work, ignore_errors=True)  # the TEMP files go with the word

    def _check_files(self, work: Path) -> str | None:
        """The POTM allows only TEMP* files of up to 1 MB in the working directory; the
        referee's own directories must be exactly as it left them."""
        try:
            for p in work.iterdir():
                if not p.name.startswith("TEMP"):
                    return f"wrote {p.name!r} (only TEMP* files are allowed)"
                if p.is_symlink() or not p.is_file():
                    return f"made {p.name!r}, which is not a plain file"
                if p.stat().st_size > TEMP_CAP:
                    return f"{p.name} is larger than 1 MB"
        except OSError as exc:
            return f"working directory unreadable ({exc.strerror})"
        expected = {"io", *(f"prog-{j}" for j in range(len(self.entries))),
                    *(f"work-{j}" for j in range(len(self.entries)))}
        extra = sorted(p.name for p in self.root.iterdir() if p.name not in expected)
        for j, prog in enumerate(self.programs):
            if sorted(prog.parent.iterdir()) != [prog]:  # possible only as our own user
                os.chmod(prog.parent, 0o755)
                for p in prog.parent.iterdir():
                    if p != prog:
                        if p.is_dir() and not p.is_symlink():
                            shutil.rmtree(p, ignore_errors=True)
                        else:
                            p.unlink(missing_ok=True)
                os.chmod(prog.parent, 0o555)
                extra.append(f"prog-{j}/")
        if extra:
            for name in extra:
                target = self.root / name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target, ignore_errors=True)
                else:
                    target.unlink(missing_ok=True)
            return f"wrote outside its directory ({', '.join(extra)})"
        return None

    # -- one run ----------------------------------------------------------------------------
    def _preexec(self, i: int, work: Path) -> Callable[[], None]:
        lim = self.limits
        uid = self.uid(i)
        as_root = self.as_root
        cpu_soft = math.ceil(lim.cpu) + 1
        nproc = lim.processes
        if not as_root:  # the limit counts all of this user's processes: leave room for ours
            nproc += len(_processes_of(os.getuid()))

        def setup() -> None:
            os.setsid()
            if as_root:
                _libc_unshare_net()
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_soft, cpu_soft + 1))
            resource.setrlimit(resource.RLIMIT_AS, (lim.memory_mb << 20,) * 2)
            resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_mb << 20,) * 2)
            resource.setrlimit(resource.RLIMIT_NOFILE, (lim.open_files,) * 2)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            if as_root:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            os.chdir(work)
            os.umask(0o077)

        return setup

    def run_once(self, i: int, work: Path, stdin: str, length: int) -> GuessRun:
        """Run entry ``i`` once with ``stdin``; validate its guess of ``length`` letters."""
        lim = self.limits
        inp = self.io / "stdin"
        out = self.io / "stdout"
        inp.write_text(stdin)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(work), "TMPDIR": str(work),
               "LC_ALL": "C"}
        setup = self._preexec(i, work)
        t0 = time.monotonic()
        with open(inp, "rb") as fin, open(out, "wb") as fout:
            pid = _spawn(str(self.programs[i]), env, fin.fileno(), fout.fileno(), setup)
        if pid < 0:
            return GuessRun(stdin, None, 0.0, 0.0, "could not be started")
        status, usage, timed_out = _wait(pid, lim.wall)
        wall = time.monotonic() - t0
        self._kill_all(i, pid)
        cpu = usage.ru_utime + usage.ru_stime
        run = GuessRun(stdin, None, cpu, wall)
        if cpu > lim.cpu:
            run.error = f"used {cpu:.2f} s of CPU (limit {lim.cpu:g} s)"
            return run
        if timed_out:
            run.error = f"still running after {lim.wall:g} s of wall-clock time"
            return run
        size = out.stat().st_size
        with open(out, "rb") as f:
            data = f.read(OUTPUT_CAP + 1)
        if len(data) > OUTPUT_CAP or size > OUTPUT_CAP:
            run.error = f"printed more than {OUTPUT_CAP} bytes"
            return run
        if os.WIFSIGNALED(status):
            run.error = f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
            return run
        text = data.decode("ascii", errors="replace")
        tokens = text.split()
        if len(tokens) != 1:
            shown = text.strip()[:40]
            run.error = f"printed {shown!r}, not one word" if shown else "printed nothing"
            return run
        guess = tokens[0]
        if len(guess) != length or not all("A" <= c <= "Z" for c in guess):
            run.error = f"printed {guess[:40]!r}, not {length} upper-case letters A-Z"
            return run
        run.output = guess
        return run

    def _kill_all(self, i: int, pid: int | None = None) -> None:
        """Kill the run's process group and, as root, every process of the entry's user.

        The user sweep catches processes that left the group (``setsid``) to outlive the
        run; it repeats until none is left, because a fork bomb forks while it is swept.
        """
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not self.as_root:
            return
        for _ in range(1000):
            pids = _processes_of(self.uid(i))
            if not pids:
                return
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for p in pids:  # reap the ones that are our own children
                try:
                    os.waitpid(p, os.WNOHANG)
                except ChildProcessError:
                    pass


def _spawn(program: str, env: dict[str, str], fin: int, fout: int,
           setup: Callable[[], None]) -> int:
    """fork + exec with the confinement applied in the child; -1 if exec failed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into the referee
        try:
            os.close(r)
            os.dup2(fin, 0)
            os.dup2(fout, 1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.closerange(3, w)
            os.closerange(w + 1, 4096)
            os.set_inheritable(w, False)
            setup()
            os.execve(program, [program], env)
        except BaseException:  # the child reports any failure and exits, whatever it was
            try:
                os.write(w, b"x")
            finally:
                os._exit(127)
    os.close(w)
    failed = os.read(r, 1)
    os.close(r)
    if failed:
        os.waitpid(pid, 0)
        return -1
    return pid


def _wait(pid: int, wall: float) -> tuple[int, resource.struct_rusage, bool]:
    """Wait for ``pid`` at most ``wall`` seconds (killing its group after that)."""
    fd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        timed_out = not poller.poll(int(wall * 1000))
        if timed_out:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while True:
            try:
                _pid, status, usage = os.wait4(pid, 0)
                return status, usage, timed_out
            except InterruptedError:
                continue
            except ChildProcessError as exc:  # pragma: no cover - reaped elsewhere
                raise RuntimeError("entry process vanished") from exc
    finally:
        os.close(fd)


# -- finals and playoffs ------------------------------------------------------------------------
@dataclass
class Round:
    """Three words (or the number asked) played by some entries."""

    name: str
    words: list[str]
    results: dict[str, list[WordResult]]

    def totals(self) -> dict[str, int]:
        return {e: sum(r.score for r in rs) for e, rs in self.results.items()}


@dataclass
class Tournament:
    """A final and its playoffs; the winner is alone at the top of the last round, if any."""

    length: int
    rounds: list[Round]
    winner: str | None

    def standings(self) -> list[tuple[int, str, list[int]]]:
        """(rank, entry, totals per round played) best first: the final's total decides,
        then the playoffs among those tied (later rounds break earlier ties)."""
        names = list(self.rounds[0].results)

        def key(name: str) -> tuple[int, ...]:
            parts: list[int] = []
            for rnd in self.rounds:
                totals = rnd.totals()
                parts.append(totals.get(name, 10 ** 9))
            return tuple(parts)

        ordered = sorted(names, key=key)
        out: list[tuple[int, str, list[int]]] = []
        for pos, name in enumerate(ordered):
            rank = pos + 1
            if pos and key(name) == key(ordered[pos - 1]):
                rank = out[-1][0]
            out.append((rank, name, [r.totals()[name] for r in self.rounds if name in r.results]))
        return out

    def to_dict(self) -> dict[str, object]:
        return {
            "length": self.length,
            "winner": self.winner,
            "rounds": [
                {"name": r.name, "words": r.words, "totals": r.totals(),
                 "results": [x.to_dict() for rs in r.results.values() for x in rs]}
                for r in self.rounds
            ],
            "standings": [{"rank": rank, "entry": name, "totals": totals}
                          for rank, name, totals in self.standings()],
        }


def entry_names(paths: Sequence[Path]) -> list[Entry]:
    """Entries named by file name; a repeated name gets ``#2``, ``#3``..."""
    seen: dict[str, int] = {}
    out = []
    for p in paths:
        n = seen.get(p.name, 0) + 1
        seen[p.name] = n
        out.append(Entry(p.name if n == 1 else f"{p.name}#{n}", p))
    return out


def run_tournament(
    entries: Sequence[Entry],
    words: Sequence[str],
    length: int,
    *,
    per_round: int = 3,
    max_playoffs: int = 5,
    targets: Sequence[str] = (),
    seed: int | None = None,
    limits: Limits | None = None,
    progress: Callable[[WordResult], None] | None = None,
) -> Tournament:
    """The final (``per_round`` words, every entry) and playoffs among those tied for first.

    ``targets`` are used first, in order; then words are drawn from ``words`` (of ``length``
    letters) at random without repetition while any are left.
    """
    pool = [w for w in words if len(w) == length]
    rng = random.Random(seed)
    queue = list(targets)
    used: set[str] = set(queue)

    def draw() -> str:
        if queue:
            return queue.pop(0)
        fresh = [w for w in pool if w not in used] or pool
        if not fresh:
            raise ValueError(f"no {length}-letter words to play")
        w = rng.choice(fresh)
        used.add(w)
        return w

    if not pool:  # only the targets can be played: no playoff beyond them
        max_playoffs = max(0, min(max_playoffs, len(queue) // per_round - 1))
    with Referee(entries, limits) as ref:
        return play_rounds([e.name for e in entries], ref.play_word, draw, length,
                           per_round=per_round, max_playoffs=max_playoffs, progress=progress)


def play_rounds(
    names: Sequence[str],
    play: Callable[[int, str], WordResult],
    draw: Callable[[], str],
    length: int,
    *,
    per_round: int = 3,
    max_playoffs: int = 5,
    progress: Callable[[WordResult], None] | None = None,
) -> Tournament:
    """The POTM's final and playoffs, given how to play one entry on one word.

    Every entry plays the final's words; if several share the lowest total, only they play
    ``per_round`` new words, and so on, at most ``max_playoffs`` times. Ties below the top are
    left as ties (shared rank), as in the contest.
    """
    rounds: list[Round] = []
    playing = list(range(len(names)))
    for number in range(max_playoffs + 1):
        words_now = [draw() for _ in range(per_round)]
        results: dict[str, list[WordResult]] = {names[i]: [] for i in playing}
        for word in words_now:
            for i in playing:
                res = play(i, word)
                results[names[i]].append(res)
                if progress:
                    progress(res)
        rnd = Round("final" if number == 0 else f"playoff {number}", words_now, results)
        rounds.append(rnd)
        totals = rnd.totals()
        best = min(totals.values())
        tied = [i for i in playing if totals[names[i]] == best]
        if len(tied) == 1:
            return Tournament(length, rounds, names[tied[0]])
        playing = tied
    return Tournament(length, rounds, None)
