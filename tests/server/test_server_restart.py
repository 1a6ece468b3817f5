"""Crash and restart: ``moo serve`` killed with SIGKILL or stopped with SIGTERM mid-match.

The server runs as a real subprocess on a real SQLite file. Clients pipeline guesses, so
some are in flight when the process dies; afterwards every guess that was acknowledged (its
event came back with our ``ref``) must be in the replayed log, and the matches must finish.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.patience import patience
from tests.server_support import Client

ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(rb"listening on ws://[^:]+:(\d+)/")


class ServerProcess:
    def __init__(self, proc: asyncio.subprocess.Process, port: int, started_s: float) -> None:
        self.proc = proc
        self.port = port
        self.started_s = started_s
        self.log: list[bytes] = []
        #: reads its standard error to the end (into ``log``)
        self.drain: asyncio.Task[None] | None = None


#: The per-connection rate limit these servers allow (messages a second, and burst). The
#: default (20/s, bursts of 40: docs/protocol.md) is less than this test sends in a row: ann
#: pipelines 40 guesses after 8 setup messages, and after the restart bob answers every guess
#: ann made (up to 21 a match) with hello and resumes first. A message over the limit is refused
#: with ``rate_limited`` (nothing done), and how many were refused depended on timing: more
#: under load, where ann's burst spreads out, more of its guesses get in, and bob has more to
#: answer. The limit is tested on its own
#: (test_conformance.py, test_server_matches.py); here it is set out of reach.
RATE_PER_S = 1000
RATE_BURST = 1000


async def start_server(db: Path) -> ServerProcess:
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", "serve", "--port", "0", "--db", str(db),
        "--bot-delay-ms", "0", "--grace-ms", "60000",
        "--rate-per-s", str(RATE_PER_S), "--rate-burst", str(RATE_BURST),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MOO_SQLITE_SYNCHRONOUS": "FULL"},
    )
    assert proc.stderr is not None
    lines: list[bytes] = []
    async with asyncio.timeout(patience(15)):
        while True:
            line = await proc.stderr.readline()
            if not line:
                raise AssertionError(b"server exited early:\n" + b"".join(lines))
            lines.append(line)
            found = LISTENING.search(line)
            if found:
                break
    server = ServerProcess(proc, int(found.group(1)), time.monotonic() - t0)
    server.log = lines

    async def drain() -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            server.log.append(line)

    server.drain = asyncio.get_running_loop().create_task(drain())
    return server


@asynccontextmanager
async def served(db: Path) -> AsyncIterator[ServerProcess]:
    server = await start_server(db)
    try:
        yield server
    finally:
        if server.proc.returncode is None:
            server.proc.kill()
        await server.proc.wait()
        # its standard error read to the end, so that its pipe is closed on this event loop:
        # a transport left open is closed by the garbage collector once the loop is gone,
        # "Event loop is closed" in whichever test runs then (stop 44's warning)
        if server.drain is not None:
            await asyncio.wait_for(server.drain, patience(10))


def refused(client: Client) -> list[dict[str, Any]]:
    """The ``rate_limited`` errors ``client`` got: each is a message of ours never acted on."""
    return [m for m in client.seen if m.get("type") == "error" and m.get("code") == "rate_limited"]


def acked_guesses(client: Client, match_id: str) -> list[tuple[int, str]]:
    return [
        (e["seq"], e["guess"])
        for e in client.events(match_id)
        if e["kind"] == "guess" and "ref" in e
    ]


async def setup_matches(port: int) -> tuple[Client, Client, list[str]]:
    """ann and bob in two free matches and one lockstep match, secrets set."""
    # programs (bot: true) may sit in several matches at once; people play one at a time
    ann = await Client.hello(port, "ann", bot=True)
    bob = await Client.hello(port, "bob", "moo.v1.msgpack", bot=True)
    mids = []
    for pacing in ("free", "free", "lockstep"):
        sent = await ann.request({"type": "challenge", "opponent": "bob", "pacing": pacing})
        cid = sent["challenge_id"]
        offer = await bob.expect(lambda m: m.get("challenge_id") == cid)  # noqa: B023
        m = await bob.request({"type": "accept", "challenge_id": offer["challenge_id"]})
        mid = m["match_id"]
        await ann.expect(
            lambda m: m.get("type") == "match" and m["match_id"] == mid  # noqa: B023
        )
        await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
        await bob.request({"type": "secret", "match_id": mid, "secret": "4567"})
        await ann.event(mid, "started")
        mids.append(mid)
    return ann, bob, mids


#: wrong guesses for ann (bob's secret is 4567), all distinct
WRONG = [g for g in ("5678", "6789", "7890", "8901", "9012", "1234", "2345", "3456") * 4]


async def pipeline_then_stop(
    server: ServerProcess, ann: Client, mids: list[str], sig: int
) -> dict[str, list[tuple[int, str]]]:
    """Fire many guesses without waiting, stop the server after some acks arrive."""
    free = mids[:2]
    for mid in free:
        for guess in WRONG[:20]:
            await ann.send({"type": "guess", "match_id": mid, "guess": guess})
    # wait for a few acknowledgements, then pull the plug with guesses still in flight
    async with asyncio.timeout(patience(10)):
        while sum(len(acked_guesses(ann, mid)) for mid in free) < 6:
            try:
                await ann.expect(lambda m: "ref" in m and m.get("kind") == "guess", timeout=5)
            except TimeoutError:
                break
            ann.inbox.clear()
    server.proc.send_signal(sig)
    # read what still arrives until the connection drops: those acks count too
    code = await ann.closed(timeout=10)
    # every pipelined guess reached the match: what was lost is lost to the stop alone
    assert not refused(ann), refused(ann)
    if sig == signal.SIGTERM:
        assert code == 1012
    return {mid: acked_guesses(ann, mid) for mid in free}


async def resume_and_finish(port: int, ann_token: str, bob_token: str, mids: list[str],
                            acked: dict[str, list[tuple[int, str]]]) -> None:
    ann = await Client.hello(port, "x", token=ann_token)
    bob = await Client.hello(port, "y", "moo.v1.msgpack", token=bob_token)
    welcome = ann.seen[-1]
    assert sorted(m["match_id"] for m in welcome["matches"]) == sorted(mids)
    for mid in mids:
        await ann.request({"type": "resume", "match_id": mid, "last_seq": 0})
        await bob.request({"type": "resume", "match_id": mid, "last_seq": 0})
        resumed = await ann.event(mid, "resumed")
        logged = {(e["seq"], e["guess"]) for e in ann.events(mid) if e["kind"] == "guess"
                  and e["seat"] == 0 and e["seq"] < resumed["seq"]}
        # nothing acknowledged was lost
        assert set(acked.get(mid, [])) <= logged, (mid, acked.get(mid), logged)
        print("restart:", mid, "acked", len(acked.get(mid, [])), "logged", len(logged))
    # finish every match: ann solves, bob then cannot catch up (or misses in lockstep)
    for mid in mids:
        if mid == mids[2]:
            # lockstep: bob completes the half-done round 1, then round 2 decides
            await bob.request({"type": "guess", "match_id": mid, "guess": "9876"})
            await ann.event(mid, "round", n=1)
        await ann.request({"type": "guess", "match_id": mid, "guess": "4567"})
        if mid == mids[2]:
            await bob.request({"type": "guess", "match_id": mid, "guess": "8976"})
        else:
            # bob has made no guesses: it needs to make as many as ann to tie or lose
            # (by seq: hello replays the match and resume replays it again)
            count = len({e["seq"] for e in ann.events(mid) if e["kind"] == "guess"
                         and e["seat"] == 0})
            for guess in (WRONG * 3)[:count]:
                r = await bob.request({"type": "guess", "match_id": mid, "guess": guess})
                if r["type"] == "error":
                    assert r["code"] == "match_finished"
                    break
        fin = await ann.event(mid, "finished")
        assert fin["winner"] == 0 and fin["reason"] == "solved"
    assert not refused(ann) and not refused(bob), (refused(ann), refused(bob))
    await ann.close()
    await bob.close()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
async def test_restart_loses_no_acknowledged_guess(tmp_path: Path, sig: int) -> None:
    db = tmp_path / "moo.sqlite3"
    async with served(db) as first:
        print(f"moo serve started in {first.started_s:.2f}s")
        ann, bob, mids = await setup_matches(first.port)
        # one lockstep round is half done: ann guessed, bob did not
        await ann.request({"type": "guess", "match_id": mids[2], "guess": "5678"})
        acked = await pipeline_then_stop(first, ann, mids, sig)
        acked[mids[2]] = acked_guesses(ann, mids[2])
        assert sum(len(v) for v in acked.values()) >= 3
        rc = await asyncio.wait_for(first.proc.wait(), patience(10))
        assert rc == (-signal.SIGKILL if sig == signal.SIGKILL else 0)
        tokens: tuple[Any, Any] = (ann.token, bob.token)
    async with served(db) as second:
        await resume_and_finish(second.port, tokens[0], tokens[1], mids, acked)
        second.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(second.proc.wait(), patience(10)) == 0
