"""OpenSkill ratings: direction of updates, draws, persistence, and the leaderboard message."""

from __future__ import annotations

import asyncio
from pathlib import Path

from moo.mastermind import MastermindRules
from moo.match import Match, MatchConfig
from server.ratings import Ratings, ratings_path
from server.ratings_pg import PgRatings
from server.storage import StatDelta
from server.storage_pg import PostgresStore
from tests.pg_support import pg_url
from tests.server_support import Client, running, server_settings

__all__ = ["pg_url"]  # the fixture, re-exported so pytest finds it here


def finished_match(
    winner: int | None, players: tuple[str, str] = ("ann", "bob"), rated: bool = True,
    match_id: str = "m1",
) -> Match:
    """A real finished match: seat 0 solves at guess 2 unless told otherwise."""
    m, _ = Match.create(match_id, players, MatchConfig(rated=rated), 0)
    m.set_secret(0, "0123", "s0", 0)
    m.set_secret(1, "4567", "s1", 0)
    g0 = ["9876", "4567"] if winner in (0, None) else ["9876", "8765"]
    g1 = ["5678", "0123"] if winner in (1, None) else ["5678", "1234"]
    for n in range(2):
        m.guess(0, g0[n], n + 1)
        m.guess(1, g1[n], n + 1)
    assert m.finished and m.result is not None and m.result["winner"] == winner
    return m


def test_winner_goes_up_loser_goes_down() -> None:
    r = Ratings()
    changes = r.record(finished_match(0))
    ann, bob = r.get("ann"), r.get("bob")
    assert ann.mu > 25.0 > bob.mu
    assert ann.sigma < 25.0 / 3 and bob.sigma < 25.0 / 3  # both are better known now
    assert [c.outcome for c in changes] == ["win", "loss"]
    assert changes[0].after > changes[0].before and changes[1].after < changes[1].before
    assert (ann.wins, ann.losses, bob.wins, bob.losses) == (1, 0, 0, 1)
    assert ann.avg_guesses == 2.0 and bob.avg_guesses is None


def test_draw_between_equals_moves_no_mean_and_draw_with_a_stronger_player_helps() -> None:
    r = Ratings()
    r.record(finished_match(None))
    assert r.get("ann").mu == r.get("bob").mu == 25.0
    assert r.get("ann").draws == 1 and r.get("ann").avg_guesses == 2.0
    # make ann strong, then a draw against her lifts carl and lowers ann
    for _ in range(5):
        r.record(finished_match(0, ("ann", "dan")))
    ann_before = r.get("ann").mu
    r.record(finished_match(None, ("ann", "carl")))
    assert r.get("carl").mu > 25.0
    assert r.get("ann").mu < ann_before


def test_unrated_matches_are_ignored_and_names_fold_case() -> None:
    r = Ratings()
    m = finished_match(0, rated=False)
    r(m, [m.events[-1]])
    assert r.leaderboard() == []
    r.record(finished_match(1, ("Ann", "bob")))
    r.record(finished_match(1, ("ANN", "bob")))
    assert r.get("ann").games == 2 and r.get("ann").losses == 2


def test_leaderboards_by_rating_and_by_average() -> None:
    r = Ratings()
    for _ in range(3):
        r.record(finished_match(0, ("ann", "bob")))
    r.record(finished_match(None, ("carl", "bob")))
    by_rating = [row["name"] for row in r.leaderboard("rating")]
    assert by_rating[0] == "ann" and by_rating[-1] == "bob"
    rows = r.leaderboard("average")
    assert [row["avg_guesses"] for row in rows] == [2.0, 2.0, 2.0]
    for row in rows:
        assert set(row) >= {"name", "rating", "games", "wins", "draws", "losses",
                            "avg_guesses", "avg_time_s"}


async def test_ratings_persist_across_restarts(tmp_path: Path) -> None:
    path = ratings_path(str(tmp_path / "moo.sqlite3"))
    assert path is not None and path.endswith("moo.ratings.sqlite3")
    r = Ratings(path)
    await r.start()
    r.record(finished_match(0))
    mu = r.get("ann").mu
    await r.stop()
    again = Ratings(path)
    await again.start()
    assert again.get("ann").mu == mu and again.get("ann").games == 1
    await again.stop()


async def test_leaderboard_message_after_a_rated_server_match(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        a = await Client.hello(app.port, "ann")
        b = await Client.hello(app.port, "bob")
        room = await a.request({"type": "room_create"})
        await b.request({"type": "room_join", "code": room["code"]})
        mid = (await a.of_type("match"))["match_id"]
        await a.request({"type": "secret", "match_id": mid, "secret": "0123"})
        await b.request({"type": "secret", "match_id": mid, "secret": "4567"})
        await a.request({"type": "guess", "match_id": mid, "guess": "4567"})
        await b.request({"type": "guess", "match_id": mid, "guess": "9876"})
        fin = await a.event(mid, "finished")
        assert fin["winner"] == 0
        board = await a.request({"type": "leaderboard"})
        assert board["type"] == "leaderboard" and board["by"] == "rating"
        names = [row["name"] for row in board["players"]]
        assert names == ["ann", "bob"]
        assert board["players"][0]["rating"] > board["players"][1]["rating"]
        assert board["players"][0]["wins"] == 1 and board["players"][0]["avg_guesses"] == 1.0
        avg = await a.request({"type": "leaderboard", "by": "average"})
        assert avg["players"][0]["name"] == "ann"


def _mastermind_match(winner: int) -> Match:
    """A finished Mastermind 4-of-6 match won by ``winner`` at guess 1."""
    m, _ = Match.create("mm", ("ann", "bob"), MatchConfig(rules=MastermindRules()), 0)
    m.set_secret(0, "1111", "s0", 0)
    m.set_secret(1, "2222", "s1", 0)
    m.guess(0, "2222" if winner == 0 else "3333", 1)
    m.guess(1, "1111" if winner == 1 else "3333", 1)
    assert m.result is not None and m.result["winner"] == winner
    return m


async def test_one_rating_per_variant_family_persisted(tmp_path: Path) -> None:
    """A Mastermind result moves the Mastermind ratings only; classic ones stay as they were,
    and both families survive a restart."""
    path = ratings_path(str(tmp_path / "moo.sqlite3"))
    r = Ratings(path)
    await r.start()
    r.record(finished_match(0))
    classic_ann = r.get("ann").mu
    changes = r.record(_mastermind_match(1))
    assert [c.variant for c in changes] == ["mastermind:4:123456"] * 2
    assert "variant" not in r.record(finished_match(0))[0].to_dict()  # classic: as before
    assert r.get("ann").games == 2 and r.get("ann").mu > classic_ann  # only classic games
    mm_bob = r.get("bob", "mastermind:4:123456")
    assert mm_bob.games == 1 and mm_bob.wins == 1
    board = r.leaderboard(variant="mastermind:4:123456")
    assert [row["name"] for row in board] == ["bob", "ann"]
    await r.stop()
    again = Ratings(path)
    await again.start()
    assert again.get("bob", "mastermind:4:123456").mu == mm_bob.mu
    assert again.get("ann").games == 2 and again.get("bob").games == 2
    await again.stop()


def _deltas(m: Match) -> list[StatDelta]:
    """The statistics the arena stores with a finished match (server/arena.py)."""
    winner = (m.result or {}).get("winner")
    return [
        StatDelta(s.name, "draw" if winner is None else "win" if winner == seat else "loss",
                  s.solved_at, m.last_at - m.created_at)
        for seat, s in enumerate(m.seats)
    ]


async def test_a_cluster_rates_as_a_single_node_does(pg_url: str) -> None:
    """The same finished matches give the same ratings and leaderboards in a single node's
    memory as in a cluster's ``player_ratings`` rows, rated inside each finishing commit."""
    games = [
        finished_match(0, match_id="c1"),
        finished_match(None, ("ann", "Carl"), match_id="c2"),
        finished_match(1, ("bob", "carl"), match_id="c3"),
        finished_match(0, ("dan", "ANN"), match_id="c4"),
        finished_match(0, ("dan", "bob"), rated=False, match_id="c5"),
        _mastermind_match(1),
    ]
    single = Ratings()
    store = PostgresStore(pg_url)
    await store.open()
    cluster = PgRatings(store)
    await cluster.start()
    try:
        for m in games:
            single(m, m.events)
            done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
            store.append(m.match_id, m.events, done.set_result, finished=True, stats=_deltas(m),
                         meta={"players": list(m.players), "bots": [None, None]})
            assert await done is None
        for by in ("rating", "average"):
            board = await cluster.board(by)
            assert board == single.leaderboard(by) and len(board) == 4
        mastermind = "mastermind:4:123456"
        assert await cluster.board(variant=mastermind) == single.leaderboard(variant=mastermind)
        assert await cluster.lookup("CARL") == single.players["carl"]
        assert await cluster.lookup("nobody") is None
    finally:
        await cluster.stop()
        await store.close()
