"""Every cluster test runs with the SDK's quiet-match resync off (``MOO_RESYNC_AFTER=0``,
inherited by the ``moo`` processes the tests start): the server must keep every follower fed by
itself (docs/cluster.md, "Delivery"), not with the clients' help."""

from __future__ import annotations

from tests.cluster_support import client_resync_off

__all__ = ["client_resync_off"]
