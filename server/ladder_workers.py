"""The bot workers' side of the ladder: ``worker_hello`` and the ``worker_*`` messages
(docs/protocol.md, "Bot workers"), the jobs they claim through the store and what their
reports change (a check's verdict, an eval's exact scores, a seat's failure)."""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from moo.errors import BadCredentials, NotAvailable, SchemaError, UnknownJob
from moo.rules import DEFAULT_RULES
from moo.variants import rules_spec
from server.accounts import hash_token, new_token
from server.ladder_records import (
    MAX_KEY_STRIKES,
    Worker,
    exact_status,
    exact_values,
    with_ref,
)
from server.ladder_schedule import LadderSchedule
from server.matches import Follower

__all__ = ["LadderWorkers"]

log = logging.getLogger("moo.ladder")


class LadderWorkers(LadderSchedule):
    """The scheduler, with the workers that run its jobs."""

    def worker_hello(self, conn: Follower, msg: dict[str, Any]) -> bool:
        """A worker's first message; True once it is let in (refusals raise). Answered by
        the node the worker connects to, also on a cluster: its other messages go to the
        lobby leader with who it is (:meth:`worker_request`)."""
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
        conn.send(with_ref({"type": "worker_welcome", "worker_id": worker.worker_id,
                             "lease_ms": self.lease_ms}, msg.get("id")))
        return True

    async def worker_request(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A worker's message, from its session: done here, or on a cluster at the lobby
        leader, with the worker's id, slots and name, so that a leader that never saw its
        ``worker_hello`` (the leadership moved) knows it."""
        worker = self.workers.get(conn)
        if worker is None:
            raise NotAvailable("only a bot worker's connection (worker_hello) sends worker_* "
                               "messages")
        if self.route is not None:
            self.route(conn, {**msg, "worker": [worker.worker_id, worker.slots, worker.name]})
            return
        await self.worker_message(conn, msg)

    async def worker_message(self, conn: Follower, msg: dict[str, Any]) -> None:
        """A worker's message, done here (a single node, or the cluster's leader)."""
        worker = self.workers.get(conn)
        ident = msg.get("worker")
        if worker is None and ident is not None:  # a worker of another node, new here
            worker = self.workers[conn] = Worker(str(ident[0]), int(ident[1]), str(ident[2]))
        if worker is None:
            raise NotAvailable("only a bot worker's connection (worker_hello) sends worker_* "
                               "messages")
        self.check_active()
        job_id = msg.get("job_id")
        if job_id is not None and job_id not in worker.jobs:
            await self._adopt(worker, str(job_id))
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
        conn.send(with_ref(reply, ref))

    async def _adopt(self, worker: Worker, job_id: str) -> None:
        """A job the worker claimed before this node led the ladder: its again, if the store
        says the worker holds it."""
        row = await self.store.ladder_job(job_id)
        if row is not None and row[2] == "claimed" and row[3] == worker.worker_id:
            worker.jobs[job_id] = str(row[0])

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
            await self.create_games(payload)
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
            self.refit(game.family)
        return {"type": "worker_noted", "job_id": job_id, "match_id": match_id}

    async def _done(self, worker: Worker, msg: dict[str, Any]) -> dict[str, Any]:
        job_id = msg["job_id"]
        kind = worker.jobs.get(job_id)
        if kind is None:
            raise UnknownJob(f"job {job_id!r} is not yours (any more)")
        if kind == "check" and not isinstance(msg.get("accepted"), bool):
            raise SchemaError("a check's 'worker_done' needs field 'accepted'")
        exact = exact_values(msg.get("exact")) if kind == "eval" else None
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
            bot.exact = exact_status("pending")
            if bot.status in ("checking", "refused"):
                bot.status = "active"
            job = self.new_job("eval", {"bot_id": bot_id, "version": version}, self.clock())
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
            self.nudge()

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
            bot.exact = exact_status("not_deterministic" if classic else "not_computed",
                                      reason)
        await self.store.ladder_update_bot(bot.update_row())

