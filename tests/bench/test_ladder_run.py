"""bench/ladder_run.py end to end, briefly, so that it cannot rot: two example bots (sprinter,
not deterministic, and first, whose exact tree is cheap) submitted with moo ladder submit,
played by two worker processes for 15 s (one killed and started again in the middle), then the
script's own checks: games played, ratings with intervals, no game stuck, every bot's games
reachable from its page; an exact score found computed must equal moo eval's. The same on a
three-node cluster with the lobby leader killed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.client_support import ROOT
from tests.patience import patience

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e


@pytest.mark.slow(31)
def test_a_short_ladder_run_reports_and_checks_its_games() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.ladder_run", "--minutes", "0.25", "--workers", "2",
         "--only", "sprinter,first", "--kill-worker-at", "6", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=patience(600))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert proc.stderr.strip().splitlines()[-1].startswith("summary: ")
    assert {r["bot"] for r in result["standings"]} == {"sprinter", "first"}
    assert result["games"] >= 2  # at least a pairing, played both ways
    assert result["stuck_games"] == [] and result["reachable"] is True
    for row in result["standings"]:
        assert row["games"] == result["games"]  # two bots: every game is between them
        assert row["low"] <= row["rating"] <= row["high"]
        assert row["games"] == row["wins"] + row["draws"] + row["losses"]
    # first's exact tree is cheap (minimum's took a worker for the whole run, and a core)
    assert all(check["equal"] for check in result["exact"]), result["exact"]


@pytest.mark.slow(31, nodes=True)
@pytest.mark.pg
@pytest.mark.mqtt
def test_a_short_ladder_run_on_a_cluster_with_the_leader_killed() -> None:
    """Three nodes on PostgreSQL, workers on b and c, node a (the leader that runs the
    ladder) SIGKILLed 7 s in: games played on, none stuck, pages complete."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.ladder_run", "--cluster", "--minutes", "0.3",
         "--workers", "2", "--only", "first,random", "--kill-node-at", "7", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=patience(900))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["nodes"] == 3 and "node_killed_at_s" in result, result
    assert {r["bot"] for r in result["standings"]} == {"first", "random"}
    # (a fresh-clone suite run once saw 0 games here, not reproduced since: what the run
    # printed is kept in the message)
    assert result["games"] >= 2, (result, proc.stderr[-3000:])
    assert result["stuck_games"] == [] and result["reachable"] is True
    for row in result["standings"]:
        assert row["games"] == result["games"]
        assert row["games"] == row["wins"] + row["draws"] + row["losses"]
