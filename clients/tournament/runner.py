"""The tournament runner: the plan of paired games, the in-process engine, and the scheduler.

*Plan.* For every pair of bots and every round ``r`` two secrets ``x, y`` are drawn (the same
two for every pair of bots in that round, like a shared opening book) and played both ways:
leg 0 has the first bot guess ``y`` while the second guesses ``x``; leg 1 swaps them. The luck
of drawing an easy secret therefore cancels within a pair, which is why pairs are scored
together (pentanomial statistics, see :mod:`moo.stats`). Every match has a
stable ``key`` derived from the plan alone, so ``--resume`` can tell what was already played.

*Engines.* :class:`LocalEngine` drives the very same sans-I/O :class:`~moo.match.Match` the
server runs, in this process (or in worker processes with ``--concurrency``);
:class:`clients.tournament.remote.RemoteEngine` plays each match for real on a server.
Both return a :class:`~clients.tournament.results.MatchRecord`.

*Determinism.* Each seat's strategy gets ``random.Random`` seeded from the tournament seed and
the match key, so in local mode a match's outcome does not depend on scheduling, concurrency or
interruption: a resumed run reproduces the uninterrupted one exactly.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

from bots import dictionary
from bots.base import Strategy
from bots.external import BotFailure, ExternalStrategy
from bots.registry import available, close_strategy, create, display_names
from bots.variants import VARIANT_BOTS, check_bot, create_for, prepare
from clients.tournament.results import MatchRecord, ResultsFile, pair_standings
from moo.errors import BotUnsupported, MooError, UsageError
from moo.mastermind import MastermindRules
from moo.match import Event, Match, MatchConfig
from moo.rules import DEFAULT_RULES, Response
from moo.stats import SprtResult, SprtSpec, sprt
from moo.variants import CLASSIC_SPEC, GameRules, is_classic, rules_spec
from moo.words import WordRules

T = TypeVar("T")

__all__ = [
    "Engine",
    "Job",
    "LocalEngine",
    "Progress",
    "TournamentResult",
    "begin_match",
    "check_programs",
    "choose_secret",
    "display_names",
    "failure_text",
    "make_plan",
    "make_strategy",
    "play_local",
    "run_tournament",
]

FORMATS = ("roundrobin", "gauntlet")
SECRET_MODES = ("uniform", "bots")


@dataclass(frozen=True)
class Job:
    """One match to play: ``specs[i]`` sits in seat ``i`` and sets ``secrets[i]``."""

    key: str
    seed: int
    round: int
    leg: int
    pair: tuple[int, int]
    specs: tuple[str, str]
    names: tuple[str, str]
    #: None when the bots choose their own secrets (``--secrets bots``)
    secrets: tuple[str, str] | None
    #: the game's spec (docs/variants.md), as the record keeps it
    rules: str = CLASSIC_SPEC


def pairs_for(n_bots: int, fmt: str) -> list[tuple[int, int]]:
    if fmt == "gauntlet":
        return [(0, j) for j in range(1, n_bots)]
    if fmt == "roundrobin":
        return [(i, j) for i in range(n_bots) for j in range(i + 1, n_bots)]
    raise ValueError(f"format must be one of {FORMATS}")


def secret_pair(seed: int, round_: int, rules: GameRules) -> tuple[str, str]:
    """The two secrets of round ``round_``: independent and uniform over the legal secrets."""
    rng = random.Random(f"moo-tournament:{seed}:{round_}")
    return rng.choice(rules.secrets), rng.choice(rules.secrets)


def make_plan(
    specs: Sequence[str],
    *,
    fmt: str = "roundrobin",
    rounds: int = 10,
    seed: int = 1,
    secrets: str = "uniform",
    rules: GameRules = DEFAULT_RULES,
) -> list[Job]:
    """Every match of the tournament, round by round (so a stopped run is still balanced)."""
    if len(specs) < 2:
        raise ValueError("a tournament needs at least two bots")
    if secrets not in SECRET_MODES:
        raise ValueError(f"--secrets must be one of {SECRET_MODES}")
    names = display_names(specs)
    spec_of_rules = rules_spec(rules)
    jobs = []
    for r in range(rounds):
        x, y = secret_pair(seed, r, rules)
        for a, b in pairs_for(len(specs), fmt):
            for leg in (0, 1):
                pair_secrets = ((x, y) if leg == 0 else (y, x)) if secrets == "uniform" else None
                jobs.append(
                    Job(
                        key=f"{a}.{names[a]}|{b}.{names[b]}|r{r}|g{leg}",
                        seed=seed,
                        round=r,
                        leg=leg,
                        pair=(a, b),
                        specs=(specs[a], specs[b]),
                        names=(names[a], names[b]),
                        secrets=pair_secrets,
                        rules=spec_of_rules,
                    )
                )
    return jobs


# -- strategies ---------------------------------------------------------------------------------


def make_strategy(
    spec: str, *, relabel: bool = True, rules: GameRules | None = None
) -> Strategy:
    """A strategy from any spec (:func:`bots.registry.create`, the loader every command shares).

    For rules other than classic 4 of 10, only the bots of :func:`bots.variants.bots_for`
    (``BotUnsupported`` otherwise), built for those rules."""
    if rules is None or is_classic(rules):
        return create(spec, relabel=relabel)
    if spec.startswith("cmd:"):  # the line protocol announces any MOO rules, not Mastermind
        if isinstance(rules, MastermindRules | WordRules):
            raise BotUnsupported("external bot programs play MOO rules only "
                                 "(docs/bot-protocol.md); for Mastermind use minimum, "
                                 "strongest or random, for word MOO words")
        return create(spec, relabel=relabel)
    check_bot(spec, rules, [*available(), *VARIANT_BOTS])
    prepare(spec, rules)  # a variant's tree is solved before the first match, not in it
    strategy: Strategy = create_for(spec, rules)
    return strategy


def check_programs(specs: Sequence[str], rules: GameRules) -> None:
    """Start every ``cmd:`` program once and do its handshake, before any match is played.

    A program that is not there was already refused by the loader (a usage error); one that
    starts but exits, hangs or answers garbage is a :class:`~bots.external.BotFailure` here,
    naming the spec: the tournament does not start with a bot that cannot play.
    """
    for spec in dict.fromkeys(s for s in specs if s.startswith("cmd:")):
        strategy = make_strategy(spec, relabel=False, rules=rules)
        try:
            if isinstance(strategy, ExternalStrategy):
                begin_match(strategy, rules, random.Random(0))
        except BotFailure as exc:
            raise MooError(f"{spec} cannot play: {exc}") from None
        finally:
            close_strategy(strategy)


def begin_match(strategy: Strategy, rules: GameRules, rng: random.Random) -> None:
    """``new_match`` for either game: :class:`Strategy` is typed for MOO rules, and the
    Mastermind / variant bots of :mod:`bots.variants` take any rules through the same method."""
    player: Any = strategy
    player.new_match(rules, rng)


def choose_secret(strategy: Strategy, rules: GameRules, rng: random.Random) -> str:
    """The bot's own secret for ``--secrets bots``: its ``choose_secret`` if it has one."""
    chooser = getattr(strategy, "choose_secret", None)
    if callable(chooser):
        return rules.check_secret(chooser(rules, rng))
    return rng.choice(rules.secrets)


def seat_rng(job: Job, seat: int) -> random.Random:
    return random.Random(f"moo-tournament:{job.seed}:{job.key}:{seat}")


def play_local(
    job: Job, strategies: tuple[Strategy, Strategy], config: MatchConfig
) -> MatchRecord:
    """Play ``job`` to the end on an in-process :class:`Match`; time is a guess counter.

    What each seat learns, and when, is what a server connection would see: in lockstep both
    responses of a round arrive together at the ``round`` event; in free pacing at once.
    A strategy that fails (an external program that crashes or answers garbage, a plug-in that
    raises) forfeits the match: its seat resigns and the record's ``forfeit`` says why.
    """
    started = int(time.time() * 1000)
    rules = config.rules
    match, _ = Match.create(job.key, job.names, config, 0)
    rngs = (seat_rng(job, 0), seat_rng(job, 1))
    failed: dict[int, str] = {}

    def attempt(seat: int, call: Callable[[], T]) -> T | None:
        if seat in failed:
            return None
        try:
            return call()
        except Exception as exc:
            failed[seat] = f"{job.specs[seat]}: {failure_text(exc)}"
            return None

    for seat in (0, 1):
        attempt(seat, partial(begin_match, strategies[seat], rules, rngs[seat]))
    secrets = job.secrets or tuple(
        attempt(seat, partial(choose_secret, strategies[seat], rules, rngs[seat]))
        or rngs[seat].choice(rules.secrets)
        for seat in (0, 1)
    )
    for seat in (0, 1):
        match.set_secret(seat, secrets[seat], "tournament", 0)
    tick = 0
    while not match.finished:
        moved = False
        for seat in (0, 1):
            if match.finished or not match.owes_move(seat):
                continue
            tick += 1
            guess = attempt(seat, strategies[seat].next_guess)
            try:
                if guess is None:
                    raise ValueError("no guess")
                events = match.guess(seat, guess, tick)
            except Exception as exc:
                failed.setdefault(seat, f"{job.specs[seat]}: {failure_text(exc)}")
                match.resign(seat, tick)
                break
            moved = True
            _deliver(match, events, strategies, attempt)
        if not moved and not match.finished:  # cannot happen with a correct Match; be safe
            match.resign(0, tick)
    record = _record_from_match(job, match, "local", started)
    record.forfeit = "; ".join(failed[seat] for seat in sorted(failed)) or None
    return record


def failure_text(exc: BaseException) -> str:
    """Why a strategy failed, in a few words: a program's own failure says it all."""
    if isinstance(exc, BotFailure | MooError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _deliver(match: Match, events: list[Event], strategies: tuple[Strategy, Strategy],
             attempt: Callable[[int, Callable[[], None]], None]) -> None:
    lockstep = match.config.pacing == "lockstep"
    for event in events:
        kind = event["kind"]
        if kind == "guess" and not lockstep:
            seat = event["seat"]
            response = Response(event["bulls"], event["cows"])
            attempt(seat, partial(strategies[seat].observe, event["guess"], response))
            shown = event["guess"] if match.config.show_guesses else None
            attempt(1 - seat, partial(strategies[1 - seat].observe_opponent_move,
                                      event["n"], shown, response))
        elif kind == "round":
            n = event["n"]
            results = event["results"]
            for seat in (0, 1):
                guess, bulls, cows = results[seat]
                attempt(seat, partial(strategies[seat].observe, guess, Response(bulls, cows)))
            for seat in (0, 1):
                other, bulls, cows = results[1 - seat]
                shown = other if match.config.show_guesses else None
                attempt(seat, partial(strategies[seat].observe_opponent_move, n, shown,
                                      Response(bulls, cows)))


def _record_from_match(job: Job, match: Match, mode: str, started: int) -> MatchRecord:
    result = match.result or {}
    return MatchRecord(
        key=job.key,
        seed=job.seed,
        round=job.round,
        leg=job.leg,
        players=list(job.names),
        secrets=[str(s.secret) for s in match.seats],
        guesses=[[g for g, _, _ in s.guesses] for s in match.seats],
        counts=[s.count for s in match.seats],
        winner=result.get("winner"),
        reason=str(result.get("reason")),
        mode=mode,
        started_ms=started,
        finished_ms=int(time.time() * 1000),
        match_id=None,
        pair=list(job.pair),
        rules=rules_spec(match.config.rules),
    )


# -- engines ------------------------------------------------------------------------------------


class Engine(Protocol):
    async def start(self, jobs: Sequence[Job]) -> None: ...

    async def play(self, job: Job) -> MatchRecord: ...

    async def close(self) -> None: ...


#: per-process cache of strategy instances, keyed by (spec, seat): a strategy plays one match
#: at a time and keeps its expensive tables between matches
_CACHE: dict[tuple[str, int, GameRules], Strategy] = {}


def _cached(spec: str, seat: int, rules: GameRules) -> Strategy:
    strategy = _CACHE.get((spec, seat, rules))
    if strategy is None:
        strategy = _CACHE[(spec, seat, rules)] = make_strategy(spec, rules=rules)
    return strategy


def _worker_play(job: Job, config: dict[str, Any]) -> MatchRecord:
    dictionary.install()  # a worker process starts without it (the pool may spawn)
    cfg = MatchConfig.from_dict(config)
    return play_local(
        job, (_cached(job.specs[0], 0, cfg.rules), _cached(job.specs[1], 1, cfg.rules)), cfg
    )


class LocalEngine:
    """In-process matches; with ``concurrency > 1`` spread over that many worker processes."""

    def __init__(self, config: MatchConfig, concurrency: int = 1) -> None:
        self.config = config
        self.concurrency = max(1, concurrency)
        self._pool: ProcessPoolExecutor | None = None
        self._strategies: dict[tuple[str, int], Strategy] = {}

    async def start(self, jobs: Sequence[Job]) -> None:
        dictionary.install()  # word MOO's secrets are checked against the real list
        # Fail fast on a bad bot name or a program that cannot play, before any match.
        specs = sorted({s for job in jobs for s in job.specs})
        check_programs(specs, self.config.rules)
        for spec in specs:
            self._strategy(spec, 0)
        if self.concurrency > 1:
            self._pool = ProcessPoolExecutor(max_workers=self.concurrency)

    def _strategy(self, spec: str, seat: int) -> Strategy:
        strategy = self._strategies.get((spec, seat))
        if strategy is None:
            strategy = self._strategies[(spec, seat)] = make_strategy(
                spec, rules=self.config.rules
            )
        return strategy

    async def play(self, job: Job) -> MatchRecord:
        if self._pool is not None:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self._pool, _worker_play, job, self.config.to_dict()
            )
        strategies = (self._strategy(job.specs[0], 0), self._strategy(job.specs[1], 1))
        return play_local(job, strategies, self.config)

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        for strategy in self._strategies.values():
            close_strategy(strategy)
        self._strategies.clear()


# -- progress -----------------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on stderr (redrawn at most 10 times a second)."""

    def __init__(self, total: int, *, enabled: bool | None = None, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total = total
        self.done = 0
        self.start = time.monotonic()
        self._last = 0.0
        self.note = ""

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._last >= 0.1 or self.done >= self.total):
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        frac = self.done / self.total if self.total else 1.0
        width = 30
        filled = int(width * frac)
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(
            f"\r[{bar}] {self.done}/{self.total} matches  {rate:7.1f}/s  "
            f"ETA {eta:5.0f}s {self.note}"
        )
        self.stream.flush()

    def interrupt(self, line: str) -> None:
        """Print ``line`` on the stream without tearing the bar (it is redrawn after)."""
        if self.enabled:
            self.stream.write("\r\033[K")
        self.stream.write(line + "\n")
        self.stream.flush()
        if self.enabled:
            self._draw(time.monotonic())

    def finish(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()


# -- scheduler ----------------------------------------------------------------------------------


@dataclass
class TournamentResult:
    records: list[MatchRecord]
    played: int
    skipped: int
    elapsed_s: float
    sprt: SprtResult | None


def check_resumable(out: ResultsFile, jobs: Sequence[Job]) -> list[MatchRecord]:
    """The records of ``out``, if they belong to this plan's bots and rules; else UsageError."""
    records = out.load()
    if not jobs:
        return records
    seats = {(tuple(job.pair), job.names) for job in jobs}
    wanted = {job.specs[0]: job.names[0] for job in jobs} | {
        job.specs[1]: job.names[1] for job in jobs}
    rules = jobs[0].rules
    for record in records:
        if record.rules != rules:
            raise UsageError(f"{out.path} was written for rules {record.rules}, not {rules}: "
                             "give another --out, or drop --resume to start it afresh")
        if (tuple(record.pair), tuple(record.players)) not in seats:
            theirs = sorted({p for r in records for p in r.players})
            raise UsageError(
                f"{out.path} was written for bots {', '.join(theirs)}, not "
                f"{', '.join(wanted.values())}: give another --out, or drop --resume to start "
                "it afresh")
    return records


def _sprt_state(records: Sequence[MatchRecord], spec: SprtSpec) -> SprtResult:
    table = pair_standings(records)
    penta = [0, 0, 0, 0, 0]
    for st in table.values():
        penta = [p + q for p, q in zip(penta, st.penta)]
    return sprt(penta, spec)


async def run_tournament(
    jobs: Sequence[Job],
    engine: Engine,
    *,
    out: ResultsFile | None = None,
    resume: bool = False,
    concurrency: int = 1,
    sprt_spec: SprtSpec | None = None,
    progress: Progress | None = None,
    on_forfeit: Callable[[MatchRecord], None] | None = None,
) -> TournamentResult:
    """Play every job not already in ``out`` (when resuming); stop early if the SPRT decides.

    Matches run ``concurrency`` at a time; each finished match is appended to ``out`` at once.
    The returned records are those of the plan, old and new, in plan order. ``on_forfeit``
    hears of every match a bot lost by failing (its record's ``forfeit`` says why).
    Resuming from a file written for other bots or other rules is refused
    (:class:`~moo.errors.UsageError`): its records would be mixed into these standings.
    """
    out = out or ResultsFile(None)
    keys = {job.key: i for i, job in enumerate(jobs)}
    done: dict[str, MatchRecord] = {}
    if resume:
        for record in check_resumable(out, jobs):
            if record.key in keys:
                done[record.key] = record
    todo = [job for job in jobs if job.key not in done]
    skipped = len(jobs) - len(todo)
    progress = progress or Progress(len(jobs), enabled=False)
    progress.total = len(jobs)
    progress.done = skipped
    decision: SprtResult | None = None
    if sprt_spec is not None:
        decision = _sprt_state(list(done.values()), sprt_spec)
    start = time.monotonic()
    played = 0
    queue = list(reversed(todo))
    stop = decision is not None and decision.decision is not None
    failure: list[BaseException] = []

    async def worker() -> None:
        nonlocal played, decision, stop
        while queue and not stop and not failure:
            job = queue.pop()
            try:
                record = await engine.play(job)
            except Exception as exc:  # one failure ends the tournament, reported by the CLI
                failure.append(exc)
                return
            done[record.key] = record
            out.write(record)
            played += 1
            if record.forfeit and on_forfeit is not None:
                on_forfeit(record)
            if sprt_spec is not None:
                decision = _sprt_state(list(done.values()), sprt_spec)
                d = decision
                progress.note = f"LLR {d.llr:+.2f} [{d.lower:.2f}, {d.upper:.2f}]"
                if decision.decision is not None:
                    stop = True
            progress.advance()

    try:
        if todo and not stop:
            await engine.start(todo)  # a bot that cannot play is told before --out is touched
        out.open(append=resume)
        if todo and not stop:
            workers = [asyncio.create_task(worker()) for _ in range(max(1, concurrency))]
            try:
                await asyncio.gather(*workers)
            finally:
                for w in workers:
                    w.cancel()
    finally:
        await engine.close()
        out.close()
        progress.finish()
    if failure:
        raise failure[0]
    records = sorted(done.values(), key=lambda r: keys[r.key])
    return TournamentResult(records, played, skipped, time.monotonic() - start, decision)
