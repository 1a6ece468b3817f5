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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from moo.errors import MooError, NotAvailable
from moo.match import Event, Match
from moo.variants import rules_from_dict, rules_spec
from server.arena import Arena
from server.background import spawn
from server.connection import Connection
from server.ladder_records import (
    HANDOVER_S,
    MISSING_S,
    POLL_S,
    STORED_WAIT_S,
    TICK_S,
    UPLOAD_TTL_S,
    Fit,
    LadderBot,
    LadderGame,
    Rating,
    Standing,
    Upload,
    Worker,
    center,
    certainty,
    dumps,
    finite,
    fit_standings,
    standing_rows,
)
from server.lobby import Lobby
from server.matches import Follower, TournamentGame
from server.storage import Store

__all__ = ["LadderSchedule"]

log = logging.getLogger("moo.ladder")


def bradley_terry(games: Sequence[tuple[str, str, float]]) -> Mapping[str, Rating]:
    """moo.bradley_terry's fit, imported at the first refit rather than with the server: it
    needs numpy, whose import is a fifth of a server's start-up CPU, and most servers (and
    every test that starts one) never rate a ladder."""
    from moo.bradley_terry import fit

    return fit(games)


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
        route: Callable[[Follower, dict[str, Any]], None] | None = None,
    ) -> None:
        #: a cluster's way to the ladder's handler (the lobby leader's :meth:`handle`, here
        #: or over the bus: ClusterLobby.ladder); None on a single node
        self.route = route
        #: whether this node runs the ladder now: a single node always; a cluster node while
        #: it leads the lobby and once it has read the ladder (:meth:`set_leading`)
        self.active = route is None
        #: a cluster node: whether it leads the lobby now
        self.leading = route is None
        #: set by stop(): a leadership taken while the server shuts down loads nothing
        self._stopped = False
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
        #: a cluster's leader: games whose match is not live here -> when it was last asked
        #: for (:meth:`look_for_results`), and since when the store has not had it
        self.absent: dict[str, float] = {}
        self.missing: dict[str, float] = {}
        self.polling: set[str] = set()
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
        # its match is not there to resume. On a cluster its match may run on any node, or
        # wait for its takeover: the leader looks it up in the store as it goes, counting it
        # when it finishes and voiding it if it was never stored: look_for_results)
        lost = [g.match_id for g in self.games.values()
                if not g.finished and not g.void and (
                    g.match_id not in open_games if g.hosted
                    else self.route is None and not self.arena.is_live(g.match_id))]
        if lost and self.route is not None:
            # on a cluster the leader that saw a game finish may have died before it wrote
            # so: a game whose match finished counts (written now)
            for match_id in list(lost):
                if await self.poll(self.games[match_id]):
                    lost.remove(match_id)
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
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            if not self.active:
                continue
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
        if self.route is not None:
            self.look_for_results()
        await self.pair()

    def set_leading(self, leading: bool) -> None:
        """A cluster node starts or stops leading the lobby, and so running the ladder.

        Starting: read it from the store (every change was written when it was made), then
        run. Stopping: forget it (the next leader reads it); the local workers stay known
        (their messages carry who they are to the next leader)."""
        self.leading = leading
        if leading:
            spawn(self._activate())
            return
        self.active = False
        self.bots, self.games, self.standings, self.playing = {}, {}, {}, {}
        self.uploads.clear()
        self.absent.clear()
        self.missing.clear()
        # a connected bot's absence is counted again by the next leader, from its reading
        self.away.clear()
        for conn in [c for c in self.workers if not isinstance(c, Connection)]:
            del self.workers[conn]
        for worker in self.workers.values():
            worker.jobs.clear()

    async def _activate(self) -> None:
        await asyncio.sleep(HANDOVER_S)
        if self.active or not self.leading or self._stopped:  # led again, or no longer
            return
        try:
            await self.load()
        except MooError as exc:
            if self._stopped:
                return
            log.error("ladder: cannot read it (%s); retrying", exc)
            spawn(self._activate())
            return
        if not self.leading or self._stopped:  # it stopped leading while it read
            self.bots, self.games, self.standings, self.playing = {}, {}, {}, {}
            return
        self.active = True
        log.info("ladder: running it here (%d bots, %d games)", len(self.bots),
                 len(self.games))
        self.nudge()

    def look_for_results(self) -> None:
        """A cluster's leader: a game not finished whose match is not live here is looked
        up in the store every :data:`POLL_S` (its match runs on another node, or was taken
        over from one that died)."""
        now = time.monotonic()
        for g in self.games.values():
            mid = g.match_id
            if g.finished or mid in self.polling or self.arena.is_live(mid):
                continue
            first = self.absent.setdefault(mid, now)
            if now - first >= POLL_S:
                self.absent[mid] = now
                self.polling.add(mid)
                spawn(self._poll_safely(g))

    async def _poll_safely(self, game: LadderGame) -> None:
        try:
            await self.poll(game)
        except MooError as exc:
            log.warning("ladder: cannot read match %s: %s", game.match_id, exc)
        finally:
            self.polling.discard(game.match_id)

    async def poll(self, game: LadderGame) -> bool:
        """Whether the game's match finished, by the store; its end is counted if so. A
        game whose match the store does not have although its play job was claimed (the
        match's creation was lost with the node that led) is void after :data:`MISSING_S`,
        and ends, counting for nobody."""
        end = await self.store.match_end(game.match_id)
        if end is None:
            if not game.void and await self._not_claimed_yet(game.match_id):
                self.missing.pop(game.match_id, None)  # its matches start at the claim
                return False
            first = self.missing.setdefault(game.match_id, time.monotonic())
            if time.monotonic() - first >= MISSING_S:
                self.missing.pop(game.match_id, None)
                log.warning("ladder: game %s was never stored; void", game.match_id)
                if not game.void:
                    await self.store.ladder_void([game.match_id])
                    game.void = True
                await self.end_game(game, self.clock(), None, "disconnect")
            return False
        finished, last = end
        if not finished or last is None or last.get("kind") != "finished":
            return False
        self.absent.pop(game.match_id, None)
        await self.end_game(game, int(last["at"]), last.get("winner"),
                            str(last.get("reason")))
        return True

    async def _not_claimed_yet(self, match_id: str) -> bool:
        """Whether the game's play job waits in the queue (nobody started its matches)."""
        job_id = next((j for j, ms in self.playing.items() if match_id in ms), None)
        if job_id is None:
            return False
        row = await self.store.ladder_job(job_id)
        return row is not None and row[2] == "queued"

    def forget(self, conn: Follower) -> None:
        """The connection is gone: its uploads go, and a worker's claims are let go of."""
        self.uploads.pop(conn, None)
        self.key_strikes.pop(conn, None)
        worker = self.workers.pop(conn, None)
        if worker is not None and worker.jobs and self.active:
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
            raise NotAvailable("the ladder is moving to another node; try again")

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
        # known here before the job is in the store: a worker may claim it the moment it is
        # committed, before this coroutine runs again (a 30-minute cluster run met it ten
        # times: the claim found no such game and the pairing was dropped)
        for g in games:
            self.games[g.match_id] = g
        if job is not None:
            self.playing[job[0]] = ids
        try:
            await self.store.ladder_add_pairing(
                [(g.match_id, family, pairing, g.bots[0], g.bots[1], g.versions[0],
                  g.versions[1], now) for g in games], job)
        except BaseException:
            for g in games:
                self.games.pop(g.match_id, None)
            if job is not None:
                self.playing.pop(job[0], None)
            raise
        log.info("ladder %s: %s vs %s (%s)", family, a.name, b.name, pairing)
        if job is None:
            await self.create_games(payload)
            return
        self.nudge()

    async def create_games(self, payload: dict[str, Any]) -> None:
        """A claimed play job's two matches, started now: ordinary rated matches with the
        pairing's two secrets, the seats swapped (a bot's seat is away until the worker's
        connection for it says hello, a moment later), and stored before the job is handed
        out: on a cluster the worker's bots may say hello on another node, whose welcome
        lists a player's matches from the database, and nothing else would seat them in a
        match that was not there yet (the suite met it under load: the bots waited for ever)."""
        await self._start_games(payload)
        await self._stored([m for m in payload["matches"] if not self.games[m].void])

    async def _stored(self, match_ids: list[str]) -> None:
        """Until the store has each of these matches (a live one here: its first commit;
        one started on another node: the database), at most :data:`STORED_WAIT_S`."""
        deadline = time.monotonic() + STORED_WAIT_S
        pending, delay = set(match_ids), 0.005
        while pending:
            for match_id in sorted(pending):
                lm = self.arena.live.get(match_id)
                if lm is not None:
                    stored = lm.durable_seq > 0
                else:
                    stored = await self.store.match_end(match_id) is not None
                if stored:
                    pending.discard(match_id)
            if not pending:
                return
            if time.monotonic() >= deadline:
                log.warning("ladder: games %s not stored after %g s; handed out all the same",
                            sorted(pending), STORED_WAIT_S)
                return
            await asyncio.sleep(delay)
            delay = min(2 * delay, 0.2)

    async def _start_games(self, payload: dict[str, Any]) -> None:
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
                await self.end_game(g, self.clock(), None, "disconnect")

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
        spawn(self.end_game(game, int(events[-1]["at"]), match.result["winner"],
                        str(match.result["reason"])))

    async def end_game(self, game: LadderGame, at: int, winner: int | None, reason: str) -> None:
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
        table = self.standings[family] = fit_standings(self.games.values(), family, self.fit)
        return table

    # -- standings ---------------------------------------------------------------------------
    def show(self, msg: dict[str, Any]) -> dict[str, Any]:
        rules = self.arena.rules_of(msg)
        family = rules_spec(rules)
        rows = standing_rows(self.bots.values(), family, self.standings.get(family, {}))
        return {"type": "ladder_standings", "rules": rules.to_dict(), "standings": rows}

    def games_of(self, bot_id: str) -> list[LadderGame]:
        """The bot's games, newest first."""
        games = [g for g in self.games.values() if bot_id in g.bots]
        games.sort(key=lambda g: (g.ended_ms or g.created_ms, g.created_ms), reverse=True)
        return games

