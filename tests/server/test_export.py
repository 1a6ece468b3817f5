"""``moo export`` and ``moo report --games``: a tournament played through a real server, exported,
then each bot's score against minimum estimated from the export.

The tournament is seeded, so the matches (and therefore the estimates) are the same on every
run: the interval checks below are facts about these 240 matches, not a 95 % coin toss.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bots.estimator import score_against
from bots.tree import shipped_distribution
from cli.main import main as moo_main
from clients.tournament.remote import RemoteEngine
from clients.tournament.runner import make_plan, run_tournament
from server.export import FORMAT
from tests.patience import patience
from tests.pg_support import pg_url
from tests.server_support import running, server_settings

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here

#: exact score of the strongest tree against the minimum tree (moo eval strongest --vs minimum)
STRONGEST_VS_MINIMUM = 0.5019145
ROUNDS = 120  # paired: 240 matches


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One seeded strongest-vs-minimum tournament through a server, exported to JSON lines."""
    tmp = tmp_path_factory.mktemp("export")

    async def play() -> int:
        jobs = make_plan(["strongest", "minimum"], rounds=ROUNDS, seed=7)
        async with running(server_settings(tmp)) as app:
            engine = RemoteEngine(f"ws://127.0.0.1:{app.port}/", prefix="ex-")
            result = await asyncio.wait_for(run_tournament(jobs, engine, concurrency=8),
                                            patience(300))
        return len(result.records)

    assert asyncio.run(play()) == 2 * ROUNDS
    out = tmp / "games.jsonl"
    assert moo_main(["export", "--db", str(tmp / "moo.sqlite3"), "--out", str(out)]) == 0
    return out


def test_every_finished_match_is_one_checkable_record(exported: Path) -> None:
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    assert len(records) == 2 * ROUNDS
    assert len({r["match_id"] for r in records}) == 2 * ROUNDS
    for r in records:
        _check_record(r)


def _check_record(r: dict[str, Any]) -> None:
    assert r["format"] == FORMAT
    assert {p.split("-")[1] for p in r["players"]} == {"strongest", "minimum"}
    # fairness: the commitments published at the start match the revealed secrets
    for seat in (0, 1):
        digest = hashlib.sha256((r["salts"][seat] + r["secrets"][seat]).encode()).hexdigest()
        assert digest == r["commitments"][seat]
    # every guess is there with its response: the last one of a solver is its 4 bulls
    for seat in (0, 1):
        moves = r["guesses"][seat]
        assert [m["n"] for m in moves] == list(range(1, len(moves) + 1))
        assert len(moves) == r["result"]["counts"][seat]
        secret = r["secrets"][1 - seat]
        for m in moves:
            bulls = sum(a == b for a, b in zip(m["guess"], secret))
            assert (m["bulls"], m["cows"]) == (bulls, len(set(m["guess"]) & set(secret))
                                               - bulls)
            assert m["ms"] >= 0
        if r["result"]["solved"][seat]:
            assert moves[-1]["guess"] == secret
    assert r["ended_at"] >= r["started_at"] >= r["created_at"]


def test_export_from_postgresql(pg_url: str, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """``--db postgresql://...`` exports the same records, in end order, read-only."""
    rounds = 3

    async def play() -> int:
        jobs = make_plan(["strongest", "minimum"], rounds=rounds, seed=7)
        settings = dataclasses.replace(server_settings(tmp_path), db=pg_url)
        async with running(settings) as app:
            engine = RemoteEngine(f"ws://127.0.0.1:{app.port}/", prefix="ex-")
            result = await asyncio.wait_for(run_tournament(jobs, engine, concurrency=4),
                                            patience(120))
        return len(result.records)

    assert asyncio.run(play()) == 2 * rounds
    out = tmp_path / "pg.jsonl"
    assert moo_main(["export", "--db", pg_url, "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len({r["match_id"] for r in records}) == len(records) == 2 * rounds
    for r in records:
        _check_record(r)
    ends = [r["ended_at"] for r in records]
    assert ends == sorted(ends)
    assert moo_main(["export", "--db", pg_url, "--since", "2999-01-01", "--out", str(out)]) == 0
    assert out.read_text() == ""
    capsys.readouterr()
    gone = pg_url.rsplit("/", 1)[0] + "/moo_no_such_database"
    assert moo_main(["export", "--db", gone, "--out", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("moo export: cannot read postgresql://")


def test_since_filters_by_end_time(exported: Path, tmp_path: Path) -> None:
    db = exported.parent / "moo.sqlite3"
    out = tmp_path / "late.jsonl"
    assert moo_main(["export", "--db", str(db), "--since", "2999-01-01", "--out", str(out)]) == 0
    assert out.read_text() == ""
    assert moo_main(["export", "--db", str(db), "--since", "2000-01-01T00:00:00Z",
                     "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 2 * ROUNDS


def test_report_games_interval_contains_the_exact_scores(
    exported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert moo_main(["report", "--games", str(exported), "--player", "ex-strongest-*",
                     "--json"]) == 0
    strongest = json.loads(capsys.readouterr().out)
    vs = strongest["vs_minimum"]
    assert vs["n"] == 2 * ROUNDS
    assert vs["low"] <= STRONGEST_VS_MINIMUM <= vs["high"]
    assert vs["high"] - vs["low"] < 0.2  # an interval that says something
    assert moo_main(["report", "--games", str(exported), "--player", "ex-minimum-*",
                     "--json"]) == 0
    minimum = json.loads(capsys.readouterr().out)
    assert minimum["vs_minimum"]["low"] <= 0.5 <= minimum["vs_minimum"]["high"]
    # the exact value the test compares with is the shipped trees' own
    m, s = shipped_distribution("minimum"), shipped_distribution("strongest")
    exact = score_against({k: n / 5040 for k, n in s.items()}, m)
    assert round(exact, 7) == STRONGEST_VS_MINIMUM
    # the text form says the same in one line a person reads
    assert moo_main(["report", "--games", str(exported), "--player", "ex-strongest-*"]) == 0
    text = capsys.readouterr().out
    assert f"score against minimum: {vs['score']:.4f}" in text


def test_solved_matches_alone_would_overstate_the_winner(exported: Path) -> None:
    """Why the estimator handles censoring: averaging solved matches only is biased."""
    from bots.report import observed_outcomes

    _, outcomes = observed_outcomes(exported, "ex-strongest-*")
    solved = [k for k, ok in outcomes if ok]
    naive = score_against({k: solved.count(k) / len(solved) for k in set(solved)},
                          shipped_distribution("minimum"))
    assert naive > STRONGEST_VS_MINIMUM + 0.05


def test_cli_mistakes_get_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "x.jsonl")
    assert moo_main(["export", "--db", str(tmp_path / "none.sqlite3"), "--out", out]) == 1
    assert not (tmp_path / "none.sqlite3").exists()  # nothing created
    (tmp_path / "junk.sqlite3").write_text("not a database")
    assert moo_main(["export", "--db", str(tmp_path / "junk.sqlite3"), "--out", out]) == 1
    sqlite3.connect(tmp_path / "other.sqlite3").execute("CREATE TABLE t(x)").connection.commit()
    assert moo_main(["export", "--db", str(tmp_path / "other.sqlite3"), "--out", out]) == 1
    assert moo_main(["export", "--db", str(tmp_path), "--out", out]) == 1
    assert moo_main(["export", "--db", str(tmp_path / "other.sqlite3"), "--since", "yesterday",
                     "--out", out]) == 1
    assert moo_main(["report", "--games", str(tmp_path / "missing.jsonl"), "--player", "a"]) == 1
    (tmp_path / "bad.jsonl").write_text('{"players": 1}\n')
    assert moo_main(["report", "--games", str(tmp_path / "bad.jsonl"), "--player", "a"]) == 1
    assert moo_main(["report", "--games", str(tmp_path / "bad.jsonl")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 8 and all(line.startswith(("moo export: ", "moo report: ")) for line in err)
    assert "none.sqlite3" in err[0] and "junk.sqlite3" in err[1] and "not a MOO Arena" in err[2]
    assert "directory" in err[3] and "yesterday" in err[4] and "bad.jsonl:1" in err[6]
    assert not Path(out).exists()


def test_report_games_counts_classic_unassisted_matches_only(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Records of other variants and assisted practice matches are left out, and said so."""
    first = json.loads(exported.read_text().splitlines()[0])
    mastermind = json.loads(json.dumps(first))
    mastermind["config"]["rules"] = {"game": "mastermind", "length": 4, "alphabet": "123456",
                                     "repeats_in_guess": True}
    assisted = json.loads(json.dumps(first))
    assisted["config"]["assist"] = True
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join(json.dumps(r) for r in (first, mastermind, assisted)) + "\n")
    name = first["players"][0]
    capsys.readouterr()
    assert moo_main(["report", "--games", str(mixed), "--player", name, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["matches"] == 1 and data["other_matches"] == 2
    only_other = tmp_path / "other.jsonl"
    only_other.write_text(json.dumps(mastermind) + "\n")
    assert moo_main(["report", "--games", str(only_other), "--player", name]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no classic match" in err[0] and "1 of other variants" in err[0]
