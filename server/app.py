"""Wiring and lifecycle: store, arena, lobby and the WebSocket/HTTP listener on one port.

Start order matters for the durability promise: the store opens and unfinished matches are
replayed (with ``resume_clocks`` so the downtime is not charged) *before* the port accepts a
connection. Stop order is the reverse: stop pairing and freezing timers first, then close
every connection with 1012 (clients reconnect and ``resume``), then drain the store, so nothing
acknowledged is lost and nothing half-done is acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from moo import __version__
from moo.protocol import SUBPROTOCOLS
from server.arena import Arena, bot_player_name
from server.connection import CLOSE_RESTART, Connection
from server.heartbeat import Heartbeat
from server.http import HttpFront, _text
from server.lobby import Lobby
from server.publisher import install as install_hooks
from server.session import run_session
from server.settings import Settings
from server.storage import SQLiteStore, Store

__all__ = ["App"]

log = logging.getLogger("moo.server")


class App:
    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        self.settings = settings
        self.store: Store = store or SQLiteStore(
            settings.db,
            commit_window_ms=settings.commit_window_ms,
            synchronous=settings.sqlite_synchronous,
        )
        self.arena = Arena(settings, self.store)
        self.lobby = Lobby(self.arena, list(settings.bot_strategies))
        self.reserved_names = {bot_player_name(s).casefold() for s in self.lobby.strategies()}
        self.connections: set[Connection] = set()
        self.http = HttpFront(settings.static_dir or None, self.health)
        self.server: Server | None = None
        self.started = time.monotonic()
        self._stopped = asyncio.Event()
        self.hooks = install_hooks(self)  # ratings + optional MQTT (server/publisher.py)
        self.heartbeat = Heartbeat(
            self.connections,
            idle_timeout_s=settings.idle_timeout_s,
            ping_interval_s=settings.ping_interval_s,
        )

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        await self.store.open()
        await self.hooks.start()
        restored = self.arena.restore(await self.store.unfinished_matches())
        if restored:
            log.info("restored %d unfinished matches", restored)
        s = self.settings
        self.server = await serve(
            self._handler,
            s.host,
            s.port,
            subprotocols=[Subprotocol(p) for p in SUBPROTOCOLS],
            select_subprotocol=_select_subprotocol,
            process_request=self._process_request,
            compression=None,
            max_size=s.max_message_bytes,
            max_queue=4,
            open_timeout=s.handshake_timeout_s,
            # keepalive pings and idle timeouts: one task for all (server/heartbeat.py)
            ping_interval=None,
            ping_timeout=None,
            close_timeout=2,
            server_header=None,
        )
        self.heartbeat.start()
        log.info("listening on ws://%s:%d/ (db %s)", s.host, self.port, s.db)

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def stop(self, code: int = CLOSE_RESTART, reason: str = "server restarting") -> None:
        """Graceful stop; idempotent."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.lobby.closed = True
        self.arena.stop()
        await self.heartbeat.stop()
        if self.server is not None:
            self.server.close(close_connections=False)
        for conn in list(self.connections):
            conn.close(code, reason)
        if self.server is not None:
            try:
                async with asyncio.timeout(5):
                    await self.server.wait_closed()
            except TimeoutError:
                log.warning("some connections did not close in time")
        await self.store.close()
        await self.hooks.stop()
        log.info("stopped")

    # -- hooks -----------------------------------------------------------------------------------
    async def _handler(self, ws: ServerConnection) -> None:
        await run_session(self, ws)

    def _process_request(self, ws: ServerConnection, request: Request) -> Response | None:
        response = self.http.handle(request)
        if response is not None:
            return response
        origin = request.headers.get("Origin")
        if origin is not None and not self._origin_allowed(origin, request):
            return _text_forbidden(f"origin {origin[:100]} is not allowed")
        if len(self.connections) >= self.settings.max_connections:
            return _text_busy()
        return None

    def _origin_allowed(self, origin: str, request: Request) -> bool:
        if self.settings.origins:
            return origin in self.settings.origins
        host = request.headers.get("Host", "")
        return urlsplit(origin).netloc.lower() == host.lower()

    def health(self) -> dict[str, Any]:
        store = self.store
        return {
            "status": "stopping" if self._stopped.is_set() else "ok",
            "version": __version__,
            "uptime_s": round(time.monotonic() - self.started, 1),
            "connections": len(self.connections),
            "players_online": len(self.lobby.online),
            "live_matches": len(self.arena.live),
            "queue": len(self.lobby.queue),
            "commits": getattr(store, "commits", None),
            "committed_ops": getattr(store, "ops", None),
            "ack_latency_ms": _percentiles(self.arena.ack_latency),
        }


def _percentiles(samples: Iterable[float]) -> dict[str, float | int] | None:
    """p50/p99/max in ms of the recent acknowledgements (server side: frame in -> ack queued)."""
    values = sorted(samples)
    if not values:
        return None
    n = len(values)
    return {
        "n": n,
        "p50": round(values[n // 2] * 1000, 2),
        "p99": round(values[min(n - 1, int(n * 0.99))] * 1000, 2),
        "max": round(values[-1] * 1000, 2),
    }


def _select_subprotocol(
    ws: ServerConnection, offered: Sequence[Subprotocol]
) -> Subprotocol | None:
    for name in offered:
        if name in SUBPROTOCOLS:
            return name
    return None


def _text_forbidden(text: str) -> Response:
    from http import HTTPStatus

    return _text(HTTPStatus.FORBIDDEN, text)


def _text_busy() -> Response:
    from http import HTTPStatus

    return _text(HTTPStatus.SERVICE_UNAVAILABLE, "server full, try again later")
