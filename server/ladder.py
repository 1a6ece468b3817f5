"""Hosted bots and the permanent ladder: the requests, the bot workers' jobs, the scheduler.

A player submits a program (``ladder_upload`` chunks, then ``ladder_submit``); it is stored
with its versions, and a bot worker (clients/hosted/worker.py, a client of its own kind that
opens with ``worker_hello``) claims the job of checking it. An accepted bot is paired on its
variant family's ladder: each pairing is two ordinary rated matches with the same two server
secrets, seats swapped, started here through the lobby as a tournament's games are, and one
``play`` job a worker claims to play both sides (one connection per bot, each program in its
own sandbox). A connected bot (a client with ``bot: true`` that sent ``ladder_join``) is paired
the same way and plays its own seats (server/ladder_connected.py). Ratings are a
maximum-likelihood Bradley-Terry fit over all the ladder's games (``moo.bradley_terry``),
refitted whenever a pairing ends. docs/protocol.md ("Ladder") is the
contract; docs/ladder.md says how pairing and ratings work.

The service is made of five modules: server/ladder_records.py (the bots, games and standings
as records), server/ladder_schedule.py (state, life cycle, pairing, results, ratings),
server/ladder_workers.py (the workers' messages and jobs), server/ladder_connected.py (the
connected bots) and this one (the players' requests).

Work goes through the store (``ladder_jobs``): a job is claimed with a lease (on PostgreSQL
``FOR UPDATE SKIP LOCKED``), so a worker that dies costs at most its claims: a check or an eval
is queued again when its lease runs out, and a play job's games end by the match rules (both
seats away, a draw by disconnect after the grace) and are void on the ladder, so the two bots
are simply paired again.

On a cluster the lobby leader runs it, as the tournaments: every node sends the requests
and its workers' messages there (docs/ladder.md, "On a cluster").
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
import time
from typing import Any

from moo.errors import (
    InvalidName,
    MooError,
    NameTaken,
    NotAvailable,
    NotYourBot,
    SchemaError,
    UnknownBot,
    UnknownUpload,
)
from moo.protocol import MAX_PROGRAM_BYTES
from moo.variants import rules_spec
from server.accounts import hash_token, new_token
from server.background import spawn
from server.connection import error_message
from server.ladder_connected import LadderConnected
from server.ladder_records import (
    MAX_BOTS_PER_OWNER,
    MAX_ERRORS,
    MAX_HISTORY,
    MAX_RECENT,
    MAX_UPLOADS,
    LadderBot,
    Rating,
    Standing,
    Upload,
    exact_status,
    player_of,
    round_rating,
    valid_bot_name,
    with_ref,
)
from server.matches import Follower
from server.requests import derived, fingerprint, reused

__all__ = ["LadderService", "Rating", "valid_bot_name"]


class LadderService(LadderConnected):
    """The hosted bots and ladders of one server: the players' requests on top of the
    scheduler (server/ladder_schedule.py), the workers (server/ladder_workers.py) and the
    connected bots (server/ladder_connected.py)."""

    # -- player requests -----------------------------------------------------------------------
    async def request(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A client's ``ladder_*`` request, from its session: done here, or on a cluster at
        the lobby leader (:meth:`handle`)."""
        if self.route is not None:
            # ladder_join and ladder_leave too: the leader knows the sender (a stand-in of
            # this connection, its player) and, through the lobby's presence, whether its
            # connection is open anywhere in the cluster (server/ladder_connected.py)
            self.route(conn, msg)
            return
        await self.player_request(conn, msg)

    def handle(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A cluster's leader: a ``ladder_*`` request or a worker's message of a client of
        any node (``conn`` a stand-in for another node's), answered when done."""
        spawn(self._handle(conn, msg))

    async def _handle(self, conn: Follower, msg: dict[str, Any]) -> None:
        try:
            if msg["type"].startswith("worker_"):
                await self.worker_message(conn, msg)
            else:
                await self.player_request(conn, msg)
        except MooError as exc:
            if not conn.closing:
                conn.send(error_message(exc, msg.get("id")))

    async def player_request(self, conn: Follower, msg: dict[str, Any]) -> None:
        self.check_active()
        kind = msg["type"]
        ref = msg.get("id")
        reply: dict[str, Any]
        if kind == "ladder_upload":
            reply = self.upload(conn, msg)
        elif kind == "ladder_submit":
            reply = await self.submit(conn, msg)
        elif kind == "ladder_mine":
            reply = {"type": "ladder_mine", "bots": await self.mine(player_of(conn))}
        elif kind in ("ladder_pause", "ladder_resume", "ladder_withdraw"):
            reply = await self.set_status(conn, kind, msg["bot_id"])
        elif kind == "ladder_show":
            reply = self.show(msg)
        elif kind == "ladder_page":
            reply = await self.page(msg["bot_id"])
        elif kind in ("ladder_join", "ladder_leave"):
            reply = await self.connected_request(conn, msg)
        else:  # pragma: no cover - the session sends only the types above
            raise NotAvailable(f"{kind!r} is not a ladder request")
        conn.send(with_ref(reply, ref))

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
        """A new bot or version. With a ``request_id``, its check job's id is derived from the
        owner and the request id, and the job keeps the request's content and its answer, in
        the commit that stores the bot or version: sent again, the request is answered with
        that first answer (from the store, on any node, after a restart), never a second
        bot or version (docs/protocol.md, "Retrying safely")."""
        owner = player_of(conn)
        uid = msg["upload"]
        rid = msg.get("request_id")
        job_id = None if rid is None else "j" + derived("ladder_submit", owner, rid)[:12]
        if job_id is None:
            return await self._submit(conn, owner, msg, None)
        if job_id in self.submitting:
            raise NotAvailable("this request is being answered already; try again")
        self.submitting.add(job_id)
        try:
            first = await self._answered(job_id, msg)
            if first is not None:
                self.uploads.get(conn, {}).pop(uid, None)
                return first
            try:
                return await self._submit(conn, owner, msg, job_id)
            except MooError:
                # its write may have landed although it was reported failed: answered so
                first = await self._answered(job_id, msg)
                if first is None:
                    raise
                return first
        finally:
            self.submitting.discard(job_id)

    async def _answered(self, job_id: str, msg: dict[str, Any]) -> dict[str, Any] | None:
        """The first answer to a ``ladder_submit`` sent again (None: it was not done);
        ``request_reused`` for the same request id with other content."""
        row = await self.store.ladder_job(job_id)
        if row is None:
            return None
        payload = json.loads(row[1])
        if payload.get("request") != _submit_body(msg):
            raise reused(msg["request_id"])
        return dict(payload["answer"])

    async def _submit(self, conn: Follower, owner: str, msg: dict[str, Any],
                      job_id: str | None) -> dict[str, Any]:
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
            answer = {"type": "ladder_submitted", "bot": bot.public()}
            job = self.new_job("check", _check_payload(bot.bot_id, 1, msg, answer), now,
                               job_id)
            await self.store.ladder_new_bot(
                bot.row(), hash_token(new_token()),
                (bot.bot_id, 1, digest, len(program), encoded, now), job)
            self.bots[bot.bot_id] = bot
        else:
            if "rules" in msg:
                raise SchemaError("'rules' goes with 'name' (a new bot); a new version plays "
                                  "its bot's rules")
            bot = self._own(owner, str(bot_id))
            self.refuse_program_request(bot)
            if bot.status == "withdrawn":
                raise NotAvailable(f"bot {bot.bot_id} is withdrawn")
            if bot.checking is not None:
                raise NotAvailable(f"version {bot.checking} is being checked; wait for its "
                                   "verdict")
            versions = await self.store.ladder_versions(bot.bot_id)
            number = (versions[0][0] if versions else 0) + 1
            before = bot.checking, bot.status
            bot.checking = number
            if bot.version is None:
                bot.status = "checking"
            answer = {"type": "ladder_submitted", "bot": bot.public()}
            job = self.new_job("check", _check_payload(bot.bot_id, number, msg, answer), now,
                               job_id)
            try:
                await self.store.ladder_new_version(
                    bot.update_row(), (bot.bot_id, number, digest, len(program), encoded, now),
                    job)
            except MooError:
                bot.checking, bot.status = before
                raise
        del self.uploads[conn][uid]
        self.nudge()
        return answer

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
                         "", None, 1, now, exact_status("not_computed"))

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
        bot = self._own(player_of(conn), bot_id)
        self.refuse_program_request(bot)
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
            games = self.games_of(bot.bot_id)
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

    async def page(self, bot_id: str) -> dict[str, Any]:
        bot = self._bot(bot_id)
        st = self.standings.get(bot.family, {}).get(bot_id, Standing())
        games = self.games_of(bot_id)
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
        history = [{"at": r[0], "games": r[1], "rating": round_rating(r[2]),
                    "low": round_rating(r[3]), "high": round_rating(r[4])}
                   for r in await self.store.ladder_history(bot_id, MAX_HISTORY)]
        versions = [{"version": v[0], "sha256": v[1], "size": v[2], "submitted_at": v[3],
                     "check": v[4]} for v in await self.store.ladder_versions(bot_id)]
        return {"type": "ladder_page", "bot": bot.public(), **st.fields(),
                "history": history,
                "opponents": sorted(opponents.values(), key=lambda r: (-r["games"], r["bot"])),
                "recent": recent, "versions": versions}


def _submit_body(msg: dict[str, Any]) -> str:
    """A ``ladder_submit``'s content for its ``request_id``: without ``id`` and ``upload`` (a
    retry after a reconnect uploads the program again, under a new upload id)."""
    return fingerprint({k: v for k, v in msg.items() if k != "upload"})


def _check_payload(bot_id: str, version: int, msg: dict[str, Any],
                   answer: dict[str, Any]) -> dict[str, Any]:
    """A check job's payload; with the request's content and answer when it has a
    ``request_id`` (:meth:`LadderService.submit`)."""
    payload: dict[str, Any] = {"bot_id": bot_id, "version": version}
    if msg.get("request_id") is not None:
        payload["request"] = _submit_body(msg)
        payload["answer"] = answer
    return payload
