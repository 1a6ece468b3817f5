"""Table bots: dump files are validated on load and played back move for move.

The real minimum/strongest trees come from the exact solver; these tests use placeholder trees
dumped from the heuristic bots into a temporary directory, never committed.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

import bots.tree as tree_mod
from bots.playout import play_all
from bots.registry import create
from bots.tree import (
    InvalidTree,
    Minimum,
    Strongest,
    TreeStrategy,
    TreeUnavailable,
    format_dump_line,
    load_tree,
)
from cli.main import main as moo
from moo.rules import DEFAULT_RULES, Response, Rules


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bots/data look-alike holding placeholder minimum/strongest trees from heuristics."""
    data = tmp_path_factory.mktemp("data")
    for name, stands_for in [("expected", "minimum"), ("minimax", "strongest")]:
        assert moo(["strategy", "dump", name, "-o", str(data / f"{stands_for}.txt.gz")]) == 0
    return data


def lines_of(path: Path) -> list[str]:
    with gzip.open(path, "rt") as fh:
        return fh.read().splitlines()


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_table_bot_replays_the_tree_it_was_given(dumps: Path) -> None:
    bot = TreeStrategy(dumps / "minimum.txt.gz")
    games = play_all(bot, DEFAULT_RULES)
    assert games == play_all(create("expected", relabel=False), DEFAULT_RULES)
    assert sum(bot.tree.counts.values()) == sum(len(g) for _, g in games)


def test_named_table_bots_take_a_path_or_default_to_bots_data(
    dumps: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert play_all(Strongest(dumps / "strongest.txt.gz"), DEFAULT_RULES)[:50] == play_all(
        create("minimax", relabel=False), DEFAULT_RULES, secrets=DEFAULT_RULES.secrets[:50]
    )
    monkeypatch.setattr(tree_mod, "DATA_DIR", dumps)
    assert Minimum().tree.source == str((dumps / "minimum.txt.gz").resolve())
    assert Minimum.unavailable() == ""
    monkeypatch.setattr(tree_mod, "DATA_DIR", tmp_path)
    with pytest.raises(TreeUnavailable, match=r"'minimum' needs its decision tree .*missing"):
        Minimum()
    assert "missing" in Strongest.unavailable()
    with pytest.raises(TreeUnavailable):
        create("strongest")


def test_a_move_is_a_dict_lookup(dumps: Path) -> None:
    bot = Minimum(dumps / "minimum.txt.gz")
    bot.new_match(DEFAULT_RULES, random.Random(0))
    first = bot.next_guess()
    assert bot.tree.moves[()] == first == "0123"
    bot.observe(first, Response(0, 1))
    assert bot.next_guess() == bot.tree.moves[(Response(0, 1),)]
    with pytest.raises(TreeUnavailable, match="not these rules"):
        bot.new_match(Rules(length=3), random.Random(0))


def test_file_spec_plays_a_dump_relabelled_by_default(dumps: Path) -> None:
    bot = create(f"file:{dumps / 'strongest.txt.gz'}")
    assert bot.name == "file"
    firsts = set()
    for seed in range(20):
        bot.new_match(DEFAULT_RULES, random.Random(seed))
        firsts.add(bot.next_guess())
    assert len(firsts) > 10  # the tree always opens 0123; relabelled, almost never the same
    assert isinstance(create(f"file:{dumps / 'strongest.txt.gz'}", relabel=False), TreeStrategy)


def test_trees_are_loaded_once_per_process(dumps: Path) -> None:
    assert load_tree(dumps / "minimum.txt.gz") is load_tree(dumps / "minimum.txt.gz")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda ls: ls[:-1], "missing 9876"),
        (lambda ls: [ls[0], *ls], "repeated or out of order"),
        (lambda ls: [ls[1], ls[0], *ls[2:]], "repeated or out of order"),
        (lambda ls: [*ls[:7], "0132 0123 0132", *ls[8:]], "expected 'SECRET"),
        (lambda ls: [*ls[:7], "0132: 0123 0124", *ls[8:]], "is not the secret"),
        (lambda ls: [*ls[:7], "0132: 0132 0123 0132", *ls[8:]], "guessed before the end"),
        (lambda ls: [*ls[:7], "0132: 0123 0113 0132", *ls[8:]], "must be distinct"),
        (lambda ls: [*ls[:7], "0132: 0123 4567 0132", *ls[8:]], "not a function of the history"),
    ],
)
def test_invalid_dumps_are_rejected_with_the_line(
    dumps: Path, tmp_path: Path, edit: object, message: str
) -> None:
    lines = lines_of(dumps / "minimum.txt.gz")
    assert lines[7].startswith("0132: ")
    path = write(tmp_path / "bad.txt", edit(lines))  # type: ignore[operator]
    with pytest.raises(InvalidTree, match=message):
        TreeStrategy(path)


def test_dump_lines_round_trip(dumps: Path) -> None:
    lines = lines_of(dumps / "minimum.txt.gz")
    assert len(lines) == 5040 and lines[0] == format_dump_line("0123", ["0123"])


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TreeUnavailable, match="no dump file"):
        TreeStrategy(tmp_path / "nope.txt.gz")
