"""Idle timeouts and keepalive pings for every connection, from one task.

websockets can keep a connection alive by itself (a task per connection that pings every
``ping_interval``), and the obvious idle timeout is an ``asyncio.timeout`` around each
``recv()``. With thousands of connections both cost where it hurts: a task, a coroutine frame
and a timer per connection (memory), and a timer armed and cancelled for every frame received
(CPU on the hot path). The server instead stamps each connection with the loop time of its last
frame (one attribute store per frame) and this one task walks the connections in slices:

* a connection whose last frame is older than ``idle_timeout_s`` is closed with 1001;
* a connection that has been quiet for ``ping_interval_s`` gets a Ping (a busy one never
  does: its frames prove it is alive), and if the Pong has not come back ``ping_timeout_s``
  later it is closed with 1011, as websockets' own keepalive would.

The walk is sliced (a fraction of the connections per tick) so that ten thousand connections
never cost one long stall of the event loop; every connection is visited at least once per
``period_s``, which bounds how late a timeout can fire.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Collection

from server.connection import CLOSE_GOING_AWAY, CLOSE_INTERNAL_ERROR, Connection

__all__ = ["Heartbeat"]

log = logging.getLogger("moo.heartbeat")


class Heartbeat:
    def __init__(
        self,
        connections: Collection[Connection],
        *,
        idle_timeout_s: float,
        ping_interval_s: float,
        ping_timeout_s: float | None = None,
        period_s: float = 1.0,
        slices: int = 4,
    ) -> None:
        self.connections = connections
        self.idle_timeout_s = idle_timeout_s
        self.ping_interval_s = ping_interval_s
        self.ping_timeout_s = ping_timeout_s if ping_timeout_s is not None else ping_interval_s
        # A timeout can fire up to one period late; keep that small against the timeouts.
        shortest = min(
            (t for t in (idle_timeout_s, ping_interval_s) if t > 0), default=period_s * 4
        )
        self.period_s = max(0.01, min(period_s, shortest / 4))
        self.slices = max(1, slices)
        self._task: asyncio.Task[None] | None = None
        #: connections closed for idling / for a missing pong, and pings sent (for tests/logs)
        self.idle_closed = 0
        self.dead_closed = 0
        self.pings = 0

    def start(self) -> None:
        if self._task is None and (self.idle_timeout_s > 0 or self.ping_interval_s > 0):
            self._task = asyncio.get_running_loop().create_task(self._run(), name="heartbeat")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        tick = self.period_s / self.slices
        while True:
            batch = list(self.connections)
            size = max(1, math.ceil(len(batch) / self.slices))
            for start in range(0, max(1, len(batch)), size):
                await asyncio.sleep(tick)
                now = loop.time()
                for conn in batch[start : start + size]:
                    try:
                        self.check(conn, now)
                    except Exception:  # one broken socket must not stop everyone's keepalive
                        log.exception("heartbeat check failed for %s", conn.player)

    def check(self, conn: Connection, now: float) -> None:
        """Apply the idle timeout and the keepalive to one connection at loop time ``now``."""
        if conn.closing or conn.player is None:  # before hello the handshake timeout rules
            return
        if self.idle_timeout_s > 0 and now - conn.last_in > self.idle_timeout_s:
            self.idle_closed += 1
            conn.close(CLOSE_GOING_AWAY, "idle timeout")
            return
        if self.ping_interval_s <= 0:
            return
        if conn.ping_pending():
            if now - conn.ping_at > self.ping_timeout_s:
                self.dead_closed += 1
                log.info("closing %s: no pong in %.0f s", conn.player, self.ping_timeout_s)
                conn.close(CLOSE_INTERNAL_ERROR, "keepalive ping timeout")
            return
        if now - max(conn.last_in, conn.ping_at) >= self.ping_interval_s:
            self.pings += 1
            conn.ping(now)
