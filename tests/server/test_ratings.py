"""OpenSkill ratings: direction of updates, draws, persistence, and the leaderboard message."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg

from moo.mastermind import MastermindRules
from moo.match import Match, MatchConfig
from server.ratings import PlayerRating, Ratings, ratings_path
from server.ratings_pg import PgRatings
from server.storage import Db, FinishedMatch, StatDelta
from server.storage_pg import FINISHERS, PostgresStore, RatingPlan
from tests.cluster_support import until
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


async def _finish(store: PostgresStore, m: Match) -> None:
    done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    store.append(m.match_id, m.events, done.set_result, finished=True, stats=_deltas(m),
                 meta={"players": list(m.players), "bots": [None, None]})
    assert await done is None


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
    async with _rated(store) as cluster:
        for m in games:
            single(m, m.events)
            await _finish(store, m)
        for by in ("rating", "average"):
            board = await cluster.board(by)
            assert board == single.leaderboard(by) and len(board) == 4
        mastermind = "mastermind:4:123456"
        assert await cluster.board(variant=mastermind) == single.leaderboard(variant=mastermind)
        assert await cluster.lookup("CARL") == single.players["carl"]
        assert await cluster.lookup("nobody") is None


class _QueryCountingStore(PostgresStore):
    """A PostgreSQL store that notes every statement its sessions send, by session."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.sent: list[tuple[str, str]] = []
        self.opened: list[str] = []  # the sessions' names, in the order they were opened
        self.by_session: dict[int, list[str]] = {}

    async def _connect(self, name: str) -> Any:
        conn = await super()._connect(name)
        self.opened.append(name)
        conn.add_query_logger(lambda q: self.sent.append((name, q.query)))
        if name == "moo-finisher":
            conn.add_query_logger(
                lambda q: self.by_session.setdefault(id(conn), []).append(q.query))
        return conn

    def ready_finishers(self) -> int:
        """Finishers' sessions that have called ``moo_finish`` (opened ahead, or used)."""
        return sum(1 for qs in self.by_session.values()
                   if any("FROM moo_finish(" in q for q in qs))


@asynccontextmanager
async def _rated(store: PostgresStore) -> AsyncIterator[PgRatings]:
    """``store`` opened, with the cluster's ratings rating its finishes; both closed after."""
    await store.open()
    cluster = PgRatings(store)
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()
        await store.close()


async def _finish_sends_two(store: _QueryCountingStore, match_id: str) -> None:
    """Once the finishers' sessions are opened ahead, finish a rated match: its finisher's
    session sends the rating rows' read and the ``moo_finish`` call, and no session is
    opened for it."""

    async def ready() -> bool:
        return store.ready_finishers() >= FINISHERS

    await until(ready, 30, "the finishers' sessions opened ahead")
    opened, store.sent[:] = len(store.opened), []
    await _finish(store, finished_match(0, match_id=match_id))
    finishing = [q for name, q in store.sent if name == "moo-finisher"]
    assert len(finishing) == 2, finishing
    assert "player_ratings" in finishing[0] and "moo_finish" in finishing[1]
    assert "moo-finisher" not in store.opened[opened:]


async def test_a_cluster_rates_a_finish_with_one_call_after_reading_the_rows(
        pg_url: str) -> None:
    """Finishing a rated match on PostgreSQL reads the players' rating rows, then commits the
    events, the ``results`` rows and the new ratings with one ``moo_finish`` call: two round
    trips on the finishing session, where a transaction of statements took seven (over a
    slow link to the database, seconds that both players waited for the match's end)."""
    store = _QueryCountingStore(pg_url)
    async with _rated(store) as cluster:
        await _finish_sends_two(store, "q0")
        await _finish_sends_two(store, "q1")
        ann = await cluster.lookup("ann")
        assert ann is not None and ann.games == 2 and ann.wins == 2
        assert [r.match_id for r in await store.history("bob", None, 5)] == ["q1", "q0"]
        assert store.stale_ratings == 0


async def test_finishers_sessions_are_opened_and_prepared_before_a_finish_needs_one(
        pg_url: str) -> None:
    """The finishers' sessions are opened, and a finish's statements prepared on them, when
    the store opens, and again as soon as they are lost, idle as they are (a database
    restart closes every session): a finish then opens no session and sends only its own
    two statements. Before, the first finish on a new session connected and prepared first
    (and asked about the array types): over a slow link right after a database restart, a
    5 s wait for one match's end (issue 31's fault harness, ``database`` then ``slow-db``)."""
    store = _QueryCountingStore(pg_url)
    async with _rated(store):
        await _finish_sends_two(store, "w0")
        # every session of the store is cut (as by a database restart)
        store.by_session.clear()
        killer = await asyncpg.connect(pg_url)
        try:
            await killer.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()")
        finally:
            await killer.close()
        # nothing failed (no commit ran): the lost sessions alone are opened again ahead
        await _finish_sends_two(store, "w1")


async def test_a_rating_changed_after_it_was_read_is_rated_again_under_the_locks(
        pg_url: str) -> None:
    """Another node finishing a match of the same player between the read of the rows and
    the ``moo_finish`` call: the call writes nothing, the match is then rated from the row as
    it is now, under its lock, and what is announced is what is stored."""
    store = PostgresStore(pg_url)
    await store.open()
    announced: list[PlayerRating] = []

    class Meddled(PgRatings):
        async def plan(self, db: Db, finished: list[FinishedMatch]) -> RatingPlan | None:
            plan = await super().plan(db, finished)
            other = await asyncpg.connect(pg_url)
            try:  # another node's finish of a match of ann's lands now
                await other.execute(
                    "INSERT INTO player_ratings VALUES ('', 'ann', 40, 8, 1, 1, 0, 0, 1, 3, 9)"
                    " ON CONFLICT (variant, name) DO UPDATE SET mu = 40, games = 1")
            finally:
                await other.close()
            return plan

    cluster = Meddled(store, on_change=lambda change, player: announced.append(player))
    await cluster.start()
    try:
        m = finished_match(0, match_id="q2")
        await _finish(store, m)
        cluster(m, m.events)
        assert store.stale_ratings == 1
        ann = await cluster.lookup("ann")
        assert ann is not None and ann.games == 2 and ann.mu > 40
        assert [p for p in announced if p.name == "ann"] == [ann]
        assert [r.match_id for r in await store.history("ann", None, 5)] == ["q2"]
    finally:
        await cluster.stop()
        await store.close()
