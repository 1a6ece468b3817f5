"""Tournaments: the paired plan, local play, standings math, resume, SPRT, and through-server."""

from __future__ import annotations

import asyncio
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from cli.main import main as moo_main
from clients.tournament.cli import format_standings, standings_json
from clients.tournament.remote import RemoteEngine
from clients.tournament.results import (
    MatchRecord,
    ResultsFile,
    pair_standings,
    player_standings,
)
from clients.tournament.runner import (
    Job,
    LocalEngine,
    TournamentResult,
    make_plan,
    run_tournament,
)
from moo import stats
from moo.match import MatchConfig
from moo.rules import Rules, score
from tests.patience import patience
from tests.server_support import running, server_settings
from tests.tournament_support import FIRST, LEXI

CONFIG = MatchConfig(secret_ms=None)


def race_winner(guesses: list[list[str]], secrets: list[str]) -> int | None:
    """Who wins the race, computed independently of the Match engine from the guess lists."""
    solved_at = []
    for seat in (0, 1):
        target = secrets[1 - seat]
        hit = [i + 1 for i, g in enumerate(guesses[seat]) if g == target]
        solved_at.append(hit[0] if hit else math.inf)
    if solved_at[0] == solved_at[1]:
        return None
    return 0 if solved_at[0] < solved_at[1] else 1


def local(jobs: list[Job], **kwargs: Any) -> TournamentResult:
    return asyncio.run(run_tournament(jobs, LocalEngine(CONFIG), **kwargs))


# -- the plan ---------------------------------------------------------------------------------


def test_plan_pairs_secrets_and_swaps_them() -> None:
    jobs = make_plan(["a", "b", "c"], rounds=20, seed=7)
    assert len(jobs) == 3 * 20 * 2  # the brief's 120
    assert len({j.key for j in jobs}) == len(jobs)
    by_round: dict[int, set[tuple[str, str]]] = {}
    for j in jobs:
        assert j.secrets is not None
        by_round.setdefault(j.round, set()).add(tuple(sorted(j.secrets)))  # type: ignore[arg-type]
    # one secret pair per round, shared by every pair of bots
    assert all(len(pairs) == 1 for pairs in by_round.values())
    legs = {(j.pair, j.round, j.leg): j for j in jobs}
    for (pair, r, leg), j in legs.items():
        if leg == 0:
            other = legs[(pair, r, 1)]
            assert other.secrets == (j.secrets[1], j.secrets[0])  # type: ignore[index]
    # stable: the same arguments give the same plan, another seed other secrets
    assert make_plan(["a", "b", "c"], rounds=20, seed=7) == jobs
    assert make_plan(["a", "b", "c"], rounds=20, seed=8) != jobs
    gauntlet = make_plan(["a", "b", "c", "d"], fmt="gauntlet", rounds=2, seed=1)
    assert {j.pair for j in gauntlet} == {(0, 1), (0, 2), (0, 3)}


# -- local play -------------------------------------------------------------------------------


def test_local_paired_games_are_consistent_with_the_rules() -> None:
    jobs = make_plan([FIRST, LEXI, "random"], rounds=3, seed=11)
    result = local(jobs)
    assert len(result.records) == 18 and result.played == 18
    for r in result.records:
        job = next(j for j in jobs if j.key == r.key)
        assert r.secrets == list(job.secrets or ())
        assert r.counts == [len(g) for g in r.guesses]
        assert r.winner == race_winner(r.guesses, r.secrets)
        for seat in (0, 1):
            for g in r.guesses[seat][:-1]:
                assert score(r.secrets[1 - seat], g).bulls < 4
    # the weak bot loses almost everything
    table = {(a, b): st for (a, b), st in pair_standings(result.records).items()}
    assert table[(0, 1)].wins >= 5


def test_local_results_do_not_depend_on_worker_processes() -> None:
    jobs = make_plan([FIRST, "random"], rounds=3, seed=5)
    one = local(jobs)
    two = asyncio.run(run_tournament(jobs, LocalEngine(CONFIG, 2), concurrency=2))
    strip = [(r.key, r.guesses, r.winner) for r in one.records]
    assert strip == [(r.key, r.guesses, r.winner) for r in two.records]


# -- standings --------------------------------------------------------------------------------


def record(
    round_: int, leg: int, winner: int | None, pair: tuple[int, int] = (0, 1)
) -> MatchRecord:
    return MatchRecord(
        key=f"{pair}|r{round_}|g{leg}", seed=1, round=round_, leg=leg, players=["A", "B"],
        secrets=["0123", "4567"], guesses=[["4567"], ["0123"]], counts=[1, 1], winner=winner,
        reason="solved", mode="local", started_ms=0, finished_ms=0, pair=list(pair),
    )


def test_standings_by_hand() -> None:
    # rounds: (win, win) = 2 points, (win, draw) = 1.5, (draw, loss) = 0.5, (loss, loss) = 0,
    # (win, loss) = 1
    outcomes = [(0, 0), (0, None), (None, 1), (1, 1), (0, 1)]
    records = [record(r, leg, w) for r, pair in enumerate(outcomes) for leg, w in enumerate(pair)]
    (st,) = pair_standings(records).values()
    assert (st.wins, st.draws, st.losses) == (4, 2, 4)
    assert st.score == 0.5
    assert st.penta == [1, 1, 1, 1, 1]
    # pentanomial interval: pair shares 0, .25, .5, .75, 1 -> mean .5, variance .125
    iv = st.interval
    se = math.sqrt(0.125 / 5)
    assert iv.stderr == pytest.approx(se)
    assert iv.elo == pytest.approx(0.0)
    assert iv.elo_high == pytest.approx(-400 * math.log10(1 / (0.5 + stats.Z95 * se) - 1))
    a, b = player_standings(records, ["A", "B"])
    assert (a.name, a.wins, a.draws, a.losses) == ("A", 4, 2, 4)
    assert (b.wins, b.losses) == (4, 4)


def test_elo_and_los_formulas() -> None:
    assert stats.elo_from_score(0.75) == pytest.approx(400 * math.log10(3))
    assert stats.elo_from_score(0.5) == 0.0
    assert stats.score_from_elo(stats.elo_from_score(0.3)) == pytest.approx(0.3)
    assert stats.elo_from_score(1.0) == math.inf
    # trinomial: 6 wins, 2 draws, 2 losses -> s = .7, per-game variance .16
    iv = stats.elo_interval_trinomial(6, 2, 2)
    assert iv.score == pytest.approx(0.7)
    assert iv.stderr == pytest.approx(math.sqrt(0.16 / 10))
    low = 0.7 - 1.959964 * math.sqrt(0.016)
    assert iv.elo_low == pytest.approx(-400 * math.log10(1 / low - 1), rel=1e-5)
    # LOS = Phi((W - L) / sqrt(W + L))
    nd = statistics.NormalDist()
    assert stats.los(10, 5) == pytest.approx(nd.cdf(5 / math.sqrt(15)))
    assert stats.los(3, 3) == 0.5
    assert stats.los(0, 0) == 0.5


def test_sprt_llr_and_bounds() -> None:
    spec = stats.SprtSpec.parse("0,50,0.05,0.05")
    assert spec.upper == pytest.approx(math.log(0.95 / 0.05))
    assert spec.lower == pytest.approx(-spec.upper)
    # a pentanomial centred on the H1 score share is evidence for H1, and grows with N
    s0, s1 = stats.score_from_elo(0), stats.score_from_elo(50)
    assert 0.5 < s1 < 0.6
    small = stats.sprt_llr([1, 2, 4, 5, 3], 0, 50)
    big = stats.sprt_llr([10, 20, 40, 50, 30], 0, 50)
    assert 0 < small < big == pytest.approx(10 * small, rel=1e-3)
    assert stats.sprt_llr([3, 5, 4, 2, 1], 0, 50) < 0
    # for many pairs it agrees with the normal approximation N (s1-s0)(2m-s0-s1)/(2v)
    penta = [100, 200, 400, 500, 300]
    shares = [v for v, c in zip((0, 0.25, 0.5, 0.75, 1), penta) for _ in range(c)]
    m, v = statistics.fmean(shares), statistics.pvariance(shares)
    normal = len(shares) * (s1 - s0) * (2 * m - s0 - s1) / (2 * v)
    assert stats.sprt_llr(penta, 0, 50) == pytest.approx(normal, rel=0.2)
    # one decisive pair is weak evidence: log(s1/s0) at most, not a decision
    one = stats.sprt_llr([0, 0, 0, 0, 1], 0, 50)
    assert 0 < one <= math.log(s1 / s0) + 1e-6
    # n pairs all won: the constrained MLE puts mass s on "won", so LLR -> n log(s1/s0)
    assert stats.sprt_llr([0, 0, 0, 0, 40], 0, 50) == pytest.approx(
        40 * math.log(s1 / s0), rel=1e-3
    )
    with pytest.raises(ValueError):
        stats.SprtSpec.parse("50,0")


def test_sprt_stops_a_lopsided_match_early() -> None:
    jobs = make_plan([FIRST, LEXI], rounds=200, seed=3)
    spec = stats.SprtSpec(0, 100, 0.05, 0.05)
    result = local(jobs, sprt_spec=spec)
    assert result.sprt is not None and result.sprt.decision == "H1"
    assert result.played < len(jobs) // 4
    assert result.sprt.llr >= spec.upper


# -- results file and resume -----------------------------------------------------------------


class Crashing(LocalEngine):
    """Plays ``limit`` matches, then fails like a killed process would."""

    def __init__(self, limit: int) -> None:
        super().__init__(CONFIG)
        self.limit = limit

    async def play(self, job: Job) -> MatchRecord:
        if self.limit == 0:
            raise RuntimeError("crash")
        self.limit -= 1
        return await super().play(job)


def comparable(records: list[MatchRecord]) -> list[tuple[Any, ...]]:
    return [
        (r.key, r.players, r.secrets, r.guesses, r.counts, r.winner, r.reason) for r in records
    ]


def test_resume_after_a_crash_gives_the_same_results(tmp_path: Path) -> None:
    jobs = make_plan([FIRST, "random", LEXI], rounds=4, seed=99)
    full = local(jobs, out=ResultsFile(tmp_path / "full.jsonl"))
    path = tmp_path / "crash.jsonl"
    with pytest.raises(RuntimeError):
        asyncio.run(run_tournament(jobs, Crashing(9), out=ResultsFile(path)))
    lines = path.read_text().splitlines()
    assert len(lines) == 9
    with open(path, "a") as fh:  # a torn final line, as a crash mid-write leaves it
        fh.write(lines[0][: len(lines[0]) // 2])
    resumed = local(jobs, out=ResultsFile(path), resume=True)
    assert resumed.skipped == 9 and resumed.played == len(jobs) - 9
    assert comparable(resumed.records) == comparable(full.records)
    on_disk = ResultsFile(path).load()
    assert len(on_disk) == len(jobs)
    assert comparable(sorted(on_disk, key=lambda r: [j.key for j in jobs].index(r.key))) == (
        comparable(full.records)
    )
    names = ["FirstConsistent", "random", "Lexicographic"]
    info = {"format": "roundrobin", "rounds": 4, "pacing": "lockstep", "seed": 99, "mode": "local"}
    a = standings_json(full, names, info)
    b = standings_json(resumed, names, info)
    assert a["players"] == b["players"] and a["pairs"] == b["pairs"]
    # nothing left to play: a second resume plays nothing and agrees again
    again = local(jobs, out=ResultsFile(path), resume=True)
    assert again.played == 0 and comparable(again.records) == comparable(full.records)


def test_cli_local_json_and_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.jsonl"
    argv = ["tournament", FIRST, "random", LEXI, "--local", "--rounds", "2", "--seed", "4",
            "--out", str(out), "--json", "--no-progress"]
    assert moo_main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["matches"] == 12 and data["played"] == 12
    assert len(out.read_text().splitlines()) == 12
    first = json.loads(out.read_text().splitlines()[0])
    for key in ("players", "secrets", "guesses", "counts", "result", "reason", "started_ms",
                "finished_ms", "key"):
        assert key in first
    assert sum(p["games"] for p in data["players"]) == 24
    assert moo_main([*argv, "--resume"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["played"] == 0 and again["resumed"] == 12
    assert again["players"] == data["players"]
    assert moo_main(["tournament", "nonesuch", "random", "--local"]) == 2  # a usage mistake


def test_text_standings_mention_every_bot() -> None:
    jobs = make_plan([FIRST, LEXI], rounds=2, seed=2)
    result = local(jobs)
    text = format_standings(
        result, ["FirstConsistent", "Lexicographic"],
        {"format": "roundrobin", "rounds": 2, "pacing": "lockstep", "seed": 2, "mode": "local"},
    )
    assert "FirstConsistent vs Lexicographic: +4 =0 -0" in text
    assert "Elo" in text and "LOS" in text


# -- through a real server -------------------------------------------------------------------


async def test_through_server_tournament_matches_local_play(tmp_path: Path) -> None:
    jobs = make_plan([FIRST, "random", LEXI], rounds=2, seed=21)
    async with running(server_settings(tmp_path)) as app:
        engine = RemoteEngine(f"ws://127.0.0.1:{app.port}/", prefix="tt-")
        out = ResultsFile(tmp_path / "server.jsonl")
        remote = await asyncio.wait_for(
            run_tournament(jobs, engine, out=out, concurrency=4), 60
        )
        board = await app.store.leaderboard("rating")
    assert len(remote.records) == 12
    assert all(r.mode == "server" and r.match_id for r in remote.records)
    assert len({r.match_id for r in remote.records}) == 12
    # the same seeds play the same guesses in-process: the two modes agree record by record
    offline = await run_tournament(jobs, LocalEngine(CONFIG))
    assert comparable(remote.records) == comparable(offline.records)
    assert {row["name"] for row in board} >= {"tt-FirstConsistent-1", "tt-random-1"}


async def test_a_connection_lost_mid_match_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clients.sdk import Client

    original = Client.request
    calls = {"n": 0, "cut": 0}

    async def flaky_request(self: Client, type: str, **fields: Any) -> Any:
        calls["n"] += 1
        if calls["n"] >= 25 and calls["cut"] == 0 and type == "guess":
            calls["cut"] += 1
            assert self.connection is not None
            self.connection.transport.abort()  # the network goes away under this seat
        return await original(self, type, **fields)

    monkeypatch.setattr(Client, "request", flaky_request)
    jobs = make_plan([FIRST, "random"], rounds=3, seed=8)
    async with running(server_settings(tmp_path)) as app:
        engine = RemoteEngine(f"ws://127.0.0.1:{app.port}/", prefix="fl-")
        result = await asyncio.wait_for(run_tournament(jobs, engine, concurrency=2), patience(60))
        live = len(app.arena.live)
    assert calls["cut"] == 1
    assert live == 0  # the abandoned match was resigned, not left open
    offline = await run_tournament(jobs, LocalEngine(CONFIG))
    assert comparable(result.records) == comparable(offline.records)


def test_bots_choose_secrets_and_gauntlet(capsys: pytest.CaptureFixture[str]) -> None:
    jobs = make_plan([FIRST, LEXI, "random"], fmt="gauntlet", rounds=3, seed=6, secrets="bots")
    assert all(j.secrets is None for j in jobs) and {j.pair for j in jobs} == {(0, 1), (0, 2)}
    result = local(jobs)
    rules = CONFIG.rules
    assert isinstance(rules, Rules)
    assert all(rules.is_secret(s) for r in result.records for s in r.secrets)
    # every seat drew its own secret from its own seeded RNG: not all the same
    assert len({tuple(r.secrets) for r in result.records}) > 1
    assert moo_main(["tournament", FIRST, LEXI, "random", "--format", "gauntlet", "--rounds",
                     "2", "--secrets", "bots", "--json", "--no-progress", "--seed", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(p["a"], p["b"]) for p in data["pairs"]] == [
        ("FirstConsistent", "Lexicographic"), ("FirstConsistent", "random")
    ]
    assert data["matches"] == 8


def test_cli_through_a_moo_serve_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The acceptance shape: `moo tournament A B C --url ... --rounds N --out r.jsonl`."""
    import subprocess
    import sys
    import time
    import urllib.request

    from tests.mqtt_support import free_port

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "cli", "serve", "--port", str(port), "--db",
         str(tmp_path / "s.sqlite3"), "--log-level", "WARNING"],
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # ready when /healthz answers
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        out = tmp_path / "r.jsonl"
        assert moo_main(["tournament", FIRST, LEXI, "random", "--url",
                         f"ws://127.0.0.1:{port}/", "--rounds", "2", "--out", str(out),
                         "--no-progress"]) == 0
    finally:
        server.terminate()
        server.wait(patience(30))
    text = capsys.readouterr().out
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 3 * 2 * 2
    assert all(r["mode"] == "server" and r["match_id"] for r in records)
    for name in ("FirstConsistent", "Lexicographic", "random"):
        assert name in text
    assert "12 matches (12 played" in text


def test_identical_pairs_do_not_give_a_zero_width_interval() -> None:
    records = [record(r, leg, leg) for r in range(3) for leg in (0, 1)]  # each pair 1-1
    (st,) = pair_standings(records).values()
    assert st.penta == [0, 0, 3, 0, 0]
    iv = st.interval
    assert iv.stderr == pytest.approx(math.sqrt(0.25 / 6))  # per-game: W3 L3
    assert iv.elo_low < 0 < iv.elo_high


def test_an_external_program_plays_in_a_tournament() -> None:
    """``cmd:`` bots go through the external-program adapter (bots/external.py)."""
    root = Path(__file__).resolve().parents[2]
    prog = root / "examples" / "bots" / "first_consistent.sh"
    assert prog.exists()
    jobs = make_plan([f"cmd:{prog}", FIRST], rounds=2, seed=3)
    result = local(jobs)
    assert len(result.records) == 4
    for r in result.records:
        assert r.counts == [len(g) for g in r.guesses]
        assert r.winner == race_winner(r.guesses, r.secrets)
        assert r.reason == "solved"  # the shell bot neither crashed nor timed out
