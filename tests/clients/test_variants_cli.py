"""``--rules`` on the command line: ``moo play`` (solo and online), ``moo bot``; one line on a
mistake (docs/variants.md, "Choosing the rules")."""

from __future__ import annotations

import argparse
import json
import random
import subprocess
from pathlib import Path

import pytest

from bots.judge.assistant import assist
from clients.terminal import play_solo, show_response
from moo.mastermind import MastermindRules, mastermind_score
from moo.rules import parse_response
from server.export import records
from tests.cli.test_cli_errors import moo, one_line
from tests.client_support import ROOT, client_env, moo_command, moo_serve
from tests.patience import patience

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e


def test_solo_mastermind_scores_pegs() -> None:
    rules = MastermindRules()
    secret = random.Random(3).choice(rules.secrets)  # the solo game's first draw for seed 3
    typed = iter(["1111", "12", secret, "no"])
    said: list[str] = []
    args = argparse.Namespace(seed=3, helper=False, rules=rules)
    assert play_solo(args, lambda _prompt: next(typed, None), said.append) == 0
    text = "\n".join(said)
    assert text.startswith("MASTERMIND\nI WILL THINK OF 4 COLOURS 1-6 (REPEATS ALLOWED).")
    assert f"  -> {show_response(mastermind_score(secret, '1111'))}" in said
    assert "expected 4 symbols, got 2: not counted" in text
    assert secret != "1111" and "GAME 1: TRIES = 2," in text  # the mistyped line not counted


def test_bad_rules_spec_is_one_line(tmp_path: Path) -> None:
    for command in (["play", "--solo"], ["bot", "random"], ["play", "--bot", "random"]):
        line = one_line(moo(tmp_path, *command, "--rules", "moo:5:0123"), command[0])
        assert "5 positions need at least 5 distinct symbols; the alphabet has 4" in line
    line = one_line(moo(tmp_path, "bot", "entropy", "--rules", "mastermind",
                        "--url", "ws://127.0.0.1:9/"), "bot")
    assert "bots that can: minimum, random, strongest" in line
    line = one_line(moo(tmp_path, "bot", "--cmd", "cat", "--rules", "mastermind",
                        "--url", "ws://127.0.0.1:9/"), "bot")
    assert "external bot programs play MOO rules only" in line


def test_moo_bot_plays_variants_on_a_server(tmp_path: Path) -> None:
    env = {**client_env(tmp_path), "MOO_TREE_CACHE": str(tmp_path / "trees")}
    with moo_serve(tmp_path, env={"MOO_TREE_CACHE": str(tmp_path / "trees")}) as url:
        mm = subprocess.run(
            moo_command("bot", "minimum", "--rules", "mastermind:4:123456", "--vs-bot",
                        "random", "--url", url, "--games", "2", "--json", "--name", "mm"),
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=patience(120),
        )
        five = subprocess.run(
            moo_command("bot", "random", "--rules", "moo:5", "--url", url, "--games", "2",
                        "--concurrency", "2", "--json", "--name", "five"),
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=patience(120),
        )
    assert mm.returncode == 0, mm.stderr
    assert five.returncode == 0, five.stderr
    lines = [json.loads(line) for line in mm.stdout.splitlines()]
    assert lines[-1]["type"] == "summary" and lines[-1]["matches"] == 2
    played = [line for line in lines if line["type"] == "match"]
    assert len(played) == 2 and all(m["reason"] == "solved" for m in played)
    for m in played:
        # The optimal Mastermind tree never needs more than 5 guesses. The random opponent may
        # solve first and end the race, so the tree bot has made at most as many guesses as it
        # and at most 5, and it has either solved or been stopped by the opponent's solve.
        assert m["guesses"] <= 5 and (m["solved"] or m["opponent_solved"])
    variants = sorted(r["variant"] for r in records(str(tmp_path / "serve.sqlite3")))
    # the two "five" connections were paired with each other: one match, seen from both seats
    assert variants == ["mastermind:4:123456"] * 2 + ["moo:5:0123456789"]


def test_tournament_with_rules_local_and_remote(tmp_path: Path) -> None:
    env = {**client_env(tmp_path), "MOO_TREE_CACHE": str(tmp_path / "trees")}
    local = subprocess.run(
        moo_command("tournament", "minimum", "random", "--rules", "mastermind", "--rounds", "3",
                    "--seed", "2", "--json", "--no-progress"),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=patience(180),
    )
    assert local.returncode == 0, local.stderr
    standings = json.loads(local.stdout)
    by_name = {p["name"]: p for p in standings["players"]}
    assert by_name["minimum"]["games"] == 6 and by_name["minimum"]["avg_guesses"] <= 5
    line = one_line(moo(tmp_path, "tournament", "minimum", "entropy", "--rules", "mastermind",
                        "--rounds", "1"), "tournament")
    assert "bot 'entropy' cannot play Mastermind 4 of 6" in line
    with moo_serve(tmp_path, env={"MOO_TREE_CACHE": str(tmp_path / "trees")}) as url:
        remote = subprocess.run(
            moo_command("tournament", "minimum", "random", "--rules", "mastermind:4:123456",
                        "--rounds", "1", "--seed", "2", "--url", url, "--no-progress"),
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=patience(180),
        )
    assert remote.returncode == 0, remote.stderr
    assert "rules mastermind:4:123456" in remote.stdout.splitlines()[0]
    variants = {r["variant"] for r in records(str(tmp_path / "serve.sqlite3"))}
    assert variants == {"mastermind:4:123456"}


def test_moo_play_assist_online(tmp_path: Path) -> None:
    """``moo play --assist`` asks for an unrated assisted match and prints the assistant's
    line (bots.judge.assistant's figures) under its own response."""
    with moo_serve(tmp_path) as url:
        done = subprocess.run(
            moo_command("play", "--bot", "random", "--rules", "mastermind", "--assist",
                        "--url", url, "--name", "zed"),
            input="1234\n1122\n", cwd=ROOT, env=client_env(tmp_path), capture_output=True,
            text=True, timeout=patience(120),
        )
    lines = done.stdout.splitlines()
    mine = next(line for line in lines if line.strip().startswith("ROUND 1: 1122 ->"))
    response = parse_response(mine.split("->")[1].split()[0])
    said = assist(MastermindRules(), [("1122", response.bulls, response.cows)])
    if response.bulls < 4:
        assert f"     ASSISTANT: {said.text()}" in lines
    exported = list(records(str(tmp_path / "serve.sqlite3")))
    assert exported and exported[0]["config"]["assist"] is True
    assert exported[0]["rated"] is False


def test_external_programs_play_moo_variants_not_mastermind(tmp_path: Path) -> None:
    awk = "cmd:" + str(ROOT / "examples" / "bots" / "first_consistent.sh")
    done = subprocess.run(
        moo_command("tournament", awk, "random", "--rules", "moo:3", "--rounds", "1",
                    "--seed", "1", "--json", "--no-progress"),
        cwd=ROOT, env=client_env(tmp_path), capture_output=True, text=True, timeout=patience(120),
    )
    assert done.returncode == 0, done.stderr
    standings = json.loads(done.stdout)
    assert standings["rules"] == "moo:3:0123456789" and standings["matches"] == 2
    line = one_line(moo(tmp_path, "tournament", awk, "random", "--rules", "mastermind",
                        "--rounds", "1"), "tournament")
    assert "external bot programs play MOO rules only" in line
