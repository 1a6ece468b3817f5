"""Faults: crash and graceful restarts under a bot tournament, and a store that cannot write.

The tournament runs are CI-sized versions of ``python -m bench.faults`` (figures for the long
runs are in docs/reliability.md): a real ``moo serve`` process on a real SQLite file, killed at
seeded moments while raw-WebSocket bots play many concurrent matches; the bots reconnect with
their tokens and ``resume``. Nothing acknowledged may be lost and every match must finish.

The storage tests make the store refuse writes the way a full disk (SQLite's
``max_page_count``) or a read-only database (``query_only``) does, on the server's own writer
connection, and check that the server refuses with ``storage_unavailable`` instead of
acknowledging what it could not store.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.faults import tournament
from bench.rawbot import Record, free_port, logged_guesses
from server.app import App
from tests.server_support import (
    Client,
    break_store,
    disk_full,
    read_only,
    running,
    server_settings,
)


async def test_sigkill_mid_tournament_loses_no_acknowledged_guess(tmp_path: Path) -> None:
    report = await tournament(tmp_path, sig=signal.SIGKILL, kills=3, pairs=4, matches=16, seed=11)
    assert report.exit_codes[:3] == [-signal.SIGKILL] * 3
    assert report.acked > 60
    assert report.lost == []
    assert report.unfinished == []
    assert report.matches >= 16 and report.matches_in_db >= 16
    assert report.client_errors == []
    assert report.close_codes.get(1006, 0) > 0  # the bots really lost their connections


async def test_sigterm_mid_tournament_closes_1012_and_loses_nothing(tmp_path: Path) -> None:
    report = await tournament(tmp_path, sig=signal.SIGTERM, kills=2, pairs=4, matches=12, seed=12)
    assert report.exit_codes[:2] == [0, 0]
    assert report.close_codes.get(1012, 0) > 0
    assert report.lost == []
    assert report.unfinished == []
    assert report.client_errors == []
    assert not report.server_errors, report.server_errors[:5]


async def _pair(app: App) -> tuple[Client, Client, str]:
    a = await Client.hello(app.port, "ann")
    b = await Client.hello(app.port, "bob")
    sent = await a.request({"type": "challenge", "opponent": "bob", "pacing": "free"})
    reply = await b.request({"type": "accept", "challenge_id": sent["challenge_id"]})
    assert reply["type"] == "match", reply
    mid = reply["match_id"]
    await a.request({"type": "secret", "match_id": mid, "secret": "0123"})
    await b.request({"type": "secret", "match_id": mid, "secret": "4567"})
    return a, b, mid




#: Never "4567" (bob's secret): ann guesses on without solving, one new row per guess.
CODES = ["".join(p) for p in itertools.permutations("98763", 4)]


@pytest.mark.parametrize("fault", [disk_full, read_only], ids=["disk_full", "read_only"])
async def test_guesses_are_refused_not_acknowledged_when_storage_fails(
    tmp_path: Path, fault: Callable[[sqlite3.Connection], Any]
) -> None:
    settings = server_settings(tmp_path, sqlite_synchronous="FULL")
    async with running(settings) as app:
        a, _, mid = await _pair(app)
        await break_store(app, fault)
        acked: list[tuple[str, int, int, str]] = []
        refused = None
        for guess in CODES:  # free pacing: ann guesses on and on (never solving) until full
            reply = await a.request({"type": "guess", "match_id": mid, "guess": guess})
            if reply["type"] == "event":
                acked.append((mid, 0, reply["n"], guess))
                continue
            refused = (reply, guess)
            break
        assert refused is not None, "the store never filled up"
        reply, guess = refused
        assert reply["type"] == "error" and reply["code"] == "storage_unavailable", reply
        # Nothing more is accepted for that match, and a new match is refused the same way.
        again = await a.request({"type": "guess", "match_id": mid, "guess": "5678"})
        assert again["type"] == "error", again
        if fault is read_only:  # a full disk may still fit a small row; read-only fits none
            c = await Client.open(app.port)
            hello = await c.request({"type": "hello", "name": "cat"})
            assert hello["type"] == "error" and hello["code"] == "storage_unavailable", hello
    logged = logged_guesses(Path(settings.db))
    assert set(acked) <= logged, "an acknowledged guess is not on disk"
    assert not any(g == guess and m == mid for m, _, _, g in logged), "refused guess stored"


async def test_new_match_is_refused_with_storage_unavailable(tmp_path: Path) -> None:
    """The player who accepts a challenge must hear why no match starts (before the fix in
    Arena.create, found here, neither player heard anything)."""
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann")
        b = await Client.hello(app.port, "bob")
        await break_store(app, read_only)
        sent = await a.request({"type": "challenge", "opponent": "bob"})
        ref = await b.send({"type": "accept", "challenge_id": sent["challenge_id"]})
        reply = await b.expect(lambda m: m.get("ref") == ref, timeout=3)
        assert reply["type"] == "error" and reply["code"] == "storage_unavailable", reply
        assert app.arena.live == {}


async def test_mqtt_broker_down_and_restarting_leaves_matches_unaffected(
    mosquitto: str, tmp_path: Path
) -> None:
    """The publisher (server/publisher.py) must never hold up a match: the broker is absent
    at first, then started, SIGKILLed and restarted while a tournament runs, and every match
    is played to its end with nothing acknowledged lost. (How long acknowledgements took is
    ``python -m bench.faults``'s figure, not a test's.)"""
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    phases: list[str] = []

    async def broker_chaos(record: Record) -> None:
        async def after(n: int) -> None:
            while len(record.acked) < n:
                await asyncio.sleep(0.01)

        proc = None
        try:
            for start, stop in ((30, 70), (110, 150)):  # down, up, killed, up, killed
                await after(start)
                proc = await asyncio.create_subprocess_exec(
                    mosquitto, "-c", str(conf),
                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                )
                phases.append(f"up@{len(record.acked)}")
                await after(stop)
                proc.kill()
                await proc.wait()
                phases.append(f"killed@{len(record.acked)}")
        finally:
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()

    report = await tournament(
        tmp_path, kills=0, pairs=4, matches=24, seed=13,
        env={"MOO_MQTT_URL": f"mqtt://127.0.0.1:{port}"}, side=broker_chaos,
    )
    print(report.summary(), phases)
    assert len(phases) == 4, phases  # the broker really went up and down twice mid-play
    assert report.lost == [] and report.unfinished == []
    assert report.client_errors == []
