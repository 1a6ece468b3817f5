"""Which store a ``db`` setting names: the one place that knows both backends.

It sits apart from :mod:`server.storage` (the interface and its operations) so that the two
backends, which build on that interface, are never imported back by it: the storage modules
stay a one-way chain, and a single node on SQLite never loads the PostgreSQL driver.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from server.storage import Store, is_postgres_url
from server.storage_sqlite import SQLiteStore

if TYPE_CHECKING:
    from server.settings import Settings

__all__ = ["make_store"]


def make_store(settings: Settings) -> Store:
    """The store the ``db`` setting names: ``postgresql://...`` or a SQLite file path."""
    if is_postgres_url(settings.db):
        if settings.cluster_url:  # a cluster node: also the directory and the leases
            from server.storage_cluster import ClusterStore

            return ClusterStore(
                settings.db, node=settings.node or socket.gethostname(),
                commit_window_ms=settings.commit_window_ms,
            )
        from server.storage_pg import PostgresStore

        return PostgresStore(settings.db, commit_window_ms=settings.commit_window_ms)
    return SQLiteStore(
        settings.db,
        commit_window_ms=settings.commit_window_ms,
        synchronous=settings.sqlite_synchronous,
    )
