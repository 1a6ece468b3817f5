"""Hosted tournaments: the requests, the clock that starts and pairs them, and their results.

What decides pairings and standings is pure (moo/tourney.py); this module does the I/O around
it: it validates the ``tournament_*`` requests, starts each game as an ordinary match through
the lobby (so a person's queue entry and rooms are dropped as for any match), hears each
game's result from the arena's listeners (or, for a match that ran elsewhere or finished while
this node was not running the tournaments, from the store), and tells participants and
watchers the new ``tournament`` object (docs/protocol.md, "Tournaments").

One node runs the tournaments: a single server, or on a cluster the lobby's leader (the same
fence as the lobby, server/cluster/leadership.py). Each change is written to the store as the
tournament's whole state, so a restarted server, or the next leader, goes on from there.

Updates are coalesced: a change marks the tournament dirty and one flush, at most every
:data:`FLUSH_S`, sends the object and writes it, so an arena of many fast bots does not send the
whole object once per event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from moo.errors import (
    MooError,
    NotAvailable,
    SchemaError,
    StorageError,
    UnknownTournament,
    WrongPool,
)
from moo.match import Event, Match
from moo.tourney import (
    Game,
    Tournament,
    arena_pairs,
    round_robin_schedule,
    swiss_first_round,
    swiss_pairs,
)
from moo.variants import rules_from_dict
from server.arena import Arena
from server.background import spawn
from server.connection import error_message
from server.lobby import Lobby
from server.matches import Follower, TournamentGame
from server.requests import derived, fingerprint, reused
from server.storage import Store

__all__ = ["TournamentService", "unanswered_watch"]

log = logging.getLogger("moo.tournaments")

#: seconds between two looks at the tournaments (starts, pairings, games that may start)
TICK_S = 0.25
#: at most one update (message and write) per tournament this often: the object is sent
#: whole to every participant and watcher, so an arena of many fast bots must not send it per
#: event
FLUSH_S = 1.0
#: a node that starts leading waits this long before it reads the tournaments, so that the
#: last write of the node that led before it (made when it learnt it no longer leads) is in
HANDOVER_S = FLUSH_S + 0.5
#: seconds a started game's match may be absent from this node before the store is asked
#: whether it finished (a match run by another node, or finished before a restart)
POLL_S = 1.0
#: seconds a started game's match may be missing from the store before the game is started
#: again (a creation lost with a node; one that commits at all does so well within this)
MISSING_S = 10.0
#: limits (docs/protocol.md, "Tournaments")
MAX_OPEN = 100
MAX_OPEN_PER_CREATOR = 5
MAX_PLAYERS = 64
MAX_WATCHED = 32
#: request ids kept per tournament (server/requests.py), the oldest dropped first
MAX_REQUESTS = 4 * MAX_PLAYERS
#: finished tournaments listed by ``tournaments`` (and kept in memory)
RECENT_FINISHED = 20
#: finished tournaments older than this are not loaded at start (ms)
RECENT_MS = 24 * 3600 * 1000
DEFAULT_START_IN_S = 60
#: watches held while a new leader reads the tournaments (bounded: the oldest go first)
_HELD_MAX = 100_000
DEFAULT_SWISS_ROUNDS = 5


class TournamentService:
    """The hosted tournaments of one server (or of a cluster, on its lobby leader)."""

    def __init__(
        self,
        arena: Arena,
        lobby: Lobby,
        store: Store,
        *,
        clock: Callable[[], int] | None = None,
        publish: Callable[[str, dict[str, Any]], None] | None = None,
        route: Callable[[Follower, dict[str, Any]], None] | None = None,
    ) -> None:
        self.arena = arena
        self.lobby = lobby
        self.store = store
        self.clock = clock or arena.clock
        #: told each tournament object sent (MQTT: server/publisher.py)
        self.publish = publish
        self.tournaments: dict[str, Tournament] = {}
        #: tournament id -> connections watching it
        self.watchers: dict[str, set[Follower]] = {}
        #: connection -> the tournaments it watches
        self.watching: dict[Follower, set[str]] = {}
        #: tournaments changed since their last flush, and when each was flushed last
        self.dirty: set[str] = set()
        self.flushed: dict[str, float] = {}
        #: match id -> when it was last found not live here (for the store poll)
        self.absent: dict[str, float] = {}
        #: one write at a time per tournament (server/storage.py save_tournament)
        self.locks: dict[str, asyncio.Lock] = {}
        #: match id -> when the store was first found not to have it
        self.missing: dict[str, float] = {}
        self.polling: set[str] = set()
        #: a cluster's way to a request's handler (the lobby leader's :meth:`handle`, here
        #: or over the bus: ClusterLobby.tournament); None on a single node
        self.route = route
        #: whether this node runs the tournaments now: a single node always; a cluster node
        #: while it leads the lobby and once it has read them (:meth:`set_leading`)
        self.active = route is None
        #: a cluster node: whether it leads the lobby now (told by :meth:`set_leading`)
        self.leading = route is None
        #: ``tournament_watch`` requests without ``id`` that came while this node read the
        #: tournaments to start running them: a cluster node re-sends its clients' watches so
        #: to a new leader, and nobody would hear a refusal of one (answered once read)
        self.held: list[tuple[Follower, dict[str, Any]]] = []
        self._task: asyncio.Task[None] | None = None
        #: set by stop(): a leadership taken while the server shuts down loads nothing (the
        #: store is about to close under it; the next leader reads the tournaments)
        self._stopped = False
        self._flush_handle: asyncio.TimerHandle | None = None
        arena.listeners.append(self.on_events)

    # -- life cycle ----------------------------------------------------------------------------
    async def load(self) -> None:
        """Read the unfinished and recently finished tournaments back from the store."""
        rows = await self.store.load_tournaments(self.clock() - RECENT_MS)
        self.tournaments = {}
        for data in rows:
            try:
                t = Tournament.from_dict(data)
            except (KeyError, TypeError, ValueError) as exc:
                log.error("cannot read a stored tournament: %s", exc)
                continue
            self.tournaments[t.tournament_id] = t
        if rows:
            log.info("tournaments: %d loaded", len(self.tournaments))

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
        for tid in list(self.dirty):
            await self._save(tid)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            if not self.active:
                continue
            try:
                self.tick()
            except Exception:  # a bug here must not stop every tournament for good
                log.exception("tournament tick failed")

    def set_leading(self, leading: bool) -> None:
        """A cluster node starts or stops leading the lobby, and so running the tournaments.

        Starting: read them from the store (the former leader wrote each change), then run.
        Stopping: write what changed since the last write, then forget them (the next leader
        reads them)."""
        self.leading = leading
        if leading:
            spawn(self._activate())
            return
        self.active = False
        self.held.clear()  # their nodes send them again to the next leader
        for tid in list(self.dirty):
            spawn(self._save(tid, self.tournaments.get(tid)))
        self.dirty.clear()
        self.tournaments.clear()
        self.watchers.clear()
        self.watching.clear()
        self.absent.clear()
        self.missing.clear()

    async def _activate(self) -> None:
        await asyncio.sleep(HANDOVER_S)
        if self.active or not self.leading or self._stopped:  # led again, or no longer
            return
        try:
            await self.load()
        except MooError as exc:
            if self._stopped:  # the store closed under the read: the server is stopping
                return
            log.error("tournaments: cannot read them (%s); retrying", exc)
            spawn(self._activate())
            return
        if not self.leading or self._stopped:  # it stopped leading while it read
            self.tournaments.clear()
            return
        self.active = True
        log.info("tournaments: running them here (%d loaded)", len(self.tournaments))
        held, self.held = self.held, []
        for conn, msg in held:
            try:
                self.watch(conn, msg)
            except MooError as exc:
                conn.send(error_message(exc, None))

    # -- requests ------------------------------------------------------------------------------
    def request(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A client's ``tournament_*`` request, from its session."""
        if self.route is not None:
            self.route(conn, msg)
        else:
            self.handle(conn, msg)

    def handle(self, conn: Follower, msg: dict[str, Any]) -> None:
        """Run a ``tournament_*`` request here (a single node, or the cluster's leader)."""
        kind = msg["type"]
        if not self.active:
            if self.leading and unanswered_watch(msg):
                self.held.append((conn, msg))
                del self.held[:-_HELD_MAX]
                return
            raise NotAvailable("the tournaments are moving to another node; try again")
        if kind == "tournament_create":
            self.create(conn, msg)
        elif kind == "tournaments":
            self.listing(conn, msg.get("id"))
        elif kind == "tournament_join":
            self.join(conn, msg)
        elif kind == "tournament_leave":
            self.leave(conn, msg)
        elif kind == "tournament_watch":
            self.watch(conn, msg)
        elif kind == "tournament_unwatch":
            self.unwatch(conn, msg)
        elif kind == "tournament_start":
            self.start_now(conn, msg)
        else:
            raise NotAvailable(f"{kind!r} is not a tournament request")

    def create(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A new tournament. With a ``request_id`` its id is derived from the creator and the
        request id (server/requests.py): sent again, the request is answered with that
        tournament (its state now), found in memory or, if its write landed although it was
        reported failed, in the store; never a second tournament."""
        self._check_active()
        creator = _player(conn)
        rid = msg.get("request_id")
        tid = None if rid is None else "t" + derived("tournament", creator, rid)[:12]
        if tid is not None and tid in self.tournaments:
            self._answer_again(conn, self.tournaments[tid], creator, msg)
            return
        t = self._build(msg, creator, tid)
        if tid is None:
            self._add(conn, t, msg)
        else:
            t.requests[_request_key(creator, msg)] = fingerprint(msg)
            spawn(self._create_once(conn, t, msg))

    def _answer_again(self, conn: Follower, t: Tournament, creator: str,
                      msg: dict[str, Any]) -> None:
        """A ``tournament_create`` sent again: its tournament as it is now, once stored."""
        if t.requests.get(_request_key(creator, msg)) != fingerprint(msg):
            raise reused(msg["request_id"])
        self._answer_stored(conn, t, [_state(t, msg.get("id"))])

    async def _create_once(self, conn: Follower, t: Tournament, msg: dict[str, Any]) -> None:
        """Make ``t`` unless the store has it already (a creation whose write landed although
        it was reported failed: it is taken back instead of made twice)."""
        tid = t.tournament_id
        try:
            data = await self.store.tournament(tid)
            self._check_active()
            found = self.tournaments.get(tid)
            if found is None and data is not None:
                found = self.tournaments[tid] = Tournament.from_dict(data)
            if found is not None:
                self._answer_again(conn, found, t.creator, msg)
                return
            self._add(conn, t, msg)
        except MooError as exc:
            conn.send(error_message(exc, msg.get("id")))

    def _build(self, msg: dict[str, Any], creator: str, tid: str | None) -> Tournament:
        """The tournament a ``tournament_create`` asks for, its fields checked."""
        name = msg["name"].strip()
        if not name:
            raise SchemaError("field 'name' must not be empty")
        fmt = msg["format"]
        duration = msg.get("duration_s")
        rounds = msg.get("rounds")
        if fmt == "arena":
            if duration is None:
                raise SchemaError("an arena needs field 'duration_s' (10-86400 seconds)")
            rounds = None
        else:
            if duration is not None:
                raise SchemaError(f"field 'duration_s' is for an arena, not a {fmt}")
            if rounds is None:
                rounds = 1 if fmt == "round-robin" else DEFAULT_SWISS_ROUNDS
        rules = self.arena.rules_of(msg)
        pool = msg.get("pool") or "any"
        now = self.clock()
        starts_at = now + 1000 * msg.get("start_in_s", DEFAULT_START_IN_S)
        while tid is None:
            tid = "t" + secrets.token_hex(6)
            if tid in self.tournaments:
                tid = None
        return Tournament(
            tournament_id=tid, name=name, creator=creator, format=fmt, rules=rules.to_dict(),
            pool=pool, rounds=rounds, duration_s=duration, rated=msg.get("rated", True),
            secrets=msg.get("secrets") or ("server" if pool == "bots" else "players"),
            pacing=msg.get("pacing") or self.arena.settings.pacing, starts_at=starts_at,
            ends_at=starts_at + 1000 * duration if duration is not None else None,
        )

    def _add(self, conn: Follower, t: Tournament, msg: dict[str, Any]) -> None:
        """Make ``t`` (within the limits) and answer once it is stored."""
        creator = t.creator
        open_ = [o for o in self.tournaments.values() if o.status != "finished"]
        if len(open_) >= MAX_OPEN:
            raise NotAvailable("too many open tournaments on this server; try later")
        if sum(1 for o in open_ if o.creator == creator) >= MAX_OPEN_PER_CREATOR:
            raise NotAvailable(
                f"too many open tournaments of yours (at most {MAX_OPEN_PER_CREATOR})")
        self.tournaments[t.tournament_id] = t
        self._answer_stored(conn, t, [_state(t, msg.get("id"))], created=True)

    def listing(self, conn: Follower, ref: Any) -> None:
        every = list(self.tournaments.values())
        upcoming = sorted((t for t in every if t.status == "upcoming"), key=lambda t: t.starts_at)
        running = sorted((t for t in every if t.status == "running"), key=lambda t: t.starts_at)
        done = sorted((t for t in every if t.status == "finished"),
                      key=lambda t: -(t.finished_at or 0))[:RECENT_FINISHED]
        rows = [t.summary() for t in (*upcoming, *running, *done)]
        conn.send(_with_ref({"type": "tournaments", "tournaments": rows}, ref))

    def join(self, conn: Follower, msg: dict[str, Any]) -> None:
        """Join. With a ``request_id``, the same request sent again is answered
        ``tournament_joined`` whatever happened since (the tournament started, say): the
        join took effect; it is never refused as a join that came too late."""
        self._check_active()
        player = _player(conn)
        t = self._get(msg["tournament_id"])
        rid = msg.get("request_id")
        key = None if rid is None else _request_key(player, msg)
        if key is not None:
            body = fingerprint(msg)
            if any(o.requests.get(key, body) != body for o in self.tournaments.values()):
                raise reused(msg["request_id"])
            if key in t.requests:
                reply = _with_ref({"type": "tournament_joined",
                                   "tournament_id": t.tournament_id}, msg.get("id"))
                self._answer_stored(conn, t, [reply])
                return
        self._check_membership_change(t)
        bot = self.lobby.is_bot(player)
        if t.pool == "bots" and not bot:
            raise WrongPool("this tournament's pool is 'bots': programs (hello with bot: true)"
                            " only")
        if t.pool == "humans" and bot:
            raise WrongPool("this tournament's pool is 'humans': people only, not programs")
        if not t.has(player) and len(t.players) >= MAX_PLAYERS:
            raise NotAvailable(f"the tournament is full ({MAX_PLAYERS} players)")
        added = t.join(player)
        if key is not None:
            t.requests[key] = fingerprint(msg)
            while len(t.requests) > MAX_REQUESTS:  # the oldest first (joins and leaves
                del t.requests[next(iter(t.requests))]  # again and again)
            added = True  # the record of the request is to be stored before the answer
        reply = _with_ref({"type": "tournament_joined", "tournament_id": t.tournament_id},
                          msg.get("id"))
        if added or t.tournament_id in self.dirty:  # the state with them in is not stored yet
            self._answer_stored(conn, t, [reply])
        else:
            conn.send(reply)

    def leave(self, conn: Follower, msg: dict[str, Any]) -> None:
        self._check_active()
        player = _player(conn)
        t = self._get(msg["tournament_id"])
        reply = _with_ref({"type": "tournament_left", "tournament_id": t.tournament_id},
                          msg.get("id"))
        if t.has(player):
            self._check_membership_change(t)
            t.leave(player)
            # the last update they get says they are out
            self._answer_stored(conn, t, [_state(t, None), reply])
        elif t.tournament_id in self.dirty:  # the state without them is not stored yet
            self._answer_stored(conn, t, [reply])
        else:
            conn.send(reply)

    def start_now(self, conn: Follower, msg: dict[str, Any]) -> None:
        """Its creator starts an upcoming tournament before its time (everyone is there):
        it starts at the next tick, as if its time had come. Idempotent: one that has started
        is answered as it is, so a retried request is not an error."""
        self._check_active()
        player = _player(conn)
        t = self._get(msg["tournament_id"])
        if t.creator != player:
            raise NotAvailable("only the tournament's creator can start it early")
        if t.status == "upcoming":
            now = self.clock()
            if now < t.starts_at:
                t.starts_at = now
                if t.duration_s is not None:
                    t.ends_at = now + 1000 * t.duration_s
        reply = _state(t, msg.get("id"))
        if t.status == "upcoming":
            self._answer_stored(conn, t, [reply])
        else:
            conn.send(reply)

    def _answer_stored(self, conn: Follower, t: Tournament, replies: list[dict[str, Any]],
                       *, created: bool = False) -> None:
        """Answer a creation, join or leave once the state with it is written (not with the
        coalesced flush): the next leader, or a restarted server, reads the tournaments from
        the store, so an answer sent before the write could promise what a crash then undoes."""
        spawn(self._store_then_answer(conn, t, replies, created))

    async def _store_then_answer(self, conn: Follower, t: Tournament,
                                 replies: list[dict[str, Any]], created: bool) -> None:
        tid = t.tournament_id
        ref = replies[-1].get("ref")
        if await self._save(tid, t):
            for reply in replies:
                conn.send(reply)
            self._changed(t)
            return
        ours = self.active and self.tournaments.get(tid) is t
        if created and self.tournaments.get(tid) is t:
            del self.tournaments[tid]  # never announced: nobody knows its id
            self.dirty.discard(tid)
        if ours:  # a join or leave that was not written stays, and the flush writes it
            # again; sent again, it is answered once written (both are idempotent)
            if not created:
                self._changed(t)
            conn.send(error_message(StorageError(
                "the tournament could not be stored; try again"), ref))
        else:
            conn.send(error_message(NotAvailable(
                "the tournaments are moving to another node; try again"), ref))

    def watch(self, conn: Follower, msg: dict[str, Any]) -> None:
        t = self._get(msg["tournament_id"])
        mine = self.watching.setdefault(conn, set())
        if t.tournament_id not in mine and len(mine) >= MAX_WATCHED:
            raise NotAvailable(f"you watch {MAX_WATCHED} tournaments already; unwatch one first")
        mine.add(t.tournament_id)
        self.watchers.setdefault(t.tournament_id, set()).add(conn)
        conn.send(_state(t, msg.get("id")))

    def unwatch(self, conn: Follower, msg: dict[str, Any]) -> None:
        tid = msg["tournament_id"]
        self._get(tid)
        self._unwatch(conn, tid)
        conn.send(_with_ref({"type": "tournament_unwatched", "tournament_id": tid},
                            msg.get("id")))

    def forget(self, conn: Follower) -> None:
        """The connection is gone: it watches nothing any more."""
        if self.held:
            self.held = [(c, m) for c, m in self.held if c is not conn]
        for tid in self.watching.pop(conn, set()):
            watchers = self.watchers.get(tid)
            if watchers is not None:
                watchers.discard(conn)

    def _unwatch(self, conn: Follower, tid: str) -> None:
        self.watching.get(conn, set()).discard(tid)
        self.watchers.get(tid, set()).discard(conn)

    def _get(self, tid: str) -> Tournament:
        t = self.tournaments.get(tid)
        if t is None:
            raise UnknownTournament(f"no tournament {tid!r}")
        return t

    def _check_active(self) -> None:
        if not self.active:
            raise NotAvailable("the tournaments are moving to another node; try again")
        if self.lobby.closed:
            raise NotAvailable("the server is shutting down; try again in a moment")

    @staticmethod
    def _check_membership_change(t: Tournament) -> None:
        if t.status == "finished":
            raise NotAvailable("the tournament is finished")
        if t.status == "running" and t.format != "arena":
            raise NotAvailable(
                "the tournament has started: only an arena takes or lets go of players while"
                " it runs")

    # -- results ---------------------------------------------------------------------------------
    def on_events(self, match: Match, events: list[Event]) -> None:
        """Arena listener: a finished game of a tournament counts at once. Cheap for every
        other match (one attribute read)."""
        tid = match.config.tournament_id
        if tid is None or not match.finished or events[-1]["kind"] != "finished":
            return
        t = self.tournaments.get(tid)
        if t is None or match.result is None:
            return
        if t.record(match.match_id, match.result["winner"]) is not None:
            self.absent.pop(match.match_id, None)
            self._changed(t)
            if self.active:
                asyncio.get_running_loop().call_soon(self._step_safely, t)

    async def _poll(self, t: Tournament, match_id: str) -> None:
        """Ask the store whether a game whose match is not live here has finished; a game
        whose match the store does not have after :data:`MISSING_S` is started again (its
        creation was lost: the node asked to start it died, or refused it)."""
        try:
            end = await self.store.match_end(match_id)
        except MooError as exc:
            log.warning("tournament %s: cannot read match %s: %s", t.tournament_id, match_id, exc)
            return
        finally:
            self.polling.discard(match_id)
        if not self.active:
            return
        if end is None:
            first = self.missing.setdefault(match_id, time.monotonic())
            if time.monotonic() - first >= MISSING_S:
                for game in t.games:
                    if game.match_id == match_id and game.result is None:
                        log.warning("tournament %s: match %s was never stored; the game "
                                    "starts again", t.tournament_id, match_id)
                        game.match_id = None
                        self.missing.pop(match_id, None)
                        self.absent.pop(match_id, None)
                        self._changed(t)
                        self._step_safely(t)
            return
        self.missing.pop(match_id, None)
        finished, last = end
        if not finished or last is None or last.get("kind") != "finished":
            return
        if t.record(match_id, last.get("winner")) is not None:
            self.absent.pop(match_id, None)
            self._changed(t)
            self._step_safely(t)

    # -- the clock -------------------------------------------------------------------------------
    def tick(self) -> None:
        for t in list(self.tournaments.values()):
            if t.status != "finished":
                self._step(t)
        self._forget_old()

    def _step_safely(self, t: Tournament) -> None:
        try:
            self._step(t)
        except Exception:
            log.exception("tournament %s: step failed", t.tournament_id)

    def _step(self, t: Tournament) -> None:
        now = self.clock()
        if t.status == "upcoming":
            if now < t.starts_at:
                return
            self._begin(t, now)
            if t.status == "finished":
                return
        if t.format == "arena":
            if now < (t.ends_at or 0):
                self._pair_arena(t)
            else:
                # over: a game paired but not started yet (a person still busy) is dropped
                kept = [g for g in t.games if g.match_id is not None or g.result is not None]
                if len(kept) != len(t.games):
                    t.games = kept
                    self._changed(t)
                if not t.unfinished():
                    self._finish(t, now)
                    return
        elif t.round_done() and not self._next_round(t):
            self._finish(t, now)
            return
        self._start_games(t)
        self._look_for_results(t)

    def _begin(self, t: Tournament, now: int) -> None:
        t.status = "running"
        self._changed(t)
        if len(t.players) < 2 and t.format != "arena":  # an arena takes players as it runs
            self._finish(t, now)
            return
        if t.format == "round-robin":
            schedule = round_robin_schedule(t.players, t.rounds or 1)
            for number, pairs in enumerate(schedule, start=1):
                t.round = number
                for a, b in pairs:
                    t.add_pairing(a, b, self._secrets(t))
            t.round = 1
        elif t.format == "swiss":
            t.rounds = min(t.rounds or DEFAULT_SWISS_ROUNDS, len(t.players) - 1)
            t.round = 1
            pairs, bye = swiss_first_round(t.players)
            self._add_round(t, pairs, bye)

    def _next_round(self, t: Tournament) -> bool:
        """Round-robin and swiss: the next round once this one is done; False at the end."""
        if t.format == "round-robin":
            last = max((g.round for g in t.games), default=0)
            if t.round >= last:
                return False
            t.round += 1
            self._changed(t)
            return True
        if t.round >= (t.rounds or 0):
            return False
        t.round += 1
        rows = {r["name"]: r for r in t.public()["standings"]}
        ranked = [p for p in sorted(t.players, key=lambda p: (
            -rows[p]["score"], -rows[p]["tiebreak"], t.players.index(p)))]
        scores = {p: float(rows[p]["score"]) for p in t.players}
        met = {frozenset(g.players) for g in t.games}
        pairs, bye = swiss_pairs(ranked, scores, met, t.byes)
        self._add_round(t, pairs, bye)
        return True

    def _add_round(self, t: Tournament, pairs: list[tuple[str, str]], bye: str | None) -> None:
        for a, b in pairs:
            t.add_pairing(a, b, self._secrets(t))
        if bye is not None:
            t.byes.append(bye)
        self._changed(t)

    def _pair_arena(self, t: Tournament) -> None:
        busy = t.busy_players()
        played = {p: 0 for p in t.players}
        for g in t.games:
            for p in g.players:
                if p in played:
                    played[p] += 1
        free = [p for p in t.players if p not in busy and self._free(p) and self._online(p)]
        free.sort(key=lambda p: (played[p], t.players.index(p)))
        for a, b in arena_pairs(free, t.last_opponent):
            t.round += 1
            t.add_pairing(a, b, self._secrets(t))
            t.last_opponent[a], t.last_opponent[b] = b, a
            self._changed(t)

    def _start_games(self, t: Tournament) -> None:
        """Start every game whose turn it is and whose players are free.

        Write-ahead: the games get their match ids and the tournament is written first; only
        once the write is in are the matches created (:meth:`_create`). So a node that dies
        in between leaves games whose matches the store never gets (the next leader starts
        them again after :data:`MISSING_S`), never a match the tournament does not know."""
        limit = t.round if t.format != "arena" else None
        # people in a game of this tournament not finished (or not even created yet)
        playing = {p for g in t.games if g.match_id is not None and g.result is None
                   for p in g.players if not self.lobby.is_bot(p)}
        chosen: list[Game] = []
        for g in t.games:
            if g.match_id is not None or g.result is not None:
                continue
            if limit is not None and g.round > limit:
                break
            if any(p in playing for p in g.players):
                continue  # a person's second game waits for the first
            if not all(self._free(p) for p in g.players):
                continue
            g.match_id = "m" + secrets.token_hex(6)
            playing.update(p for p in g.players if not self.lobby.is_bot(p))
            chosen.append(g)
        if chosen:
            self._changed(t)
            spawn(self._create(t, chosen))

    async def _create(self, t: Tournament, games: list[Game]) -> None:
        if not await self._save(t.tournament_id, t):
            return  # not written: not created; started again after MISSING_S
        if not self.active or self.tournaments.get(t.tournament_id) is not t:
            return  # no longer ours to run: the next leader creates them
        for g in games:
            if g.result is None and g.match_id is not None:
                self._start(t, g, g.match_id)

    def _start(self, t: Tournament, g: Game, match_id: str) -> None:
        conns = (self.lobby.online.get(g.players[0]), self.lobby.online.get(g.players[1]))
        try:
            self.lobby.start(
                g.players, conns, t.pacing, rated=t.rated, rules=rules_from_dict(dict(t.rules)),
                tournament=TournamentGame(t.tournament_id, match_id,
                                          g.secrets if t.secrets == "server" else None),
            )
        except MooError as exc:
            log.warning("tournament %s: game %s could not start: %s", t.tournament_id,
                        match_id, exc)
            g.match_id = None
            self._changed(t)

    def _look_for_results(self, t: Tournament) -> None:
        """A started game whose match is not live here: after :data:`POLL_S`, ask the store."""
        now = time.monotonic()
        for g in t.games:
            mid = g.match_id
            if mid is None or g.result is not None or self.arena.is_live(mid):
                continue
            first = self.absent.setdefault(mid, now)
            if now - first >= POLL_S and mid not in self.polling:
                self.absent[mid] = now
                self.polling.add(mid)
                spawn(self._poll(t, mid))

    def _finish(self, t: Tournament, now: int) -> None:
        t.status = "finished"
        t.finished_at = now
        if t.format != "arena":
            t.ends_at = now
        self._changed(t)

    def _forget_old(self) -> None:
        done = sorted((t for t in self.tournaments.values() if t.status == "finished"),
                      key=lambda t: -(t.finished_at or 0))
        for t in done[RECENT_FINISHED:]:
            if t.tournament_id not in self.dirty and not self.watchers.get(t.tournament_id):
                del self.tournaments[t.tournament_id]

    # -- who may play now ---------------------------------------------------------------------
    def _free(self, player: str) -> bool:
        """A program always; a person without another unfinished match."""
        return self.lobby.is_bot(player) or self.lobby.busy(player) is None

    def _online(self, player: str) -> bool:
        conn = self.lobby.online.get(player)
        return conn is not None and not conn.closing

    def _secrets(self, t: Tournament) -> tuple[str, str] | None:
        if t.secrets != "server":
            return None
        codes = rules_from_dict(dict(t.rules)).secrets
        return (secrets.choice(codes), secrets.choice(codes))

    # -- telling everyone ----------------------------------------------------------------------
    def _changed(self, t: Tournament) -> None:
        self.dirty.add(t.tournament_id)
        if self._flush_handle is None:
            loop = asyncio.get_running_loop()
            last = min((self.flushed.get(tid, 0.0) for tid in self.dirty), default=0.0)
            delay = max(0.0, last + FLUSH_S - time.monotonic())
            self._flush_handle = loop.call_later(delay, self._flush)

    def _flush(self) -> None:
        self._flush_handle = None
        if not self.active:
            return
        dirty, self.dirty = self.dirty, set()
        now = time.monotonic()
        for tid in dirty:
            t = self.tournaments.get(tid)
            if t is None:
                continue
            self.flushed[tid] = now
            self._announce(t)
            spawn(self._save(tid))

    def _announce(self, t: Tournament) -> None:
        """Send the tournament to its participants and watchers, and to the stream."""
        tid = t.tournament_id
        obj = t.public()
        msg = {"type": "tournament", "tournament": obj}
        told: set[int] = set()
        for name in t.players:
            conn = self.lobby.online.get(name)
            if conn is not None and not conn.closing:
                told.add(id(conn))
                conn.send(msg)
        for conn in list(self.watchers.get(tid, ())):
            if id(conn) not in told and not conn.closing:
                conn.send(msg)
        if self.publish is not None:
            try:
                self.publish(tid, obj)
            except Exception:  # the stream never stops a tournament
                log.exception("tournament %s: publishing failed", tid)

    async def _save(self, tid: str, t: Tournament | None = None) -> bool:
        """Write the tournament's state as it is now; True once written. One write at a time
        per tournament, each taking the state when it starts, so they land in order.

        Each write is a new version over the one this node wrote or read last; if another
        node wrote in between (it leads now, and this one has not heard yet), nothing is
        written, and the tournament is read again if this node still runs them."""
        lock = self.locks.setdefault(tid, asyncio.Lock())
        async with lock:
            t = t or self.tournaments.get(tid)
            if t is None:
                return False
            t.version += 1
            try:
                ok = await self.store.save_tournament(tid, t.status, t.to_dict(), self.clock(),
                                                      t.version)
            except MooError as exc:
                t.version -= 1
                log.error("tournament %s: cannot store it: %s", tid, exc)
                self.dirty.add(tid)  # written again with the next change
                return False
            if not ok:
                t.version -= 1
                log.warning("tournament %s: another node wrote it meanwhile; not written",
                            tid)
                if self.active and self.tournaments.get(tid) is t:
                    spawn(self._reload(tid))
                return False
            return True

    async def _reload(self, tid: str) -> None:
        """Read one tournament again (another node wrote it): its stored state replaces this
        node's, whose unwritten changes are dropped (no match was made for them)."""
        try:
            data = await self.store.tournament(tid)
        except MooError as exc:
            log.error("tournament %s: cannot read it again: %s", tid, exc)
            return
        if data is not None and self.active:
            t = self.tournaments[tid] = Tournament.from_dict(data)
            self.dirty.discard(tid)
            self._announce(t)


def unanswered_watch(msg: dict[str, Any]) -> bool:
    """A ``tournament_watch`` without ``id``, as a cluster node re-sends its clients' watches
    to a new leader (server/cluster/leadership.py): nobody would hear a refusal of it and send
    it again, so it is held, not refused, while the tournaments cannot take it yet."""
    return msg.get("type") == "tournament_watch" and msg.get("id") is None


def _player(conn: Follower) -> str:
    assert conn.player is not None
    return conn.player


def _request_key(player: str, msg: dict[str, Any]) -> str:
    """The key of a request in :attr:`Tournament.requests`."""
    return f"{player.casefold()}\n{msg['request_id']}"


def _state(t: Tournament, ref: Any) -> dict[str, Any]:
    """The ``tournament`` message with its state now (the answer to a request when ``ref``)."""
    return _with_ref({"type": "tournament", "tournament": t.public()}, ref)


def _with_ref(msg: dict[str, Any], ref: Any) -> dict[str, Any]:
    if ref is not None:
        msg["ref"] = ref
    return msg
