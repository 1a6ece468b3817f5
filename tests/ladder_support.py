"""Helpers for the ladder's tests: submitting a program over the protocol, and a bot worker
scripted by the test (tests/server/test_ladder.py plays the bots' seats itself, so the server's
side is tested without the sandbox; tests/clients/test_worker.py runs the real worker)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from tests.cluster_support import until
from tests.server_support import Client

ROOT = Path(__file__).resolve().parents[1]
#: a compliant program (docs/bot-protocol.md): a random code consistent with every response
GOOD = (ROOT / "tests" / "hosted_entries" / "consistent.py").read_bytes()
#: a program that answers the protocol's hello with garbage
BROKEN = b"#!/bin/sh\necho hello\n"


async def upload(client: Client, program: bytes, chunk: int = 2304) -> str:
    """The program sent in chunks; the upload's id."""
    upload_id = None
    for offset in range(0, len(program), chunk):
        msg: dict[str, Any] = {"type": "ladder_upload", "offset": offset,
                               "data": base64.b64encode(program[offset:offset + chunk]).decode()}
        if upload_id is not None:
            msg["upload"] = upload_id
        reply = await client.request(msg)
        assert reply["type"] == "ladder_uploaded", reply
        assert reply["size"] == min(len(program), offset + chunk)
        upload_id = reply["upload"]
    assert upload_id is not None
    return str(upload_id)


async def submit(client: Client, program: bytes, **fields: Any) -> dict[str, Any]:
    """Upload then submit (``name=`` a new bot, ``bot_id=`` a new version); the reply."""
    upload_id = await upload(client, program)
    return await client.request({"type": "ladder_submit", "upload": upload_id,
                                 "sha256": hashlib.sha256(program).hexdigest(), **fields})


async def worker(port: int, key: str = "k", slots: int = 1) -> Client:
    """A bot worker's connection, scripted by the test."""
    conn = await Client.open(port)
    welcome = await conn.request({"type": "worker_hello", "key": key, "slots": slots})
    assert welcome["type"] == "worker_welcome", welcome
    return conn


async def claim(conn: Client) -> dict[str, Any] | None:
    reply = await conn.request({"type": "worker_claim"})
    assert reply["type"] == "worker_job", reply
    job: dict[str, Any] | None = reply["job"]
    return job


async def answered(client: Client, msg: dict[str, Any]) -> dict[str, Any]:
    """Send ``msg`` until it is not refused with "try again" (on a cluster: the ladder moving
    to, or still being read at, the leader; the docs say to send it again); the reply."""
    reply: dict[str, Any] = {}

    async def done() -> bool:
        nonlocal reply
        reply = await client.request(msg, timeout=30)
        return not (reply.get("type") == "error" and "try again" in reply.get("message", ""))

    await until(done, 60, f"an answer to {msg['type']}", poll=0.2)
    return reply


async def next_job(w: Client, kind: str) -> dict[str, Any]:
    """Claim until a job of ``kind`` comes (a refusal must be "try again"); an eval on the
    way is done with no score."""
    found: dict[str, Any] = {}

    async def got() -> bool:
        nonlocal found
        reply = await w.request({"type": "worker_claim"}, timeout=30)
        if reply.get("type") == "error":
            assert "try again" in reply["message"], reply
            return False
        job = reply["job"]
        if job is None:
            return False
        if job["kind"] == "eval" and kind != "eval":
            done = await w.request({"type": "worker_done", "job_id": job["job_id"],
                                    "reason": "not scored here"})
            assert done["type"] == "worker_noted", done
            return False
        assert job["kind"] == kind, job
        found = job
        return True

    await until(got, 60, f"a {kind} job", poll=0.2)
    return found


async def check(conn: Client, accepted: bool, reason: str = "") -> dict[str, Any]:
    """Claim the next job, a check, and give the verdict; the job."""
    job = await claim(conn)
    assert job is not None and job["kind"] == "check", job
    done = await conn.request({"type": "worker_done", "job_id": job["job_id"],
                               "accepted": accepted, "reason": reason, "name": "x"})
    assert done["type"] == "worker_noted", done
    return job


async def play_pairing(port: int, job: dict[str, Any], winner: int | None) -> None:
    """Play a claimed ``play`` job's two games through the bots' own connections (with the
    tokens the job carries): ``job["bots"][winner]`` solves at once, the other guesses wrong
    (``winner`` None: both solve, a draw)."""
    bots = [await Client.hello(port, b["player"], token=b["token"], bot=True)
            for b in job["bots"]]
    try:
        for n, match_id in enumerate(job["matches"]):
            seats = (n, 1 - n)  # bots[0] sits in seat n
            own = [(await bots[i].event(match_id, "secret", seat=seats[i]))["secret"]
                   for i in (0, 1)]
            for i in (0, 1):
                target = own[1 - i]  # the code this bot must find: the other seat's secret
                solves = winner is None or winner == i
                guess = target if solves else next(
                    c for c in ("0123", "4567", "8901") if c != target)
                await bots[i].send({"type": "guess", "match_id": match_id, "guess": guess,
                                    "n": 1})
            for b in bots:
                await b.event(match_id, "finished")
    finally:
        for b in bots:
            await b.close()
