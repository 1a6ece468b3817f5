"""``moo analyse MATCH_ID``: the match fetched from a real ``moo serve`` (``--url``) or from its
database (``--db``), analysed as the same record in a file would be; one-line errors for an
unknown match, an unfinished one and a server that is not there (docs/analysis.md)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from clients.analyse import record_from_match_record
from server.export import records
from tests.client_support import ROOT, client_env, moo_command, moo_serve
from tests.patience import patience

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e


def _moo(tmp_path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**client_env(tmp_path), "MOO_TREE_CACHE": str(tmp_path / "trees")}
    return subprocess.run(moo_command(*args), cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=patience(300))


async def _unfinished_match(url: str) -> str:
    """A match left waiting for our secret: started against a hosted bot, never played."""
    from clients.sdk.wire import Wire

    ws = await Wire.open(url)
    try:
        await ws.send({"type": "hello", "name": "idle"})
        while (await ws.receive())["type"] != "welcome":
            pass
        await ws.send({"type": "play_bot", "strategy": "random", "id": 1})
        while True:
            msg = await ws.receive()
            if msg["type"] == "match":
                return str(msg["match_id"])
    finally:
        await ws.close()


@pytest.mark.slow(15)
def test_analyse_match_id_from_server_and_db(tmp_path: Path) -> None:
    db = tmp_path / "serve.sqlite3"
    with moo_serve(tmp_path, env={"MOO_TREE_CACHE": str(tmp_path / "trees")}) as url:
        for pacing in ("lockstep", "free"):
            played = _moo(tmp_path, "bot", "entropy", "--vs-bot", "minimum", "--url", url,
                          "--rules", "moo:3",
                          "--games", "1", "--json", "--name", f"ent-{pacing}",
                          "--pacing", pacing, "--seed", "3")
            assert played.returncode == 0, played.stderr
        ids = [r["match_id"] for r in records(str(db))]
        assert len(ids) == 2
        for mid in ids:
            fetched = _moo(tmp_path, "analyse", mid, "--url", url, "--json")
            assert fetched.returncode == 0, fetched.stderr
            from_db = _moo(tmp_path, "analyse", mid, "--db", str(db), "--json")
            assert from_db.returncode == 0, from_db.stderr
            # the same analysis as the export record given as a file
            record = next(r for r in records(str(db)) if r["match_id"] == mid)
            as_file = _moo(tmp_path, "analyse", "-", "--json", stdin=json.dumps(record))
            assert as_file.returncode == 0, as_file.stderr
            assert json.loads(fetched.stdout) == json.loads(as_file.stdout)
            assert json.loads(from_db.stdout) == json.loads(as_file.stdout)
            players = json.loads(fetched.stdout)["players"]
            assert [len(p["guesses"]) for p in players] == [
                len(g) for g in record["guesses"]
            ]
            assert all(p["guesses"] for p in players)
        text = _moo(tmp_path, "analyse", ids[0], "--url", url)
        assert text.returncode == 0 and "expected guesses lost" in text.stdout
        # one line for what a person can get wrong
        unknown = _moo(tmp_path, "analyse", "m000000000000", "--url", url)
        assert unknown.returncode == 1
        assert unknown.stderr.strip() == "moo analyse: no match 'm000000000000'"
        idle = asyncio.run(_unfinished_match(url))
        waiting = _moo(tmp_path, "analyse", idle, "--url", url)
        assert waiting.returncode == 1 and len(waiting.stderr.strip().splitlines()) == 1
        assert "still being played" in waiting.stderr or "not finished" in waiting.stderr
    not_db = _moo(tmp_path, "analyse", "m000000000000", "--db", str(db))
    assert not_db.returncode == 1
    assert not_db.stderr.strip().startswith("moo analyse: no match 'm000000000000'")
    down = _moo(tmp_path, "analyse", ids[0], "--url", url)
    assert down.returncode == 1 and len(down.stderr.strip().splitlines()) == 1
    assert down.stderr.startswith(f"moo analyse: cannot reach the server at {url}")
    missing = _moo(tmp_path, "analyse", "nothere.json")
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_too_large_variant_is_refused_in_one_line(tmp_path: Path) -> None:
    record = {"rules": {"length": 5}, "secret": "01234", "guesses": ["56789", "01234"]}
    out = _moo(tmp_path, "analyse", "-", stdin=json.dumps(record))
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "moo analyse: MOO 5 of 10 is too large for the exact solver, so it is not analysed "
        "(exact analysis: 4 of 10, and distinct-symbol MOO of at most 3024 codes and "
        "10 symbols)"
    ]
    small = {"rules": {"length": 3}, "secret": "012", "guesses": ["345", "012"]}
    ok = _moo(tmp_path, "analyse", "-", "--json", stdin=json.dumps(small))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["players"][0]["guesses"][0]["source"] == "solver"


def test_lockstep_record_takes_guesses_from_rounds() -> None:
    reply = {
        "match_id": "m1", "players": ["ann", "bob"],
        "config": {"pacing": "lockstep", "rules": {"length": 3}},
        "events": [
            {"seq": 1, "kind": "created"},
            {"seq": 2, "kind": "guess", "seat": 0, "n": 1},
            {"seq": 3, "kind": "guess", "seat": 1, "n": 1},
            {"seq": 4, "kind": "round", "n": 1, "results": [["012", 0, 0], ["345", 3, 0]]},
            {"seq": 5, "kind": "finished", "secrets": ["345", "678"]},
        ],
    }
    rec = record_from_match_record(reply)
    assert rec["players"] == [
        {"name": "ann", "secret": "678", "guesses": ["012"]},
        {"name": "bob", "secret": "345", "guesses": ["345"]},
    ]
