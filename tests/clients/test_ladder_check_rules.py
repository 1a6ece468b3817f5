"""A bot submitted for a variant family is checked in that family's rules (docs/ladder.md:
"in the sandbox, with the limits above ... 3 complete legal games against random" for the
ladder it will play on). Found by the hostile-submission work: the worker checks every version
with the default rules (clients/hosted/worker.py calls ``check_submission`` without the
job's rules), so a correct moo:5 bot is refused and a bot that only plays classic MOO is
accepted for moo:5, where it then forfeits every game."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from clients.hosted.worker import run_worker
from tests.client_support import client_env
from tests.ladder_support import GOOD
from tests.patience import patience
from tests.server_support import running, server_settings

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

KEY = "test-worker-key"


async def test_a_moo5_bot_is_checked_in_moo5(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, ladder_worker_key=KEY)) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        stop = asyncio.Event()
        worker = asyncio.create_task(run_worker(url, KEY, 1, stop=stop))
        try:
            path = tmp_path / "five.py"
            path.write_bytes(GOOD)  # consistent.py plays whatever `new` announces
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cli", "ladder", "submit", str(path), "--url", url,
                "--name", "fivebot", "--as", "ann", "--rules", "moo:5",
                env=client_env(tmp_path), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
            async with asyncio.timeout(patience(120)):
                out, err = await proc.communicate()
            assert proc.returncode == 0, (out, err)
            # a program that can only play 4 symbols is refused for moo:5
            four = tmp_path / "four.sh"
            four.write_bytes(b"#!/bin/sh\nwhile read -r w rest; do case $w in\n"
                             b"moo) echo ready ;;\nguess) echo 0123 ;;\nquit) exit ;;\n"
                             b"esac; done\n")
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cli", "ladder", "submit", str(four), "--url", url,
                "--name", "fourbot", "--as", "ann", "--rules", "moo:5",
                env=client_env(tmp_path), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
            async with asyncio.timeout(patience(120)):
                out, err = await proc.communicate()
            assert proc.returncode == 1, (out, err)
            assert "'0123' is not a legal guess" in out.decode().splitlines()[-1], out
        finally:
            stop.set()
            await worker
