"""CI-sized fuzzing of the whole inbound path (bench/fuzz/), plus the bugs it found.

The long run (10**6 frames) is ``python -m bench.fuzz``; its figures are in
docs/reliability.md. Here a bounded, seeded run must finish with no violation at all. The two
bugs the fuzzer found (lone surrogate escapes; a refused action logging ``back``) are fixed on
main and keep their own regression tests below.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.fuzz import SPECIFIC_CODES, InProcessFuzzer, Session, fuzz_inproc, fuzz_sockets
from tests.patience import patience
from tests.server_support import Client, running, server_settings


async def test_inprocess_fuzz_keeps_every_promise() -> None:
    stats = await fuzz_inproc(frames=12_000, seed=20261122, worlds=4)
    assert stats.frames >= 12_000
    assert stats.harness_errors == []
    assert stats.violations == []
    # The run must have exercised the paths it claims to: all families, refusals and accepts.
    assert len(stats.by_label) == 10, stats.by_label
    assert stats.accepted > 500 and stats.refused > 5_000
    expected = {
        "undecodable", "bad_field", "too_large", "unknown_type", "unknown_match",
        "wrong_phase", "not_your_seat", "match_finished", "already_set", "not_your_turn",
        "unknown_symbol", "wrong_length", "unknown_player", "unknown_room", "unknown_strategy",
    }
    assert expected <= set(stats.by_code), expected - set(stats.by_code)
    assert set(stats.by_code) <= SPECIFIC_CODES


async def test_socket_fuzz_is_answered_or_closed_for_cause() -> None:
    stats = await fuzz_sockets(frames=1_500, seed=7, reply_timeout=1.0)
    assert stats.frames == 1_500
    assert stats.violations == []
    assert stats.by_code["close 1009"] > 0  # oversized frames met the transport limit
    assert stats.refused > 1_000


async def test_the_harness_catches_a_state_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant a bug (a refused guess that still counts) and the fuzzer must report it."""
    from moo.errors import InvalidCode
    from moo.match import Match

    real = Match.guess

    def leaky(
        self: Match, seat: int, code: str, now: int, n: int | None = None
    ) -> list[dict[str, object]]:
        try:
            return real(self, seat, code, now, n)
        except InvalidCode:
            self.seats[seat].guesses.append((code, 0, 0))
            raise

    monkeypatch.setattr(Match, "guess", leaky)
    stats = await fuzz_inproc(frames=3_000, seed=3, worlds=2)
    assert any("state changed" in v for v in stats.violations), stats.violations[:5]


async def test_lone_surrogate_in_json_is_refused_not_fatal(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        c = await Client.hello(app.port, "ann")
        await c.send_raw('{"type":"ping","id":"\\ud800"}')
        await c.send_raw('{"type":"ping","id":2}')
        pong = await c.expect(lambda m: m.get("ref") == 2, timeout=1)
        assert pong["type"] == "pong"


async def test_refused_action_after_reconnect_changes_nothing(tmp_path: Path) -> None:
    """docs/protocol.md: "The request changed nothing." Arena.act re-attaches the seat (and
    appends a ``back`` event) before the match has validated the action."""
    fuzzer = InProcessFuzzer(1, tmp_path)
    await fuzzer.start()
    try:
        mid = await fuzzer.new_match("ann", "bob", "lockstep", secrets=False)
        await fuzzer.sessions["ann"].ws.close()
        await asyncio.wait_for(fuzzer.sessions["ann"].task, patience(5))
        await fuzzer.barrier()
        ann: Session = await fuzzer.connect("ann", "moo.v1.json")
        before = fuzzer.app.arena.live[mid].match.seq
        err = await ann.request({"type": "guess", "match_id": mid, "guess": "0123"})
        assert err["type"] == "error" and err["code"] == "wrong_phase"
        assert fuzzer.app.arena.live[mid].match.seq == before
    finally:
        await fuzzer.stop()
