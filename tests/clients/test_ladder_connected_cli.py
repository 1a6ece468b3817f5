"""``moo bot --ladder`` end to end (docs/ladder.md, "Connected bots"): two bot processes, an
in-process strategy and a program (``--cmd``), join the ladder as connected bots, are paired
with each other (no worker needed), play their games, leave and exit; a connected bot
process and a hosted bot played by the real worker (clients/hosted/worker.py), which runs
only the hosted side."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from clients.hosted.worker import run_worker
from tests.client_support import ROOT, client_env, moo_command
from tests.ladder_support import GOOD
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


async def test_two_bot_processes_join_the_ladder_play_their_pairing_and_leave(
        tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, ladder_worker_key="k")) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        program = str(ROOT / "examples" / "bots" / "first_consistent.sh")
        procs = [
            await _moo(tmp_path, "bot", "first", "--url", url, "--ladder", "--games", "2",
                       "--name", "lad-first"),
            await _moo(tmp_path, "bot", "--cmd", program, "--url", url, "--ladder",
                       "--games", "2", "--name", "lad-cmd"),
        ]
        results = [await _done(p) for p in procs]
        played = {}
        for name, (code, out, err) in zip(("lad-first", "lad-cmd"), results, strict=True):
            assert code == 0, err
            assert "joined the ladder moo:4:0123456789 as a connected bot" in err
            lines = out.strip().splitlines()
            assert len(lines) >= 2 and len(lines) % 2 == 0, out  # whole pairings
            assert all(f"{name} vs " in line for line in lines), out
            played[name] = len(lines)
        assert played["lad-first"] == played["lad-cmd"]
        ann = await Client.hello(app.port, "ann")
        rows = {r["bot"]: r for r in (await ann.request({"type": "ladder_show"}))["standings"]}
        assert set(rows) == {"lad-first", "lad-cmd"}
        for name, row in rows.items():
            assert (row["kind"], row["status"], row["owner"]) == ("connected", "offline", name)
            assert row["games"] == played[name] and row["forfeits"] == 0
            assert row["rating"] is not None
        assert all(g.finished and not g.void for g in app.ladder.games.values())


async def test_a_connected_bot_process_meets_a_hosted_bot_run_by_the_real_worker(
        tmp_path: Path) -> None:
    key = "test-worker-key"
    async with running(server_settings(tmp_path, ladder_worker_key=key)) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        stop = asyncio.Event()
        worker = asyncio.create_task(run_worker(url, key, 1, name="test", stop=stop))
        try:
            good = tmp_path / "good.py"
            good.write_bytes(GOOD)
            code, out, err = await _done(await _moo(
                tmp_path, "ladder", "submit", str(good), "--url", url, "--name", "hostbot",
                "--as", "ann"))
            assert code == 0, err
            hosted = out.strip().splitlines()[-1]
            code, out, err = await _done(await _moo(
                tmp_path, "bot", "first", "--url", url, "--ladder", "--games", "2", "--name",
                "conbot", "--wait", "120"), timeout=240)
            assert code == 0, err
            lines = out.strip().splitlines()
            assert len(lines) >= 2 and all("conbot vs hostbot" in x for x in lines), out
            assert all("[bot" not in x for x in lines), out  # no failure of its own
            code, out, err = await _done(await _moo(
                tmp_path, "ladder", "show", "--url", url, "--as", "ann"))
            assert code == 0, err
            shown = {x.split()[1]: x for x in out.strip().splitlines()[1:]}
            assert shown["conbot"].endswith("[connected, offline]"), out
            assert "[" not in shown["hostbot"].split("forfeits)")[1], out
            for game in app.ladder.games.values():
                if game.finished and not game.void:
                    assert hosted in game.bots and sorted(game.versions) == [0, 1]  # 0: conbot
                    assert game.failures == ["", ""], game
        finally:
            stop.set()
            await worker
        assert all(g.finished or g.void for g in app.ladder.games.values())


def test_ladder_usage_errors_are_one_line_with_status_2(tmp_path: Path) -> None:
    for extra in (("--vs-bot", "random"), ("--tournament", "t1"), ("--concurrency", "2")):
        done = subprocess.run(moo_command("bot", "random", "--ladder", *extra),
                              cwd=ROOT, env=client_env(tmp_path), capture_output=True,
                              text=True, timeout=patience(60))
        assert done.returncode == 2 and "--ladder" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
