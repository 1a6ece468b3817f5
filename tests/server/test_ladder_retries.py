"""``ladder_submit`` with a ``request_id`` is safe to send again (docs/protocol.md, "Retrying
safely"), as the lobby's requests are (tests/server/test_request_ids.py, issue 31).

The case: the submit is done (the bot or version and its check job committed), its answer
never reaches the client (the connection is closed before it reads it, or the server
restarts), the client comes back and sends the same request under the same ``request_id``,
with the program uploaded again. There must be one bot, one version, one check job, and the
retry must get the first answer. Through a real server on a real SQLite file.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

from server.app import App
from tests.cluster_support import until
from tests.ladder_support import GOOD, check, claim, upload, worker
from tests.server_support import Client, running, server_settings


def _settings(tmp_path: Path) -> Any:
    return server_settings(tmp_path, ladder_worker_key="k")


def _count(db: str, query: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(query).fetchone()[0])


async def _submit_lost(app: App, client: Client, msg: dict[str, Any], name: str) -> Client:
    """Upload, send the submit and close the connection without reading its answer; back
    with the token once the server has stored what the submit made."""
    bots_before = len(app.ladder.bots)
    checking = {b.bot_id: b.checking for b in app.ladder.bots.values()}
    up = await upload(client, GOOD)
    await client.send({**msg, "upload": up})
    await client.close()

    async def done() -> bool:
        return len(app.ladder.bots) > bots_before or any(
            b.checking != checking.get(b.bot_id) for b in app.ladder.bots.values())

    await until(done, 10, "the lost submit stored")
    return await Client.hello(app.port, name, token=client.token)


async def _retry(client: Client, msg: dict[str, Any]) -> dict[str, Any]:
    up = await upload(client, GOOD)
    return await client.request({**msg, "upload": up})


async def test_a_retried_submit_gets_its_first_answer_and_makes_one_bot(
        tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    sha = hashlib.sha256(GOOD).hexdigest()
    submit = {"type": "ladder_submit", "sha256": sha, "name": "alpha", "request_id": "s-1"}
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann")
        ann = await _submit_lost(app, ann, submit, "ann")
        (bot,) = app.ladder.bots.values()
        again = await _retry(ann, submit)
        assert again["type"] == "ladder_submitted", again
        assert again["bot"]["bot_id"] == bot.bot_id
        assert again["bot"]["checking"] == 1 and again["bot"]["status"] == "checking"
        # the same request id with other content: refused, nothing made
        other = await _retry(ann, {**submit, "name": "beta"})
        assert other["code"] == "request_reused", other
        # without its upload (none open on this connection): still its first answer
        bare = await ann.request({**submit, "upload": "unope"})
        assert bare["type"] == "ladder_submitted" and bare["bot"]["bot_id"] == bot.bot_id
        w = await worker(app.port)
        await check(w, True)  # the one check job
        assert await claim(w) is not None  # its eval
        assert await claim(w) is None  # and nothing else: no second check
        await w.close()
        await ann.close()
    assert _count(settings.db, "SELECT count(*) FROM ladder_bots") == 1
    assert _count(settings.db, "SELECT count(*) FROM ladder_versions") == 1
    assert _count(settings.db, "SELECT count(*) FROM ladder_jobs WHERE kind = 'check'") == 1
    # after a restart the answer comes from the store: the first answer still
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann", token=ann.token)
        again = await _retry(ann, submit)
        assert again["type"] == "ladder_submitted" and again["bot"]["checking"] == 1, again
        assert again["bot"]["bot_id"] == bot.bot_id
        await ann.close()
    assert _count(settings.db, "SELECT count(*) FROM ladder_bots") == 1


async def test_a_retried_new_version_makes_one_version(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    sha = hashlib.sha256(GOOD).hexdigest()
    async with running(settings) as app:
        ann = await Client.hello(app.port, "ann")
        first = await _retry(ann, {"type": "ladder_submit", "sha256": sha, "name": "alpha"})
        bot_id = first["bot"]["bot_id"]
        w = await worker(app.port)
        await check(w, True)
        await ann.of_type("ladder_checked")
        submit = {"type": "ladder_submit", "sha256": sha, "bot_id": bot_id,
                  "request_id": "v-2"}
        ann = await _submit_lost(app, ann, submit, "ann")
        again = await _retry(ann, submit)
        assert again["type"] == "ladder_submitted", again
        assert again["bot"]["checking"] == 2 and again["bot"]["version"] == 1
        # a second version request while version 2 is checked is refused as before, so
        # the retry above did not go through that path: it was answered, not done again
        fresh = await _retry(ann, {**submit, "request_id": "v-3"})
        assert fresh["code"] == "not_available" and "being checked" in fresh["message"]
        mine = (await ann.request({"type": "ladder_mine"}))["bots"]
        assert [v["version"] for v in mine[0]["versions"]] == [2, 1]
        await w.close()
        await ann.close()
    assert _count(settings.db, "SELECT count(*) FROM ladder_versions") == 2
