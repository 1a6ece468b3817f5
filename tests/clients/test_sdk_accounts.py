"""The SDK's accounts and history calls against the real server, and ``moo play`` signing in
on a second device (its own token file) with ``--password-file`` and ``--sign-in``."""

from __future__ import annotations

import asyncio
import sys

import pexpect
import pytest

from clients.sdk import (
    Client,
    Disconnected,
    Finished,
    History,
    MatchRecord,
    PlayerInfo,
    ServerError,
    Started,
)
from tests.client_support import ROOT, client_env, moo_serve
from tests.patience import patience
from tests.server_support import running, server_settings

FAST = {"argon2_time_cost": 1, "argon2_memory_kib": 64, "argon2_parallelism": 1}
PASSWORD = "tr0ub4dor&3 horse"


@pytest.mark.parametrize("encoding", ["json", "msgpack"])
async def test_sdk_accounts_and_history(tmp_path, encoding):
    async with running(server_settings(tmp_path, **FAST)) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        laptop = Client(url, "ann", encoding=encoding)
        welcome = await laptop.connect()
        assert welcome.secured is False and laptop.token
        await laptop.set_password(PASSWORD)
        match = await laptop.play_bot("random")
        await laptop.resign(match.match_id)
        async with asyncio.timeout(patience(10)):
            async for msg in laptop.events():
                if isinstance(msg, Finished):
                    break

        with pytest.raises(ServerError) as info:
            await Client(url, "ann", password="not it", encoding=encoding,
                         reconnect=False).connect()
        assert info.value.code == "bad_credentials"

        phone = Client(url, "ANN", password=PASSWORD, encoding=encoding)
        welcome = await phone.connect()
        assert welcome.secured is True and welcome.name == "ann"
        assert phone.token and phone.token != laptop.token
        async with asyncio.timeout(patience(10)):  # the laptop was replaced and does not fight back
            async for msg in laptop.events():
                if isinstance(msg, Disconnected):
                    assert msg.code == 4001 and msg.will_retry is False
                    break

        page = await phone.history(limit=5)
        assert isinstance(page, History) and page.player == "ann" and page.next is None
        (entry,) = page.matches
        assert (entry.match_id, entry.result, entry.opponent) == (match.match_id, "loss",
                                                                 "random-bot")
        record = await phone.match_record(match.match_id)
        assert isinstance(record, MatchRecord) and record.players == ("ann", "random-bot")
        assert isinstance(record.events[-1], Finished)
        assert record.events[-1].reason == "resign"
        assert not any(isinstance(e, Started) for e in record.events)  # resigned before
        info_ = await phone.player("random-bot")
        assert isinstance(info_, PlayerInfo) and info_.wins == 1
        board = await phone.leaderboard()
        assert all(row.provisional for row in board.players)

        old_phone_token = phone.token
        out = await phone.sign_out_all()
        assert phone.token == out.token != old_phone_token
        with pytest.raises(ServerError) as info:
            await Client(url, "ann", token=laptop.token, encoding=encoding,
                         reconnect=False).connect()
        assert info.value.code == "bad_token"
        # a revoked token with the password at hand: the SDK signs in with the password
        tablet = Client(url, "ann", token=old_phone_token, password=PASSWORD,
                        encoding=encoding, reconnect=False)
        welcome = await tablet.connect()
        assert welcome.secured and tablet.token not in (old_phone_token, out.token)
        for c in (laptop, phone, tablet):
            await c.close()


def _play(tmp_path, device: str, *args: str) -> pexpect.spawn:
    env = client_env(tmp_path)
    env["MOO_TOKENS"] = str(tmp_path / f"{device}-tokens.json")  # one token file per device
    env["TERM"] = "dumb"
    return pexpect.spawn(sys.executable, ["-m", "cli", "play", *args], cwd=str(ROOT), env=env,
                         encoding="utf-8", timeout=patience(30), dimensions=(40, 120))


def test_moo_play_signs_in_on_a_second_device(tmp_path):
    fast_env = {f"MOO_{k.upper()}": str(v) for k, v in FAST.items()}
    with moo_serve(tmp_path, env=fast_env) as url:
        first = _play(tmp_path, "laptop", "--url", url, "--name", "ann", "--set-password")
        first.expect("NEW PASSWORD")
        first.sendline(PASSWORD)
        first.expect("AGAIN")
        first.sendline(PASSWORD)
        first.expect("PASSWORD SET")
        first.expect(pexpect.EOF)
        first.close()
        assert first.exitstatus == 0

        # a new device without the token: the name is refused, with the way out spelled out
        stranger = _play(tmp_path, "phone", "--url", url, "--name", "ann", "--bot", "random")
        stranger.expect("SIGN IN WITH --sign-in")
        stranger.expect(pexpect.EOF)
        stranger.close()
        assert stranger.exitstatus == 1

        secret = tmp_path / "pw.txt"
        secret.write_text(PASSWORD + "\n")
        phone = _play(tmp_path, "phone", "--url", url, "--name", "ann", "--bot", "random",
                      "--password-file", str(secret))
        phone.expect("HELLO, ann")
        phone.expect(r"MATCH \S+: YOU \(ann\) VS random-bot")
        phone.sendline("quit")
        phone.close(force=True)

        tablet = _play(tmp_path, "tablet", "--url", url, "--name", "ann", "--bot", "random",
                       "--sign-in")
        tablet.expect("PASSWORD: ")
        tablet.sendline("wrong one")
        tablet.expect("wrong name or password")
        tablet.expect(pexpect.EOF)
        tablet.close()
        assert tablet.exitstatus == 1

        missing = _play(tmp_path, "tablet", "--url", url, "--name", "ann",
                        "--password-file", str(tmp_path / "nope.txt"))
        missing.expect("cannot read --password-file")
        missing.expect(pexpect.EOF)
        missing.close()
        assert missing.exitstatus == 2
