"""The in-process driver (``--mode inproc``, the default): a real App with its SQLite store,
fed by sessions over :mod:`bench.fuzz.memory`, with every frame's promises checked.

It snapshots the arena and lobby before and after each frame, so a refused frame that changes
anything is caught, and it keeps interesting targets (matches in each phase) alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from bench.fuzz.checks import (
    LOOP_ERRORS,
    SILENT_WHEN_ACCEPTED,
    SPECIFIC_CODES,
    ErrorCollector,
    Stats,
    first_difference,
    loop_error,
    match_state,
    probe_frame,
    sane_id,
)
from bench.fuzz.frames import JSON, MSGPACK, FrameGen, World
from bench.fuzz.memory import Session, stuck
from server import background
from server.app import App
from server.lobby import Lobby
from server.review_worker import TIME_LIMIT_S as ANALYSIS_LIMIT_S
from server.settings import Settings


class InProcessFuzzer:
    """Drives sessions of a real App with generated frames and checks every promise."""

    PLAYERS = (("ann", JSON), ("bob", MSGPACK), ("cat", MSGPACK), ("dan", JSON))

    def __init__(self, seed: int, db_dir: Path) -> None:
        self.rng = random.Random(seed)
        self.world = World()
        self.gen = FrameGen(self.rng, self.world)
        self.db_dir = db_dir
        self.stats = Stats()
        self.sessions: dict[str, Session] = {}
        self.errors_logged: list[str] = []

    async def start(self) -> None:
        settings = Settings(
            host="127.0.0.1",
            port=0,
            db=str(self.db_dir / "fuzz.sqlite3"),
            sqlite_synchronous="OFF",
            commit_window_ms=0.0,
            rate_per_s=1e9,
            rate_burst=10**9,
            new_names_per_address=10**9,
            secret_ms=0,
            grace_ms=10**9,
            idle_timeout_s=10**6,
            handshake_timeout_s=10**6,
            bot_delay_ms=10**9,  # hosted bots never move inside a run: no state change by timer
            argon2_time_cost=1,  # fuzzed set_password frames: hash cheaply
            argon2_memory_kib=64,
            argon2_parallelism=1,
            send_queue_max=10**6,
            static_dir=str(self.db_dir / "web"),
        )
        self.app = App(settings)
        await self.app.start()
        # the ladder's scheduler pairs connected bots (a fuzzed ladder_join) on its own clock:
        # no state change by timer either (its requests are still answered)
        await self.app.ladder.stop()
        asyncio.get_running_loop().set_exception_handler(loop_error)
        handler = ErrorCollector(self.errors_logged)
        logging.getLogger("moo").addHandler(handler)
        for name, sub in self.PLAYERS:
            await self.connect(name, sub)
        self.world.names = [n for n, _ in self.PLAYERS] + ["nobody", "ANN", "random-bot"]
        await self.refresh_matches()

    async def stop(self) -> None:
        for s in self.sessions.values():
            await s.ws.close()
        await self.app.stop()

    async def connect(self, name: str, sub: str) -> Session:
        old = self.sessions.get(name)
        s = Session(self.app, name, sub)
        # programs (bot: true): the fuzzer keeps several matches per pair going at once, which
        # docs/protocol.md allows programs only (a person plays one live match at a time)
        hello: dict[str, Any] = {"type": "hello", "name": name, "bot": True}
        if old is not None:
            for m in old.decoded():  # a fuzzed sign_out_all rotated the token
                if m.get("type") == "signed_out":
                    old.token = m["token"]
        if old is not None and old.token:
            hello["token"] = old.token
        welcome = await s.request(hello)
        assert welcome["type"] == "welcome", welcome
        s.token = welcome.get("token") or (old.token if old else None)
        self.sessions[name] = s
        return s

    # -- keeping interesting targets around
    async def new_match(self, a: str, b: str, pacing: str, secrets: bool) -> str:
        sa, sb = self.sessions[a], self.sessions[b]
        # The fuzzer's own challenges pile up (a player may have 10 open): answer them first.
        for cid, ch in list(cast(Lobby, self.app.lobby).challenges.items()):
            target = self.sessions.get(ch.target)
            if target is not None and ch.source_name == a:
                await target.feed(target.codec.encode({"type": "decline", "challenge_id": cid}))
        sent = await sa.request({"type": "challenge", "opponent": b, "pacing": pacing})
        assert sent["type"] == "challenge_sent", sent
        reply = await sb.request({"type": "accept", "challenge_id": sent["challenge_id"]})
        assert reply["type"] == "match", reply
        mid = str(reply["match_id"])
        await self.barrier()
        if secrets:
            for s in (sa, sb):
                r = await s.request({"type": "secret", "match_id": mid, "secret": "0123"})
                assert r.get("type") == "event", r
        return mid

    async def refresh_matches(self) -> None:
        """Keep each pair in a match in the secrets phase and one in play; retire the rest."""
        arena = self.app.arena
        for ids in list(self.world.own_matches.values()):
            for mid in ids:
                if mid not in arena.live and mid not in self.world.finished:
                    self.world.finished.append(mid)
        self.world.finished = self.world.finished[-20:]
        for name in self.sessions:
            mine = sorted(arena.by_player.get(name, ()))
            for mid in mine[:-6]:  # bound the number of live matches a player sits in
                if mid in arena.live:
                    await self.sessions[name].request({"type": "resign", "match_id": mid})
        for a, b in (("ann", "bob"), ("cat", "dan")):
            phases = [
                arena.live[m].match.phase
                for m in arena.by_player.get(a, ())
                if m in arena.live and arena.live[m].match.seat_of(b) is not None
            ]
            if "secrets" not in phases:
                await self.new_match(a, b, self.rng.choice(["lockstep", "free"]), False)
            if "playing" not in phases:
                await self.new_match(a, b, self.rng.choice(["lockstep", "free"]), True)
        await self.barrier()
        for name in self.sessions:
            own = sorted(m for m in arena.by_player.get(name, ()) if m in arena.live)
            self.world.own_matches[name] = own
            self.world.other_matches[name] = sorted(set(arena.live) - set(own))
        self.world.challenges = sorted(cast(Lobby, self.app.lobby).challenges)
        self.world.rooms = sorted(cast(Lobby, self.app.lobby).rooms)

    async def barrier(self, before: frozenset[asyncio.Task[Any]] = frozenset()) -> None:
        """Everything appended so far is committed and its callbacks have run; with
        ``before`` (:func:`server.background.running` before the frame), also what the frame
        started in the background, which may take several commits one after the other (a
        ``tournament_create`` with a ``request_id`` reads the store, then writes the
        tournament, then answers): rounds until none of those tasks is left, at most 10 (a
        task that lives on, such as a tournament's clock, does not hold it up longer)."""
        for _ in range(10):
            await self.app.store.player_by_token("barrier")
            for s in self.sessions.values():
                await s.settle()
            if not (background.running() - before):
                return

    # -- the checks
    def snapshot(self, player: str, frame_match: Any) -> Any:
        arena, lobby = self.app.arena, cast(Lobby, self.app.lobby)
        live = tuple(
            (
                mid,
                lm.match.seq,
                lm.match.phase,
                tuple(id(c) for c in lm.conns),
                tuple(sorted(id(c) for c in lm.spectators)),
            )
            for mid, lm in sorted(arena.live.items())
        )
        deep_ids = set(arena.by_player.get(player, ()))
        if isinstance(frame_match, str):
            deep_ids.add(frame_match)
        deep = tuple(
            match_state(arena.live[mid].match)
            for mid in sorted(m for m in deep_ids if m in arena.live)
        )
        lobby_state = (
            tuple((w.player, w.pool, w.pacing) for w in lobby.queue),
            tuple(sorted(lobby.challenges)),
            tuple(sorted(lobby.rooms)),
            tuple(sorted(lobby.online)),
            tuple(sorted((k, tuple(sorted(v))) for k, v in arena.by_player.items())),
            tuple(sorted(arena.recent)),
            tuple(sorted((m, tuple(sorted(w))) for m, w in lobby.wishes.items())),
        )
        return live, deep, lobby_state

    async def one(self, player: str) -> None:
        s = self.sessions[player]
        frame, label = self.gen.frame(player, s.codec)
        probe = probe_frame(s.codec, frame)
        before = self.snapshot(player, probe.get("match_id"))
        start = len(s.ws.sent)
        # An analysis runs the exact solver in a child process (server/review_worker.py): its
        # session waits for it, up to the documented limit, and is stuck only past that.
        wait = ANALYSIS_LIMIT_S + 10.0 if probe.get("type") == "analysis" else 5.0
        try:
            started = background.running()
            await s.feed(frame, timeout=wait)
        except TimeoutError:
            self.stats.frames += 1
            self.stats.violations.append(f"[{label}] session stuck; frame={frame[:200]!r}")
            await self.connect(player, s.codec.subprotocol)
            return
        replies = s.decoded(start)
        self.stats.frames += 1
        self.stats.by_label[label.split(":")[0]] += 1
        problem = None
        if s.task.done():
            problem = f"session ended: {s.task.exception() if not s.task.cancelled() else ''}"
        errs = [r for r in replies if r.get("type") == "error"]
        if errs:
            self.stats.refused += 1
            err = errs[0]
            self.stats.by_code[err.get("code", "?")] += 1
            after = self.snapshot(player, probe.get("match_id"))
            if err.get("code") not in SPECIFIC_CODES:
                problem = f"unspecific error code {err.get('code')!r}"
            elif after != before:
                changed = first_difference(before, after)
                problem = f"refused ({err.get('code')}) but state changed: {changed}"
            elif sane_id(probe.get("id")) and err.get("ref") != probe.get("id"):
                problem = f"error without ref {probe.get('id')!r}: {err}"
        elif problem is None:
            self.stats.accepted += 1
            # Let whatever the frame started become durable (and its callbacks run), so the
            # next frame's before/after comparison sees only that frame's doing.
            await self.barrier(started)
            kind = probe.get("type")
            silent = isinstance(kind, str) and kind in SILENT_WHEN_ACCEPTED
            if not s.decoded(start) and not silent:
                problem = "no answer at all"
        if LOOP_ERRORS:
            self.errors_logged.extend(LOOP_ERRORS)
            LOOP_ERRORS.clear()
        if self.errors_logged:
            problem = (problem or "") + f" server logged: {self.errors_logged[:3]}"
            self.errors_logged.clear()
        if problem is None and stuck(s.conn):
            problem = "the connection can no longer send (its flush/writer failed)"
        if problem:
            self.stats.violations.append(f"[{label}] {problem}; frame={frame[:1000]!r}")
            await self.repair(player)

    async def repair(self, player: str) -> None:
        """After a violation: a fresh session for that player, so the run goes on."""
        old = self.sessions[player]
        if old.task.done() or old.ws.closed is not None or stuck(old.conn):
            await old.ws.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await old.task  # its teardown (detach, leave) happens now, not mid-frame
            new = await self.connect(player, old.codec.subprotocol)
            # What a real client does after reconnecting: resume every match it sits in.
            for mid in sorted(self.app.arena.by_player.get(player, ())):
                await new.request({"type": "resume", "match_id": mid, "last_seq": 0})
        else:
            await old.settle()

    async def run(self, frames: int, duration: float | None = None) -> Stats:
        t0 = time.monotonic()
        names = [n for n, _ in self.PLAYERS]
        while self.stats.frames < frames:
            if self.stats.frames % 500 == 0:
                await self.refresh_matches()
                if duration is not None and time.monotonic() - t0 > duration:
                    break
            try:
                await self.one(self.rng.choice(names))
            except Exception as exc:  # a bug of the harness must not end a long run unseen
                self.stats.harness_errors.append(repr(exc)[:200])
                if len(self.stats.harness_errors) > 100:
                    raise
        await self.barrier()
        self.stats.seconds = time.monotonic() - t0
        return self.stats


async def fuzz_inproc(
    frames: int, seed: int, duration: float | None = None, worlds: int = 1
) -> Stats:
    """``worlds`` independent servers fuzzed concurrently (seeds seed, seed+1, ...).

    Most of a frame's time is spent waiting (the store's writer thread, the writer task), so
    several independent worlds in one event loop multiply throughput without sharing state.
    """
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="moo-fuzz-") as tmp:
        fuzzers = []
        for i in range(worlds):
            (Path(tmp) / str(i)).mkdir()
            fuzzers.append(InProcessFuzzer(seed + i, Path(tmp) / str(i)))
        try:
            for f in fuzzers:
                await f.start()
            share = -(-frames // worlds)
            parts = await asyncio.gather(*(f.run(share, duration) for f in fuzzers))
        finally:
            for f in fuzzers:
                with contextlib.suppress(Exception):
                    await f.stop()
    total = Stats()
    for part in parts:
        total.frames += part.frames
        total.refused += part.refused
        total.accepted += part.accepted
        total.by_label.update(part.by_label)
        total.by_code.update(part.by_code)
        total.violations.extend(part.violations)
        total.harness_errors.extend(part.harness_errors)
    total.seconds = time.monotonic() - t0
    return total
