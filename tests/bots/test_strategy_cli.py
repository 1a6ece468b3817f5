"""moo strategy list / dump."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bots.tree as tree_mod
from cli.main import main as moo
from moo.rules import DEFAULT_RULES, score
from tests.patience import patience


def test_list_names_and_summaries(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tree_mod, "DATA_DIR", tmp_path)
    assert moo(["strategy", "list"]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines()]
    assert names == sorted(names)
    for name in ["entropy", "expected", "parts", "minimax", "larmouth", "random", "first",
                 "minimum", "strongest"]:
        assert name in names
    assert "unavailable" in next(line for line in out.splitlines() if line.startswith("minimum"))
    assert moo(["strategy", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["minimax"]["available"] and "largest part" in rows["minimax"]["summary"]
    assert not rows["strongest"]["available"]


def test_dump_prints_5040_replayable_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert moo(["strategy", "dump", "first"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5040
    secrets = [line.split(":")[0] for line in lines]
    assert secrets == list(DEFAULT_RULES.secrets)
    for line in lines:
        secret, guesses = line.split(": ")
        seq = guesses.split()
        assert seq[-1] == secret and secret not in seq[:-1]
        assert all(score(secret, g) != DEFAULT_RULES.solved for g in seq[:-1])
    assert sum(len(line.split()) - 1 for line in lines) == 28024


def test_dump_json_and_random_seeds(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in ("a.json", "b.json", "c.json"))
    assert moo(["strategy", "dump", "random", "--seed", "5", "--json", "-o", str(a)]) == 0
    assert moo(["strategy", "dump", "random", "--seed", "5", "--json", "-o", str(b)]) == 0
    assert moo(["strategy", "dump", "random", "--seed", "6", "--json", "-o", str(c)]) == 0
    first = json.loads(a.read_text())
    assert first == json.loads(b.read_text()) != json.loads(c.read_text())
    assert len(first) == 5040 and first[9]["secret"] == first[9]["guesses"][-1]


def test_dump_of_unknown_strategy_fails_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    assert moo(["strategy", "dump", "nosuchbot"]) == 2
    assert "unknown strategy" in capsys.readouterr().err


def test_dump_into_a_closed_pipe_is_quiet() -> None:
    """`moo strategy dump minimum | head -1`: the reader leaving is not a crash.

    The read end is closed before the child can have written anything (it has to import and
    load the tree first), so its first write meets EPIPE every time."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "strategy", "dump", "minimum"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _out, err = proc.communicate(timeout=patience(60))
    assert "Traceback" not in err.decode(), err.decode()
    assert "BrokenPipeError" not in err.decode(), err.decode()
    assert proc.returncode == 141
