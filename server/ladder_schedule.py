"""The ladder's scheduler: its state and life cycle, the pairing, the results and the
ratings (server/ladder.py is the service built on it; docs/ladder.md says how pairing and
ratings work).

Ratings are a maximum-likelihood Bradley-Terry fit over all the ladder's games
(``moo.bradley_terry``), refitted whenever a pairing ends. Each pairing is two ordinary rated
matches with the same two server secrets, seats swapped, started through the lobby as a
tournament's games are, and one ``play`` job a worker claims to play both sides.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

from moo.bradley_terry import fit as bradley_terry
from moo.errors import MooError, NotAvailable
from moo.match import Event, Match
from moo.variants import rules_from_dict, rules_spec
from server.arena import Arena
from server.background import spawn
from server.ladder_records import (
    TICK_S,
    UPLOAD_TTL_S,
    Fit,
    LadderBot,
    LadderGame,
    Standing,
    Upload,
    Worker,
    center,
    certainty,
    dumps,
    finite,
)
from server.lobby import Lobby
from server.matches import Follower, TournamentGame
from server.storage import Store

__all__ = ["LadderSchedule"]

log = logging.getLogger("moo.ladder")


class LadderSchedule:
    """The hosted bots and ladders of one server: state, pairing, results, ratings."""

    def __init__(
        self,
        arena: Arena,
        lobby: Lobby,
        store: Store,
        fit: Fit = bradley_terry,
        *,
        reserved: set[str],
        worker_key: str,
        lease_ms: int = 30_000,
        clock: Callable[[], int] | None = None,
        publish: Callable[[str, dict[str, Any]], None] | None = None,
        active: bool = True,
    ) -> None:
        #: False on a cluster node: the ladder is not run there yet
        self.active = active
        #: casefolded names of the server's own hosted bots (``random-bot``, ...)
        self.reserved = reserved
        self.arena = arena
        self.lobby = lobby
        self.store = store
        self.worker_key = worker_key
        self.lease_ms = lease_ms
        self.clock = clock or arena.clock
        #: the rating fit over all of a ladder's games (moo.bradley_terry)
        self.fit = fit
        #: told each finished pairing's standings change (MQTT: server/publisher.py)
        self.publish = publish
        self.bots: dict[str, LadderBot] = {}
        self.games: dict[str, LadderGame] = {}
        #: family -> bot id -> standing, refitted when a pairing ends
        self.standings: dict[str, dict[str, Standing]] = {}
        self.uploads: dict[Follower, dict[str, Upload]] = {}
        #: check job ids of ``ladder_submit`` requests with a ``request_id`` being done now
        self.submitting: set[str] = set()
        self.workers: dict[Follower, Worker] = {}
        self.key_strikes: dict[Follower, int] = {}
        #: play jobs queued or claimed (each takes one worker slot) -> their matches
        self.playing: dict[str, list[str]] = {}
        #: connected bots whose connection is gone -> since when (monotonic seconds; server/
        #: ladder_connected.py)
        self.away: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        self._pairing = False
        arena.listeners.append(self.on_events)

    # -- life cycle ----------------------------------------------------------------------------
    async def load(self) -> None:
        self.bots = {row[0]: LadderBot.from_row(row) for row in await self.store.ladder_bots()}
        self.games = {row[0]: LadderGame.from_row(row) for row in await self.store.ladder_games()}
        self.playing = {row[0]: list(json.loads(row[2])["matches"])
                        for row in await self.store.ladder_open_jobs() if row[1] == "play"}
        # a game not ended whose play job is no longer open was lost with its worker when
        # the store could not say so (the server was stopping): void, as docs/ladder.md says
        open_games = {m for matches in self.playing.values() for m in matches}
        # (a game of two connected bots has no job: it is resumed as any match, and void if
        # its match is not there to resume)
        lost = [g.match_id for g in self.games.values()
                if not g.finished and not g.void and (g.match_id not in open_games if g.hosted
                                                      else not self.arena.is_live(g.match_id))]
        if lost:
            for match_id in await self.store.ladder_void(lost):
                self.games[match_id].void = True
        for family in {b.family for b in self.bots.values()}:
            self.refit(family)
        if self.bots:
            log.info("ladder: %d bots, %d games loaded", len(self.bots), len(self.games))

    def start(self) -> None:
        if self._task is None:
            self._task = spawn(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                await self.tick()
            except MooError as exc:
                log.warning("ladder: %s", exc)
            except Exception:  # a bug here must not stop the ladder for good
                log.exception("ladder tick failed")

    async def tick(self) -> None:
        """Let go of expired claims, drop stale uploads, and pair what the workers can play."""
        for row in await self.store.ladder_expire(self.clock()):
            await self._lost(row)
        now = time.monotonic()
        for uploads in self.uploads.values():
            for uid in [u for u, up in uploads.items() if now - up.touched > UPLOAD_TTL_S]:
                del uploads[uid]
        await self.pair()

    def forget(self, conn: Follower) -> None:
        """The connection is gone: its uploads go, and a worker's claims are let go of."""
        self.uploads.pop(conn, None)
        self.key_strikes.pop(conn, None)
        worker = self.workers.pop(conn, None)
        if worker is not None and worker.jobs:
            spawn(self._release(worker))

    async def _release(self, worker: Worker) -> None:
        try:
            rows = await self.store.ladder_expire(-1, worker.worker_id)
        except MooError as exc:  # the leases run out by themselves
            log.warning("ladder: cannot release worker %s's jobs: %s", worker.worker_id, exc)
            return
        for row in rows:
            await self._lost(row)

    async def _lost(self, row: Sequence[Any]) -> None:
        job_id, kind = str(row[0]), str(row[1])
        for worker in self.workers.values():
            worker.jobs.pop(job_id, None)
        if kind == "play":
            self.playing.pop(job_id, None)
            try:
                void = await self.store.ladder_void(json.loads(row[2])["matches"])
            except MooError as exc:  # the store is closing: load() voids them at the start
                log.warning("ladder: cannot void the games of job %s: %s", job_id, exc)
                return
            for match_id in void:
                game = self.games.get(match_id)
                if game is not None:
                    game.void = True
            log.warning("ladder: play job %s lost with its worker; its games end by the "
                        "match rules, %d of them void", job_id, len(void))
        else:
            log.info("ladder: %s job %s queued again (its worker went away)", kind, job_id)
            self.nudge()


    def check_active(self) -> None:
        if not self.active:
            raise NotAvailable("this server runs no ladder: hosted bots run on a single-node "
                               "server (not yet on a cluster)")

    def new_job(self, kind: str, payload: dict[str, Any], now: int,
                job_id: str | None = None) -> tuple[Any, ...]:
        return (job_id or "j" + secrets.token_hex(6), kind, dumps(payload), now)

    def nudge(self) -> None:
        for conn in list(self.workers):
            if not conn.closing:
                conn.send({"type": "worker_nudge"})


    # -- pairing -------------------------------------------------------------------------------
    def capacity(self) -> int:
        """Play jobs the connected workers can run at once beyond those queued or running."""
        return sum(w.slots for w in self.workers.values()) - len(self.playing)

    async def pair(self) -> None:
        """Pair the free active bots of each ladder while the workers have room: the least
        certain bot first (fewest games, widest interval), against the free bot it has met
        least, of those the one of the closest rating. Met-least comes first: pairing by
        rating alone splits a young ladder into groups that only meet each other (an early
        lucky streak decides the group), and then the fit cannot compare the groups."""
        if self._pairing or self.lobby.closed:
            return
        self._pairing = True
        try:
            busy = {b for g in self.games.values() if not g.finished for b in g.bots}
            by_family: dict[str, list[LadderBot]] = {}
            for bot in self.bots.values():
                if bot.status == "active" and bot.version is not None and bot.bot_id not in busy \
                        and self.present(bot):
                    by_family.setdefault(bot.family, []).append(bot)
            for family, free in sorted(by_family.items()):
                table = self.standings.get(family, {})
                while len(free) >= 2:
                    # two connected bots need no worker (server/ladder_connected.py)
                    able = free if self.capacity() >= 1 else [
                        b for b in free if b.kind == "connected"]
                    if len(able) < 2:
                        break
                    first = min(able, key=lambda b: certainty(table.get(b.bot_id)))
                    rest = [b for b in able if b is not first]
                    met = self._met(first.bot_id)
                    mine = center(table.get(first.bot_id))
                    second = min(rest, key=lambda b: (
                        met.get(b.bot_id, 0), abs(center(table.get(b.bot_id)) - mine),
                        b.created_ms))
                    free = [b for b in free if b is not first and b is not second]
                    await self._start_pairing(family, first, second)
        finally:
            self._pairing = False

    def present(self, bot: LadderBot) -> bool:
        """Whether the bot can play now: a hosted bot always (a worker runs it), a connected
        bot while its player's connection is open."""
        if bot.kind == "hosted":
            return True
        conn = self.lobby.online.get(bot.name)
        return conn is not None and not conn.closing

    def _met(self, bot_id: str) -> dict[str, int]:
        met: dict[str, int] = {}
        for g in self.games.values():
            if bot_id in g.bots:
                other = g.bots[1 - g.seat_of(bot_id)]
                met[other] = met.get(other, 0) + 1
        return met

    async def _start_pairing(self, family: str, a: LadderBot, b: LadderBot) -> None:
        """The two games and their play job, stored. The matches themselves start when a
        worker claims the job (:meth:`create_games`), so that no seat waits for a worker
        busy elsewhere (its grace would run out). Only the hosted bots are in the job (the
        first of them sits in the first seat of the first game); two connected bots need no
        job: their matches start at once (server/ladder_connected.py)."""
        if a.kind == "connected":
            a, b = b, a
        assert a.version is not None and b.version is not None
        rules = rules_from_dict(dict(a.rules))
        codes = rules.secrets
        pair_secrets = (secrets.choice(codes), secrets.choice(codes))
        now = self.clock()
        pairing = "p" + secrets.token_hex(6)
        ids = [self.arena.new_match_id(), self.arena.new_match_id()]
        games = [
            LadderGame(ids[0], family, pairing, (a.bot_id, b.bot_id), (a.version, b.version),
                       now),
            LadderGame(ids[1], family, pairing, (b.bot_id, a.bot_id), (b.version, a.version),
                       now),
        ]
        hosted = [bot for bot in (a, b) if bot.kind == "hosted"]
        payload = {"bots": [x.bot_id for x in hosted], "versions": [x.version for x in hosted],
                   "matches": ids, "rules": dict(a.rules), "secrets": list(pair_secrets)}
        job = self.new_job("play", payload, now) if hosted else None
        await self.store.ladder_add_pairing(
            [(g.match_id, family, pairing, g.bots[0], g.bots[1], g.versions[0], g.versions[1],
              now) for g in games], job)
        for g in games:
            self.games[g.match_id] = g
        log.info("ladder %s: %s vs %s (%s)", family, a.name, b.name, pairing)
        if job is None:
            await self.create_games(payload)
            return
        self.playing[job[0]] = ids
        self.nudge()

    async def create_games(self, payload: dict[str, Any]) -> None:
        """A claimed play job's two matches, started now: ordinary rated matches with the
        pairing's two secrets, the seats swapped (a bot's seat is away until the worker's
        connection for it says hello, a moment later)."""
        rules = rules_from_dict(dict(payload["rules"]))
        pair = tuple(payload["secrets"])
        for n, match_id in enumerate(payload["matches"]):
            g = self.games[match_id]
            if g.finished or self.arena.is_live(match_id):
                continue
            names = (self.bots[g.bots[0]].name, self.bots[g.bots[1]].name)
            codes = (pair[0], pair[1]) if n == 0 else (pair[1], pair[0])
            try:
                self.lobby.start(
                    names, (self.lobby.online.get(names[0]), self.lobby.online.get(names[1])),
                    "lockstep", rated=True, rules=rules,
                    tournament=TournamentGame(None, match_id, codes, ladder=g.family))
            except MooError as exc:  # the server is stopping: the game never was
                log.warning("ladder: game %s could not start: %s", match_id, exc)
                g.void = True
                await self.store.ladder_void([match_id])
                await self._end(g, self.clock(), None, "disconnect")

    # -- results -------------------------------------------------------------------------------
    def on_events(self, match: Match, events: list[Event]) -> None:
        """Arena listener: a ladder game that finished counts (cheap for other matches)."""
        if match.config.ladder is None or not match.finished:
            return
        if events[-1]["kind"] != "finished" or match.result is None:
            return
        game = self.games.get(match.match_id)
        if game is None or game.finished:
            return
        spawn(self._end(game, int(events[-1]["at"]), match.result["winner"],
                        str(match.result["reason"])))

    async def _end(self, game: LadderGame, at: int, winner: int | None, reason: str) -> None:
        if game.finished:
            return
        game.ended_ms, game.winner, game.reason = at, winner, reason
        try:
            await self.store.ladder_game_end(game.match_id, at, winner, reason)
        except MooError as exc:
            log.error("ladder: cannot store the end of %s: %s", game.match_id, exc)
        pair = [g for g in self.games.values() if g.pairing == game.pairing]
        if all(g.finished for g in pair):
            await self._pairing_done(game.family, pair)
        else:
            self.refit(game.family)

    async def _pairing_done(self, family: str, pair: list[LadderGame]) -> None:
        table = self.refit(family)
        at = self.clock()
        points = []
        for bot_id in pair[0].bots:
            st = table.get(bot_id)
            if st is not None and st.rating is not None:
                points.append((bot_id, st.games, at, st.rating, finite(st.low),
                               finite(st.high)))
        if points:
            try:
                await self.store.ladder_add_history(points)
            except MooError as exc:
                log.error("ladder: cannot store rating points: %s", exc)
        if self.publish is not None:
            try:
                self.publish(family, {
                    "family": family, "pairing": pair[0].pairing,
                    "games": [{"match_id": g.match_id, "bots": [
                        self.bots[b].name if b in self.bots else b for b in g.bots],
                        "winner": g.winner, "reason": g.reason} for g in pair],
                    "standings": self.show({"rules": dict(self.bots[pair[0].bots[0]].rules)}
                                           )["standings"]})
            except Exception:  # the stream never stops the ladder
                log.exception("ladder %s: publishing failed", family)

    def refit(self, family: str) -> dict[str, Standing]:
        """The family's standings from every finished, non-void game (records and the fit)."""
        table: dict[str, Standing] = {}
        scored: list[tuple[str, str, float]] = []
        for g in self.games.values():
            if g.family != family or not g.finished or g.void:
                continue
            for seat in (0, 1):
                st = table.setdefault(g.bots[seat], Standing())
                st.games += 1
                result = g.result_for(seat)
                if result == "win":
                    st.wins += 1
                elif result == "draw":
                    st.draws += 1
                else:
                    st.losses += 1
                    if g.failure_of(seat):
                        st.forfeits += 1
            scored.append((g.bots[0], g.bots[1],
                           0.5 if g.winner is None else float(g.winner == 0)))
        if scored:
            for bot_id, r in self.fit(scored).items():
                found = table.get(bot_id)
                if found is not None:
                    found.rating, found.low, found.high = r.rating, r.low, r.high
        self.standings[family] = table
        return table


    # -- standings ---------------------------------------------------------------------------
    def show(self, msg: dict[str, Any]) -> dict[str, Any]:
        rules = self.arena.rules_of(msg)
        family = rules_spec(rules)
        table = self.standings.get(family, {})
        rows = []
        for bot in self.bots.values():
            if bot.family != family or bot.status not in ("active", "paused", "offline"):
                continue
            st = table.get(bot.bot_id, Standing())
            rows.append({"bot": bot.name, "bot_id": bot.bot_id, "owner": bot.owner,
                         "kind": bot.kind, "status": bot.status, **st.fields(),
                         "exact": dict(bot.exact)})
        rows.sort(key=lambda r: (r["rating"] is None, -(r["rating"] or 0),
                                 r["bot"].casefold()))
        return {"type": "ladder_standings", "rules": rules.to_dict(), "standings": rows}

    def games_of(self, bot_id: str) -> list[LadderGame]:
        """The bot's games, newest first."""
        games = [g for g in self.games.values() if bot_id in g.bots]
        games.sort(key=lambda g: (g.ended_ms or g.created_ms, g.created_ms), reverse=True)
        return games

