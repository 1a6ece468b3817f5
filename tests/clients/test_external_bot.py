"""External-program bots: the line protocol, time limits, and misbehaving programs."""

from __future__ import annotations

import os
import random
import shutil
import stat
import sys
from asyncio.subprocess import DEVNULL
from pathlib import Path

import pytest

from bots.external import BotFailure, ExternalBot, ExternalStrategy
from bots.registry import create
from clients.botrunner import play_match
from clients.sdk import Client
from moo.rules import DEFAULT_RULES, Rules
from tests.client_support import ROOT
from tests.patience import patience
from tests.sdk_fakeserver import FakeServer

AWK_BOT = str(ROOT / "examples" / "bots" / "first_consistent.sh")
RULES = DEFAULT_RULES


def script(tmp_path: Path, name: str, body: str) -> str:
    """A small Python bot program; ``body`` runs after the handshake helpers are defined."""
    path = tmp_path / name
    path.write_text(
        f"#!{sys.executable}\n"
        "import sys, time\n"
        "def say(s):\n"
        "    sys.stdout.write(s + '\\n'); sys.stdout.flush()\n"
        + body
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def solve_offline(bot: ExternalBot, secret: str, rules: Rules = RULES) -> int:
    await bot.new_match(rules, random.Random(0))
    for n in range(1, 20):
        guess = await bot.next_guess()
        response = rules.score(secret, guess)
        await bot.observe(guess, response)
        await bot.observe_opponent(n, None if n % 2 else response)
        if response == rules.solved:
            await bot.end("win")
            return n
    raise AssertionError("the bot did not solve in 20 guesses")


async def test_awk_bot_speaks_the_protocol_and_solves():
    bot = ExternalBot(AWK_BOT, move_timeout=patience(20))
    try:
        for secret in ("0123", "9876", "5268", "4702"):
            assert await solve_offline(bot, secret) <= 9
        assert bot.name == "first-consistent-awk"
        assert bot.starts == 1 and bot.failures == 0  # one process for every match
    finally:
        await bot.close()
    assert not bot.running


async def test_awk_bot_handles_other_variants():
    bot = ExternalBot(AWK_BOT, move_timeout=patience(20))
    try:
        rules = Rules(length=3, alphabet="ABCDEF")
        assert await solve_offline(bot, "FAD", rules) <= 8
    finally:
        await bot.close()


@pytest.mark.skipif(shutil.which("mawk") is None, reason="mawk not installed")
async def test_awk_bot_works_with_mawk_too(tmp_path):
    # mawk buffers piped input unless told otherwise; the script must cope.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "awk").symlink_to(shutil.which("mawk") or "")
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{bindir}:{old}"
    try:
        bot = ExternalBot(AWK_BOT, move_timeout=patience(20))
        assert await solve_offline(bot, "3817") <= 9
        await bot.close()
    finally:
        os.environ["PATH"] = old


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("say('ready'); sys.stdin.readline(); sys.stdin.readline(); sys.exit(3)\n", "crash"),
        ("say('ready')\nfor line in sys.stdin: pass\n", "timeout"),
        ("say('ready')\nfor line in sys.stdin:\n    if line.startswith('guess'): say('moo?')\n",
         "garbage"),
        ("say('ready')\nfor line in sys.stdin:\n    if line.startswith('guess'): say('0000')\n",
         "garbage"),
        ("say('ready')\nfor line in sys.stdin:\n    if line.startswith('guess'): say('x' * 5000)\n",
         "garbage"),
        ("say('hello there')\nfor line in sys.stdin: pass\n", "garbage"),
        ("time.sleep(30)\n", "timeout"),
    ],
    ids=["crash", "silent", "chatter", "illegal-guess", "flood", "no-handshake", "never-ready"],
)
async def test_misbehaving_program_fails_fast_and_is_restarted(tmp_path, body, reason):
    # Generous limits where the failure is not about time: a loaded machine may take a
    # while just to start Python, and that must not turn "garbage" into "timeout".
    limit = 1.0 if reason == "timeout" else patience(20.0)
    bot = ExternalBot(script(tmp_path, "bad.py", body), move_timeout=limit, stderr=DEVNULL)
    try:
        with pytest.raises(BotFailure) as err:
            await bot.new_match(RULES)
            await bot.next_guess()
        assert err.value.reason == reason, err.value
        assert not bot.running  # killed, not left behind
        with pytest.raises(BotFailure):  # the next match starts a fresh process
            await bot.new_match(RULES)
            await bot.next_guess()
        assert bot.starts >= 1 and bot.failures == 2
    finally:
        await bot.close()


async def test_comment_lines_are_ignored(tmp_path):
    body = (
        "say('# warming up'); say('ready commenter')\n"
        "for line in sys.stdin:\n"
        "    if line.startswith('guess'):\n"
        "        say('# thinking hard'); say(''); say('0 1 2 3')\n"
    )
    bot = ExternalBot(script(tmp_path, "c.py", body), move_timeout=patience(20))
    try:
        await bot.new_match(RULES)
        assert await bot.next_guess() == "0123"
        assert bot.name == "commenter"
    finally:
        await bot.close()


def test_external_strategy_is_a_synchronous_strategy():
    strategy = create(f"cmd:{AWK_BOT}", move_timeout=5.0)
    assert isinstance(strategy, ExternalStrategy)
    with strategy:
        strategy.new_match(RULES, random.Random(1))
        left = list(RULES.secrets)
        for _ in range(10):
            guess = strategy.next_guess()
            assert guess == left[0]
            response = RULES.score("8302", guess)
            strategy.observe(guess, response)
            left = RULES.consistent(left, guess, response)
            if response == RULES.solved:
                break
        else:
            raise AssertionError("not solved")
    assert create("random", relabel=False).name == "random"


async def test_runner_resigns_for_a_crashing_bot_then_plays_on(tmp_path):
    marker = tmp_path / "crashed-once"
    body = (
        f"import os\nM = {str(marker)!r}\n"
        "say('ready flaky')\n"
        "for line in sys.stdin:\n"
        "    if line.startswith('guess'):\n"
        "        if not os.path.exists(M):\n"
        "            open(M, 'w').close(); sys.exit(1)\n"
        "        say('0123')\n"
    )
    bot = ExternalBot(script(tmp_path, "flaky.py", body), move_timeout=patience(20), stderr=DEVNULL)
    async with FakeServer() as server, Client(server.url, "flaky") as client:
        first = await play_match(client, await client.play_bot("random"), bot,
                                 random.Random(1), timeout=patience(20))
        assert first.outcome == "loss" and first.reason == "resign"
        assert first.failure is not None and "crash" in first.failure
        second = await play_match(client, await client.play_bot("random"), bot,
                                  random.Random(2), timeout=patience(20))
        # Always guessing 0123 is legal: it plays on until the guess cap or a loss.
        assert second.failure is None
        assert second.outcome in ("win", "loss", "draw")
        assert bot.starts == 2
    await bot.close()
