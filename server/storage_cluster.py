"""The cluster's directory and leases, as public methods of the PostgreSQL store.

A cluster node's store is a :class:`ClusterStore`: the PostgreSQL store plus the queries the
cluster needs about *who runs what* -- node leases with epochs (``nodes``) and match ownership
(``owners``) -- so that no SQL lives outside the storage layer. Every lease is judged by the
database's clock (:data:`~server.storage_pg.DB_NOW_MS`), never by a node's own.

The rules these queries implement (docs/cluster.md, "Ownership"): a node owns a match while
the owner row names it in its current epoch and its lease runs; a claim is one conditional
``UPDATE`` per batch, so exactly one node wins each match; a node's commits are fenced by the
same condition inside the commit (:class:`~server.storage_pg.PostgresStore`), and a claim's
``UPDATE`` waits for a commit in flight (the commit holds the owner rows ``FOR SHARE``).
"""

from __future__ import annotations

import json
from typing import Any

from server.storage import StoredMatch
from server.storage_pg import DB_NOW_MS, PostgresStore

__all__ = ["ClusterStore", "Owner"]

#: (node, epoch)
Owner = tuple[str, int]

_LIVE_OWNER = (
    "JOIN nodes n ON n.name = o.node AND n.epoch = o.epoch AND n.expires_ms > " + DB_NOW_MS
)


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

    async def node_connected(self, node: str) -> bool:
        """Whether ``node``'s process holds its writer session (it is alive, whatever the
        broker says about it)."""

        async def read(conn: Any) -> Any:
            return await conn.fetchval(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = $1 LIMIT 1",
                f"moo-writer:{node}",
            )

        return await self._run(read) is not None

    def has_pending(self) -> bool:
        """Whether appends are queued and not yet committed (a drain waits for them)."""
        return bool(self._pending)

    # -- the directory: who runs what ----------------------------------------------------------
    async def owner_of(self, match_id: str) -> Owner | None:
        """The (node, epoch) whose live lease owns ``match_id``; None: nobody (finished,
        unknown, or its owner died and no one has claimed it yet)."""

        async def read(conn: Any) -> Any:
            return await conn.fetchrow(
                f"SELECT o.node, o.epoch FROM owners o {_LIVE_OWNER} WHERE o.match_id = $1",
                match_id,
            )

        row = await self._run(read)
        return None if row is None else (str(row[0]), int(row[1]))

    async def owners_of(self, match_ids: list[str]) -> dict[str, Owner]:
        """:meth:`owner_of` for many matches at once (those without a live owner are left out)."""

        async def read(conn: Any) -> Any:
            return await conn.fetch(
                f"SELECT o.match_id, o.node, o.epoch FROM owners o {_LIVE_OWNER}"
                " WHERE o.match_id = ANY($1::text[])",
                match_ids,
            )

        if not match_ids:
            return {}
        return {str(r[0]): (str(r[1]), int(r[2])) for r in await self._run(read)}

    async def match_state(self, match_id: str) -> bool | None:
        """True: unfinished; False: finished; None: no such match."""

        async def read(conn: Any) -> Any:
            return await conn.fetchval(
                "SELECT finished FROM matches WHERE match_id = $1", match_id
            )

        finished = await self._run(read)
        return None if finished is None else finished == 0

    async def alive_nodes(self) -> set[str]:
        async def read(conn: Any) -> Any:
            return await conn.fetch(
                f"SELECT name FROM nodes WHERE epoch > 0 AND expires_ms > {DB_NOW_MS}"
            )

        return {str(r[0]) for r in await self._run(read)}

    async def unfinished_of(self, player: str) -> list[StoredMatch]:
        """The unfinished matches ``player`` sits in, wherever they run, with their logs."""

        async def read(conn: Any) -> Any:
            return await conn.fetch(
                "SELECT match_id FROM matches WHERE finished = 0"
                " AND (meta::jsonb -> 'players') ? $1",
                player,
            )

        ids = [str(r[0]) for r in await self._run(read)]
        return await self.stored_matches(ids) if ids else []

    async def live_elsewhere(self, node: str, limit: int) -> list[StoredMatch]:
        """Unfinished matches that other nodes with a live lease own, oldest first."""

        async def read(conn: Any) -> Any:
            return await conn.fetch(
                f"SELECT o.match_id FROM owners o {_LIVE_OWNER}"
                " JOIN matches m ON m.match_id = o.match_id"
                " WHERE m.finished = 0 AND o.node <> $1 ORDER BY m.created_ms LIMIT $2",
                node, limit,
            )

        ids = [str(r[0]) for r in await self._run(read)]
        return await self.stored_matches(ids) if ids else []

    # -- leases --------------------------------------------------------------------------------
    async def begin_epoch(self, node: str, ttl_ms: int) -> int:
        """A new epoch under ``node``'s name (a restarted node inherits nothing), leased."""

        async def write(conn: Any) -> Any:
            return await conn.fetchval(
                f"INSERT INTO nodes(name, epoch, expires_ms) VALUES ($1, 1, {DB_NOW_MS} + $2)"
                " ON CONFLICT (name) DO UPDATE SET epoch = nodes.epoch + 1,"
                " expires_ms = EXCLUDED.expires_ms RETURNING epoch",
                node, ttl_ms,
            )

        return int(await self._run(write))

    async def renew(self, node: str, epoch: int, ttl_ms: int) -> bool:
        """Extend the lease; False if another process took the name's epoch over."""

        async def write(conn: Any) -> Any:
            return await conn.fetchval(
                f"UPDATE nodes SET expires_ms = {DB_NOW_MS} + $3"
                " WHERE name = $1 AND epoch = $2 RETURNING epoch",
                node, epoch, ttl_ms,
            )

        return await self._run(write) is not None

    async def end_lease(self, node: str, epoch: int) -> None:
        async def write(conn: Any) -> None:
            await conn.execute(
                f"UPDATE nodes SET expires_ms = {DB_NOW_MS} - 1 WHERE name = $1 AND epoch = $2",
                node, epoch,
            )

        await self._run(write)

    async def owned(self, match_ids: list[str], node: str, epoch: int) -> set[str]:
        """Which of ``match_ids`` the owner rows give to (node, epoch)."""

        async def read(conn: Any) -> Any:
            return await conn.fetch(
                "SELECT match_id FROM owners WHERE match_id = ANY($1::text[])"
                " AND node = $2 AND epoch = $3",
                match_ids, node, epoch,
            )

        return {str(r[0]) for r in await self._run(read)} if match_ids else set()

    async def owned_unfinished(self, node: str, epoch: int) -> list[str]:
        async def read(conn: Any) -> Any:
            return await conn.fetch(
                "SELECT o.match_id FROM owners o JOIN matches m ON m.match_id = o.match_id"
                " WHERE o.node = $1 AND o.epoch = $2 AND m.finished = 0",
                node, epoch,
            )

        return [str(r[0]) for r in await self._run(read)]

    async def others_alive(self, node: str) -> bool:
        async def read(conn: Any) -> Any:
            return await conn.fetchval(
                f"SELECT 1 FROM nodes WHERE name <> $1 AND expires_ms > {DB_NOW_MS} LIMIT 1",
                node,
            )

        return await self._run(read) is not None

    async def claim_orphans(self, node: str, epoch: int, limit: int = 1000) -> list[str]:
        """Claim for (node, epoch) unfinished matches whose owner's lease ran out or whose
        owner restarted; the ids this call won."""

        async def find(conn: Any) -> Any:
            return await conn.fetch(
                "SELECT o.match_id, o.node, o.epoch FROM owners o"
                " JOIN matches m ON m.match_id = o.match_id"
                " LEFT JOIN nodes n ON n.name = o.node"
                " WHERE m.finished = 0 AND NOT (o.node = $1 AND o.epoch = $2)"
                " AND (n.name IS NULL OR n.epoch <> o.epoch"
                f" OR n.expires_ms < {DB_NOW_MS}) LIMIT $3",
                node, epoch, limit,
            )

        orphans = list(await self._run(find))
        if not orphans:
            return []

        async def claim(conn: Any) -> Any:
            return await conn.fetch(
                "UPDATE owners o SET node = $1, epoch = $2"
                " FROM unnest($3::text[], $4::text[], $5::bigint[]) AS c(match_id, node, epoch)"
                " WHERE o.match_id = c.match_id AND o.node = c.node AND o.epoch = c.epoch"
                " AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.name = c.node"
                f" AND n.epoch = c.epoch AND n.expires_ms >= {DB_NOW_MS})"
                " RETURNING o.match_id",
                node, epoch,
                [r[0] for r in orphans], [r[1] for r in orphans], [int(r[2]) for r in orphans],
            )

        return [str(r[0]) for r in await self._run(claim)]

    async def claim_from(self, dead: str, dead_epoch: int, node: str, epoch: int) -> list[str]:
        """The broker says ``dead`` (in ``dead_epoch``) lost its connection: end that lease and
        claim its unfinished matches for (node, epoch), in one transaction. Still fenced: a
        process that is in fact alive (cut from the broker only) fails its next commits and
        lets its matches go; one that already restarted has another epoch and is untouched."""

        async def write(conn: Any) -> Any:
            async with conn.transaction():
                await conn.execute(
                    f"UPDATE nodes SET expires_ms = LEAST(expires_ms, {DB_NOW_MS} - 1)"
                    " WHERE name = $1 AND epoch = $2",
                    dead, dead_epoch,
                )
                return await conn.fetch(
                    "UPDATE owners o SET node = $3, epoch = $4 FROM matches m"
                    " WHERE m.match_id = o.match_id AND m.finished = 0"
                    " AND o.node = $1 AND o.epoch = $2 RETURNING o.match_id",
                    dead, dead_epoch, node, epoch,
                )

        return [str(r[0]) for r in await self._run(write)]

    async def match_terms(self, match_id: str) -> dict[str, Any] | None:
        """A match's stored metadata (players, hosted bots), None if there is none."""

        async def read(conn: Any) -> Any:
            return await conn.fetchval("SELECT meta FROM matches WHERE match_id = $1", match_id)

        meta = await self._run(read)
        return None if meta is None else dict(json.loads(meta))
