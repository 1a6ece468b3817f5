"""The SQLite writer's CPU per event row, with the server's match ids against random ones.

The log's table has a unique index on ``(match_id, seq)``. Each commit of a busy server holds
one or two rows of each of ~1000 live matches; where those rows land in the index depends on
the ids. Random ids put them all over it (a page per match, each commit), ids that grow with
time (server/arena.py ``new_match_id``) in its newest pages. The store is made by the real
migrations, filled with ``--old`` finished matches of 30 events (random ids, as older
servers made them), then ``--live`` matches append ``--rounds`` events each, in commits of
400 rows through the writer's own multi-row statements; CPU (user + system) of this process
per row, for each kind of id in turn, ``--repeat`` times.

    .venv/bin/python -m bench.log_index --old 10000 --live 1000 --rounds 40 --repeat 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from server.arena import new_match_id
from server.sql import EVENT_CHUNKS, INSERT_EVENTS
from server.storage_sqlite import SQLiteStore

BODY = json.dumps({"kind": "guess", "seat": 0, "guess": "0123", "bulls": 1, "cows": 2, "n": 7,
                   "at": 1795959193123, "tail": "x" * 80}, separators=(",", ":"))


def _insert(conn: sqlite3.Connection, rows: list[tuple[str, int, str]]) -> None:
    """As the writer does: multi-row INSERTs of fixed sizes, largest first."""
    i = 0
    for n in EVENT_CHUNKS:
        sql = INSERT_EVENTS[n].sqlite
        while len(rows) - i >= n:
            conn.execute(sql, [v for row in rows[i:i + n] for v in row])
            i += n


async def _made(path: Path) -> None:
    store = SQLiteStore(path)
    await store.open()
    await store.close()


def cpu_per_row(ids: str, old: int, live: int, rounds: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "moo.sqlite3"
        asyncio.run(_made(path))
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("BEGIN")
        _insert(conn, [("m" + secrets.token_hex(6), seq, BODY)
                       for _ in range(old) for seq in range(1, 31)])
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        names = [new_match_id() if ids == "server" else "m" + secrets.token_hex(6)
                 for _ in range(live)]
        start = time.process_time()
        rows = 0
        for seq in range(1, rounds + 1):
            batch = [(m, seq, BODY) for m in names]
            for i in range(0, len(batch), 400):
                conn.execute("BEGIN")
                _insert(conn, batch[i:i + 400])
                conn.execute("COMMIT")
                rows += len(batch[i:i + 400])
        took = time.process_time() - start
        conn.close()
        return took / rows * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.log_index", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", type=int, default=10000, help="finished matches stored first")
    parser.add_argument("--live", type=int, default=1000, help="matches appending")
    parser.add_argument("--rounds", type=int, default=40, help="events each live match appends")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    figures: dict[str, list[float]] = {"random": [], "server": []}
    for _ in range(args.repeat):
        for ids in figures:
            figures[ids].append(cpu_per_row(ids, args.old, args.live, args.rounds))
            print(f"{ids} ids: {figures[ids][-1]:.2f} us of CPU per row", file=sys.stderr)
    best = {k: min(v) for k, v in figures.items()}
    print(f"summary: {args.old} finished matches stored, {args.live} appending: "
          f"{best['server']:.2f} us per row with the server's ids, {best['random']:.2f} with "
          f"random ones ({best['random'] / best['server']:.2f} x)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
