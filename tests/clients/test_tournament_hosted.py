"""Hosted tournaments end to end with the real commands: ``moo tournament create``, four
``moo bot --tournament`` processes, ``moo tournament show --json`` and ``moo export``."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from server.export import records
from tests.client_support import ROOT, client_env, moo_command
from tests.patience import patience
from tests.server_support import Client, running, server_settings

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e


async def _moo(tmp_path: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *moo_command(*args), cwd=ROOT, env=client_env(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def _done(proc: asyncio.subprocess.Process, timeout: float = 120) -> tuple[int, str, str]:
    async with asyncio.timeout(patience(timeout)):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_round_robin_of_four_bot_processes(tmp_path: Path) -> None:
    settings = server_settings(tmp_path)
    async with running(settings) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        code, out, err = await _done(await _moo(
            tmp_path, "tournament", "create", "--url", url, "--name", "four", "--format",
            "round-robin", "--rounds", "1", "--pool", "bots", "--start-in", "3600"))
        assert code == 0, err
        tid = out.strip().splitlines()[-1]
        assert tid.startswith("t") and " " not in tid
        watcher = await Client.hello(app.port, "watcher", bot=True)
        await watcher.request({"type": "tournament_watch", "tournament_id": tid})
        names = [f"four-{s}-{i}" for i, s in enumerate(("random", "first", "random", "first"))]
        bots = [await _moo(tmp_path, "bot", name.split("-")[1], "--url", url, "--tournament",
                           tid, "--name", name, "--seed", str(i), "--json")
                for i, name in enumerate(names)]
        await watcher.expect(lambda m: m.get("type") == "tournament"
                             and len(m["tournament"]["players"]) == 4, timeout=120)
        # the start time comes (the service's next tick starts it)
        app.tournaments.tournaments[tid].starts_at = app.arena.clock()
        outcomes: list[dict[str, Any]] = []
        for proc in bots:
            code, out, err = await _done(proc)
            assert code == 0, err
            outcomes += [json.loads(line) for line in out.splitlines()
                         if line.startswith("{") and json.loads(line)["type"] == "match"]
        code, out, err = await _done(await _moo(
            tmp_path, "tournament", "show", tid, "--url", url, "--json"))
        assert code == 0, err
        shown = json.loads(out)
        code, table, err = await _done(await _moo(tmp_path, "tournament", "show", tid,
                                                  "--url", url))
        assert code == 0 and "sonneborn-berger" in table and "four-first-1" in table
    assert shown["id"] == tid and shown["status"] == "finished"
    rows = shown["standings"]
    assert sorted(r["name"] for r in rows) == sorted(names)
    for r in rows:  # 3 opponents x 2 games each
        assert r["games"] == 6 == r["wins"] + r["draws"] + r["losses"]
        assert r["score"] == r["wins"] + r["draws"] / 2
    assert sum(r["wins"] for r in rows) == sum(r["losses"] for r in rows)
    assert sum(r["score"] for r in rows) == 12
    assert len(shown["games"]) == 12 and all(g["result"] for g in shown["games"])
    # each bot reported each of its 6 games, with the result the standings counted
    assert len(outcomes) == 24
    by_name = {r["name"]: r for r in rows}
    for name in names:
        mine = [o for o in outcomes if o["player"] == name]
        assert len(mine) == 6
        assert sum(o["outcome"] == "win" for o in mine) == by_name[name]["wins"]
    # exported with the tournament's id; each pair of secrets played both ways
    exported = [r for r in records(settings.db) if r["tournament_id"] == tid]
    assert sorted(r["match_id"] for r in exported) == sorted(g["match_id"]
                                                              for g in shown["games"])
    by_pair: dict[frozenset[str], list[dict[str, Any]]] = {}
    for r in exported:
        by_pair.setdefault(frozenset(r["players"]), []).append(r)
    assert len(by_pair) == 6
    for first, second in by_pair.values():
        assert second["players"] == first["players"][::-1]
        assert second["secrets"] == first["secrets"]  # the same code per seat, seats swapped
    out_file = tmp_path / "games.jsonl"
    done = subprocess.run(moo_command("export", "--db", settings.db, "--out", str(out_file)),
                          cwd=ROOT, env=client_env(tmp_path), capture_output=True, text=True,
                          timeout=patience(60))
    assert done.returncode == 0, done.stderr
    text = out_file.read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert sum(1 for line in lines if line.get("tournament_id") == tid) == 12


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(moo_command(*args), cwd=ROOT, env=client_env(tmp_path),
                          capture_output=True, text=True, timeout=patience(60))


def test_usage_errors_are_one_line_with_status_2(tmp_path: Path) -> None:
    cases = [
        (("tournament", "create", "--name", "x", "--format", "arena", "--rounds", "1",
          "--duration", "60"), "--url is required"),
        (("tournament", "create", "--url", "ws://127.0.0.1:9/", "--name", "x", "--format",
          "knockout", "--rounds", "1"), "--format"),
        (("tournament", "create", "--url", "ws://127.0.0.1:9/", "--name", "x", "--format",
          "arena", "--rounds", "1"), "needs --duration"),
        (("tournament", "create", "--url", "ws://127.0.0.1:9/", "--name", "x", "--format",
          "swiss", "--rounds", "1", "--duration", "60"), "for an arena"),
        (("tournament", "create", "--url", "ws://127.0.0.1:9/", "--name", "x", "--format",
          "swiss"), "--rounds"),
        (("tournament", "show"), "ID"),
        (("bot", "random", "--tournament", "t1", "--vs-bot", "random"), "--tournament"),
    ]
    for args, words in cases:
        done = _run(tmp_path, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and words in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_run_time_failures_are_one_line_with_status_1(tmp_path: Path) -> None:
    for args in (("tournament", "show", "t0", "--url", "ws://127.0.0.1:9/"),
                 ("tournament", "create", "--url", "ws://127.0.0.1:9/", "--name", "x",
                  "--format", "swiss", "--rounds", "3")):
        done = _run(tmp_path, *args)
        assert done.returncode == 1, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


async def test_show_of_an_unknown_tournament_and_the_local_runner_still_parses(
        tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        code, _, err = await _done(await _moo(tmp_path, "tournament", "show", "t000000000000",
                                              "--url", url))
        assert code == 1 and err.strip() == (
            "moo tournament show: unknown_tournament: no tournament 't000000000000'"), err
    # ``moo tournament A B`` is still the local runner (create/show are only first words)
    done = _run(tmp_path, "tournament", "random", "first", "--local", "--rounds", "1",
                "--json", "--no-progress")
    assert done.returncode == 0, done.stderr
    helped = _run(tmp_path, "tournament", "--help")
    assert "moo tournament create" in helped.stdout and "moo tournament show" in helped.stdout
