"""The bot worker and ``moo ladder`` end to end: programs submitted from the command line,
checked in the sandbox by a real worker (clients/hosted/worker.py), refused with the reason,
accepted when fixed, paired and played over the ordinary match path, rated; a worker stopped
mid-game leaves no game stuck. docs/ladder.md, docs/protocol.md ("Ladder")."""

from __future__ import annotations

import asyncio
import json
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from clients.hosted.worker import run_worker
from tests.client_support import ROOT, client_env
from tests.clients.test_exact import eval_scores
from tests.cluster_support import until
from tests.ladder_support import BROKEN, GOOD
from tests.patience import patience
from tests.server_support import Client, running, server_settings

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

KEY = "test-worker-key"


async def moo(tmp_path: Path, *args: str) -> tuple[int, list[str], str]:
    """``moo ARGS`` as a child process (the server runs in this event loop: it must not
    block): exit status, standard output's lines, standard error."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", *args, env=client_env(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(patience(120)):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode().splitlines(), err.decode()



async def test_submit_refused_fixed_then_rated_from_the_command_line(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, ladder_worker_key=KEY)) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        viewer = await Client.hello(app.port, "viewer", bot=True)
        stop = asyncio.Event()
        worker = asyncio.create_task(run_worker(url, KEY, 2, name="test", stop=stop))
        try:
            broken = tmp_path / "broken.sh"
            broken.write_bytes(BROKEN)
            good = tmp_path / "good.py"
            good.write_bytes(GOOD)
            rc, out, err = await moo(tmp_path, "ladder", "submit", str(broken), "--url", url,
                                     "--name", "annbot", "--as", "ann")
            assert rc == 1, (out, err)
            assert out[-1] == ("refused: game 1 of 3 against random: garbage: expected "
                               "'ready', got 'hello'")
            bot_id = out[0].split("(")[1].split(")")[0]
            assert bot_id.startswith("b") and len(bot_id) == 13
            # fixed: a new version of the same bot
            rc, out, err = await moo(tmp_path, "ladder", "submit", str(good), "--url", url,
                                     "--replace", bot_id, "--as", "ann")
            assert rc == 0, (out, err)
            assert out[-1] == bot_id and out[-2].startswith("accepted: annbot version 2")
            rc, out, err = await moo(tmp_path, "ladder", "submit", str(good), "--url", url,
                                     "--name", "bobbot", "--as", "bob")
            assert rc == 0, (out, err)
            bob_bot = out[-1]

            async def played() -> bool:
                rows = (await viewer.request({"type": "ladder_show"}))["standings"]
                return len(rows) == 2 and all(r["games"] >= 2 for r in rows)

            await until(played, 120, "a pairing of the two bots played")
            rc, out, err = await moo(tmp_path, "ladder", "show", "--url", url, "--json",
                                     "--as", "ann")
            assert rc == 0, err
            shown = json.loads(out[-1])
            assert shown["rules"]["length"] == 4
            for row in shown["standings"]:
                assert row["low"] <= row["rating"] <= row["high"]
                assert row["games"] == row["wins"] + row["draws"] + row["losses"]
                assert row["forfeits"] == 0
            assert {r["bot"] for r in shown["standings"]} == {"annbot", "bobbot"}
            rc, out, err = await moo(tmp_path, "ladder", "log", bot_id, "--url", url,
                                     "--as", "ann")
            assert rc == 0, err
            assert any("version 1: refused: game 1 of 3 against random" in line
                       for line in out)
            assert any("version 2: accepted" in line for line in out)
            rc, out, err = await moo(tmp_path, "ladder", "mine", "--url", url, "--as", "bob")
            assert rc == 0 and len(out) == 1 and bob_bot in out[0] and "active" in out[0]
            # another player's bot: one line, and nothing changes
            rc, out, err = await moo(tmp_path, "ladder", "pause", bot_id, "--url", url,
                                     "--as", "bob")
            assert rc == 1 and out == []
            assert len(err.strip().splitlines()) == 1 and "another player" in err
            rc, out, err = await moo(tmp_path, "ladder", "pause", bot_id, "--url", url,
                                     "--as", "ann")
            assert rc == 0 and "paused" in out[-1]
            # every game of the bot is an ordinary match in its history, with the ladder mark
            page = await viewer.request({"type": "ladder_page", "bot_id": bot_id})
            assert page["games"] >= 2 and page["history"]
            for game in page["recent"]:
                record = await viewer.request({"type": "match_record",
                                               "match_id": game["match_id"]})
                assert record["events"][0]["config"]["ladder"] == "moo:4:0123456789"
                assert record["events"][0]["players"][game["seat"]] == "annbot"
        finally:
            stop.set()
            await worker


@pytest.mark.slow(20)
async def test_a_worker_stopped_mid_game_leaves_no_game_stuck(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, ladder_worker_key=KEY,
                                       grace_ms=300)) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        ann = await Client.hello(app.port, "watcher", bot=True)
        worker = asyncio.create_task(run_worker(url, KEY, 1))
        try:
            for name in ("alpha", "beta"):
                rc, out, err = await moo(tmp_path, "ladder", "submit", str(_file(tmp_path)),
                                         "--url", url, "--name", name, "--as", "ann")
                assert rc == 0, (out, err)

            async def playing() -> bool:  # a game with a guess made, not over
                return any(app.arena.is_live(m) and app.arena.live[m].match.seats[0].guesses
                           for m in app.ladder.games)

            await until(playing, 120, "a ladder game under way")
            games = list(app.ladder.games)
        finally:
            worker.cancel()  # killed: no report, no goodbye
            await asyncio.gather(worker, return_exceptions=True)

        async def settled() -> bool:
            return all(app.ladder.games[m].finished for m in games)

        await until(settled, 60, "the games of the killed worker ended")
        assert not any(app.arena.is_live(m) for m in games)
        # each ended as played (before the kill) or is void (it was under way: it ended by
        # disconnect after the grace, and counts for nobody)
        ended = [app.ladder.games[m] for m in games]
        assert all(g.void or g.reason in ("solved", "guess_cap") for g in ended), ended
        counted = sum(1 for g in ended if not g.void)
        rows = (await ann.request({"type": "ladder_show"}))["standings"]
        assert all(r["games"] == counted for r in rows)
        # a new worker takes over: the two are paired again and play
        stop = asyncio.Event()
        again = asyncio.create_task(run_worker(url, KEY, 1, stop=stop))
        try:
            async def played() -> bool:
                rows = (await ann.request({"type": "ladder_show"}))["standings"]
                return all(r["games"] >= 2 for r in rows)

            await until(played, 120, "a new pairing played")
        finally:
            stop.set()
            await again


@pytest.mark.slow(25)
async def test_a_deterministic_bot_gets_the_exact_scores_of_moo_eval(tmp_path: Path) -> None:
    """examples/ladder/minimum.py plays the shipped minimum tree: against minimum it scores
    exactly 1/2, against strongest what moo eval gives, and its average is minimum's 26274
    guesses (Tanaka's optimum) over the 5040 secrets."""
    async with running(server_settings(tmp_path, ladder_worker_key=KEY)) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        stop = asyncio.Event()
        worker = asyncio.create_task(run_worker(url, KEY, 1, stop=stop))
        try:
            program = ROOT / "examples" / "ladder" / "minimum.py"
            rc, out, err = await moo(tmp_path, "ladder", "submit", str(program), "--url", url,
                                     "--name", "mini", "--as", "ann")
            assert rc == 0, (out, err)
            bot = app.ladder.bots[out[-1]]

            async def evaluated() -> bool:
                return bool(bot.exact["status"] != "pending")

            await until(evaluated, 300, "the exact evaluation")
            vs_minimum, vs_strongest, total = eval_scores("minimum")
            assert (vs_minimum, total) == (Fraction(1, 2), 26274)
            assert bot.exact == {"status": "computed", "vs_minimum": "1/2",
                                 "vs_strongest": str(vs_strongest),
                                 "average": str(Fraction(total, 5040)), "reason": ""}
            assert Fraction(bot.exact["vs_strongest"]) < Fraction(1, 2)
            rc, out, err = await moo(tmp_path, "ladder", "show", "--url", url, "--as", "ann")
            assert rc == 0 and "exact: 0.5000 vs minimum" in out[-1], (out, err)
        finally:
            stop.set()
            await worker


def _file(tmp_path: Path) -> Path:
    """A compliant program that takes 0.2 s a guess, so that a game lasts a while."""
    path = tmp_path / "slow.py"
    slow = GOOD.replace(b"import sys\n", b"import sys\nimport time\n", 1).replace(
        b"print(rng.choice(left), flush=True)",
        b"time.sleep(0.2)\n            print(rng.choice(left), flush=True)", 1)
    assert slow.count(b"time.sleep") == 1
    path.write_bytes(slow)
    return path


@pytest.mark.parametrize(("args", "words"), [
    (["ladder", "submit", "nofile.py", "--name", "x"], "no such file"),
    (["ladder", "submit", "x.py"], "--name NAME for a new bot, or --replace ID"),
    (["ladder", "submit", "x.py", "--name", "a", "--replace", "b1"],
     "--name NAME for a new bot, or --replace ID"),
    (["ladder", "submit", "x.py", "--replace", "b1", "--rules", "moo:4:0123456789"],
     "--rules is for a new bot"),
    (["ladder", "submit", "x.py", "--name", "a", "--rules", "chess"], "--rules"),
    (["ladder", "pause"], "ID"),
    (["ladder", "frobnicate"], "unknown action 'frobnicate'"),
    (["ladder", "show", "--as", "x" * 30], "--as must be a player name"),
    (["worker", "--url", "ws://127.0.0.1:1/"], "--key is required"),
    (["worker", "--url", "ws://127.0.0.1:1/", "--key", "k", "--slots", "0"], "--slots"),
    (["worker", "--url", "http://x/", "--key", "k"], "--url must be ws://"),
    (["worker", "--url", "ws://127.0.0.1:1/", "--key", "k", "--cpu-share", "0"],
     "--cpu-share must be in (0, 1], got 0"),
    (["worker", "--url", "ws://127.0.0.1:1/", "--key", "k", "--cpu-share", "1.5"],
     "--cpu-share must be in (0, 1], got 1.5"),
    (["worker", "--url", "ws://127.0.0.1:1/", "--key", "k", "--move-time", "0"], "--move-time"),
])
def test_command_line_mistakes_are_one_line(tmp_path: Path, args: list[str],
                                            words: str) -> None:
    import subprocess

    (tmp_path / "x.py").write_bytes(GOOD)
    env = client_env(tmp_path)
    env.pop("MOO_WORKER_KEY", None)
    proc = subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=patience(60))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_ladder_action_has_help(tmp_path: Path) -> None:
    import subprocess

    for action in ("submit", "mine", "pause", "resume", "withdraw", "show", "log", "check"):
        proc = subprocess.run([sys.executable, "-m", "cli", "ladder", action, "--help"],
                              capture_output=True, text=True, env=client_env(tmp_path),
                              timeout=patience(60))
        assert proc.returncode == 0 and f"moo ladder {action}" in proc.stdout, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "cli", "worker", "--help"],
                          capture_output=True, text=True, env=client_env(tmp_path),
                          timeout=patience(60))
    assert proc.returncode == 0 and "--slots" in proc.stdout


def test_moo_serve_runs_its_own_worker_which_ends_with_it_even_killed(tmp_path: Path) -> None:
    """A fresh ``moo serve`` starts a bot worker (a child at nice 10, its programs capped at
    ``ladder_cpu_share`` of the cores in a cgroup of its own) that joins the ladder; killed
    with SIGKILL, the server cannot stop it, and the worker ends by itself (its standard
    input, the server's pipe, closes), its cgroup removed."""
    import os
    import re
    import signal
    import subprocess
    import threading
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "serve", "--port", "0", "--db",
         str(tmp_path / "own.sqlite3"), "--log-level", "INFO"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=client_env(tmp_path))
    assert proc.stderr is not None
    joined = threading.Event()
    pids: list[int] = []
    caps: list[tuple[float, str]] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            started = re.search(r"bot worker started \(pid (\d+), (\d+) slots, nice 10\)", line)
            if started:
                pids.append(int(started.group(1)))
            capped = re.search(r"worker: hosted bots capped at ([\d.]+) cores together "
                               r"\(cgroup v[12] (/\S+), ", line)
            if capped:
                caps.append((float(capped.group(1)), capped.group(2)))
            elif "worker: no CPU cap for hosted bots" in line:
                caps.append((0.0, line))
            if "(own) joined" in line:
                joined.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        assert joined.wait(patience(60)), "the server's own worker never joined"
        assert len(pids) == 1
        worker = pids[0]
        assert os.getpriority(os.PRIO_PROCESS, worker) >= 10
        # ladder_cpu_share 0.5 of the cores (the suite runs as root, where this machine and
        # CI have a cpu controller)
        assert caps == [(0.5 * len(os.sched_getaffinity(0)), caps[0][1])], caps
        cgroup = Path(caps[0][1])
        assert cgroup.name == f"moo-worker-{worker}" and cgroup.is_dir()
        proc.send_signal(signal.SIGKILL)
        proc.wait(patience(30))
        deadline = time.monotonic() + patience(30)
        while Path(f"/proc/{worker}").exists() and not _zombie(worker):
            assert time.monotonic() < deadline, "the worker outlived its killed server"
            time.sleep(0.05)
        assert not cgroup.exists()  # it removed its cgroup before it ended
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True
