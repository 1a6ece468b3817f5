"""Match ownership in a cluster: node leases with epochs in PostgreSQL, fencing and takeover.

Every node has a row in ``nodes`` (name, epoch, lease end in ms of the *database's* clock) and
every match a row in ``owners`` (match id, node, epoch). A node owns a match while the owner row
names it with its current epoch and its lease has not run out; only then may it append to the
match's log (:meth:`server.storage_pg.PostgresStore._fenced` checks this inside each commit and
locks the owner rows until the commit, so a takeover waits for an in-flight commit and then
replays a log that includes it).

* **Start**: the node's epoch is bumped (a restarted node never silently inherits what its
  previous incarnation owned: those matches are taken over like any dead node's, possibly by
  itself), and its lease begins.
* **Heartbeat** every ``lease/5``: the lease is extended to ``now + 0.7 * lease``. Matches the
  node holds in memory but no longer owns (it was paused past its lease and another node took
  them) are let go of at once; their players are told to reconnect.
* **Takeover scan** every ``lease/20``: unfinished matches whose owner's lease ran out, or whose
  owner restarted, are claimed with a conditional UPDATE (exactly one node wins each) and
  rebuilt by replay from the log, clocks given back as after a restart. With the default
  ``lease_ms = 10000`` a killed node's matches accept moves again after at most about 7.5 s
  plus the replay.
* **Stop** (SIGTERM, :meth:`Leases.hand_over`): the node commits what is queued, ends its own
  lease and waits (up to one lease) until the others have taken its matches over on their next
  scan; only then are its clients closed with 1012, so when they reconnect the matches have
  moved already.

A paused node (SIGSTOP) cannot fork a match: when it wakes up, its stale appends fail the fence
(:class:`~server.storage_pg.LeaseLost`, refused with ``storage_unavailable``) and it drops
the match.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from moo.errors import StorageError
from server.storage import StoredMatch
from server.storage_pg import _UNAVAILABLE, DB_NOW_MS, LeaseLost, PostgresStore

__all__ = ["Leases"]

log = logging.getLogger("moo.cluster")


class Leases:
    """One node's side of the lease protocol."""

    def __init__(
        self,
        store: PostgresStore,
        node: str,
        *,
        lease_ms: int = 10_000,
        adopt: Callable[[list[StoredMatch]], int],
        live: Callable[[], dict[str, int]],
        let_go: Callable[[str, BaseException], None],
    ) -> None:
        self.store = store
        self.node = node
        self.lease_ms = lease_ms
        self.ttl_ms = int(lease_ms * 0.7)
        self.heartbeat_s = lease_ms / 5000
        self.scan_s = lease_ms / 20000
        self.epoch = 0
        self._adopt = adopt
        self._live = live
        self._let_go = let_go
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._renew_failed = False
        #: matches taken over from dead or paused nodes, and matches let go of (for /metrics)
        self.takeovers = 0
        self.lost = 0

    async def _run(self, sql: str, *args: Any) -> list[Any]:
        async def go(conn: Any) -> list[Any]:
            return list(await conn.fetch(sql, *args))

        return await self.store._run(go)

    async def start(self) -> None:
        """Begin a new epoch under this node's name and adopt what needs an owner."""
        rows = await self._run(
            "INSERT INTO nodes(name, epoch, expires_ms) VALUES ($1, 1,"
            f" {DB_NOW_MS} + $2) ON CONFLICT (name) DO UPDATE SET epoch = nodes.epoch + 1,"
            " expires_ms = EXCLUDED.expires_ms RETURNING epoch",
            self.node, self.ttl_ms,
        )
        self.epoch = int(rows[0][0])
        self.store.fence = (self.node, self.epoch)
        self.store.before_close.append(self.end_lease)
        log.info("node %s: epoch %d, lease %d ms", self.node, self.epoch, self.lease_ms)
        await self.scan()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._every(self.heartbeat_s, self.heartbeat)),
            loop.create_task(self._every(self.scan_s, self.scan)),
        ]

    async def stop(self) -> None:
        """Stop renewing; the lease ends once the store has committed its last appends."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def end_lease(self) -> None:
        """End the lease now (at a graceful stop), so other nodes take over at once."""
        with contextlib.suppress(StorageError):
            await self._run(
                f"UPDATE nodes SET expires_ms = {DB_NOW_MS} - 1 WHERE name = $1 AND epoch = $2",
                self.node, self.epoch,
            )

    async def hand_over(self, timeout_s: float | None = None) -> int:
        """Drain (SIGTERM): give this node's matches to the other nodes *before* its clients
        are told to reconnect, so they find the matches already moved.

        What the store has queued is committed first; then the lease ends, and the other
        nodes claim the matches on their next scan (``lease/20``) and replay them. This waits
        until none is left to this node (at most ``timeout_s``, default one lease; not at all
        when no other node is alive to take them). Returns how many were still left. Actions
        that reach this node meanwhile are refused by the fence (``storage_unavailable``:
        retryable) and its copy of the match is dropped, as after any lost lease.
        """
        limit = time.monotonic() + (self.lease_ms / 1000 if timeout_s is None else timeout_s)
        while self.store._pending and time.monotonic() < limit:
            await asyncio.sleep(0.005)  # what clients sent before the drain is stored here
        await self.end_lease()
        left = -1
        try:
            others = await self._run(
                f"SELECT 1 FROM nodes WHERE name <> $1 AND expires_ms > {DB_NOW_MS} LIMIT 1",
                self.node,
            )
            while True:
                rows = await self._run(
                    "SELECT count(*) FROM owners o JOIN matches m ON m.match_id = o.match_id"
                    " WHERE o.node = $1 AND o.epoch = $2 AND m.finished = 0",
                    self.node, self.epoch,
                )
                left = int(rows[0][0])
                if not left or not others or time.monotonic() >= limit:
                    break
                await asyncio.sleep(self.scan_s / 2)
        except (StorageError, *_UNAVAILABLE) as exc:
            log.warning("node %s: hand-over not confirmed: %s", self.node, exc)
        log.info("node %s: lease ended for the drain; %d matches not yet taken over",
                 self.node, max(left, 0))
        return left

    async def _every(self, seconds: float, step: Callable[[], Any]) -> None:
        """Run ``step`` every ``seconds`` until stopped. Nothing it raises may end the loop: a
        node whose renewals stopped would lose every match it runs one lease later."""
        while not self._stopping:
            await asyncio.sleep(seconds)
            try:
                await step()
            except (StorageError, *_UNAVAILABLE) as exc:
                log.warning("node %s: %s failed: %s", self.node, step.__name__, exc)
            except Exception:
                log.exception("node %s: %s failed unexpectedly; retried", self.node,
                              step.__name__)

    async def readopt(self) -> int:
        """After a database outage: matches this node still owns but dropped, back by replay."""
        rows = await self._run(
            "SELECT o.match_id FROM owners o JOIN matches m ON m.match_id = o.match_id"
            " WHERE o.node = $1 AND o.epoch = $2 AND m.finished = 0",
            self.node, self.epoch,
        )
        live = self._live()
        ids = [row[0] for row in rows if row[0] not in live]
        return self._adopt(await self.store.stored_matches(ids)) if ids else 0

    async def heartbeat(self) -> None:
        """Extend the lease; let go of live matches this node no longer owns.

        After a failed renewal (the database was away, perhaps longer than the lease), the
        first good one also re-adopts what this node still owns but had to drop meanwhile
        (its appends were refused while the lease was out), so no match is left stuck.
        """
        try:
            await self._renew()
        except BaseException:
            self._renew_failed = True
            raise
        if self._renew_failed:
            self._renew_failed = False
            adopted = await self.readopt()
            if adopted:
                log.info("node %s: re-adopted %d matches after renewing", self.node, adopted)

    async def _renew(self) -> None:
        renewed = await self._run(
            f"UPDATE nodes SET expires_ms = {DB_NOW_MS} + $3"
            " WHERE name = $1 AND epoch = $2 RETURNING epoch",
            self.node, self.epoch, self.ttl_ms,
        )
        if not renewed:
            log.error("node %s: epoch %d was replaced by another process", self.node, self.epoch)
        # only matches whose first append (which writes the owner row) has committed
        live = {match_id for match_id, seq in self._live().items() if seq > 0}
        if not live:
            return
        owned = {
            row[0]
            for row in await self._run(
                "SELECT match_id FROM owners WHERE match_id = ANY($1::text[])"
                " AND node = $2 AND epoch = $3",
                list(live), self.node, self.epoch,
            )
        }
        for match_id in live - owned if renewed else live:
            self.lost += 1
            log.warning("node %s: match %s is owned elsewhere now; letting go", self.node, match_id)
            self._let_go(
                match_id, LeaseLost("this match moved to another node; reconnect and resume it")
            )

    async def scan(self) -> int:
        """Claim unfinished matches whose owner is gone; rebuild them here by replay."""
        orphans = await self._run(
            "SELECT o.match_id, o.node, o.epoch FROM owners o"
            " JOIN matches m ON m.match_id = o.match_id"
            " LEFT JOIN nodes n ON n.name = o.node"
            " WHERE m.finished = 0 AND NOT (o.node = $1 AND o.epoch = $2)"
            " AND (n.name IS NULL OR n.epoch <> o.epoch"
            f" OR n.expires_ms < {DB_NOW_MS}) LIMIT 1000",
            self.node, self.epoch,
        )
        if not orphans:
            return 0
        random.shuffle(orphans)  # several survivors share the work instead of all racing
        claimed = await self._run(
            "UPDATE owners o SET node = $1, epoch = $2"
            " FROM unnest($3::text[], $4::text[], $5::bigint[]) AS c(match_id, node, epoch)"
            " WHERE o.match_id = c.match_id AND o.node = c.node AND o.epoch = c.epoch"
            " AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.name = c.node"
            f" AND n.epoch = c.epoch AND n.expires_ms >= {DB_NOW_MS})"
            " RETURNING o.match_id",
            self.node, self.epoch,
            [r[0] for r in orphans], [r[1] for r in orphans], [int(r[2]) for r in orphans],
        )
        ids = {row[0] for row in claimed}
        if not ids:
            return 0
        live = self._live()
        adopted = self._adopt(
            [sm for sm in await self.store.stored_matches(list(ids)) if sm.match_id not in live]
        )
        self.takeovers += adopted
        log.info("node %s: took over %d matches", self.node, adopted)
        return adopted
