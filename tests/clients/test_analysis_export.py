"""Post-match analysis in exports (``moo export --analysis``) and ``moo analyse`` reading an
export record: the figures are the judge's (``bots.judge.review.analyse_guesses``)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bots.judge.review import analyse_guesses
from clients.analyse import main as analyse_main
from moo.mastermind import MastermindRules
from moo.match import Match, MatchConfig
from moo.rules import DEFAULT_RULES
from server import review_worker
from server.export import match_record, with_analysis
from tests.patience import patience
from tests.server_support import ENCODINGS, Client, running, server_settings


def _record(config: MatchConfig, secrets: tuple[str, str],
            guesses: tuple[list[str], list[str]]) -> dict[str, object]:
    m, _ = Match.create("mx", ("ann", "bob"), config, 0)
    m.set_secret(0, secrets[0], "s0", 1)
    m.set_secret(1, secrets[1], "s1", 1)
    for n in range(max(len(guesses[0]), len(guesses[1]))):
        for seat in (0, 1):
            if n < len(guesses[seat]) and not m.finished:
                m.guess(seat, guesses[seat][n], 2 + n)
    assert m.finished
    return match_record("mx", {"players": ["ann", "bob"], "bots": [None, None]}, m.events)


def test_export_analysis_is_the_solvers() -> None:
    record = _record(MatchConfig(), ("5381", "0724"),
                     (["0123", "4567", "0724"], ["1234", "5678", "3581"]))
    done = with_analysis(record)
    analysis = done["analysis"]
    assert isinstance(analysis, list)
    ann = analyse_guesses(DEFAULT_RULES, "0724", ["0123", "4567", "0724"])
    assert analysis[0] == [a.to_dict() for a in ann]
    # the minimum tree's first guess costs nothing
    assert analysis[0][0]["guess"] == "0123" and analysis[0][0]["loss"] == 0


def test_export_analysis_of_mastermind_and_of_an_unstarted_match() -> None:
    rules = MastermindRules()
    record = _record(MatchConfig(rules=rules), ("1122", "6543"),
                     (["1234", "6543"], ["1111", "1122"]))
    done = with_analysis(record)
    assert done["analysis"][1] == [  # type: ignore[index]
        a.to_dict() for a in analyse_guesses(rules, "1122", ["1111", "1122"])]
    m, events = Match.create("my", ("ann", "bob"), MatchConfig(), 0)
    events += m.resign(0, 1)
    empty = with_analysis(match_record("my", {"players": ["ann", "bob"]}, events))
    assert empty["analysis"] is None and "no secrets" in str(empty["analysis_error"])


def test_moo_analyse_reads_an_export_file(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    record = _record(MatchConfig(), ("5381", "0724"),
                     (["0123", "4567", "0724"], ["1234", "5678", "3581"]))
    exported = tmp_path / "matches.jsonl"
    exported.write_text(json.dumps(record) + "\n" + json.dumps(record) + "\n")
    assert analyse_main(argparse.Namespace(file=exported, json=True, url=None, db=None,
                                           record=1)) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in out["players"]] == ["ann", "bob"]
    assert out["players"][1]["secret"] == "5381"
    assert out["players"][1]["guesses"] == [
        a.to_dict() for a in analyse_guesses(DEFAULT_RULES, "5381", ["1234", "5678", "3581"])]


def test_moo_analyse_of_a_file_imports_no_network_or_array_stack(tmp_path: Path) -> None:
    """``moo analyse FILE`` from a fresh process (issue 19: its start-up is what a person
    waits for) loads neither numpy nor the event loop, the WebSocket client or logging: the
    command's module imports them only where a match is fetched. A match whose guesses leave
    80-92 secrets after the third, so the history is reduced and the solver's engine built
    (the paths that used numpy)."""
    record = {"rules": {}, "players": [
        {"name": "first", "secret": "4136",
         "guesses": ["9561", "2016", "0896", "3256", "1436", "4136"]},
        {"name": "parts", "secret": "7812",
         "guesses": ["4763", "5621", "9312", "9542", "9016", "7812"]}]}
    path = tmp_path / "match.json"
    path.write_text(json.dumps(record))
    code = ("import sys; from cli.main import main; "
            f"status = main(['analyse', {str(path)!r}, '--json']); "
            "heavy = sorted(m for m in ('numpy', 'asyncio', 'websockets', 'logging', "
            "'secrets') if m in sys.modules); "
            "print('status', status, 'heavy', heavy, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "status 0 heavy []", proc.stderr
    out = json.loads(proc.stdout)
    assert [len(p["guesses"]) for p in out["players"]] == [6, 6]


@pytest.mark.parametrize("enc", ENCODINGS)
async def test_analysis_request_after_a_match(tmp_path: Path, enc: str) -> None:
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann", enc)
        b = await Client.hello(app.port, "bob", enc)
        room = await a.request({"type": "room_create"})
        m = await b.request({"type": "room_join", "code": room["code"]})
        mid = m["match_id"]
        p0, p1 = (a, b) if m["seat"] == 1 else (b, a)
        await p0.request({"type": "secret", "match_id": mid, "secret": "5381"})
        await p1.request({"type": "secret", "match_id": mid, "secret": "0724"})
        err = await p0.request({"type": "analysis", "match_id": mid})
        assert err["code"] == "not_finished"
        for g0, g1 in (("0123", "1234"), ("4567", "5678"), ("0724", "3581")):
            await p0.request({"type": "guess", "match_id": mid, "guess": g0})
            await p1.request({"type": "guess", "match_id": mid, "guess": g1})
        await p0.event(mid, "finished")
        # The analysis is a solver in a child process, which a busy machine slows past the
        # server's time limit (then the reply is a refusal): the limit grows with the load
        # here, and the test waits for the reply, however long it takes to come.
        limit = patience(review_worker.TIME_LIMIT_S)
        app.arena.analysis.worker.time_limit_s = limit
        reply = await p1.request({"type": "analysis", "match_id": mid},
                                 timeout=limit + 30)
        assert reply["type"] == "analysis" and reply["match_id"] == mid, reply
        seat0 = reply["players"][0]
        assert seat0["secret"] == "0724"
        assert seat0["guesses"] == [
            a.to_dict() for a in analyse_guesses(DEFAULT_RULES, "0724", ["0123", "4567", "0724"])]
        err = await p1.request({"type": "analysis", "match_id": "mnosuchmatch"})
        assert err["code"] == "no_such_match"
