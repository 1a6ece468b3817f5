"""The cluster's directory and leases, as public methods of the PostgreSQL store.

A cluster node's store is a :class:`ClusterStore`: the PostgreSQL store plus what the cluster
needs to know about *who runs what* -- node leases with epochs (``nodes``) and match ownership
(``owners``). The statements are in server/sql.py with every other one; this module runs them.
Every lease is judged by the database's clock, never by a node's own.

The rules they implement (docs/cluster.md, "Ownership"): a node owns a match while the owner
row names it in its current epoch and its lease runs; a claim is one conditional ``UPDATE`` per
batch, so exactly one node wins each match; a node's commits are fenced by the same condition
inside the commit (server/storage_pg.py), and a claim's ``UPDATE`` waits for a commit in flight
(the commit holds the owner rows ``FOR SHARE``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from server import sql
from server.storage import Db, StoredMatch, read_stored
from server.storage_pg import PostgresStore

__all__ = ["ClusterStore", "Owner"]

#: (node, epoch)
Owner = tuple[str, int]


class ClusterStore(PostgresStore):
    """PostgreSQL store of a cluster node: event logs and accounts, plus the directory.

    Its sessions are labelled with the node's name (``moo-writer:<node>``), so that other
    nodes can tell whether this node's process still holds its database session: a process
    that died (or was killed) closes its sockets at once, and PostgreSQL drops the session.
    """

    def __init__(self, url: str, *, node: str, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.node = node

    def session_label(self, role: str) -> str:
        return f"{role}:{self.node}"

    def has_pending(self) -> bool:
        """Whether appends are queued and not yet committed, or finishing commits are still
        in flight on their own sessions (a drain waits for them)."""
        return bool(self._pending or self._finishing)

    async def _rows(self, query: sql.Query, *args: Any) -> list[Any]:
        async def read(db: Db) -> list[Any]:
            return await db.rows(query, *args)

        return await self.with_db(read)

    async def _row(self, query: sql.Query, *args: Any) -> Any:
        async def read(db: Db) -> Any:
            return await db.row(query, *args)

        return await self.with_db(read)

    # -- the directory: who runs what ----------------------------------------------------------
    async def node_connected(self, node: str) -> bool:
        """Whether ``node``'s process holds its writer session (it is alive, whatever the
        broker says about it)."""
        return await self._row(sql.NODE_SESSION, f"moo-writer:{node}") is not None

    async def owner_of(self, match_id: str) -> Owner | None:
        """The (node, epoch) whose live lease owns ``match_id``; None: nobody (finished,
        unknown, or its owner died and no one has claimed it yet)."""
        row = await self._row(sql.OWNER_OF, match_id)
        return None if row is None else (str(row[0]), int(row[1]))

    async def owners_of(self, match_ids: list[str]) -> dict[str, Owner]:
        """:meth:`owner_of` for many matches at once (those without a live owner are left out)."""
        if not match_ids:
            return {}
        rows = await self._rows(sql.OWNERS_OF, match_ids)
        return {str(r[0]): (str(r[1]), int(r[2])) for r in rows}

    async def match_state(self, match_id: str) -> bool | None:
        """True: unfinished; False: finished; None: no such match."""
        row = await self._row(sql.MATCH_FINISHED, match_id)
        return None if row is None else row[0] == 0

    async def alive_nodes(self) -> dict[str, int]:
        """The nodes with a live lease, each with its epoch."""
        return {str(r[0]): int(r[1]) for r in await self._rows(sql.ALIVE_NODES)}

    async def unfinished_of(self, player: str) -> list[StoredMatch]:
        """The unfinished matches ``player`` sits in, wherever they run, with their logs."""
        ids = [str(r[0]) for r in await self._rows(sql.UNFINISHED_OF_PLAYER, player)]
        return await self.stored_matches(ids) if ids else []

    async def live_elsewhere(self, node: str, limit: int) -> list[StoredMatch]:
        """Unfinished matches that other nodes with a live lease own, oldest first."""
        ids = [str(r[0]) for r in await self._rows(sql.LIVE_ELSEWHERE, node, limit)]
        return await self.stored_matches(ids) if ids else []

    # -- leases --------------------------------------------------------------------------------
    async def begin_epoch(self, node: str, ttl_ms: int) -> int:
        """A new epoch under ``node``'s name (a restarted node inherits nothing), leased."""
        return int((await self._row(sql.BEGIN_EPOCH, node, ttl_ms))[0])

    async def renew(self, node: str, epoch: int, ttl_ms: int) -> bool:
        """Extend the lease; False if another process took the name's epoch over."""
        return await self._row(sql.RENEW_LEASE, ttl_ms, node, epoch) is not None

    async def end_lease(self, node: str, epoch: int) -> None:
        async def write(db: Db) -> None:
            await db.run(sql.END_LEASE, node, epoch)

        await self.with_db(write)

    async def owned(self, match_ids: list[str], node: str, epoch: int) -> set[str]:
        """Which of ``match_ids`` the owner rows give to (node, epoch)."""
        if not match_ids:
            return set()
        return {str(r[0]) for r in await self._rows(sql.OWNED, match_ids, node, epoch)}

    async def owned_unfinished(self, node: str, epoch: int) -> list[str]:
        return [str(r[0]) for r in await self._rows(sql.OWNED_UNFINISHED, node, epoch)]

    async def others_alive(self, node: str) -> bool:
        return await self._row(sql.OTHERS_ALIVE, node) is not None

    async def claim_orphans(self, node: str, epoch: int, limit: int = 1000) -> list[str]:
        """Claim for (node, epoch) unfinished matches whose owner's lease ran out or whose
        owner restarted; the ids this call won."""
        orphans = await self._rows(sql.ORPHANS, node, epoch, limit)
        if not orphans:
            return []
        rows = await self._rows(
            sql.CLAIM_ORPHANS, node, epoch,
            [r[0] for r in orphans], [r[1] for r in orphans], [int(r[2]) for r in orphans],
        )
        return [str(r[0]) for r in rows]

    async def claim_from(
        self, dead: str, dead_epoch: int, node: str, epoch: int,
        claimed: Callable[[list[str]], None],
    ) -> list[StoredMatch]:
        """``dead`` (in ``dead_epoch``) is gone: end that lease and claim its unfinished
        matches for (node, epoch), in one transaction. Still fenced: a process that is in fact
        alive fails its next commits and lets its matches go; one that already restarted has
        another epoch and is untouched.

        ``claimed(ids)`` is told the claimed ids once the claim has committed; their logs are
        then read on the same connection (no second wait for the pool, which a takeover's
        reconnecting clients keep busy) and returned. If that read fails, the matches are
        claimed all the same: the caller was told which."""

        async def write(db: Db) -> list[StoredMatch]:
            async with db.atomic():
                await db.run(sql.END_LEASE, dead, dead_epoch)
                rows = await db.rows(sql.CLAIM_FROM, node, epoch, dead, dead_epoch)
            ids = [str(r[0]) for r in rows]
            claimed(ids)
            return await read_stored(db, ids) if ids else []

        return await self.with_db(write)
