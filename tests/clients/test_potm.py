"""The POTM referee (clients/potm): the 1999 rules, confinement, hostile entries, playoffs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.potm.referee import (
    FAIL_SCORE,
    Entry,
    Limits,
    Referee,
    WordResult,
    _processes_of,
    play_rounds,
)
from moo.words import score_hits_misses

HERE = Path(__file__).parent
ENTRIES = HERE.parent / "potm_entries"
EXAMPLE = HERE.parents[1] / "examples" / "potm" / "letterwise.sh"
#: Small limits keep the hostile entries cheap on a shared machine; the rules are the same.
FAST = Limits(cpu=0.5, wall=4.0, memory_mb=64, processes=16)


def _entry(name: str) -> Entry:
    path = EXAMPLE if name == "letterwise.sh" else ENTRIES / name
    return Entry(name, path)


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


@pytest.mark.parametrize("referee", [["letterwise.sh"]], indirect=True)
@pytest.mark.parametrize("word", ["SKUNK", "AAAA", "QUIZZICAL", "MISSISSIP", "JAZZ"])
def test_example_entry_solves_and_every_answer_follows_the_rules(referee: Referee,
                                                                 word: str) -> None:
    res = referee.play_word(0, word)
    assert res.reason == "solved"
    assert res.guesses[-1] == word
    assert res.score == len(res.guesses) <= 100
    assert all(len(g) == len(word) and g.isupper() for g in res.guesses)


@pytest.mark.parametrize("referee", [["protocol.sh"]], indirect=True)
def test_stdin_is_n_then_guess_hits_misses(referee: Referee) -> None:
    # protocol.sh prints WRONG (and never finds the word) unless stdin is exactly the POTM's.
    res = referee.play_word(0, "SKUNK")
    assert res.guesses == ["ABCDE", "SKIPS", "GUPPY", "SKUNK"]
    assert res.score == 4
    assert score_hits_misses("SKUNK", "SKIPS") == (2, 2)


@pytest.mark.parametrize("referee", [["tempok.sh"]], indirect=True)
def test_temp_files_kept_within_a_word_and_removed_between_words(referee: Referee) -> None:
    first = referee.play_word(0, "SKUNK")
    second = referee.play_word(0, "SKUNK")  # prints LEAKED if TEMP.count survived
    assert (first.score, second.score) == (3, 3)


HOSTILE = [
    ("loop.sh", "CPU"),
    ("flood.sh", "more than 4096 bytes"),
    ("garbage.sh", "not one word"),
    ("lowercase.sh", "not 5 upper-case letters"),
    ("sleeper.sh", "wall-clock"),
    ("hog.sh", ""),
    ("litter.sh", "only TEMP* files"),
    ("bigtemp.sh", "larger than 1 MB"),
    ("forkbomb.sh", ""),
]


@pytest.mark.parametrize(("name", "why"), HOSTILE)
def test_hostile_entry_costs_only_its_own_score(name: str, why: str) -> None:
    with Referee([_entry("letterwise.sh"), _entry(name)], FAST) as ref:
        alone = ref.play_word(0, "SKUNK").score
        bad = ref.play_word(1, "SKUNK")
        after = ref.play_word(0, "SKUNK")
        assert bad.score == FAIL_SCORE
        assert bad.reason.startswith("guess 1: ")
        assert why in bad.reason
        assert after.reason == "solved"
        assert after.score == alone  # the example's own count for SKUNK, unchanged
        if ref.as_root:  # nothing of the hostile entry is left running
            assert _processes_of(ref.uid(1)) == []


def test_more_than_100_guesses_scores_999() -> None:
    with Referee([_entry("same.sh")], FAST) as ref:
        res = ref.play_word(0, "SKUNK")
    assert res.score == FAIL_SCORE
    assert len(res.guesses) == 100
    assert "100 guesses" in res.reason


def test_a_correct_100th_guess_counts() -> None:
    # An entry that guesses AAAAA 99 times, then the word: 100 guesses is still a score.
    script = ENTRIES / "late.sh"
    assert script.exists()
    with Referee([Entry("late.sh", script)], FAST) as ref:
        res = ref.play_word(0, "SKUNK")
    assert res.score == 100


def test_writing_outside_its_directory_is_stopped_or_penalised() -> None:
    with Referee([_entry("escape.sh"), _entry("letterwise.sh")], FAST) as ref:
        res = ref.play_word(0, "SKUNK")
        leftovers = sorted(p.name for p in ref.root.rglob("ESCAPED*"))
        assert leftovers == []
        assert res.score == FAIL_SCORE
        if ref.as_root:  # the writes fail (its own user id): it plays on, AAAAA 100 times
            assert "100 guesses" in res.reason
        else:  # the writes succeed in the referee's tree: caught after the run
            assert "outside its directory" in res.reason
        good = ref.play_word(1, "SKUNK")
        assert good.reason == "solved" and good.score == len(good.guesses)


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

    # entry 2 is best in the final: no playoff at all
    t = play_rounds(["0", "1", "2", "3"], play, lambda: next(words), 5)
    assert t.winner == "2" and len(t.rounds) == 1
    assert [(r, n) for r, n, _ in t.standings()] == [(1, "2"), (2, "0"), (2, "1"), (4, "3")]

    scores[2] = [9, 9, 9]
    played = {i: [] for i in scores}
    t = play_rounds(["0", "1", "2", "3"], play, lambda: next(words), 5, max_playoffs=5)
    assert t.winner == "1"
    assert [r.name for r in t.rounds] == ["final", "playoff 1", "playoff 2"]
    assert set(t.rounds[1].results) == {"0", "1"}  # only those tied first
    assert len(played[2]) == len(played[3]) == 3
    ranks = [(r, n) for r, n, _ in t.standings()]
    assert ranks == [(1, "1"), (2, "0"), (3, "2"), (3, "3")]


def test_playoffs_stop_at_the_limit_without_a_winner() -> None:
    words = iter(f"W{k:04}" for k in range(100))
    t = play_rounds(["a", "b", "c"], lambda i, w: WordResult("abc"[i], w, 4 if i < 2 else 7),
                    lambda: next(words), 5, max_playoffs=2)
    assert t.winner is None
    assert [set(r.results) for r in t.rounds] == [{"a", "b", "c"}, {"a", "b"}, {"a", "b"}]


def _moo(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", "potm", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_cli_standings_with_example_and_hostile_entries(tmp_path: Path) -> None:
    words = tmp_path / "words.txt"
    words.write_text("skunk\nmoose\nhouse\ncan't\nzebra\n")
    proc = _moo(str(EXAMPLE), str(ENTRIES / "garbage.sh"), str(ENTRIES / "loop.sh"),
                "--length", "5", "--words", str(words), "--seed", "7", "--cpu", "0.5",
                "--wall", "4", "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    final = data["rounds"][0]
    assert len(set(final["words"])) == 3 and set(final["words"]) <= {
        "SKUNK", "MOOSE", "HOUSE", "ZEBRA"}
    assert final["totals"]["garbage.sh"] == final["totals"]["loop.sh"] == 3 * FAIL_SCORE
    assert final["totals"]["letterwise.sh"] < 3 * 100
    assert data["winner"] == "letterwise.sh"
    assert [s["entry"] for s in data["standings"]] == ["letterwise.sh", "garbage.sh", "loop.sh"]
    assert [s["rank"] for s in data["standings"]] == [1, 2, 2]
    text = _moo(str(EXAMPLE), str(ENTRIES / "garbage.sh"), "--length", "5", "--words",
                str(words), "--target", "skunk", "--target", "moose", "--target", "house",
                "--quiet")
    assert text.returncode == 0
    assert "final: SKUNK MOOSE HOUSE" in text.stdout
    assert "winner: letterwise.sh" in text.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope.sh", "--length", "5", "--dictionary"], "no such entry"),
        ([str(HERE / "test_potm.py"), "--length", "5", "--dictionary"], "not executable"),
        ([str(EXAMPLE), "--length", "10", "--dictionary"], "--length must be 4-9"),
        ([str(EXAMPLE), "--length", "5", "--dictionary", "--target", "SKUN"], "not 5 letters"),
        ([str(EXAMPLE), "--length", "5", "--words", "/nonexistent/w.txt"], "cannot read"),
    ],
)
def test_cli_mistakes_get_one_line(args: list[str], message: str) -> None:
    proc = _moo(*args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr
    assert proc.stderr.startswith("moo potm: ")


def test_entries_are_copies(tmp_path: Path) -> None:
    # The referee runs a private copy: an entry cannot be swapped or edited mid-contest.
    with Referee([_entry("letterwise.sh")], FAST) as ref:
        copy = ref.programs[0]
        assert copy != EXAMPLE and copy.read_bytes() == EXAMPLE.read_bytes()
        assert os.stat(copy).st_uid == os.geteuid()


def test_entries_have_no_network_when_run_as_root() -> None:
    with Referee([_entry("netcheck.sh")], FAST) as ref:
        if not ref.as_root:
            pytest.skip("network namespaces need the referee to run as root")
        assert ref.play_word(0, "SKUNK").score == 1  # it saw only the loopback interface


def test_targets_only_list_limits_playoffs(tmp_path: Path) -> None:
    # Two copies of the same entry always tie; with no 5-letter word in the list only the
    # three targets exist, so there is the final and no playoff (instead of a crash).
    words = tmp_path / "w.txt"
    words.write_text("elephant\n")
    proc = _moo(str(EXAMPLE), str(EXAMPLE), "--length", "5", "--words", str(words),
                "--target", "SKUNK", "--target", "MOOSE", "--target", "HOUSE", "--json",
                "--quiet")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [r["name"] for r in data["rounds"]] == ["final"]
    assert data["winner"] is None
    assert [s["entry"] for s in data["standings"]] == ["letterwise.sh", "letterwise.sh#2"]
    assert [s["rank"] for s in data["standings"]] == [1, 1]


def test_referees_at_the_same_time_use_disjoint_user_ids() -> None:
    entries = [_entry("letterwise.sh"), _entry("same.sh")]
    with Referee(entries, FAST) as a, Referee(entries, FAST) as b:
        ids_a = {a.uid(0), a.uid(1)}
        ids_b = {b.uid(0), b.uid(1)}
        assert not ids_a & ids_b
        assert min(ids_a | ids_b) >= 1_000_000
        # one referee's sweep after its runs leaves the other's entries alone
        assert a.play_word(0, "SKUNK").reason == "solved"
        assert b.play_word(0, "SKUNK").reason == "solved"
    with Referee(entries, Limits(uid_base=1_234_000)) as c:
        assert (c.uid(0), c.uid(1)) == (1_234_000, 1_234_001)
