"""Live matches: the owner of every :class:`~moo.match.Match` the server is running.

The arena is where the pure state machine meets the network and the disk. For every accepted
action it (1) lets the match validate and apply it, (2) hands the new events to the store, and
(3) only when the store reports them committed, fans out each viewer's :meth:`Match.view` to the
seats and spectators and re-arms the match's single timer from ``next_deadline()``. Nothing is
sent about an event before it is durable, so a crash can never take back something a client
saw. Each viewer class (seat 0, seat 1, spectators) is encoded once per wire format per event,
however many spectators watch.

Hosted bots are seats driven by a :class:`~bots.base.Strategy`; they act through the very same
path as remote players (and so are subject to the same rules and durability).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bots import dictionary
from bots.dictionary import available as dictionary_available
from bots.dictionary import words_of_length
from bots.variants import bot_note, create_for
from moo.commitment import new_salt
from moo.errors import (
    BadRules,
    MatchFinished,
    MooError,
    NotAvailable,
    NotYourSeat,
    RulesNotOffered,
    StorageError,
    UnknownMatch,
)
from moo.match import Event, Match, MatchConfig, Viewer
from moo.rules import Response
from moo.variants import GameRules, is_words, parse_rules, parse_rules_spec, rules_spec
from server.connection import Connection, error_message
from server.review_worker import MatchAnalysis
from server.settings import Settings
from server.storage import StatDelta, Store, StoredMatch

__all__ = ["Arena", "LiveMatch", "bot_player_name", "match_config"]

log = logging.getLogger("moo.arena")

#: Matches one connection may watch at once (each adds to every event's fan-out).
MAX_WATCHING = 32
#: seconds a match dropped by a failed write is still answered "being restored; try again"
#: after the store is back (see Arena.restoring)
RESTORING_S = 60.0
#: seconds between two looks for a word list that was missing (Arena.variants)
WORDS_RECHECK_S = 1.0


def bot_player_name(strategy: str) -> str:
    """The reserved player name of a hosted bot (``random`` plays as ``random-bot``)."""
    return f"{strategy}-bot"


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


@dataclass(eq=False)
class HostedBot:
    """A server-side seat: the strategy plus how far it has followed its own results.

    The strategy is built and consulted on the arena's bot thread, never on the event loop:
    a strong bot may spend seconds building its tables and tens of milliseconds on a hard
    decision, and no match should wait for another match's bot.
    """

    strategy_name: str
    rng: random.Random
    #: a :class:`~bots.base.Strategy`, or a Mastermind / variant bot with the same methods
    strategy: Any = None
    observed: int = 0
    #: how many of the opponent's moves the strategy has been shown
    opponent_observed: int = 0
    pending: asyncio.TimerHandle | None = None
    thinking: bool = False
    started: bool = False


@dataclass(eq=False, slots=True)
class LiveMatch:
    match: Match
    bots: list[HostedBot | None]
    conns: list[Connection | None] = field(default_factory=lambda: [None, None])
    spectators: set[Connection] = field(default_factory=set)
    #: highest seq known to be committed; only events up to it were ever sent
    durable_seq: int = 0
    timer: asyncio.TimerHandle | None = None
    deadline: int | None = None
    rematch: set[int] = field(default_factory=set)
    broken: bool = False

    @property
    def id(self) -> str:
        return self.match.match_id


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
        self.live: dict[str, LiveMatch] = {}
        #: finished matches kept briefly for rematch offers: match_id -> (players, pacing, bots)
        self.recent: dict[str, LiveMatch] = {}
        #: player -> ids of the live matches they sit in (a short list: usually one)
        self.by_player: dict[str, list[str]] = {}
        #: matches dropped because a write failed -> when (monotonic s). They come back by
        #: replay once the store answers again, so until then (and for a while after, in case
        #: the match moved to another node instead) a request for one is refused with
        #: ``storage_unavailable``, which clients retry, not ``unknown_match``, which they do not
        self.restoring: dict[str, float] = {}
        #: called with (match, events) once events are durable and sent (ratings, MQTT)
        self.listeners: list[Callable[[Match, list[Event]], None]] = []
        self.stopping = False
        #: seconds from a request's frame arriving to its acknowledgement being queued, for the
        #: most recent acknowledged actions (``/healthz`` reports percentiles)
        self.ack_latency: deque[float] = deque(maxlen=5000)
        #: one thread for every hosted bot's thinking (strategies are not thread-safe)
        self._bot_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="moo-bots")
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
        """Read the word list in a thread once at start when word MOO is offered, so the first
        word match neither blocks the event loop nor waits; a failure is logged and the first
        word secret then gets ``not_available``."""
        lengths = sorted({r.length for r in self.variants if is_words(r)})
        if not lengths:
            return
        try:
            for n in lengths:
                await asyncio.to_thread(words_of_length, n)
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
            match_id = "m" + secrets.token_hex(6)
            if match_id not in self.live:
                return match_id

    def create(
        self,
        players: tuple[str, str],
        conns: tuple[Connection | None, Connection | None],
        pacing: str | None,
        bots: tuple[str | None, str | None] = (None, None),
        refs: tuple[Any, Any] = (None, None),
        rated: bool = True,
        rules: GameRules | None = None,
        assist: bool = False,
    ) -> LiveMatch:
        """Start a match; both seats get ``match`` then the events once they are durable."""
        if self.stopping:
            raise NotAvailable("the server is shutting down; try again in a moment")
        config = match_config(self.settings, pacing, rated, rules or self.default_rules, assist)
        match, events = Match.create(
            self.new_match_id(), players, config, self.clock(), keep_log=False
        )
        lm = LiveMatch(match=match, bots=[self._hosted(b) if b else None for b in bots])
        self._register(lm)
        meta = {"players": list(players), "bots": list(bots)}

        def announce() -> None:
            for seat, conn in enumerate(conns):
                if conn is not None and not conn.closing:
                    self._attach(lm, seat, conn)
                    conn.send(self._match_message(lm, seat, refs[seat]))

        # if the match cannot even be stored, the players who asked for it hear why
        askers = [(c, refs[i]) for i, c in enumerate(conns) if c is not None]
        self._persist(lm, events, before_fanout=announce, meta=meta, askers=askers)
        return lm

    def _hosted(self, strategy: str) -> HostedBot:
        return HostedBot(strategy, random.Random())

    def _register(self, lm: LiveMatch) -> None:
        self.live[lm.id] = lm
        self.restoring.pop(lm.id, None)
        for name in lm.match.players:
            ids = self.by_player.setdefault(name, [])
            if lm.id not in ids:
                ids.append(lm.id)

    def restore(self, stored: Iterable[StoredMatch]) -> int:
        """Bring unfinished matches back after a restart, without charging the downtime."""
        count = 0
        for sm in stored:
            events = _until_gap(sm.events)
            try:
                match = Match.replay(events, keep_log=False)
            except (ValueError, KeyError, TypeError):
                log.exception("cannot replay match %s; left as it is", sm.match_id)
                continue
            bots = [
                self._hosted(b) if isinstance(b, str) else None for b in sm.meta.get("bots", [])
            ]
            while len(bots) < 2:
                bots.append(None)
            lm = LiveMatch(match=match, bots=bots, durable_seq=match.seq)
            self._register(lm)
            self._persist(lm, match.resume_clocks(self.clock()))
            # hosted bots are back at once: their seats are never away for long
            for seat, bot in enumerate(bots):
                if bot is not None:
                    self._persist(lm, match.reconnect(seat, self.clock()))
            count += 1
        return count

    # -- the one path every action takes ----------------------------------------------------
    def _persist(
        self,
        lm: LiveMatch,
        events: list[Event],
        *,
        actor: tuple[Connection, Any] | None = None,
        before_fanout: Callable[[], None] | None = None,
        meta: dict[str, Any] | None = None,
        askers: Sequence[tuple[Connection, Any]] = (),
        received: float | None = None,
    ) -> None:
        """Hand ``events`` to the store; :meth:`_committed` runs once they are durable.

        ``received`` (perf_counter) is when the request behind them arrived, for the
        acknowledgement-latency figures.
        """
        if not events:
            return
        finished = lm.match.finished and events[-1]["kind"] == "finished"
        stats = self._stats(lm.match) if finished else ()
        # a partial, not a closure: one object per action instead of a cell per variable
        done = partial(
            self._committed, lm, events, actor, before_fanout, askers, finished, received
        )
        try:
            self.store.append(lm.id, events, done, meta=meta, finished=finished, stats=stats)
        except StorageError as exc:
            done(exc)

    def _committed(
        self,
        lm: LiveMatch,
        events: list[Event],
        actor: tuple[Connection, Any] | None,
        before_fanout: Callable[[], None] | None,
        askers: Sequence[tuple[Connection, Any]],
        finished: bool,
        received: float | None,
        exc: BaseException | None,
    ) -> None:
        if exc is not None:
            self._storage_failed(lm, exc, actor, askers)
            return
        lm.durable_seq = events[-1]["seq"]
        if before_fanout is not None:
            before_fanout()
        self._fanout(lm, events, actor)
        if received is not None:
            self.ack_latency.append(time.perf_counter() - received)
        self._notify(lm.match, events)
        if finished:
            self._retire(lm)
        else:
            self._after_change(lm)

    def _storage_failed(
        self,
        lm: LiveMatch,
        exc: BaseException,
        actor: tuple[Connection, Any] | None,
        askers: Sequence[tuple[Connection, Any]] = (),
    ) -> None:
        """Nothing after the failure was acknowledged: drop the match from memory.

        Its durable prefix stays on disk and comes back on the next start; meanwhile nobody
        is told anything that might be lost.
        """
        if lm.broken:
            return
        lm.broken = True
        log.error("storage failed for match %s: %s", lm.id, exc)
        err = exc if isinstance(exc, MooError) else StorageError(str(exc))
        refs: dict[Connection, Any] = {c: None for c in lm.conns if c is not None}
        for conn, ref in [*askers, *([actor] if actor is not None else [])]:
            refs[conn] = ref
        for conn, ref in refs.items():
            msg = error_message(err, ref)
            if lm.durable_seq:  # a match nobody was ever told about has no id to quote
                msg["match_id"] = lm.id
            conn.send(msg)
        self._drop(lm)
        if getattr(exc, "moved", False):
            return  # another node runs it now (a lost lease): nothing to restore here
        now = time.monotonic()
        if len(self.restoring) > 10_000:  # bounded: forget the oldest drops first
            for old in sorted(self.restoring, key=self.restoring.__getitem__)[:5_000]:
                del self.restoring[old]
        self.restoring[lm.id] = now

    def _restoring(self, match_id: str) -> bool:
        """Is ``match_id`` one of this server's matches waiting to be replayed after a failed
        write? While the store is down, yes; once it is back, for one more minute (the
        re-adoption is a matter of seconds; after that the match lives elsewhere or nowhere)."""
        since = self.restoring.get(match_id)
        if since is None:
            return False
        if not self.store.available or time.monotonic() - since < RESTORING_S:
            return True
        del self.restoring[match_id]
        return False

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
        self, lm: LiveMatch, events: list[Event], actor: tuple[Connection, Any] | None
    ) -> None:
        match, match_id = lm.match, lm.id
        seats = lm.conns
        spectators = lm.spectators
        # the acknowledgement: the actor's first view carries its request's ref
        ref_conn = actor[0] if actor is not None and actor[1] is not None else None
        for event in events:
            for seat in (0, 1):
                conn = seats[seat]
                if conn is None:
                    continue
                view = match.view(event, seat)
                if view is None:
                    continue
                msg = _event_message(match_id, view)
                if conn is ref_conn:
                    assert actor is not None
                    msg["ref"] = actor[1]
                    ref_conn = None
                conn.send(msg)
            if spectators:  # encoded once per wire format, however many watch
                view = match.view(event, "spectator")
                if view is None:
                    continue
                frames: dict[bool, str | bytes] = {}
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
                self._poke_bot(lm, seat, bot)

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
        if lm.broken or lm.id not in self.live:
            return
        events = lm.match.tick(self.clock())
        if events:
            self._persist(lm, events)
        else:
            self._arm_timer(lm)

    # -- hosted bots ---------------------------------------------------------------------------
    def _poke_bot(self, lm: LiveMatch, seat: int, bot: HostedBot) -> None:
        if bot.pending is not None or bot.thinking or lm.match.finished or self.stopping:
            return
        match = lm.match
        wants = (match.phase == "secrets" and match.seats[seat].secret is None) or (
            match.owes_move(seat)
        )
        if wants:
            delay = self.settings.bot_delay_ms / 1000.0
            bot.pending = asyncio.get_running_loop().call_later(
                delay, self._bot_act, lm, seat, bot
            )

    def _bot_act(self, lm: LiveMatch, seat: int, bot: HostedBot) -> None:
        bot.pending = None
        if lm.broken or lm.id not in self.live or self.stopping:
            return
        match = lm.match
        if match.phase == "secrets" and match.seats[seat].secret is None:
            try:
                secret = bot.rng.choice(match.config.rules.secrets)
            except MooError as exc:  # word MOO without a readable dictionary: the bot resigns
                log.error("hosted bot %s in %s: %s", bot.strategy_name, lm.id, exc)
                self._persist(lm, match.resign(seat, self.clock()))
                return
            self._persist(lm, match.set_secret(seat, secret, new_salt(), self.clock()))
        elif match.owes_move(seat):
            bot.thinking = True
            own = list(match.seats[seat].guesses)
            theirs = _visible_to(match, seat)
            future = asyncio.get_running_loop().run_in_executor(
                self._bot_pool, _think, bot, match.config.rules, own, theirs
            )
            future.add_done_callback(lambda f: self._bot_move(lm, seat, bot, f))

    def _bot_move(
        self, lm: LiveMatch, seat: int, bot: HostedBot, future: asyncio.Future[str]
    ) -> None:
        bot.thinking = False
        match = lm.match
        if lm.broken or lm.id not in self.live or self.stopping or match.finished:
            return
        now = self.clock()
        try:
            events = match.guess(seat, future.result(), now)
        except MooError as exc:
            log.warning("hosted bot %s in %s: %s", bot.strategy_name, lm.id, exc)
            return
        except Exception:
            log.exception("hosted bot %s failed in %s; it resigns", bot.strategy_name, lm.id)
            events = match.resign(seat, now)
        self._persist(lm, events)

    # -- seats, spectators, connections ------------------------------------------------------
    def get(self, match_id: str) -> LiveMatch:
        lm = self.live.get(match_id)
        if lm is None or lm.broken:
            if self._restoring(match_id):
                raise StorageError(
                    f"match {match_id!r} is being restored after a storage failure; try again"
                )
            raise UnknownMatch(f"no live match {match_id!r}")
        return lm

    def seat_of(self, lm: LiveMatch, conn: Connection) -> int:
        seat = lm.match.seat_of(conn.player) if conn.player else None
        if seat is None or lm.bots[seat] is not None:
            raise NotYourSeat("you do not sit in this match")
        return seat

    def act(self, conn: Connection, msg: dict[str, Any], received: float | None = None) -> None:
        """``secret`` / ``guess`` / ``resign`` from a seated connection.

        ``received`` (perf_counter) is when its frame arrived, for the ack-latency figures.
        """
        lm = self.get(msg["match_id"])
        seat = self.seat_of(lm, conn)
        now = self.clock()
        kind = msg["type"]
        # The action is validated (and raises, changing nothing) before a re-connected seat is
        # re-attached: a refused request must not even log the seat's return.
        if kind == "secret":
            events = lm.match.set_secret(seat, msg["secret"], new_salt(), now)
        elif kind == "guess":
            events = lm.match.guess(seat, msg["guess"], now)
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
        )

    def _attach(self, lm: LiveMatch, seat: int, conn: Connection) -> None:
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
        if not match.finished:  # unfinished but not live: its log is cut (storage failure)
            raise UnknownMatch(f"match {match_id!r} is not available")
        return LiveMatch(match=match, bots=[None, None], durable_seq=match.seq)

    async def missed(self, lm: LiveMatch, last_seq: int) -> list[Event]:
        """The durable events after ``last_seq``, read back from the log.

        Live matches keep no log in memory, so a replay reads the store. Commits go on while
        the read is in flight, so this reads again until it has caught up with
        ``durable_seq`` and returns only events up to it: the caller then attaches the
        connection *without awaiting*, and every later event reaches it through the fan-out,
        in order, with no gap and no duplicate.
        """
        out: list[Event] = []
        seen = max(0, last_seq)
        while seen < lm.durable_seq:
            events = await self.store.match_events(lm.id, after=seen)
            if lm.broken:
                raise UnknownMatch(f"no live match {lm.id!r}")
            limit = lm.durable_seq
            fresh = [e for e in events or () if seen < e["seq"] <= limit]
            if not fresh or fresh[0]["seq"] != seen + 1:
                raise StorageError(f"the log of {lm.id} cannot be read back")
            out.extend(fresh)
            seen = fresh[-1]["seq"]
        return out

    async def resume(self, conn: Connection, match_id: str, last_seq: int, ref: Any) -> None:
        """Replay what the seat missed; a finished match replays to its end (e.g. after a
        reconnect or a restart that happened after the last move)."""
        lm = self.live.get(match_id)
        if lm is None or lm.broken:
            lm = await self.finished_match(match_id)
            seat = self.seat_of(lm, conn)
            missed = await self.missed(lm, last_seq)
            conn.send(self._match_message(lm, seat, ref))
            self._replay(lm, conn, seat, missed)
            return
        seat = self.seat_of(lm, conn)
        missed = await self.missed(lm, last_seq)
        if conn.closing:  # replaced by a newer connection while the log was read
            return
        if self.live.get(match_id) is not lm:  # it ended while the log was read
            await self.resume(conn, match_id, last_seq, ref)
            return
        self._attach(lm, seat, conn)
        conn.send(self._match_message(lm, seat, ref))
        self._replay(lm, conn, seat, missed)
        self._persist(lm, lm.match.reconnect(seat, self.clock()))

    async def watch(self, conn: Connection, match_id: str, last_seq: int, ref: Any) -> None:
        if len(conn.spectating) >= MAX_WATCHING and match_id not in conn.spectating:
            raise NotAvailable(f"watching {MAX_WATCHING} matches already; unwatch one first")
        lm = self.live.get(match_id)
        if lm is None or lm.broken:
            lm = await self.finished_match(match_id)  # replayed once, nothing live follows
            missed = await self.missed(lm, last_seq)
        else:
            missed = await self.missed(lm, last_seq)
            if conn.closing:
                return
            if self.live.get(match_id) is not lm:  # it ended while the log was read
                await self.watch(conn, match_id, last_seq, ref)
                return
            lm.spectators.add(conn)
            if lm.id not in conn.spectating:
                conn.spectating.append(lm.id)
        conn.send(
            {
                "type": "watching",
                "match_id": lm.id,
                "players": list(lm.match.players),
                "config": lm.match.config.to_dict(),
                **({"ref": ref} if ref is not None else {}),
            }
        )
        self._replay(lm, conn, "spectator", missed)

    def unwatch(self, conn: Connection, match_id: str) -> None:
        lm = self.live.get(match_id)
        if lm is not None:
            lm.spectators.discard(conn)
        _discard(conn.spectating, match_id)

    def _replay(
        self, lm: LiveMatch, conn: Connection, viewer: Viewer, events: list[Event]
    ) -> None:
        for event in events:
            view = lm.match.view(event, viewer)
            if view is not None:
                conn.send(_event_message(lm.id, view))

    def release(self, conn: Connection) -> None:
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

    async def rejoin(self, conn: Connection, player: str) -> None:
        """After ``hello``: put the player's new connection back into every unfinished seat.

        Each match gets ``match`` (no ``ref``) and its events so far, as if the client had sent
        ``resume`` with ``last_seq`` 0, then its live events; a seat that was away comes
        ``back``. So a client that reconnects is back in its seats whether or not it resumes,
        and a connection always sees its own matches end.
        """
        for match_id in sorted(self.by_player.get(player, ())):
            lm = self.live.get(match_id)
            if lm is None or lm.broken:
                continue
            seat = lm.match.seat_of(player)
            if seat is None or lm.bots[seat] is not None or lm.conns[seat] is conn:
                continue
            try:
                missed = await self.missed(lm, 0)
            except MooError:
                continue  # its storage failed meanwhile: the players were told
            if self.live.get(match_id) is not lm:  # ended while the log was read
                continue
            if conn.closing:
                # Gone during the read: a seat left without any connection starts its grace
                # window like any dropped seat.
                if lm.conns[seat] is None and not self.stopping:
                    self._persist(lm, lm.match.disconnect(seat, self.clock()))
                continue
            self._attach(lm, seat, conn)
            conn.send(self._match_message(lm, seat, None))
            self._replay(lm, conn, seat, missed)
            self._persist(lm, lm.match.reconnect(seat, self.clock()))

    def live_match_of(self, player: str) -> str | None:
        """The id of an unfinished match ``player`` sits in (its first), or None."""
        for match_id in self.by_player.get(player, ()):
            lm = self.live.get(match_id)
            if lm is not None and not lm.broken and not lm.match.finished:
                return match_id
        return None

    def detach(self, conn: Connection) -> None:
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

    def player_matches(self, player: str) -> list[dict[str, Any]]:
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

    def listing(self, limit: int = 100) -> list[dict[str, Any]]:
        out = []
        for lm in list(self.live.values())[:limit]:
            if lm.broken:
                continue
            m = lm.match
            out.append(
                {
                    "match_id": lm.id,
                    "players": list(m.players),
                    "pacing": m.config.pacing,
                    "rules": m.config.rules.to_dict(),
                    "phase": m.phase,
                    "counts": [s.count for s in m.seats],
                }
            )
        return out

    async def list_matches(self) -> list[dict[str, Any]]:
        """The ``matches`` request: :meth:`listing` here; a cluster node's bus replaces it
        with the live matches of every node (server/cluster/bus.py)."""
        return self.listing()

    # -- rematch --------------------------------------------------------------------------------
    def rematch(self, conn: Connection, match_id: str) -> LiveMatch | None:
        """Record a rematch wish; returns the finished match once both sides want one."""
        lm = self.recent.get(match_id)
        if lm is None:
            if match_id in self.live:
                raise NotAvailable("the match is still being played")
            raise UnknownMatch(f"no recently finished match {match_id!r}")
        seat = self.seat_of(lm, conn)
        lm.rematch.add(seat)
        other = 1 - seat
        if lm.bots[other] is not None or other in lm.rematch:
            self.recent.pop(match_id, None)
            return lm
        peer = lm.conns[other]
        if peer is not None and not peer.closing:
            peer.send({"type": "rematch_offer", "match_id": match_id})
        return None

    # -- ending ------------------------------------------------------------------------------------
    def _retire(self, lm: LiveMatch) -> None:
        self._cancel(lm)
        self._drop(lm)
        self.recent[lm.id] = lm
        while len(self.recent) > 1000:
            self.recent.pop(next(iter(self.recent)))

    def _cancel(self, lm: LiveMatch) -> None:
        if lm.timer is not None:
            lm.timer.cancel()
            lm.timer = None
        for bot in lm.bots:
            if bot is not None and bot.pending is not None:
                bot.pending.cancel()
                bot.pending = None

    def _drop(self, lm: LiveMatch) -> None:
        self._cancel(lm)
        self.live.pop(lm.id, None)
        for name in lm.match.players:
            ids = self.by_player.get(name)
            if ids is not None:
                _discard(ids, lm.id)
                if not ids:
                    del self.by_player[name]
        for conn in lm.conns:
            if conn is not None:
                _discard(conn.matches, lm.id)
        for conn in lm.spectators:
            _discard(conn.spectating, lm.id)

    def stop(self) -> None:
        """Freeze: no timers or bot moves from now on (the log keeps the state)."""
        self.stopping = True
        for lm in self.live.values():
            self._cancel(lm)
        self._bot_pool.shutdown(wait=False, cancel_futures=True)

    def _match_message(self, lm: LiveMatch, seat: int, ref: Any) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "type": "match",
            "match_id": lm.id,
            "seat": seat,
            "opponent": lm.match.players[1 - seat],
            "config": lm.match.config.to_dict(),
        }
        bot = lm.bots[1 - seat]
        if bot is not None:  # a tree bot playing a heuristic says so (docs/variants.md)
            note = bot_note(bot.strategy_name, lm.match.config.rules)
            if note:
                msg["bot_note"] = note
        if ref is not None:
            msg["ref"] = ref
        return msg

    def check_finished(self, match_id: str) -> None:
        if match_id in self.recent:
            raise MatchFinished("the match is over")


def _visible_to(match: Match, seat: int) -> list[tuple[str | None, int, int]]:
    """The opponent's moves a client in ``seat`` has seen when it owes a move: in lockstep the
    finished rounds only, in free pacing all of them; guess texts only with ``show_guesses``."""
    theirs = match.seats[1 - seat].guesses
    if match.config.pacing == "lockstep":
        theirs = theirs[: len(match.seats[seat].guesses)]
    shown = match.config.show_guesses
    return [(g if shown else None, b, c) for g, b, c in theirs]


def _think(
    bot: HostedBot,
    rules: GameRules,
    own: list[tuple[str, int, int]],
    theirs: list[tuple[str | None, int, int]],
) -> str:
    """On the bot thread: catch the strategy up on its own results and on the opponent's
    visible progress (what a connected client would have seen), then ask for a guess."""
    if bot.strategy is None:
        bot.strategy = create_for(bot.strategy_name, rules)
    if not bot.started:
        bot.strategy.new_match(rules, bot.rng)
        bot.started = True
    for guess, bulls, cows in own[bot.observed :]:
        bot.strategy.observe(guess, Response(bulls, cows))
    bot.observed = len(own)
    mover = getattr(bot.strategy, "observe_opponent_move", None)
    if mover is not None:  # variant bots without the hook just play their own game
        for n, (guess_, bulls, cows) in enumerate(theirs[bot.opponent_observed :],
                                                  start=bot.opponent_observed + 1):
            mover(n, guess_, Response(bulls, cows))
    bot.opponent_observed = max(bot.opponent_observed, len(theirs))
    return str(bot.strategy.next_guess())


def _discard(items: list[str], item: str) -> None:
    if item in items:
        items.remove(item)


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
