"""The SQLite store's own parts: its driver and the JSON it stores.

What both stores do (group commit, durability, refused rows, players, accounts, history) is
tested once for both in tests/server/test_storage_pg.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest

from server.arena import new_match_id
from server.storage import Db
from server.storage_sqlite import SQLiteStore


async def test_an_operation_that_waits_is_refused_on_the_writer_thread(tmp_path: Path) -> None:
    """The writer runs an operation to its end in one step: one that waited for the event loop
    would stall every commit behind it, so it fails at once instead (and the store goes on)."""
    store = SQLiteStore(tmp_path / "db.sqlite3")
    await store.open()
    try:
        async def waits(db: Db) -> None:
            await asyncio.sleep(0)

        with pytest.raises(RuntimeError, match="waited"):
            await store.with_db(waits)
        assert await store.known_player("nobody") is None
    finally:
        await store.close()


@pytest.mark.parametrize(
    "event",
    [
        {"seq": 1, "kind": "created", "at": 0, "players": ["Ann", "bob"], "config": {"a": None}},
        {"seq": 9, "kind": "round", "at": 2**53, "n": 3, "results": [["0123", 1, 2], [None, 0, 0]]},
        {"seq": 2, "kind": "x", "at": -1, "s": 'é"\\\n\u2028\U0001f600', "f": 1.5, "t": True},
    ],
)
def test_the_stored_json_is_exactly_what_json_dumps_makes(event: dict[str, object]) -> None:
    from moo.protocol import compact_json  # what the store writes each event with

    assert compact_json(event) == json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    assert json.loads(compact_json(event)) == event
    with pytest.raises(TypeError):
        compact_json({"not": object()})


def test_match_ids_grow_with_time_and_stay_apart() -> None:
    """The server's match ids: ``m``, the creation time in milliseconds (11 hex digits) and 8
    random hex digits (docs/protocol.md), so that ids made later sort later and the log's
    index takes new rows in its newest pages (bench/log_index.py)."""
    before = int(time.time() * 1000)
    ids = [new_match_id() for _ in range(2000)]
    after = int(time.time() * 1000)
    assert all(re.fullmatch(r"m[0-9a-f]{19}", i) for i in ids), ids[:3]
    stamps = [int(i[1:12], 16) for i in ids]
    assert stamps == sorted(stamps) and before <= stamps[0] and stamps[-1] <= after
    assert len(set(ids)) == len(ids)
