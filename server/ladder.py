"""Hosted bots and the permanent ladder: the requests, the bot workers' jobs, the scheduler.

A player submits a program (``ladder_upload`` chunks, then ``ladder_submit``); it is stored
with its versions, and a bot worker (clients/hosted/worker.py, a client of its own kind that
opens with ``worker_hello``) claims the job of checking it. An accepted bot is paired on its
variant family's ladder: each pairing is two ordinary rated matches with the same two server
secrets, seats swapped, started here through the lobby as a tournament's games are, and one
``play`` job a worker claims to play both sides (one connection per bot, each program in its
own sandbox). Ratings are a maximum-likelihood Bradley-Terry fit over all the ladder's games
(``moo.bradley_terry``), refitted whenever a pairing ends. docs/protocol.md ("Ladder") is the
contract; docs/ladder.md says how pairing and ratings work.

Work goes through the store (``ladder_jobs``): a job is claimed with a lease (on PostgreSQL
``FOR UPDATE SKIP LOCKED``), so a worker that dies costs at most its claims: a check or an eval
is queued again when its lease runs out, and a play job's games end by the match rules (both
seats away, a draw by disconnect after the grace) and are void on the ladder, so the two bots
are simply paired again.

Runs on a single node (the ladder of a cluster would run on the lobby leader as the
tournaments do; not built yet: a cluster node answers ``not_available``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import json
import logging
import math
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from moo.bradley_terry import fit as bradley_terry
from moo.errors import (
    BadCredentials,
    InvalidName,
    MooError,
    NameTaken,
    NotAvailable,
    NotYourBot,
    SchemaError,
    UnknownBot,
    UnknownJob,
    UnknownUpload,
)
from moo.match import Event, Match
from moo.protocol import MAX_PROGRAM_BYTES
from moo.rules import DEFAULT_RULES
from moo.variants import rules_from_dict, rules_spec
from server.accounts import hash_token, new_token
from server.arena import Arena
from server.background import spawn
from server.lobby import Lobby
from server.matches import Follower, TournamentGame
from server.storage import Store

__all__ = ["LadderService", "Rating", "valid_bot_name"]

log = logging.getLogger("moo.ladder")

#: uploads open at once per connection, and how long one lives without a chunk
MAX_UPLOADS = 2
UPLOAD_TTL_S = 600.0
#: bots not withdrawn per owner
MAX_BOTS_PER_OWNER = 10
#: seconds between two looks at the ladder (expired claims, new pairings)
TICK_S = 0.5
#: how many entries the lists of ``ladder_mine`` and ``ladder_page`` keep
MAX_ERRORS = 50
MAX_RECENT = 50
MAX_HISTORY = 200
#: wrong worker keys on one connection before it is closed
MAX_KEY_STRIKES = 5
#: the error log's line for a seat whose worker went away mid-game
WORKER_GONE = "disconnect: its worker stopped during the game"
#: a game's ends that are the seat's own doing (counted as forfeits when lost)
FORFEIT_REASONS = frozenset(("disconnect", "timeout"))

_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def valid_bot_name(name: str) -> bool:
    """A hosted bot's name is a player name (docs/protocol.md, "Session")."""
    return 1 <= len(name) <= 24 and set(name) <= _NAME_CHARS


class Rating(Protocol):
    """One bot's rating from the fit (``moo.bradley_terry.BTRating``)."""

    @property
    def rating(self) -> float: ...

    @property
    def low(self) -> float: ...

    @property
    def high(self) -> float: ...


#: the ladder's rating fit: games as (first, second, score of the first) -> ratings by name
Fit = Callable[[Sequence[tuple[str, str, float]]], Mapping[str, Rating]]


@dataclass
class LadderBot:
    bot_id: str
    name: str
    owner: str
    family: str
    rules: dict[str, Any]
    status: str
    reason: str
    version: int | None
    checking: int | None
    created_ms: int
    exact: dict[str, Any]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LadderBot:
        return cls(str(row[0]), str(row[1]), str(row[2]), str(row[3]), json.loads(row[4]),
                   str(row[5]), str(row[6]), row[7], row[8], int(row[9]), json.loads(row[10]))

    def row(self) -> tuple[Any, ...]:
        """The whole row, in :data:`server.sql.LADDER_BOT_COLUMNS` order."""
        return (self.bot_id, self.name, self.owner, self.family, _dumps(self.rules),
                self.status, self.reason, self.version, self.checking, self.created_ms,
                _dumps(self.exact))

    def update_row(self) -> tuple[Any, ...]:
        """The changing part, as :data:`server.sql.LADDER_UPDATE_BOT` takes it."""
        return (self.status, self.reason, self.version, self.checking, _dumps(self.exact),
                self.bot_id)

    def public(self) -> dict[str, Any]:
        return {"bot_id": self.bot_id, "name": self.name, "owner": self.owner,
                "rules": dict(self.rules), "status": self.status, "version": self.version,
                "checking": self.checking, "created_at": self.created_ms,
                "exact": dict(self.exact)}


@dataclass
class LadderGame:
    match_id: str
    family: str
    pairing: str
    bots: tuple[str, str]
    versions: tuple[int, int]
    created_ms: int
    ended_ms: int | None = None
    winner: int | None = None
    reason: str | None = None
    failures: list[str] = field(default_factory=lambda: ["", ""])
    stderr: list[str] = field(default_factory=lambda: ["", ""])
    #: its play job was lost with its worker before it ended: it counts for nobody
    void: bool = False

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LadderGame:
        return cls(str(row[0]), str(row[1]), str(row[2]), (str(row[3]), str(row[4])),
                   (int(row[5]), int(row[6])), int(row[7]),
                   None if row[8] is None else int(row[8]),
                   None if row[9] is None else int(row[9]), row[10],
                   [str(row[11]), str(row[12])], [str(row[13]), str(row[14])], bool(row[15]))

    @property
    def finished(self) -> bool:
        return self.ended_ms is not None

    def seat_of(self, bot_id: str) -> int:
        return self.bots.index(bot_id)

    def result_for(self, seat: int) -> str:
        if self.winner is None:
            return "draw"
        return "win" if self.winner == seat else "loss"

    def failure_of(self, seat: int) -> str:
        """Why ``seat`` lost by its own doing ("" if it did not)."""
        if self.result_for(seat) != "loss":
            return ""
        if self.failures[seat]:
            return self.failures[seat]
        if self.reason in FORFEIT_REASONS:
            return WORKER_GONE if self.reason == "disconnect" else f"{self.reason}: no answer"
        return ""


@dataclass
class Upload:
    data: bytearray
    touched: float


@dataclass(eq=False)
class Worker:
    worker_id: str
    slots: int
    name: str
    #: job id -> kind, the claims this connection holds
    jobs: dict[str, str] = field(default_factory=dict)


@dataclass
class Standing:
    rating: float | None = None
    low: float | None = None
    high: float | None = None
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    forfeits: int = 0

    def fields(self) -> dict[str, Any]:
        return {"rating": _round(self.rating), "low": _round(self.low),
                "high": _round(self.high), "games": self.games, "wins": self.wins,
                "draws": self.draws, "losses": self.losses, "forfeits": self.forfeits}


class LadderService:
    """The hosted bots and ladders of one server."""

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
        self.workers: dict[Follower, Worker] = {}
        self.key_strikes: dict[Follower, int] = {}
        #: play jobs queued or claimed (each takes one worker slot) -> their matches
        self.playing: dict[str, list[str]] = {}
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
        lost = [g.match_id for g in self.games.values()
                if not g.finished and not g.void and g.match_id not in open_games]
        if lost:
            for match_id in await self.store.ladder_void(lost):
                self.games[match_id].void = True
        for family in {b.family for b in self.bots.values()}:
            self._refit(family)
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
            self._nudge()

    # -- player requests -----------------------------------------------------------------------
    def check_active(self) -> None:
        if not self.active:
            raise NotAvailable("this server runs no ladder: hosted bots run on a single-node "
                               "server (not yet on a cluster)")

    async def request(self, conn: Follower, msg: dict[str, Any]) -> None:
        self.check_active()
        kind = msg["type"]
        ref = msg.get("id")
        reply: dict[str, Any]
        if kind == "ladder_upload":
            reply = self.upload(conn, msg)
        elif kind == "ladder_submit":
            reply = await self.submit(conn, msg)
        elif kind == "ladder_mine":
            reply = {"type": "ladder_mine", "bots": await self.mine(_player(conn))}
        elif kind in ("ladder_pause", "ladder_resume", "ladder_withdraw"):
            reply = await self.set_status(conn, kind, msg["bot_id"])
        elif kind == "ladder_show":
            reply = self.show(msg)
        elif kind == "ladder_page":
            reply = await self.page(msg["bot_id"])
        else:  # pragma: no cover - the session sends only the types above
            raise NotAvailable(f"{kind!r} is not a ladder request")
        conn.send(_with_ref(reply, ref))

    def upload(self, conn: Follower, msg: dict[str, Any]) -> dict[str, Any]:
        try:
            chunk = base64.b64decode(msg["data"], validate=True)
        except (binascii.Error, ValueError):
            raise SchemaError("field 'data' is not base64 (standard alphabet, '=' padding)"
                              ) from None
        if not chunk:
            raise SchemaError("field 'data' is empty")
        offset = msg["offset"]
        mine = self.uploads.get(conn, {})
        uid = msg.get("upload")
        if uid is None:
            if offset != 0:
                raise SchemaError("the first chunk of an upload has offset 0 (and no 'upload')")
            if len(mine) >= MAX_UPLOADS:
                raise NotAvailable(f"you have {MAX_UPLOADS} uploads open already; submit or "
                                   "reconnect to drop them")
            uid = "u" + secrets.token_hex(6)
            up = Upload(bytearray(), time.monotonic())
        else:
            found = mine.get(uid)
            if found is None:
                raise UnknownUpload(f"no upload {uid!r} open on this connection")
            up = found
        size = len(up.data)
        if offset < size and up.data[offset:offset + len(chunk)] == chunk:
            up.touched = time.monotonic()  # a chunk sent again: already there
            return {"type": "ladder_uploaded", "upload": uid, "size": size}
        if offset != size:
            raise SchemaError(f"expected offset {size}, got {offset}")
        if size + len(chunk) > MAX_PROGRAM_BYTES:
            raise SchemaError(f"the program would have more than {MAX_PROGRAM_BYTES} bytes "
                              "(the limit)")
        up.data += chunk
        up.touched = time.monotonic()
        self.uploads.setdefault(conn, {})[uid] = up
        return {"type": "ladder_uploaded", "upload": uid, "size": len(up.data)}

    async def submit(self, conn: Follower, msg: dict[str, Any]) -> dict[str, Any]:
        owner = _player(conn)
        uid = msg["upload"]
        up = self.uploads.get(conn, {}).get(uid)
        if up is None:
            raise UnknownUpload(f"no upload {uid!r} open on this connection")
        program = bytes(up.data)
        if not program:
            raise SchemaError("the program is empty")
        digest = hashlib.sha256(program).hexdigest()
        if msg["sha256"].lower() != digest:
            raise SchemaError(f"the program's SHA-256 is {digest}, not {msg['sha256']}; "
                              "upload it again")
        name, bot_id = msg.get("name"), msg.get("bot_id")
        if (name is None) == (bot_id is None):
            raise SchemaError("'ladder_submit' needs exactly one of 'name' (a new bot) and "
                              "'bot_id' (a new version)")
        now = self.clock()
        encoded = base64.b64encode(program).decode("ascii")
        if name is not None:
            bot = self._new_bot(owner, name.strip(), msg, now)
            job = self._job("check", {"bot_id": bot.bot_id, "version": 1}, now)
            await self.store.ladder_new_bot(
                bot.row(), hash_token(new_token()),
                (bot.bot_id, 1, digest, len(program), encoded, now), job)
            self.bots[bot.bot_id] = bot
        else:
            if "rules" in msg:
                raise SchemaError("'rules' goes with 'name' (a new bot); a new version plays "
                                  "its bot's rules")
            bot = self._own(owner, str(bot_id))
            if bot.status == "withdrawn":
                raise NotAvailable(f"bot {bot.bot_id} is withdrawn")
            if bot.checking is not None:
                raise NotAvailable(f"version {bot.checking} is being checked; wait for its "
                                   "verdict")
            versions = await self.store.ladder_versions(bot.bot_id)
            number = (versions[0][0] if versions else 0) + 1
            job = self._job("check", {"bot_id": bot.bot_id, "version": number}, now)
            before = bot.checking, bot.status
            bot.checking = number
            if bot.version is None:
                bot.status = "checking"
            try:
                await self.store.ladder_new_version(
                    bot.update_row(), (bot.bot_id, number, digest, len(program), encoded, now),
                    job)
            except MooError:
                bot.checking, bot.status = before
                raise
        del self.uploads[conn][uid]
        self._nudge()
        return {"type": "ladder_submitted", "bot": bot.public()}

    def _new_bot(self, owner: str, name: str, msg: dict[str, Any], now: int) -> LadderBot:
        if not valid_bot_name(name):
            raise InvalidName("a bot's name is a player name: 1-24 letters, digits, '_', '-' "
                              "or '.'")
        if name.casefold() in self.reserved:
            raise NameTaken(f"the name {name!r} is reserved for a hosted bot")
        rules = self.arena.rules_of(msg)
        mine = [b for b in self.bots.values() if b.owner.casefold() == owner.casefold()
                and b.status != "withdrawn"]
        if len(mine) >= MAX_BOTS_PER_OWNER:
            raise NotAvailable(f"you have {MAX_BOTS_PER_OWNER} bots on the ladder already; "
                               "withdraw one first")
        while True:
            bot_id = "b" + secrets.token_hex(6)
            if bot_id not in self.bots:
                break
        return LadderBot(bot_id, name, owner, rules_spec(rules), rules.to_dict(), "checking",
                         "", None, 1, now, _exact_status("not_computed"))

    def _bot(self, bot_id: str) -> LadderBot:
        bot = self.bots.get(bot_id)
        if bot is None:
            raise UnknownBot(f"no bot {bot_id!r}")
        return bot

    def _own(self, owner: str, bot_id: str) -> LadderBot:
        bot = self._bot(bot_id)
        if bot.owner.casefold() != owner.casefold():
            raise NotYourBot(f"bot {bot_id} ({bot.name}) belongs to another player")
        return bot

    async def set_status(self, conn: Follower, kind: str, bot_id: str) -> dict[str, Any]:
        bot = self._own(_player(conn), bot_id)
        before = bot.status
        if kind == "ladder_withdraw":
            bot.status = "withdrawn"
        elif bot.status == "withdrawn":
            raise NotAvailable(f"bot {bot_id} is withdrawn")
        elif kind == "ladder_pause":
            if bot.status not in ("active", "paused"):
                raise NotAvailable(f"bot {bot_id} is {bot.status}: only an active bot can be "
                                   "paused")
            bot.status = "paused"
        else:
            if bot.status not in ("active", "paused"):
                raise NotAvailable(f"bot {bot_id} is {bot.status}: only a paused bot can be "
                                   "resumed")
            bot.status = "active"
        if bot.status != before:
            try:
                await self.store.ladder_update_bot(bot.update_row())
            except MooError:
                bot.status = before
                raise
        return {"type": "ladder_status", "bot": bot.public()}

    async def mine(self, owner: str) -> list[dict[str, Any]]:
        out = []
        mine = [b for b in self.bots.values() if b.owner.casefold() == owner.casefold()]
        for bot in sorted(mine, key=lambda b: -b.created_ms):
            versions = await self.store.ladder_versions(bot.bot_id)
            games = self._games_of(bot.bot_id)
            errors: list[dict[str, Any]] = []
            stderr = ""
            for g in games:  # newest first
                seat = g.seat_of(bot.bot_id)
                if not stderr and g.stderr[seat]:
                    stderr = g.stderr[seat]
                failure = g.failure_of(seat) if g.finished and not g.void else ""
                if failure and len(errors) < MAX_ERRORS:
                    errors.append({"match_id": g.match_id, "version": g.versions[seat],
                                   "ended_at": g.ended_ms, "failure": failure})
            out.append({**bot.public(), "versions": [
                {"version": v[0], "sha256": v[1], "size": v[2], "submitted_at": v[3],
                 "check": v[4], "reason": v[5]} for v in versions],
                "errors": errors, "stderr": stderr})
        return out

    def show(self, msg: dict[str, Any]) -> dict[str, Any]:
        rules = self.arena.rules_of(msg)
        family = rules_spec(rules)
        table = self.standings.get(family, {})
        rows = []
        for bot in self.bots.values():
            if bot.family != family or bot.status not in ("active", "paused"):
                continue
            st = table.get(bot.bot_id, Standing())
            rows.append({"bot": bot.name, "bot_id": bot.bot_id, "owner": bot.owner,
                         "status": bot.status, **st.fields(), "exact": dict(bot.exact)})
        rows.sort(key=lambda r: (r["rating"] is None, -(r["rating"] or 0),
                                 r["bot"].casefold()))
        return {"type": "ladder_standings", "rules": rules.to_dict(), "standings": rows}

    async def page(self, bot_id: str) -> dict[str, Any]:
        bot = self._bot(bot_id)
        st = self.standings.get(bot.family, {}).get(bot_id, Standing())
        games = self._games_of(bot_id)
        opponents: dict[str, dict[str, Any]] = {}
        recent: list[dict[str, Any]] = []
        for g in games:
            if not g.finished or g.void:
                continue
            seat = g.seat_of(bot_id)
            other = self.bots.get(g.bots[1 - seat])
            result = g.result_for(seat)
            row = opponents.setdefault(g.bots[1 - seat], {
                "bot": other.name if other else g.bots[1 - seat], "bot_id": g.bots[1 - seat],
                "games": 0, "wins": 0, "draws": 0, "losses": 0})
            row["games"] += 1
            row[{"win": "wins", "draw": "draws", "loss": "losses"}[result]] += 1
            if len(recent) < MAX_RECENT:
                recent.append({"match_id": g.match_id,
                               "opponent": other.name if other else g.bots[1 - seat],
                               "opponent_id": g.bots[1 - seat], "seat": seat, "result": result,
                               "reason": g.reason, "version": g.versions[seat],
                               "ended_at": g.ended_ms})
        history = [{"at": r[0], "games": r[1], "rating": _round(r[2]), "low": _round(r[3]),
                    "high": _round(r[4])}
                   for r in await self.store.ladder_history(bot_id, MAX_HISTORY)]
        versions = [{"version": v[0], "sha256": v[1], "size": v[2], "submitted_at": v[3],
                     "check": v[4]} for v in await self.store.ladder_versions(bot_id)]
        return {"type": "ladder_page", "bot": bot.public(), **st.fields(),
                "history": history,
                "opponents": sorted(opponents.values(), key=lambda r: (-r["games"], r["bot"])),
                "recent": recent, "versions": versions}

    def _games_of(self, bot_id: str) -> list[LadderGame]:
        """The bot's games, newest first."""
        games = [g for g in self.games.values() if bot_id in g.bots]
        games.sort(key=lambda g: (g.ended_ms or g.created_ms, g.created_ms), reverse=True)
        return games

    # -- workers -------------------------------------------------------------------------------
    def worker_hello(self, conn: Follower, msg: dict[str, Any]) -> bool:
        """A worker's first message; True once it is let in (refusals raise)."""
        self.check_active()
        if not self.worker_key:
            raise NotAvailable("this server takes no bot workers (no ladder_worker_key)")
        if not secrets.compare_digest(msg["key"].encode(), self.worker_key.encode()):
            strikes = self.key_strikes[conn] = self.key_strikes.get(conn, 0) + 1
            if strikes >= MAX_KEY_STRIKES:
                conn.close(1008, "too many wrong worker keys")
            raise BadCredentials("wrong worker key")
        worker = Worker("w" + secrets.token_hex(6), msg["slots"],
                        str(msg.get("name") or ""))
        self.workers[conn] = worker
        self.key_strikes.pop(conn, None)
        log.info("ladder: worker %s (%s) joined with %d slots", worker.worker_id,
                 worker.name or "?", worker.slots)
        conn.send(_with_ref({"type": "worker_welcome", "worker_id": worker.worker_id,
                             "lease_ms": self.lease_ms}, msg.get("id")))
        return True

    async def worker_request(self, conn: Follower, msg: dict[str, Any]) -> None:
        worker = self.workers.get(conn)
        if worker is None:
            raise NotAvailable("only a bot worker's connection (worker_hello) sends worker_* "
                               "messages")
        kind = msg["type"]
        ref = msg.get("id")
        reply: dict[str, Any]
        if kind == "worker_claim":
            reply = {"type": "worker_job", "job": await self._claim(worker)}
        elif kind == "worker_renew":
            job_id = msg["job_id"]
            if job_id not in worker.jobs or not await self.store.ladder_renew(
                    job_id, worker.worker_id, self.clock() + self.lease_ms):
                worker.jobs.pop(job_id, None)
                raise UnknownJob(f"job {job_id!r} is not yours (any more)")
            reply = {"type": "worker_renewed", "job_id": job_id, "lease_ms": self.lease_ms}
        elif kind == "worker_game":
            reply = await self._game_report(worker, msg)
        elif kind == "worker_done":
            reply = await self._done(worker, msg)
        else:
            raise NotAvailable(f"{kind!r} is not a worker message")
        conn.send(_with_ref(reply, ref))

    async def _claim(self, worker: Worker) -> dict[str, Any] | None:
        row = await self.store.ladder_claim(worker.worker_id, self.clock() + self.lease_ms)
        if row is None:
            return None
        job_id, kind, payload = str(row[0]), str(row[1]), json.loads(row[2])
        worker.jobs[job_id] = kind
        try:
            return await self._job_message(job_id, kind, payload)
        except Exception:
            log.exception("ladder: job %s cannot be handed out; dropped", job_id)
            worker.jobs.pop(job_id, None)
            await self.store.ladder_job_done(job_id, worker.worker_id)
            self.playing.pop(job_id, None)
            return None

    async def _job_message(self, job_id: str, kind: str,
                           payload: dict[str, Any]) -> dict[str, Any]:
        if kind == "play":
            await self._create_games(payload)
            bots = []
            for bot_id, version in zip(payload["bots"], payload["versions"], strict=True):
                bot = self.bots[bot_id]
                token = new_token()
                await self.store.add_token(bot.name, hash_token(token), 20)
                bots.append({"bot_id": bot_id, "version": version, "player": bot.name,
                             "token": token,
                             "program": await self.store.ladder_program(bot_id, version)})
            return {"job_id": job_id, "kind": kind, "rules": payload["rules"], "bots": bots,
                    "matches": payload["matches"]}
        bot = self.bots[payload["bot_id"]]
        return {"job_id": job_id, "kind": kind, "rules": dict(bot.rules),
                "bot_id": bot.bot_id, "version": payload["version"],
                "program": await self.store.ladder_program(bot.bot_id, payload["version"])}

    async def _game_report(self, worker: Worker, msg: dict[str, Any]) -> dict[str, Any]:
        job_id, match_id = msg["job_id"], msg["match_id"]
        if worker.jobs.get(job_id) != "play":
            raise UnknownJob(f"job {job_id!r} is not a play job of yours (any more)")
        game = self.games.get(match_id)
        seat = msg["seat"]
        if game is None or match_id not in self.playing.get(job_id, ()):
            raise SchemaError(f"match {match_id!r} is not a game of job {job_id}")
        failure, stderr = msg.get("failure") or "", msg.get("stderr") or ""
        await self.store.ladder_game_failure(match_id, seat, failure, stderr)
        game.failures[seat], game.stderr[seat] = failure, stderr
        if game.finished and failure:
            # the worker reports a seat after its game ended on the server: the standings
            # counted that loss already, but not yet as a forfeit
            self._refit(game.family)
        return {"type": "worker_noted", "job_id": job_id, "match_id": match_id}

    async def _done(self, worker: Worker, msg: dict[str, Any]) -> dict[str, Any]:
        job_id = msg["job_id"]
        kind = worker.jobs.get(job_id)
        if kind is None:
            raise UnknownJob(f"job {job_id!r} is not yours (any more)")
        if kind == "check" and not isinstance(msg.get("accepted"), bool):
            raise SchemaError("a check's 'worker_done' needs field 'accepted'")
        exact = _exact_values(msg.get("exact")) if kind == "eval" else None
        row = await self.store.ladder_job_done(job_id, worker.worker_id)
        worker.jobs.pop(job_id, None)
        if row is None:
            raise UnknownJob(f"job {job_id!r} is not yours (any more)")
        payload = json.loads(row[2])
        if kind == "check":
            await self._verdict(payload["bot_id"], payload["version"], msg["accepted"],
                                str(msg.get("reason") or ""))
        elif kind == "eval":
            await self._evaluated(payload["bot_id"], payload["version"], exact,
                                  str(msg.get("reason") or ""))
        else:
            self.playing.pop(job_id, None)
        return {"type": "worker_noted", "job_id": job_id}

    async def _verdict(self, bot_id: str, version: int, accepted: bool, reason: str) -> None:
        bot = self.bots[bot_id]
        if bot.checking == version:
            bot.checking = None
        job = None
        if accepted:
            reason = ""
            bot.version = version
            bot.exact = _exact_status("pending")
            if bot.status in ("checking", "refused"):
                bot.status = "active"
            job = self._job("eval", {"bot_id": bot_id, "version": version}, self.clock())
        elif bot.version is None and bot.status != "withdrawn":
            bot.status = "refused"
        bot.reason = reason
        await self.store.ladder_update_bot(
            bot.update_row(), ("accepted" if accepted else "refused", reason, bot_id, version),
            job)
        log.info("ladder: bot %s version %d %s%s", bot_id, version,
                 "accepted" if accepted else "refused", f": {reason}" if reason else "")
        told = {"type": "ladder_checked", "bot_id": bot_id, "version": version,
                "accepted": accepted, "reason": reason, "bot": bot.public()}
        conn = self.lobby.online.get(bot.owner)
        if conn is not None and not conn.closing:
            conn.send(told)
        if job is not None:
            self._nudge()

    async def _evaluated(self, bot_id: str, version: int, exact: dict[str, str] | None,
                         reason: str) -> None:
        bot = self.bots[bot_id]
        if bot.version != version:
            return  # a newer version plays now; its own eval job says
        if exact is not None:
            bot.exact = {"status": "computed", **exact, "reason": ""}
        else:
            # no exact score: the variant has no trees to score against, or the program
            # has no single tree (it draws random numbers, adapts, fails)
            classic = bot.family == rules_spec(DEFAULT_RULES)
            bot.exact = _exact_status("not_deterministic" if classic else "not_computed",
                                      reason)
        await self.store.ladder_update_bot(bot.update_row())

    def _job(self, kind: str, payload: dict[str, Any], now: int) -> tuple[Any, ...]:
        return ("j" + secrets.token_hex(6), kind, _dumps(payload), now)

    def _nudge(self) -> None:
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
                if bot.status == "active" and bot.version is not None and bot.bot_id not in busy:
                    by_family.setdefault(bot.family, []).append(bot)
            for family, free in sorted(by_family.items()):
                table = self.standings.get(family, {})
                while len(free) >= 2 and self.capacity() >= 1:
                    first = min(free, key=lambda b: _certainty(table.get(b.bot_id)))
                    rest = [b for b in free if b is not first]
                    met = self._met(first.bot_id)
                    mine = _center(table.get(first.bot_id))
                    second = min(rest, key=lambda b: (
                        met.get(b.bot_id, 0), abs(_center(table.get(b.bot_id)) - mine),
                        b.created_ms))
                    free = [b for b in rest if b is not second]
                    await self._start_pairing(family, first, second)
        finally:
            self._pairing = False

    def _met(self, bot_id: str) -> dict[str, int]:
        met: dict[str, int] = {}
        for g in self.games.values():
            if bot_id in g.bots:
                other = g.bots[1 - g.seat_of(bot_id)]
                met[other] = met.get(other, 0) + 1
        return met

    async def _start_pairing(self, family: str, a: LadderBot, b: LadderBot) -> None:
        """The two games and their play job, stored. The matches themselves start when a
        worker claims the job (:meth:`_create_games`), so that no seat waits for a worker
        busy elsewhere (its grace would run out)."""
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
        job = self._job("play", {"bots": [a.bot_id, b.bot_id], "versions": [a.version,
                                 b.version], "matches": ids, "rules": dict(a.rules),
                                 "secrets": list(pair_secrets)}, now)
        await self.store.ladder_add_pairing(
            [(g.match_id, family, pairing, g.bots[0], g.bots[1], g.versions[0], g.versions[1],
              now) for g in games], job)
        for g in games:
            self.games[g.match_id] = g
        self.playing[job[0]] = ids
        log.info("ladder %s: %s vs %s (%s)", family, a.name, b.name, pairing)
        self._nudge()

    async def _create_games(self, payload: dict[str, Any]) -> None:
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
            self._refit(game.family)

    async def _pairing_done(self, family: str, pair: list[LadderGame]) -> None:
        table = self._refit(family)
        at = self.clock()
        points = []
        for bot_id in pair[0].bots:
            st = table.get(bot_id)
            if st is not None and st.rating is not None:
                points.append((bot_id, st.games, at, st.rating, _finite(st.low),
                               _finite(st.high)))
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

    def _refit(self, family: str) -> dict[str, Standing]:
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


def _certainty(st: Standing | None) -> tuple[int, float]:
    """Sorts the least certain first: fewest games, then the widest interval."""
    if st is None:
        return (0, 0.0)
    width = (st.high - st.low) if st.high is not None and st.low is not None else math.inf
    return (st.games, -(width if math.isfinite(width) else 1e9))


def _center(st: Standing | None) -> float:
    return 1500.0 if st is None or st.rating is None else st.rating


def _finite(value: float | None, instead: float | None = None) -> float | None:
    if value is None or not math.isfinite(value):
        return instead
    return value


def _round(value: float | None) -> int | None:
    value = _finite(value)
    return None if value is None else round(value)


def _exact_values(exact: Any) -> dict[str, str] | None:
    """A worker's exact scores, checked: three fractions as ``p/q`` text (None: none)."""
    if exact is None:
        return None
    values = {k: exact.get(k) for k in ("vs_minimum", "vs_strongest", "average")}
    for value in values.values():
        if not isinstance(value, str) or len(value) > 64:
            raise SchemaError("field 'exact' needs vs_minimum, vs_strongest and average as "
                              "'p/q' text")
        try:
            Fraction(value)
        except (ValueError, ZeroDivisionError):
            raise SchemaError(f"field 'exact': {value!r} is not a fraction 'p/q'") from None
    return {k: str(v) for k, v in values.items()}


def _exact_status(status: str, reason: str = "") -> dict[str, Any]:
    return {"status": status, "vs_minimum": None, "vs_strongest": None, "average": None,
            "reason": reason}


def _player(conn: Follower) -> str:
    assert conn.player is not None
    return conn.player


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _with_ref(msg: dict[str, Any], ref: Any) -> dict[str, Any]:
    if ref is not None:
        msg["ref"] = ref
    return msg
