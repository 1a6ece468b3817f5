"""moo report: files, and the exact matrix against matches actually played pair by pair."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

from bots.report import wdl, write_report
from clients.tournament.runner import Job, play_local
from moo.match import MatchConfig
from moo.rules import Rules
from tests.tournament_support import FIRST, LAST, FirstConsistent, LastConsistent

SMALL = Rules(length=3, alphabet="01234")  # 60 secrets: every pair can be played


def test_wdl_by_hand() -> None:
    a = {1: 1, 2: 1}
    b = {2: 1, 3: 1}
    # pairs (1,2) win, (1,3) win, (2,2) draw, (2,3) win
    assert wdl(a, b) == (Fraction(3, 4), Fraction(1, 4), Fraction(0))
    assert wdl(b, a) == (Fraction(0), Fraction(1, 4), Fraction(3, 4))


def test_report_files_and_matrix_agree_with_every_match_played(tmp_path: Path) -> None:
    data = write_report([FIRST, LAST], tmp_path, rules=SMALL, baseline=None)
    for name in ("report.md", "report.json", "matrix.png", "dist_FirstConsistent.png",
                 "dist_LastConsistent.png"):
        path = tmp_path / name
        assert path.exists() and path.stat().st_size > 0, name
        if name.endswith(".png"):
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "report.md").read_text()
    assert "## Win / draw / loss matrix" in md and "![score matrix](matrix.png)" in md
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved == json.loads(json.dumps(data))
    for s in data["strategies"]:
        assert s["games"] == len(SMALL.secrets)
    # independent check: play every (secret, secret) pair as a real race on the Match engine
    config = MatchConfig(rules=SMALL, secret_ms=None)
    strategies = (FirstConsistent(), LastConsistent())
    outcome = {0: 0, None: 0, 1: 0}
    for x in SMALL.secrets:
        for y in SMALL.secrets:
            job = Job(key=f"{x}{y}", seed=0, round=0, leg=0, pair=(0, 1), specs=(FIRST, LAST),
                      names=("a", "b"), secrets=(x, y))
            outcome[play_local(job, strategies, config).winner] += 1
    n = len(SMALL.secrets) ** 2
    cell = data["matrix"]["FirstConsistent"]["LastConsistent"]
    assert Fraction(cell["win"]) == Fraction(outcome[0], n)
    assert Fraction(cell["draw"]) == Fraction(outcome[None], n)
    assert Fraction(cell["loss"]) == Fraction(outcome[1], n)
    mirror = data["matrix"]["LastConsistent"]["FirstConsistent"]
    assert Fraction(mirror["win"]) == Fraction(cell["loss"])


def test_report_with_a_baseline_highlights_its_row(tmp_path: Path) -> None:
    write_report([LAST], tmp_path, rules=SMALL, baseline=FIRST)
    md = (tmp_path / "report.md").read_text()
    assert "## Against `FirstConsistent`" in md
    assert "| **`FirstConsistent`** |" in md
    assert "| `LastConsistent` |" in md


def test_unavailable_shipped_bots_are_listed_not_fatal(tmp_path: Path) -> None:
    import pytest

    from moo.errors import MooError

    data = write_report([FIRST, "no-such-bot"], tmp_path, rules=SMALL, baseline="missing-base",
                        optional=["no-such-bot"])
    assert set(data["skipped"]) == {"no-such-bot", "missing-base"}
    assert data["baseline"] is None
    assert "Not evaluated" in (tmp_path / "report.md").read_text()
    with pytest.raises(MooError):
        write_report([FIRST, "no-such-bot"], tmp_path, rules=SMALL, baseline=None)
