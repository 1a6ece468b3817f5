"""``moo bot`` end to end: real ``moo serve`` subprocess, real ``moo bot`` subprocesses."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

from tests.client_support import ROOT, client_env, moo_command, moo_serve
from tests.patience import patience

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

AWK_BOT = str(ROOT / "examples" / "bots" / "first_consistent.sh")


def run_bot(tmp_path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(moo_command("bot", *args), cwd=ROOT, env=client_env(tmp_path),
                          capture_output=True, text=True, timeout=timeout)


def lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_random_bots_play_twenty_queued_matches(tmp_path):
    with moo_serve(tmp_path) as url:
        # Two connections in one process queue up and are paired with each other.
        done = run_bot(tmp_path, "random", "--url", url, "--games", "20", "--concurrency", "2",
                       "--name", "rnd", "--json", "--seed", "1")
    assert done.returncode == 0, done.stderr
    out = lines(done.stdout)
    matches = [o for o in out if o["type"] == "match"]
    summary = out[-1]
    assert summary["type"] == "summary" and summary["matches"] == 20
    assert len(matches) == 20
    assert {m["player"] for m in matches} == {"rnd-1", "rnd-2"}
    assert all(m["outcome"] in ("win", "loss", "draw") and m["fair"] for m in matches)
    # Paired with each other: every match appears once from each seat with opposite results.
    by_id: dict[str, list[dict[str, Any]]] = {}
    for m in matches:
        by_id.setdefault(m["match_id"], []).append(m)
    assert all(len(v) == 2 for v in by_id.values())
    for a, b in by_id.values():
        assert {a["outcome"], b["outcome"]} in ({"win", "loss"}, {"draw"})
    assert summary["wins"] == summary["losses"]
    assert 3 < summary["avg_guesses"] < 9


def test_external_awk_bot_and_a_strategy_meet_in_the_queue(tmp_path):
    with moo_serve(tmp_path) as url:
        awk = subprocess.Popen(moo_command("bot", "--cmd", AWK_BOT, "--url", url, "--games",
                                           "4", "--name", "awk", "--pool", "any"),
                               cwd=ROOT, env=client_env(tmp_path), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        rnd = run_bot(tmp_path, "random", "--url", url, "--games", "4", "--name", "rnd")
        awk_out, awk_err = awk.communicate(timeout=patience(60))
    assert rnd.returncode == 0, rnd.stderr
    assert awk.returncode == 0, awk_err
    assert awk_out.count(" awk vs rnd: ") == 4
    assert "4 matches:" in awk_out and "bot failures" not in awk_out
    assert rnd.stdout.count(" rnd vs awk: ") == 4


def test_external_bot_against_the_servers_bot(tmp_path):
    with moo_serve(tmp_path) as url:
        done = run_bot(tmp_path, "--cmd", AWK_BOT, "--url", url, "--games", "3",
                       "--vs-bot", "random", "--name", "awk2", "--encoding", "msgpack")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(" awk2 vs random-bot: ") == 3
    assert "3 matches:" in done.stdout


def test_unknown_strategy_is_a_usage_error(tmp_path):
    done = run_bot(tmp_path, "no-such-strategy", "--url", "ws://127.0.0.1:9/")
    assert done.returncode == 2
    assert "unknown strategy" in done.stderr


def test_the_sdk_example_from_the_docs_runs(tmp_path):
    example = ROOT / "examples" / "sdk_first_consistent.py"
    doc = (ROOT / "docs" / "sdk.md").read_text()
    assert example.read_text().split('"""', 2)[2].strip() in doc  # the doc shows this code
    with moo_serve(tmp_path) as url:
        done = subprocess.run([sys.executable, str(example), url], cwd=ROOT,
                              env=client_env(tmp_path), capture_output=True, text=True,
                              timeout=patience(60))
    assert done.returncode == 0, done.stderr
    assert re.match(r"(win|loss|draw): solved, counts \(\d+, \d+\), fair: \[True, True\]",
                    done.stdout), done.stdout


def test_progress_is_one_line_rewritten_in_place_on_a_terminal():
    """On a tty the progress line is redrawn with CR + erase-line, and a notice or a match
    line first clears it, so the terminal never shows half-overwritten text."""
    import argparse
    import io

    from clients.botrunner import MatchOutcome, _Run

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    run = _Run(argparse.Namespace(games=2, json=False), stderr=err)

    def outcome(result: str) -> MatchOutcome:
        return MatchOutcome("m1", "me", "you", result, "solved", 5, 6, True, False, "0123",
                            "4567", True)

    run.report(outcome("win"))
    assert err.getvalue() == "\r\033[K[##########..........] 1/2 matches: 1 W / 0 D / 0 L"
    run.notice("me: still waiting")
    run.report(outcome("draw"))
    run.finish()
    assert err.getvalue().split("\r\033[K")[1:] == [
        "[##########..........] 1/2 matches: 1 W / 0 D / 0 L",
        "me: still waiting\n[##########..........] 1/2 matches: 1 W / 0 D / 0 L",
        "",
        "[####################] 2/2 matches: 1 W / 1 D / 0 L\n",
    ]
