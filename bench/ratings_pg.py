"""What rating a match inside its finishing transaction costs on PostgreSQL (server/ratings_pg.py).

The PostgreSQL store writes a finished match's ``finished`` event, statistics and ``results``
rows in one transaction; with the cluster's ratings that transaction also locks, computes and
updates both players' ``player_ratings`` rows. This measures the finishing commit's latency
(append to durable) with and without that hook, in alternating rounds against one fresh
database, one finishing match at a time (the latency a finishing player sees) and in bursts of
concurrent finishes (group commit), so the ratio is read from the same run.

    .venv/bin/python -m bench.ratings_pg --db postgresql://postgres@127.0.0.1/moo_bench_r

The database must exist and may be empty (it is migrated); its rows are left behind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import time
from typing import Any

from moo.match import MatchConfig
from server.ratings_pg import PgRatings
from server.storage import StatDelta
from server.storage_pg import PostgresStore


def _events(players: tuple[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    now = int(time.time() * 1000)
    created = {"seq": 1, "kind": "created", "at": now, "players": list(players),
               "config": MatchConfig().to_dict()}
    finished = {"seq": 2, "kind": "finished", "at": now + 1, "winner": 0, "reason": "solved",
                "counts": [5, 5], "solved": [True, False]}
    return [created], [finished]


async def _append(store: PostgresStore, match_id: str, events: list[dict[str, Any]],
                  **kw: Any) -> float:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[BaseException | None] = loop.create_future()
    started = time.perf_counter()
    store.append(match_id, events, done.set_result, **kw)
    exc = await done
    if exc is not None:
        raise exc
    return time.perf_counter() - started


async def _finish_one(store: PostgresStore, players: tuple[str, str]) -> float:
    match_id = secrets.token_hex(6)
    first, last = _events(players)
    await _append(store, match_id, first, meta={"players": list(players), "bots": [None, None]})
    stats = [StatDelta(players[0], "win", 5, 1), StatDelta(players[1], "loss", None, 1)]
    return await _append(store, match_id, last, finished=True, stats=stats)


async def run(db: str, rounds: int, per_round: int, burst: int, players: int) -> dict[str, Any]:
    store = PostgresStore(db)
    await store.open()
    ratings = PgRatings(store)
    names = [f"p{i}" for i in range(players)]
    out: dict[str, dict[str, list[float]]] = {
        "without": {"one": [], "burst": []}, "with": {"one": [], "burst": []},
    }
    try:
        for r in range(rounds * 2):
            mode = "with" if r % 2 else "without"
            if mode == "with":
                await ratings.start()
            for i in range(per_round):
                pair = (names[i % players], names[(i + 1 + r) % players])
                if pair[0] == pair[1]:
                    continue
                out[mode]["one"].append(await _finish_one(store, pair))
            for i in range(0, per_round, burst):
                pairs = [(names[(i + k) % players], names[(i + k + 7) % players])
                         for k in range(burst)]
                started = time.perf_counter()
                await asyncio.gather(*(_finish_one(store, p) for p in pairs))
                out[mode]["burst"].append((time.perf_counter() - started) / burst)
            if mode == "with":
                await ratings.stop()
    finally:
        await store.close()

    def ms(xs: list[float]) -> float:
        return round(statistics.median(xs) * 1000, 3)

    report: dict[str, Any] = {}
    for kind in ("one", "burst"):
        without, with_ = ms(out["without"][kind]), ms(out["with"][kind])
        report[kind] = {"without_ms": without, "with_ms": with_,
                        "ratio": round(with_ / without, 2), "n": len(out["with"][kind])}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="postgresql://HOST/DBNAME (must exist)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--per-round", type=int, default=200)
    parser.add_argument("--burst", type=int, default=20)
    parser.add_argument("--players", type=int, default=50)
    args = parser.parse_args()
    report = asyncio.run(run(args.db, args.rounds, args.per_round, args.burst, args.players))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
