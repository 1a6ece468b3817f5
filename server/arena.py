"""Live matches: the owner of every :class:`~moo.match.Match` the server is running.

The arena is where the pure state machine meets the network and the disk. For every accepted
action it (1) lets the match validate and apply it, (2) hands the new events to the store, and
(3) only when the store reports them committed, fans out each viewer's :meth:`Match.view` to the
seats and spectators and re-arms the match's single timer from ``next_deadline()``. Nothing is
sent about an event before it is durable, so a crash can never take back something a client
saw. Each viewer class (seat 0, seat 1, spectators) is encoded once per wire format per event,
however many spectators watch.

Hosted bots (server/hosted.py) are seats driven by a :class:`~bots.base.Strategy`; they act
through the very same path as remote players (and so are subject to the same rules and
durability).

The arena is the single node's :class:`~server.matches.MatchService` and, on a cluster, the
part of the router that runs the matches this node owns. Followers (seats and spectators) are
attached from a cursor by :meth:`Arena.follow`, the one way in; a match dropped by a failed
write keeps its followers *parked* with their cursors, and they are attached again from there
when the match is replayed here (or handed to the router when it moved to another node), so a
follower never waits in silence for a match that runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bots import dictionary
from bots.dictionary import answers_of_length, words_of_length
from bots.dictionary import available as dictionary_available
from bots.variants import bot_note
from moo.commitment import new_salt
from moo.errors import (
    BadRules,
    InMatch,
    MatchFinished,
    MooError,
    Moving,
    NotAvailable,
    NotYourSeat,
    RulesNotOffered,
    StorageError,
    UnknownMatch,
)
from moo.match import Event, Match, MatchConfig, Viewer
from moo.variants import GameRules, is_words, parse_rules, parse_rules_spec, rules_spec
from server.background import spawn
from server.connection import Connection, error_message
from server.hosted import HostedBot, HostedBots, bot_player_name
from server.matches import SPECTATOR, Follower, Requested, TournamentGame
from server.review_worker import MatchAnalysis
from server.settings import Settings
from server.storage import StatDelta, Store, StoredMatch

__all__ = [
    "Arena", "FollowerAt", "LiveMatch", "MoveInFlight", "Retry", "bot_player_name",
    "match_config",
]

log = logging.getLogger("moo.arena")

#: Matches one connection may watch at once (each adds to every event's fan-out).
MAX_WATCHING = 32
#: seconds a match dropped by a failed write is still answered "being restored; try again"
#: after the store is back (see Arena.parked)
RESTORING_S = 60.0
#: matches whose followers are kept parked at most (the oldest are forgotten first)
_PARKED_MAX = 10_000
#: seconds between two looks for a word list that was missing (Arena.variants)
WORDS_RECHECK_S = 1.0


def match_config(
    settings: Settings, pacing: str | None, rated: bool = True, rules: GameRules | None = None,
    assist: bool = False,
) -> MatchConfig:
    return MatchConfig(
        rules=rules if rules is not None else parse_rules_spec(settings.variants[0]),
        pacing=pacing or settings.pacing,
        guess_cap=settings.guess_cap,
        clock_total_ms=settings.clock_total_ms or None,
        clock_guess_ms=settings.clock_guess_ms or None,
        secret_ms=settings.secret_ms or None,
        grace_ms=settings.grace_ms,
        show_guesses=settings.show_guesses,
        rated=rated,
        assist=assist,
    )


def offered_variants(specs: list[str]) -> list[GameRules]:
    """The configured variants this process can play: word MOO only if the dictionary exists.

    Only a ``stat`` here (:func:`bots.dictionary.available`), so a server without word
    variants, or without the list, starts exactly as fast; the list itself is read once, in a
    thread, by :meth:`Arena.warm_dictionary`. Without the list the server still starts, logs
    one line and simply does not offer the word variants (requests for them get
    ``rules_not_offered``).
    """
    variants = [parse_rules_spec(v) for v in specs]
    words = [r for r in variants if is_words(r)]
    if words:
        missing = dictionary_available()
        if missing is not None:
            log.warning("word MOO not offered (%s): %s", ", ".join(rules_spec(r) for r in words),
                        missing)
            variants = [r for r in variants if not is_words(r)]
            if not variants:
                raise NotAvailable(f"variants: every configured variant is word MOO and {missing}")
    return variants


@dataclass(eq=False, slots=True)
class LiveMatch:
    match: Match
    bots: list[HostedBot | None]
    conns: list[Follower | None] = field(default_factory=lambda: [None, None])
    spectators: set[Follower] = field(default_factory=set)
    #: highest seq known to be committed; only events up to it were ever sent
    durable_seq: int = 0
    timer: asyncio.TimerHandle | None = None
    deadline: int | None = None
    #: dropped from this node (a failed write, or the match moved): late commits are ignored
    broken: bool = False
    #: retried guesses whose original was still being committed: answered once it is
    #: (see Arena.repeated); None while there is none (most matches never have one)
    retries: list[Retry] | None = None
    #: the seats' moves whose commit is in flight (see :class:`MoveInFlight`)
    moves: list[MoveInFlight] = field(default_factory=list)
    #: while a replay reads the log (``readers`` of them): every event committed meanwhile,
    #: so that one read is enough however slow it is (see Arena.missed); None otherwise
    tail: list[Event] | None = None
    readers: int = 0

    @property
    def id(self) -> str:
        return self.match.match_id


def new_match_id() -> str:
    """``m``, the time in milliseconds (11 hex digits), 8 random hex digits.

    Ids made later sort later, so the log's index on ``(match_id, seq)`` takes each commit's
    rows in its newest pages: with random ids every commit wrote into pages all over the
    index, and on a store holding 10 000 finished matches an event's insert cost the SQLite
    writer about 3 times the CPU (docs/benchmarks.md, "The log's index")."""
    return f"m{int(time.time() * 1000):011x}{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True)
class Retry:
    """A ``guess`` retried with its number: who asked, for which guess, and the seq up to which
    the log must be durable before the original's event can be read back from it."""

    conn: Follower
    seat: int
    n: int
    ref: Any
    seq: int


@dataclass(eq=False, slots=True)
class MoveInFlight:
    """A seat's move sent with an ``id`` whose commit is in flight.

    Its answer is normally this node's, when the commit ends. But a match can leave this node
    while a commit is in flight (another node took it over): the commit may still land, and
    the followers are re-attached at the new owner from what they were sent, whose replay of
    the log carries no ``ref``. So a move not answered here travels with its seat
    (:attr:`FollowerAt.moves`, :meth:`Arena.hand_over`): its answer is then the replayed
    event, or the new owner's own if the commit did not land, never this node's too."""

    conn: Follower
    request: dict[str, Any]
    #: answered here (its event with the ``ref``, or a refusal)
    settled: bool = False
    #: handed over with its seat: whatever its commit does, this node does not answer it
    handed: bool = False


@dataclass(frozen=True, slots=True)
class FollowerAt:
    """A follower with the viewer it follows as and the last ``seq`` it was sent, and the
    moves of its own still in flight when its match left this node."""

    conn: Follower
    viewer: Viewer
    cursor: int
    moves: tuple[MoveInFlight, ...] = ()


@dataclass(slots=True)
class Parked:
    """The followers of a match that left this node's memory, kept to be attached again."""

    since: float
    #: True: another node runs it now (the router re-seats them there); False: a failed write,
    #: it comes back here by replay once the store answers
    moved: bool
    followers: list[FollowerAt]


class Arena:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock or (lambda: int(time.time() * 1000))
        #: told the id of a match dropped because another node owns it now (a lost lease):
        #: the cluster's router re-seats its parked followers at the new owner
        self.movers: list[Callable[[str], None]] = []
        #: asked ``(follower, match id, ref)`` about a move handed over with its seat
        #: (:meth:`hand_over`) whose commit the fence then refused, so that it was applied
        #: nowhere: True if the one asked withdrew it before passing it on (the cluster's bus
        #: was down), and then this node answers it with the refusal, as it would have
        #: without the hand-over; else the move's answer stays the new owner's
        self.recallers: list[Callable[[Follower, str, Any], bool]] = []
        self.live: dict[str, LiveMatch] = {}
        #: finished matches kept briefly for rematch offers: match_id -> (players, pacing, bots)
        self.recent: dict[str, LiveMatch] = {}
        #: player -> ids of the live matches they sit in (a short list: usually one)
        self.by_player: dict[str, list[str]] = {}
        #: matches out of memory with their followers (a failed write, or moved): until they
        #: are replayed here (or the router took the followers), a request for one is refused
        #: with ``storage_unavailable``, which clients retry, not ``unknown_match``
        self.parked: dict[str, Parked] = {}
        #: (match id, connection) of followers being attached again from their cursors
        #: (:meth:`reseat`): giving the same connection its seat back meanwhile
        #: (:meth:`rejoin`) would send it the match a second time
        self.reseating: set[tuple[str, Follower]] = set()
        #: called with (match, events) once events are durable and sent (ratings, MQTT)
        self.listeners: list[Callable[[Match, list[Event]], None]] = []
        self.stopping = False
        #: seconds from a request's frame arriving to its acknowledgement being queued, for the
        #: most recent acknowledged actions (``/healthz`` reports percentiles)
        self.ack_latency: deque[float] = deque(maxlen=5000)
        #: told every acknowledgement's latency (/metrics' cumulative histogram)
        self.ack_hooks: list[Callable[[float], None]] = []
        self.hosted = HostedBots(settings.bot_delay_ms, self.clock, self._persist, self._alive)
        #: the variants configured (settings.variants) and, of them, those offered now: word
        #: MOO waits for its dictionary (:attr:`variants` looks again, see there)
        dictionary.install()
        self.configured: list[GameRules] = [parse_rules_spec(v) for v in settings.variants]
        self._offered: list[GameRules] = offered_variants(settings.variants)
        self._words_checked = time.monotonic()
        self._warming: asyncio.Task[None] | None = None
        self.default_rules: GameRules = self._offered[0]
        #: the ``analysis`` request (server/review_worker.py: the review in a child process)
        self.analysis = MatchAnalysis(store)

    @property
    def variants(self) -> list[GameRules]:
        """The variants this server offers now, the first being the default.

        A configured word variant left out for want of the dictionary is offered as soon as
        the list appears (installed after the server started): while one is missing, this
        looks for the file again, at most once a second (a few ``stat`` calls), so ``welcome``
        and the requests for it see the new list without a restart.
        """
        if len(self._offered) < len(self.configured) and (
                time.monotonic() - self._words_checked >= WORDS_RECHECK_S):
            self._words_checked = time.monotonic()
            if dictionary_available() is None:
                self._offered = list(self.configured)
                log.info("word MOO offered from now on: the dictionary is there (%s)",
                         dictionary.dictionary_file())
                with contextlib.suppress(RuntimeError):  # no running loop: read on first use
                    self._warming = asyncio.get_running_loop().create_task(
                        self.warm_dictionary())
        return self._offered

    async def warm_dictionary(self) -> None:
        """Read the word list and its answers (derived on a first start: seconds; then read
        from their cache) in a thread once at start when word MOO is offered, so the first
        word match neither blocks the event loop nor waits; a failure is logged and the first
        word secret then gets ``not_available``."""
        lengths = sorted({r.length for r in self.variants if is_words(r)})
        if not lengths:
            return
        try:
            for n in lengths:
                await asyncio.to_thread(words_of_length, n)
                await asyncio.to_thread(answers_of_length, n)
        except (OSError, MooError) as exc:
            log.error("cannot read the word list: %s", exc)

    def rules_of(self, msg: dict[str, Any]) -> GameRules:
        """The rules a lobby request asks for: checked (``bad_rules``), then offered or not
        (``rules_not_offered``). A request without ``rules`` plays the server's default."""
        raw = msg.get("rules")
        if raw is None:
            return self.default_rules
        try:
            rules = parse_rules(raw)
        except BadRules:
            raise
        except ValueError as exc:  # a rules value's own check (never expected past parse)
            raise BadRules(str(exc)) from None
        if rules not in self.variants:
            if rules in self.configured:  # a word variant whose dictionary is still missing
                raise RulesNotOffered(
                    f"this server does not offer {rules_spec(rules)} yet: "
                    f"{dictionary_available()}")
            raise RulesNotOffered(
                f"this server does not offer {rules_spec(rules)}; it offers: "
                + ", ".join(rules_spec(r) for r in self.variants)
            )
        return rules

    # -- creating and restoring -------------------------------------------------------------
    def new_match_id(self) -> str:
        while True:
            match_id = new_match_id()
            if match_id not in self.live:
                return match_id

    def create(
        self,
        players: tuple[str, str],
        conns: tuple[Follower | None, Follower | None],
        pacing: str | None,
        bots: tuple[str | None, str | None] = (None, None),
        refs: tuple[Any, Any] = (None, None),
        rated: bool = True,
        rules: GameRules | None = None,
        assist: bool = False,
        tournament: TournamentGame | None = None,
        requested: Requested | None = None,
    ) -> None:
        """Start a match; both seats get ``match`` then the events once they are durable."""
        self.start(players, conns, pacing, bots, refs, rated, rules, assist, tournament,
                   requested)

    def start(
        self,
        players: tuple[str, str],
        conns: tuple[Follower | None, Follower | None],
        pacing: str | None,
        bots: tuple[str | None, str | None] = (None, None),
        refs: tuple[Any, Any] = (None, None),
        rated: bool = True,
        rules: GameRules | None = None,
        assist: bool = False,
        tournament: TournamentGame | None = None,
        requested: Requested | None = None,
    ) -> LiveMatch:
        """:meth:`create`, returning the new match (for this node's own callers).

        A tournament's game (``tournament``) carries the tournament's id in its config, may
        have both secrets set by the server in its first write, and seats a player who is not
        connected as ``away`` at once, so that a no-show forfeits this game after the grace
        (docs/protocol.md, "Tournaments"). A match that answers requests with a
        ``request_id`` (``requested``) takes the id derived from them and keeps their records
        in its meta, written by its first commit (server/requests.py)."""
        if self.stopping:
            raise NotAvailable("the server is shutting down; try again in a moment")
        if requested is not None and requested.match_id in self.live:
            # the same request again while its match is being stored: answered once it is
            raise NotAvailable("this request is being answered already; try again")
        config = match_config(self.settings, pacing, rated, rules or self.default_rules, assist)
        if tournament is not None:
            config = dataclasses.replace(
                config, tournament_id=tournament.tournament_id,
                server_secrets=tournament.secrets is not None, ladder=tournament.ladder,
            )
        now = self.clock()
        if tournament is not None and tournament.match_id:
            match_id = tournament.match_id
        elif requested is not None:
            match_id = requested.match_id
        else:
            match_id = self.new_match_id()
        match, events = Match.create(match_id, players, config, now, keep_log=False)
        if tournament is not None:
            if tournament.secrets is not None:
                for seat in (0, 1):
                    events += match.set_secret(seat, tournament.secrets[seat], new_salt(), now)
            for seat, conn in enumerate(conns):
                if bots[seat] is None and (conn is None or conn.closing):
                    events += match.disconnect(seat, now)
        lm = LiveMatch(match=match, bots=[HostedBots.new(b) if b else None for b in bots])
        self._register(lm)
        meta: dict[str, Any] = {"players": list(players), "bots": list(bots)}
        if requested is not None and requested.records:
            meta["requests"] = list(requested.records)

        def announce() -> None:
            for seat, conn in enumerate(conns):
                if conn is not None and not conn.closing:
                    self._attach(lm, seat, conn)
                    conn.send(self._match_message(lm, seat, refs[seat]))

        # if the match cannot even be stored, the players who asked for it hear why
        askers = [(c, refs[i]) for i, c in enumerate(conns) if c is not None]
        self._persist(lm, events, before_fanout=announce, meta=meta, askers=askers)
        return lm

    def _register(self, lm: LiveMatch) -> None:
        self.live[lm.id] = lm
        for name in lm.match.players:
            ids = self.by_player.setdefault(name, [])
            if lm.id not in ids:
                ids.append(lm.id)

    def restore(self, stored: Iterable[StoredMatch]) -> list[str]:
        """Run unfinished matches here again, from their logs (after a restart, a database
        outage, or a takeover), without charging the downtime; returns their ids.

        Every seat starts away (``resumed``); followers parked here when the match dropped
        out of memory are attached again from their cursors, and hosted bots are back at once.
        """
        adopted = []
        for sm in stored:
            if sm.match_id in self.live:
                continue
            events = _until_gap(sm.events)
            try:
                match = Match.replay(events, keep_log=False)
            except (ValueError, KeyError, TypeError):
                log.exception("cannot replay match %s; left as it is", sm.match_id)
                continue
            bots = [
                HostedBots.new(b) if isinstance(b, str) else None
                for b in sm.meta.get("bots", [])
            ]
            while len(bots) < 2:
                bots.append(None)
            lm = LiveMatch(match=match, bots=bots, durable_seq=match.seq)
            self._register(lm)
            self._persist(lm, match.resume_clocks(self.clock()))
            for seat, bot in enumerate(bots):
                if bot is not None:
                    self._persist(lm, match.reconnect(seat, self.clock()))
            parked = self.parked.pop(lm.id, None)
            if parked is not None:
                self.reseat(lm.id, parked.followers)
            adopted.append(lm.id)
        return adopted

    def reseat(self, match_id: str, followers: Iterable[FollowerAt]) -> None:
        """Attach followers of a match that now runs here again, each from its cursor, with
        nothing announced (they know the match): in tasks, since missed events are read back
        from the log."""
        for f in followers:
            if not f.conn.closing:
                self.reseating.add((match_id, f.conn))
                spawn(self._reseat_one(match_id, f))

    async def _reseat_one(self, match_id: str, f: FollowerAt) -> None:
        try:
            await self.follow(f.conn, match_id, f.viewer, f.cursor, announce=False)
        except MooError as exc:
            parked = self.parked.get(match_id)
            if parked is not None:  # dropped again while its log was read: wait once more
                parked.followers.append(f)
                return
            if isinstance(exc, Moving) and self.movers:
                # another node runs it now (it moved while the log was read): the follower
                # goes there from its cursor, as the followers attached here went
                self._park(match_id, [f], moved=True)
                for mover in self.movers:
                    mover(match_id)
                return
            log.warning("cannot attach %s to %s again: %s", f.conn.player, match_id, exc)
        finally:
            self.reseating.discard((match_id, f.conn))

    # -- the one path every action takes ----------------------------------------------------
    def _persist(
        self,
        lm: LiveMatch,
        events: list[Event],
        *,
        actor: tuple[Follower, Any] | None = None,
        before_fanout: Callable[[], None] | None = None,
        meta: dict[str, Any] | None = None,
        askers: Sequence[tuple[Follower, Any]] = (),
        received: float | None = None,
        request: dict[str, Any] | None = None,
    ) -> None:
        """Hand ``events`` to the store; :meth:`_committed` runs once they are durable.

        ``received`` (perf_counter) is when the request behind them arrived, for the
        acknowledgement-latency figures; ``request``, the actor's move (kept in flight with
        the match: :class:`MoveInFlight`).
        """
        if not events:
            return
        finished = lm.match.finished and events[-1]["kind"] == "finished"
        stats = self._stats(lm.match) if finished else ()
        move = None
        if request is not None and actor is not None and actor[1] is not None:
            move = MoveInFlight(actor[0], request)
            lm.moves.append(move)
        # a partial, not a closure: one object per action instead of a cell per variable
        done = partial(
            self._committed, lm, events, actor, before_fanout, askers, finished, received,
            move,
        )
        try:
            self.store.append(lm.id, events, done, meta=meta, finished=finished, stats=stats)
        except StorageError as exc:
            done(exc)

    def _committed(
        self,
        lm: LiveMatch,
        events: list[Event],
        actor: tuple[Follower, Any] | None,
        before_fanout: Callable[[], None] | None,
        askers: Sequence[tuple[Follower, Any]],
        finished: bool,
        received: float | None,
        move: MoveInFlight | None,
        exc: BaseException | None,
    ) -> None:
        if move is not None:
            lm.moves.remove(move)
            if move.handed and not (
                exc is not None and getattr(exc, "moved", False) and self._recalled(lm, move)
            ):
                actor = None  # it left with its seat: the match's new owner answers it
            elif exc is not None or not lm.broken:
                move.settled = True  # answered below: refused, or acknowledged
        if exc is not None:
            self._failed(lm, exc, actor, askers)
            return
        if lm.retries is not None:
            self._durable_retries(lm, events[-1]["seq"])
        if lm.broken:
            # Durable, but the match left this node meanwhile: its followers are being
            # attached elsewhere from their cursors, and the replay there includes this (and
            # answers the actor's move, handed over with its seat).
            return
        lm.durable_seq = events[-1]["seq"]
        if lm.tail is not None:
            lm.tail.extend(events)
        if before_fanout is not None:
            before_fanout()
        self._fanout(lm, events, actor)
        if received is not None:
            latency = time.perf_counter() - received
            self.ack_latency.append(latency)
            for hook in self.ack_hooks:
                hook(latency)
        self._notify(lm.match, events)
        if finished:
            self._retire(lm)
        else:
            self._after_change(lm)

    def _recalled(self, lm: LiveMatch, move: MoveInFlight) -> bool:
        """Whether a handed-over move, refused by the fence, was withdrawn from its
        hand-over: answered here then (the refusal), never by the new owner too."""
        ref = move.request.get("id")
        return any(recall(move.conn, lm.id, ref) for recall in self.recallers)

    def _failed(
        self,
        lm: LiveMatch,
        exc: BaseException,
        actor: tuple[Follower, Any] | None,
        askers: Sequence[tuple[Follower, Any]] = (),
    ) -> None:
        """Nothing after the failure was acknowledged: drop the match from memory.

        Its durable prefix stays in the store and comes back by replay (here once the store
        answers again, or on the node that owns it now). Whoever asked for what failed hears
        why; the followers are parked with their cursors and attached again from there, so
        nobody is told anything that might be lost and nobody is left waiting in silence.
        """
        moved = bool(getattr(exc, "moved", False))
        err = exc if isinstance(exc, MooError) else StorageError(str(exc))
        # Whoever asked for what failed hears why, also when the match had already left
        # (an earlier write of it failed, or another node took it over while this one was in
        # flight): every request is answered.
        requesters = [*askers, *([actor] if actor is not None else [])]
        # a retry waiting for this commit shares its fate: "try again" once it is restored
        requesters.extend((r.conn, r.ref) for r in lm.retries or ())
        lm.retries = None
        for conn, ref in requesters:
            msg = error_message(err, ref)
            if lm.durable_seq:  # a match nobody was ever told about has no id to quote
                msg["match_id"] = lm.id
            conn.send(msg)
        if lm.broken:
            return
        (log.warning if moved else log.error)(
            "match %s dropped (%s): %s", lm.id, "moved" if moved else "storage failed", exc
        )
        followers = self._detach_all(lm)
        self._park(lm.id, followers, moved)
        if moved:
            for mover in self.movers:
                mover(lm.id)

    def let_go(self, match_id: str) -> list[FollowerAt]:
        """Another node runs ``match_id`` now: drop it here and hand over its followers
        (with the cursors they have: every event up to ``durable_seq`` was sent to them),
        including those parked here; nobody is told anything."""
        lm = self.live.get(match_id)
        out = self.unpark(match_id)
        if lm is not None and not lm.broken:
            out.extend(self._detach_all(lm))
        return out

    def hand_over(self, f: FollowerAt) -> list[dict[str, Any]]:
        """The requests of ``f``'s moves that this node has not answered, for the caller,
        which re-seats ``f`` at the match's new owner: answered from then on by the replay
        there (a commit that landed) or by that owner (one that did not), never here."""
        out = []
        for move in f.moves:
            if not (move.settled or move.handed):
                move.handed = True
                out.append(move.request)
        return out

    def unpark(self, match_id: str) -> list[FollowerAt]:
        parked = self.parked.pop(match_id, None)
        return [] if parked is None else [f for f in parked.followers if not f.conn.closing]

    def moved_away(self, match_id: str) -> bool:
        """Whether ``match_id`` left this node because another node runs it now."""
        parked = self.parked.get(match_id)
        return parked is not None and parked.moved

    def restoring(self, match_id: str) -> bool:
        """Whether ``match_id`` left this node's memory after a failed write and comes back
        here by replay (its followers are parked here with their cursors)."""
        parked = self.parked.get(match_id)
        return parked is not None and not parked.moved

    async def end_parked(self) -> list[str]:
        """Attach again, each from its cursor, the parked followers of matches whose failed
        write had in fact landed and finished them; returns those matches' ids.

        A commit whose answer was lost (the session cut just after the database committed)
        drops its match here as failed though it is durable, and when that commit was the
        match's last, no replay brings the match back (only unfinished ones come back): its
        followers, players and spectators alike, never heard its end. Called after the
        store is back, once the unfinished matches are restored; a match still unfinished
        in the log stays parked for them.
        """
        ended = []
        for match_id in self.restoring_parked():
            if match_id in self.live:
                continue
            try:
                await self.finished_match(match_id)
            except MooError:
                continue  # not finished (comes back by replay), or not in the log
            parked = self.parked.get(match_id)
            if parked is None or parked.moved or match_id in self.live:
                continue  # changed while the log was read
            del self.parked[match_id]
            self.reseat(match_id, parked.followers)
            ended.append(match_id)
        return ended

    def restoring_parked(self) -> list[str]:
        """Ids of matches parked after a failed write, waiting to come back here by replay."""
        return [m for m, p in self.parked.items() if not p.moved]

    def moved_parked(self) -> list[str]:
        """Ids of matches parked because they moved (the router has not re-seated them yet)."""
        return [m for m, p in self.parked.items() if p.moved]

    def _detach_all(self, lm: LiveMatch) -> list[FollowerAt]:
        lm.broken = True
        seq = lm.durable_seq
        out = [
            FollowerAt(c, seat, seq, tuple(m for m in lm.moves if m.conn is c))
            for seat, c in enumerate(lm.conns) if c is not None and not c.closing
        ]
        out.extend(FollowerAt(c, SPECTATOR, seq) for c in lm.spectators if not c.closing)
        self._drop(lm)
        return out

    def _park(self, match_id: str, followers: list[FollowerAt], moved: bool) -> None:
        if len(self.parked) >= _PARKED_MAX:  # bounded: forget the oldest drops first
            for old in sorted(self.parked, key=lambda m: self.parked[m].since)[: _PARKED_MAX // 2]:
                del self.parked[old]
        self.parked[match_id] = Parked(time.monotonic(), moved, followers)

    def _refusal(self, match_id: str) -> MooError:
        """The error for a request about ``match_id`` that is not live here."""
        if match_id in self.recent:
            return MatchFinished("the match is over")
        parked = self.parked.get(match_id)
        if parked is not None:
            if not self.store.available or time.monotonic() - parked.since < RESTORING_S:
                if parked.moved:
                    return StorageError(
                        f"match {match_id!r} is moving to another node; try again"
                    )
                return StorageError(
                    f"match {match_id!r} is being restored after a storage failure; try again"
                )
            del self.parked[match_id]
        return UnknownMatch(f"no live match {match_id!r}")

    def _left(self, match_id: str) -> MooError:
        """The error for a request about ``match_id``, which left this node's memory while
        the request waited (a read of its log): parked here (a failed write), the parked
        match's refusal; else it moved to another node (let go of, or its commit fenced):
        :class:`Moving`, never ``unknown_match``: the match exists, and a cluster node follows
        it to its new owner instead (the router)."""
        if match_id in self.parked:
            return self._refusal(match_id)
        return Moving(f"match {match_id!r} is moving to another node; try again")

    def _stats(self, match: Match) -> list[StatDelta]:
        result = match.result or {}
        winner = result.get("winner")
        duration = match.last_at - match.created_at
        out = []
        for seat, s in enumerate(match.seats):
            outcome = "draw" if winner is None else "win" if winner == seat else "loss"
            out.append(StatDelta(s.name, outcome, s.solved_at, duration))
        return out

    def _fanout(
        self, lm: LiveMatch, events: list[Event], actor: tuple[Follower, Any] | None
    ) -> None:
        match, match_id = lm.match, lm.id
        seats = lm.conns
        spectators = lm.spectators
        # the acknowledgement: the actor's first view carries its request's ref
        ref_conn = actor[0] if actor is not None and actor[1] is not None else None
        head = {"type": "event", "match_id": match_id}  # each message: this, then the view
        for event in events:
            for seat in (0, 1):
                conn = seats[seat]
                if conn is None:
                    continue
                msg = match.view(event, seat, head)
                if msg is None:
                    continue
                if conn is ref_conn:
                    assert actor is not None
                    msg["ref"] = actor[1]
                    ref_conn = None
                conn.send(msg)
            if spectators:  # encoded once per wire format, however many watch
                view = match.view(event, "spectator")
                if view is None:
                    continue
                frames: dict[Any, Any] = {}
                for conn in spectators:
                    frame = frames.get(conn.binary)
                    if frame is None:
                        frame = frames[conn.binary] = conn.encode(_event_message(match_id, view))
                    conn.send_frame(frame)

    def _notify(self, match: Match, events: list[Event]) -> None:
        for listener in self.listeners:
            try:
                listener(match, events)
            except Exception:  # a listener must never break a match
                log.exception("arena listener %r failed", listener)

    def _after_change(self, lm: LiveMatch) -> None:
        self._arm_timer(lm)
        for seat, bot in enumerate(lm.bots):
            if bot is not None:
                self.hosted.poke(lm, lm.match, seat, bot)

    def _alive(self, lm: LiveMatch) -> bool:
        return not lm.broken and self.live.get(lm.id) is lm

    # -- timers ------------------------------------------------------------------------------
    def _arm_timer(self, lm: LiveMatch) -> None:
        deadline = lm.match.next_deadline()
        if deadline == lm.deadline and (lm.timer is not None or deadline is None):
            return
        if lm.timer is not None:
            lm.timer.cancel()
            lm.timer = None
        lm.deadline = deadline
        if deadline is None or self.stopping:
            return
        delay = max(0.0, (deadline - self.clock() + 1) / 1000.0)
        lm.timer = asyncio.get_running_loop().call_later(delay, self._on_timer, lm)

    def _on_timer(self, lm: LiveMatch) -> None:
        lm.timer = None
        lm.deadline = None
        if not self._alive(lm):
            return
        events = lm.match.tick(self.clock())
        if events:
            self._persist(lm, events)
        else:
            self._arm_timer(lm)

    # -- seats, spectators, connections ------------------------------------------------------
    def get(self, match_id: str) -> LiveMatch:
        lm = self.live.get(match_id)
        if lm is None or lm.broken:
            raise self._refusal(match_id)
        return lm

    def is_live(self, match_id: str) -> bool:
        lm = self.live.get(match_id)
        return lm is not None and not lm.broken

    def follows(self, conn: Follower, match_id: str) -> bool:
        return match_id in conn.matches or (
            isinstance(conn, Connection) and conn.has_seen_end(match_id)
        )

    def match_message(self, stored: StoredMatch, player: str, ref: Any) -> dict[str, Any]:
        """The ``match`` message of ``player``'s seat in a stored match, as its start sent it
        (a retried request that started it is answered so; ``not_your_seat`` if ``player``
        does not sit in it)."""
        match = Match.replay(_until_gap(stored.events), keep_log=False)
        bots = [b if isinstance(b, str) else None for b in stored.meta.get("bots", [])]
        bots += [None] * (2 - len(bots))
        seat = match.seat_of(player)
        if seat is None or bots[seat] is not None:
            raise NotYourSeat("you do not sit in this match")
        msg = self._match_message(LiveMatch(match=match, bots=[None, None]), seat, None)
        bot = bots[1 - seat]
        note = bot_note(bot, match.config.rules) if bot is not None else None
        if note:
            msg["bot_note"] = note
        return _with_ref(msg, ref)

    def seat_of(self, lm: LiveMatch, conn: Follower) -> int:
        seat = lm.match.seat_of(conn.player) if conn.player else None
        if seat is None or lm.bots[seat] is not None:
            raise NotYourSeat("you do not sit in this match")
        return seat

    def act(self, conn: Follower, msg: dict[str, Any], received: float | None = None) -> None:
        """``secret`` / ``guess`` / ``resign`` from a seated connection.

        ``received`` (perf_counter) is when its frame arrived, for the ack-latency figures.
        """
        kind = msg["type"]
        if kind == "guess" and "n" in msg and self.repeated(conn, msg):
            return
        lm = self.get(msg["match_id"])
        seat = self.seat_of(lm, conn)
        now = self.clock()
        # The action is validated (and raises, changing nothing) before a re-connected seat is
        # re-attached: a refused request must not even log the seat's return.
        if kind == "secret":
            events = lm.match.set_secret(seat, msg["secret"], new_salt(), now)
        elif kind == "guess":
            events = lm.match.guess(seat, msg["guess"], now, msg.get("n"))
        else:
            events = lm.match.resign(seat, now)
        if lm.conns[seat] is not conn:
            self._attach(lm, seat, conn)
            events = events + lm.match.reconnect(seat, now)
        self._persist(
            lm,
            events,
            actor=(conn, msg.get("id")),
            received=time.perf_counter() if received is None else received,
            request=msg,
        )

    def repeated(self, conn: Follower, msg: dict[str, Any]) -> bool:
        """Answer a ``guess`` whose number ``n`` the seat already played with that very guess
        (a retry after a lost answer) with the original's event and the retry's ``ref``; True
        if it was one. A different guess under a taken number raises ``guess_taken``. A match
        that ended recently still knows its guesses, so the guess that ended it can be
        retried too; an older one is read back from its log first (:meth:`_late_retry`; on a
        cluster the node answering from the log does it).

        The event is read back from the log, the one place it is kept (a live match holds no
        events in memory); while the original is still being committed, the answer waits for
        that commit (and shares its failure), so a retry is never told more than the log holds.
        """
        match_id = msg["match_id"]
        lm = self.live.get(match_id)
        if lm is None or lm.broken:
            lm = self.recent.get(match_id)
            if lm is None:
                if self.settings.cluster_url or match_id in self.parked:
                    # a cluster node: the refusal tells the client's node to look elsewhere,
                    # and the node that answers from the log checks the retry there
                    # (server/cluster/serving.py); parked: "being restored, try again"
                    return False
                spawn(self._late_retry(conn, msg))
                return True
        return self.repeated_in(lm, conn, msg)

    async def _late_retry(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A numbered guess for a match neither live nor recently finished here (the server
        restarted since it ended, or 1000 others ended since): its log says whether it is
        the retry of a guess the match has; anything else is refused as before."""
        match_id = msg["match_id"]
        try:
            lm = await self.finished_match(match_id)
            if not self.repeated_in(lm, conn, msg):
                raise MatchFinished("the match is over")
        except MooError as exc:
            reply = error_message(exc, msg.get("id"))
            reply["match_id"] = match_id
            conn.send(reply)

    def repeated_in(self, lm: LiveMatch, conn: Follower, msg: dict[str, Any]) -> bool:
        """:meth:`repeated` for ``lm``, which may also be a finished match read back from its
        log (:meth:`finished_match`: a cluster node answering for a match whose node died)."""
        seat = self.seat_of(lm, conn)
        n = msg["n"]
        if not lm.match.repeat_of(seat, msg["guess"], n):
            return False
        retry = Retry(conn, seat, n, msg.get("id"), lm.match.seq)
        if lm.durable_seq >= retry.seq:
            spawn(self._answer_retry(lm, retry))
        else:
            if lm.retries is None:
                lm.retries = []
            lm.retries.append(retry)
        return True

    def _durable_retries(self, lm: LiveMatch, durable: int) -> None:
        """Answer the retries waiting for a commit that has now reached ``durable``."""
        waiting = lm.retries or []
        lm.retries = [r for r in waiting if r.seq > durable] or None
        for retry in waiting:
            if retry.seq <= durable:
                spawn(self._answer_retry(lm, retry))

    async def _answer_retry(self, lm: LiveMatch, retry: Retry) -> None:
        try:
            events = await self.store.match_events(lm.id)
            original = next(
                (e for e in events or () if e["kind"] == "guess" and e["seat"] == retry.seat
                 and e["n"] == retry.n), None,
            )
            if original is None:
                raise StorageError(f"the log of {lm.id} cannot be read back; try again")
        except MooError as exc:
            reply = error_message(exc, retry.ref)
            reply["match_id"] = lm.id
            retry.conn.send(reply)
            return
        view = lm.match.view(original, retry.seat)
        assert view is not None
        retry.conn.send(_with_ref(_event_message(lm.id, view), retry.ref))

    def _attach(self, lm: LiveMatch, seat: int, conn: Follower) -> None:
        old = lm.conns[seat]
        if old is not None and old is not conn:
            _discard(old.matches, lm.id)
        lm.conns[seat] = conn
        if lm.id not in conn.matches:
            conn.matches.append(lm.id)

    async def finished_match(self, match_id: str) -> LiveMatch:
        """A finished match, from memory or from the log, for a late ``resume``/``watch``."""
        lm = self.recent.get(match_id)
        if lm is not None:
            return lm
        events = await self.store.match_events(match_id) if len(match_id) <= 40 else None
        if not events:
            raise UnknownMatch(f"no match {match_id!r}")
        match = Match.replay(_until_gap(events), keep_log=False)
        if not match.finished:  # unfinished but not live: cut (storage failure) or moving
            raise self._refusal(match_id) if match_id in self.parked else Moving(
                f"match {match_id!r} is moving to another node; try again"
            )
        return LiveMatch(match=match, bots=[None, None], durable_seq=match.seq)

    async def missed(self, lm: LiveMatch, last_seq: int) -> list[Event]:
        """The durable events after ``last_seq``, read back from the log.

        Live matches keep no log in memory, so a replay reads the store. Commits go on while
        the read is in flight: the match keeps what they commit meanwhile (``tail``), and the
        read plus that tail reach ``durable_seq`` (an event committed before the read began is
        in the read; one committed after, in the tail). Reading again until caught up, as
        before, chased the commits: over a slow link to the database each read took as long
        as the next commits, and a watch waited 5 s for its replay (issue 31's ``slow-db``).
        Only events up to ``durable_seq`` are returned: the caller then attaches the
        connection *without awaiting*, and every later event reaches it through the fan-out,
        in order, with no gap and no duplicate.
        """
        out: list[Event] = []
        seen = max(0, last_seq)
        while seen < lm.durable_seq:
            if lm.tail is None:
                lm.tail = []
            lm.readers += 1
            try:
                events = await self.store.match_events(lm.id, after=seen)
            finally:
                lm.readers -= 1
                tail = lm.tail
                if not lm.readers:
                    lm.tail = None
            if lm.broken:
                raise self._left(lm.id)
            limit = lm.durable_seq
            before = seen
            for e in (*(events or ()), *tail):
                if seen < e["seq"] <= limit:
                    if e["seq"] != seen + 1:
                        break  # a hole (not expected): read again from what is held
                    out.append(e)
                    seen = e["seq"]
            if seen == before:
                raise StorageError(f"the log of {lm.id} cannot be read back")
        return out

    async def follow(
        self,
        conn: Follower,
        match_id: str,
        viewer: Viewer | None,
        cursor: int,
        *,
        announce: bool,
        ref: Any = None,
    ) -> None:
        """Attach ``conn`` as ``viewer`` (None: the seat of ``conn.player``) from ``cursor``:
        the events after it are replayed from the log, then live ones follow through the
        fan-out. With ``announce``, ``match`` (a seat) or ``watching`` (a spectator), with
        ``ref``, comes first. A finished match replays to its end; a seat that was away comes
        ``back``. The one way a follower is attached (docs/protocol.md ``resume``, ``watch``;
        the seats after ``hello``; re-seating after a move)."""
        spectator = viewer == SPECTATOR
        if spectator and announce and match_id not in conn.spectating and (
            len(conn.spectating) >= MAX_WATCHING
        ):
            raise NotAvailable(f"watching {MAX_WATCHING} matches already; unwatch one first")
        lm = self.live.get(match_id)
        if lm is None or lm.broken:
            lm = await self.finished_match(match_id)  # replayed once, nothing live follows
            seat = None if spectator else self._seat(lm, conn, viewer)
            missed = await self.missed(lm, cursor)
            if announce:
                conn.send(self._announcement(lm, seat, ref))
            self._replay(lm, conn, SPECTATOR if seat is None else seat, missed)
            return
        seat = None if spectator else self._seat(lm, conn, viewer)
        missed = await self.missed(lm, cursor)
        if conn.closing:  # replaced by a newer connection while the log was read
            return
        if self.live.get(match_id) is not lm or lm.broken:  # it ended or left meanwhile
            await self.follow(conn, match_id, viewer, cursor, announce=announce, ref=ref)
            return
        if seat is None:
            lm.spectators.add(conn)
            if lm.id not in conn.spectating:
                conn.spectating.append(lm.id)
        else:
            self._attach(lm, seat, conn)
        if announce:
            conn.send(self._announcement(lm, seat, ref))
        self._replay(lm, conn, SPECTATOR if seat is None else seat, missed)
        if seat is not None:
            self._persist(lm, lm.match.reconnect(seat, self.clock()))

    def _seat(self, lm: LiveMatch, conn: Follower, viewer: Viewer | None) -> int:
        seat = self.seat_of(lm, conn)
        if viewer is not None and viewer != seat:
            raise NotYourSeat("you do not sit in this match")
        return seat

    def _announcement(self, lm: LiveMatch, seat: int | None, ref: Any) -> dict[str, Any]:
        if seat is not None:
            return self._match_message(lm, seat, ref)
        return _with_ref(
            {
                "type": "watching",
                "match_id": lm.id,
                "players": list(lm.match.players),
                "config": lm.match.config.to_dict(),
            },
            ref,
        )

    async def resume(self, conn: Follower, match_id: str, last_seq: int, ref: Any) -> None:
        """Replay what the seat missed; a finished match replays to its end (e.g. after a
        reconnect or a restart that happened after the last move)."""
        await self.follow(conn, match_id, None, last_seq, announce=True, ref=ref)

    async def watch(self, conn: Follower, match_id: str, last_seq: int, ref: Any) -> None:
        await self.follow(conn, match_id, SPECTATOR, last_seq, announce=True, ref=ref)

    def unwatch(self, conn: Follower, match_id: str) -> None:
        lm = self.live.get(match_id)
        if lm is not None:
            lm.spectators.discard(conn)
        _discard(conn.spectating, match_id)

    def _replay(
        self, lm: LiveMatch, conn: Follower, viewer: Viewer, events: list[Event]
    ) -> None:
        for event in events:
            view = lm.match.view(event, viewer)
            if view is not None:
                conn.send(_event_message(lm.id, view))

    def release(self, conn: Follower) -> None:
        """A replaced connection lets go of its seats without anyone seeing it leave.

        Its successor takes them in :meth:`rejoin` right away; meanwhile the seats simply have
        no connection (no ``away``: the player never lacked one, and no grace window starts).
        """
        for match_id in conn.matches:
            lm = self.live.get(match_id)
            if lm is not None:
                for seat, c in enumerate(lm.conns):
                    if c is conn:
                        lm.conns[seat] = None
        conn.matches.clear()

    async def rejoin(
        self, conn: Follower, player: str, listed: Sequence[Mapping[str, Any]]
    ) -> None:
        """After ``hello``: put the player's new connection back into the seats of the matches
        ``welcome.matches`` listed (``listed``) that run here.

        Each match gets ``match`` (no ``ref``) and its events so far, as if the client had sent
        ``resume`` with ``last_seq`` 0, then its live events; a seat that was away comes
        ``back``. So a client that reconnects is back in its seats whether or not it resumes,
        and a connection always sees its own matches end. Only the listed ones: a match the
        welcome did not name (it came here meanwhile) the client resumes itself, and giving it
        back here too would send its events twice on this connection.
        """
        for match_id in sorted(str(m["match_id"]) for m in listed):
            lm = self.live.get(match_id)
            if lm is None or lm.broken:
                continue
            seat = lm.match.seat_of(player)
            if seat is None or lm.bots[seat] is not None or lm.conns[seat] is conn or (
                (match_id, conn) in self.reseating
            ):
                continue  # (being attached again from its cursor: issue 33)
            if conn.closing:
                # Gone before its seat was given back: a seat left without any connection
                # starts its grace window like any dropped seat.
                if lm.conns[seat] is None and not self.stopping:
                    self._persist(lm, lm.match.disconnect(seat, self.clock()))
                continue
            try:
                await self.follow(conn, match_id, seat, 0, announce=True)
            except MooError:
                continue  # its storage failed meanwhile: it comes back by replay

    def live_match_of(self, player: str) -> str | None:
        """The id of an unfinished match ``player`` sits in (its first), or None."""
        for match_id in self.by_player.get(player, ()):
            lm = self.live.get(match_id)
            if lm is not None and not lm.broken and not lm.match.finished:
                return match_id
        return None

    def busy(self, player: str) -> str | None:
        return self.live_match_of(player)

    def detach(self, conn: Follower) -> None:
        """A connection is gone: its seats start their grace window, its watching stops."""
        for match_id in list(conn.spectating):
            self.unwatch(conn, match_id)
        for match_id in list(conn.matches):
            lm = self.live.get(match_id)
            if lm is None:
                continue
            for seat, c in enumerate(lm.conns):
                if c is conn:
                    lm.conns[seat] = None
                    if not self.stopping and not lm.broken:
                        self._persist(lm, lm.match.disconnect(seat, self.clock()))
        conn.matches.clear()

    def live_player_matches(self, player: str) -> list[dict[str, Any]]:
        """``welcome.matches`` for the matches live here."""
        out = []
        for match_id in sorted(self.by_player.get(player, ())):
            lm = self.live.get(match_id)
            if lm is None or lm.broken:
                continue
            seat = lm.match.seat_of(player)
            if seat is None or lm.bots[seat] is not None:
                continue
            out.append(
                {"match_id": lm.id, "seat": seat, "seq": lm.durable_seq, "phase": lm.match.phase}
            )
        return out

    async def player_matches(self, player: str) -> list[dict[str, Any]]:
        return self.live_player_matches(player)

    def listing(self, limit: int = 100) -> list[dict[str, Any]]:
        out = []
        for lm in list(self.live.values())[:limit]:
            if lm.broken:
                continue
            out.append(match_summary(lm.match))
        return out

    async def list_matches(self) -> list[dict[str, Any]]:
        """The ``matches`` request on one node: the live matches."""
        return self.listing()

    # -- rematch --------------------------------------------------------------------------------
    async def finished_terms(
        self, match_id: str, player: str
    ) -> tuple[list[str], list[str | None], MatchConfig]:
        """Players, hosted bots and terms of a finished match, for a ``rematch``: from memory
        if it ended here recently, else from the log (it may have run on another node)."""
        lm = self.recent.get(match_id)
        if lm is not None:
            bots = [b.strategy_name if b is not None else None for b in lm.bots]
            return list(lm.match.players), bots, lm.match.config
        live = self.live.get(match_id)
        if live is not None and not live.broken:
            if live.match.seat_of(player) is not None:
                raise InMatch(
                    f"you are playing match {match_id}: finish or resign it first",
                    match_id=match_id,
                )
            raise NotAvailable("the match is still being played")
        stored = await self.store.stored_match(match_id) if len(match_id) <= 40 else None
        if stored is None or not stored.events:
            raise UnknownMatch(f"no recently finished match {match_id!r}")
        match = Match.replay(_until_gap(stored.events), keep_log=False)
        if not match.finished:
            if match.seat_of(player) is not None:
                raise InMatch(
                    f"you are playing match {match_id}: finish or resign it first",
                    match_id=match_id,
                )
            raise NotAvailable("the match is still being played")
        raw = list(stored.meta.get("bots") or [None, None])
        bots_ = [b if isinstance(b, str) else None for b in raw[:2]] + [None] * (2 - len(raw))
        return list(match.players), bots_, match.config

    # -- ending ----------------------------------------------------------------------------------
    def _retire(self, lm: LiveMatch) -> None:
        self._drop(lm)
        self.recent[lm.id] = lm
        while len(self.recent) > 1000:
            self.recent.pop(next(iter(self.recent)))

    def _cancel(self, lm: LiveMatch) -> None:
        if lm.timer is not None:
            lm.timer.cancel()
            lm.timer = None
        for bot in lm.bots:
            if bot is not None:
                bot.cancel()

    def _drop(self, lm: LiveMatch) -> None:
        self._cancel(lm)
        if self.live.get(lm.id) is lm:
            del self.live[lm.id]
        for name in lm.match.players:
            ids = self.by_player.get(name)
            if ids is not None:
                _discard(ids, lm.id)
                if not ids:
                    del self.by_player[name]
        for conn in lm.conns:
            if conn is not None:
                _discard(conn.matches, lm.id)
                if lm.match.finished and isinstance(conn, Connection):
                    conn.saw_end(lm.id)  # its seat is forgotten here: remember the end
        for conn in lm.spectators:
            _discard(conn.spectating, lm.id)

    def stop(self) -> None:
        """Freeze: no timers or bot moves from now on (the log keeps the state)."""
        self.stopping = True
        for lm in self.live.values():
            self._cancel(lm)
        self.hosted.stop()

    def _match_message(self, lm: LiveMatch, seat: int, ref: Any) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "type": "match",
            "match_id": lm.id,
            "seat": seat,
            "opponent": lm.match.players[1 - seat],
            "config": lm.match.config.to_dict(),
        }
        if lm.match.config.tournament_id is not None:
            msg["tournament_id"] = lm.match.config.tournament_id
        bot = lm.bots[1 - seat]
        if bot is not None:  # a tree bot playing a heuristic says so (docs/variants.md)
            note = bot_note(bot.strategy_name, lm.match.config.rules)
            if note:
                msg["bot_note"] = note
        if ref is not None:
            msg["ref"] = ref
        return msg


def match_summary(m: Match) -> dict[str, Any]:
    """One entry of the ``matches`` listing."""
    return {
        "match_id": m.match_id,
        "players": list(m.players),
        "pacing": m.config.pacing,
        "rules": m.config.rules.to_dict(),
        "phase": m.phase,
        "counts": [s.count for s in m.seats],
    }


def _discard(items: list[str], item: str) -> None:
    if item in items:
        items.remove(item)


def _with_ref(msg: dict[str, Any], ref: Any) -> dict[str, Any]:
    if ref is not None:
        msg["ref"] = ref
    return msg


def _event_message(match_id: str, view: Event) -> dict[str, Any]:
    return {"type": "event", "match_id": match_id, **view}


def _until_gap(events: list[Event]) -> list[Event]:
    """The log's prefix without a seq gap (a failed commit can only ever cut the tail)."""
    out = []
    for i, event in enumerate(events, start=1):
        if event.get("seq") != i:
            break
        out.append(event)
    return out
