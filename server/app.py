"""Wiring and lifecycle: store, arena, lobby and the WebSocket/HTTP listener on one port.

Start order matters for the durability promise: the store opens and unfinished matches are
replayed (with ``resume_clocks`` so the downtime is not charged) *before* the port accepts a
connection. Stop order is the reverse: stop pairing and freezing timers first, then close
every connection with 1012 (clients reconnect and ``resume``), then drain the store, so nothing
acknowledged is lost and nothing half-done is acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import stat
import time
from collections.abc import Iterable, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve, unix_serve
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from moo import __version__
from moo.errors import StorageError
from moo.protocol import SUBPROTOCOLS, TRANSPORT_FACTOR
from server.accounts import Accounts
from server.arena import Arena
from server.connection import CLOSE_RESTART, Connection, FrameConnection
from server.heartbeat import Heartbeat
from server.history import History
from server.hosted import bot_player_name
from server.http import HttpFront, response, text_response
from server.ladder import LadderService
from server.lobby import Lobby
from server.matches import Follower, LobbyService, MatchService
from server.metrics import CONTENT_TYPE, Metrics
from server.publisher import install as install_hooks
from server.session import run_session
from server.settings import Settings
from server.storage import Store, describe_db
from server.stores import make_store
from server.tournaments import TournamentService

if TYPE_CHECKING:
    from server.cluster.router import Router

__all__ = ["App"]

log = logging.getLogger("moo.server")

#: on a cluster node, how long a player's cached guess distribution and score against minimum
#: may be served before the store is read again (other nodes' finishes never reach this one)
HISTORY_CACHE_TTL_S = 30.0
#: seconds before a failed pass bringing back dropped matches is tried again (doubled each
#: time, up to the max), while the store answers (App._readopt)
READOPT_RETRY_S = 1.0
READOPT_RETRY_MAX_S = 30.0


class App:
    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        self.settings = settings
        self.store: Store = store or make_store(settings)
        self.arena = Arena(settings, self.store)
        self.node = settings.node or socket.gethostname()
        #: the seam every session and the lobby use for match operations (server/matches.py):
        #: the arena itself on one node; on a cluster node the router, which runs this node's
        #: matches in the arena and forwards the rest (server/cluster/router.py)
        self.matches: MatchService
        self.lobby: LobbyService
        self.router: Router | None = None
        if settings.cluster_url:
            from server.cluster.router import Router
            from server.storage_cluster import ClusterStore

            assert isinstance(self.store, ClusterStore)  # settings check db for a cluster
            self.router = Router(
                settings, self.arena, self.store, self.node, list(settings.bot_strategies)
            )
            self.matches = self.router
            self.lobby = self.router.lobby
        else:
            self.matches = self.arena
            self.lobby = Lobby(self.arena, list(settings.bot_strategies))
        self.reserved_names = {bot_player_name(s).casefold() for s in self.lobby.strategies()}
        self.connections: set[Connection] = set()
        self.http = HttpFront(settings.static_dir or None, self.health)
        self.server: Server | None = None
        self.unix_server: Server | None = None
        self.started = time.monotonic()
        self._stopped = asyncio.Event()
        #: a pass of :meth:`_readopt` is running; another was asked for during it
        self._readopting = False
        self._readopt_again = False
        #: passes of :meth:`_readopt` that failed while the store answered (each retried)
        self.readopt_failures = 0
        self._warm: asyncio.Task[None] | None = None
        self.metrics = Metrics(self)  # GET /metrics (server/metrics.py)
        self.hooks = install_hooks(self)  # ratings + optional MQTT (server/publisher.py)
        self.accounts = Accounts(settings, self.store)  # passwords (server/accounts.py)
        self.history = History(  # server/history.py
            self.store,
            self.hooks.ratings,
            # other nodes finish matches this node's arena never sees: re-read after a while
            cache_ttl_s=HISTORY_CACHE_TTL_S if settings.cluster_url else None,
        )
        self.arena.listeners.append(self.history)
        # hosted tournaments (server/tournaments.py): on a cluster, run by the lobby leader
        publisher = self.hooks.publisher
        self.tournaments = TournamentService(
            self.arena,
            self.router.lobby.lobby if self.router is not None else self._lobby(),
            self.store,
            publish=None if publisher is None else publisher.tournament,
            route=self.router.lobby.tournament if self.router is not None else None,
        )
        # hosted bots and the ladder (server/ladder.py): on a cluster, run by the lobby leader
        # as the tournaments are; workers connect to any node (docs/ladder.md)
        self.worker_key = settings.ladder_worker_key or secrets.token_urlsafe(24)
        self.ladder = LadderService(
            self.arena,
            self.router.lobby.lobby if self.router is not None else self._lobby(),
            self.store,
            reserved=self.reserved_names,
            worker_key=self.worker_key,
            lease_ms=settings.ladder_lease_ms,
            publish=None if publisher is None else publisher.ladder,
            route=self.router.lobby.ladder if self.router is not None else None,
        )
        if self.router is not None:
            self.router.lobby.host_ladder(self.ladder.handle)
            self.router.lobby.host_tournaments(self.tournaments.handle, self._set_leading,
                                               self._gone_elsewhere)
        self.heartbeat = Heartbeat(
            self.connections,
            idle_timeout_s=settings.idle_timeout_s,
            ping_interval_s=settings.ping_interval_s,
        )

    def _set_leading(self, leading: bool) -> None:
        """A cluster node starts or stops leading the lobby: the tournaments and the ladder
        run where it runs."""
        self.tournaments.set_leading(leading)
        self.ladder.set_leading(leading)

    def _gone_elsewhere(self, conn: Follower) -> None:
        """A client of another node is gone (the leader's stand-in for it)."""
        self.tournaments.forget(conn)
        self.ladder.forget(conn)

    def _lobby(self) -> Lobby:
        """The single node's lobby (typed as such: the tournaments use its presence)."""
        assert isinstance(self.lobby, Lobby)
        return self.lobby

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        await self.store.open()
        self.store.on_recovered(self._readopt)
        await self.hooks.start()
        if self.router is not None:
            # a cluster node adopts only what has no live owner (server/cluster/leases.py)
            await self.router.start()
        else:
            restored = self.arena.restore(await self.store.unfinished_matches())
            if restored:
                log.info("restored %d unfinished matches", len(restored))
        if self.router is None:  # a cluster node reads them when it leads the lobby
            await self.tournaments.load()
        self.tournaments.start()
        if self.router is None:  # a cluster node reads it when it leads the lobby
            await self.ladder.load()
        self.ladder.start()
        s = self.settings
        options: dict[str, Any] = dict(
            subprotocols=[Subprotocol(p) for p in SUBPROTOCOLS],
            select_subprotocol=_select_subprotocol,
            process_request=self._process_request,
            compression=None,
            # Up to this ceiling an oversized message is read and refused with too_large (the
            # session's codec checks max_message_bytes); only beyond it does websockets close
            # the connection with 1009.
            max_size=s.max_message_bytes * TRANSPORT_FACTOR,
            max_queue=4,
            open_timeout=s.handshake_timeout_s,
            # keepalive pings and idle timeouts: one task for all (server/heartbeat.py)
            ping_interval=None,
            ping_timeout=None,
            close_timeout=2,
            server_header=None,
            # messages straight to the session while it waits (server/connection.py)
            create_connection=FrameConnection,
        )
        self.server = await serve(self._handler, s.host, s.port, **options)
        if s.unix:
            # a reverse proxy on this host connects here; only this process's user may
            # (mode 0600), so no other local process can claim a client address through it
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(os.stat(s.unix).st_mode):  # a stale socket, never a file
                    os.unlink(s.unix)
            self.unix_server = await unix_serve(self._handler, s.unix, **options)
            os.chmod(s.unix, 0o600)
        self.heartbeat.start()
        # word MOO's list, read in a thread while the server already answers (server/arena.py)
        self._warm = asyncio.create_task(self.arena.warm_dictionary())
        log.info(
            "listening on ws://%s:%d/ (db %s)", s.host, self.port, describe_db(s.db)
        )

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
        if self.router is not None:
            # no takeovers while stopping; the lease ends at close
            await self.router.leases.stop()
        await self.heartbeat.stop()
        if self._warm is not None:  # the word list's read finishes in its thread regardless
            self._warm.cancel()
            await asyncio.gather(self._warm, return_exceptions=True)
        if self.server is not None:
            self.server.close(close_connections=False)
        if self.unix_server is not None:
            self.unix_server.close(close_connections=False)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.settings.unix)
        if self.router is not None:
            # the matches move to the other nodes before the clients are sent there
            await self.router.leases.hand_over()
        for conn in list(self.connections):
            conn.close(code, reason)
        if self.server is not None:
            try:
                async with asyncio.timeout(5):
                    await self.server.wait_closed()
                    if self.unix_server is not None:
                        await self.unix_server.wait_closed()
            except TimeoutError:
                log.warning("some connections did not close in time")
        if self.router is not None:
            await self.router.stop()
        await self.tournaments.stop()
        await self.ladder.stop()
        await self.arena.analysis.close()
        await self.store.close()
        await self.hooks.stop()
        log.info("stopped")

    async def _readopt(self) -> None:
        """After a database outage: bring back the matches dropped when their writes failed.

        A failed write drops its match from memory (nothing unacknowledged is shown); its
        durable prefix is in the database, so once the database answers again the match is
        replayed exactly as at a restart, clocks given back, and its players ``resume``. A
        match whose failed write had in fact landed and finished it is not replayed: its
        parked followers are sent its end (:meth:`Arena.end_parked`).

        One pass runs at a time; a call during it asks for one more pass after it (a match
        may have dropped after the pass read what to bring back).
        """
        if self._readopting:
            self._readopt_again = True
            return
        self._readopting = True
        try:
            again = True
            while again and not self._stopped.is_set():
                self._readopt_again = False
                await self._readopt_until_done()
                again = self._readopt_again
        finally:
            self._readopting = False

    async def _readopt_until_done(self) -> None:
        """One pass of :meth:`_readopt`, tried again until it gets through.

        The store calls for it once per outage or failed commit; a pass that fails while the
        store still answers (a bad link that broke a read as well as the write) would
        otherwise leave its matches out of memory for good: no outage ends to call again,
        and no other node claims the matches of an owner whose lease is alive. A pass that
        fails because the store is down again waits for that outage's end instead.
        """
        delay = READOPT_RETRY_S
        while not self._stopped.is_set():
            try:
                if self.router is not None:
                    restored = await self.router.leases.readopt()
                else:
                    stored = await self.store.unfinished_matches()
                    restored = len(self.arena.restore(
                        [sm for sm in stored if sm.match_id not in self.arena.live]
                    ))
                ended = await self.arena.end_parked()
            except StorageError as exc:
                if not self.store.available:
                    return  # down again: the end of this outage calls again
                self.readopt_failures += 1
                log.warning("bringing back the matches dropped by a failed write failed "
                            "(%s); trying again in %.0f s", exc, delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopped.wait(), delay)
                delay = min(delay * 2, READOPT_RETRY_MAX_S)
                continue
            if restored:
                log.info("re-adopted %d matches after the database outage", restored)
            if ended:
                log.info("%d matches had finished in a commit whose answer was lost: their "
                         "followers are sent the end", len(ended))
            return

    # -- hooks -----------------------------------------------------------------------------------
    async def _handler(self, ws: ServerConnection) -> None:
        await run_session(self, ws)

    def _process_request(self, ws: ServerConnection, request: Request) -> Response | None:
        if request.path == "/metrics":
            return _metrics_response(self.metrics.render())
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
            "players_online": self.lobby.online_count(),
            "db": "ok" if store.available else "unavailable",
            **(self._cluster_health() if self.router is not None else {}),
            "live_matches": len(self.arena.live),
            "queue": self.lobby.queue_length(),
            "commits": getattr(store, "commits", None),
            "committed_ops": getattr(store, "ops", None),
            "ack_latency_ms": _percentiles(self.arena.ack_latency),
            "mqtt": self.hooks.mqtt_state(),
        }

    def _cluster_health(self) -> dict[str, Any]:
        router = self.router
        assert router is not None
        return {
            "node": self.node,
            "epoch": router.leases.epoch,
            "takeovers": router.leases.takeovers,
            "bus": router.state,
            "lobby_leader": router.lobby.leader,
            # forwarded move -> its acknowledgement back here (recent ones)
            "bus_forward_ms": _percentiles(router.forwarding.latency),
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
    return text_response(HTTPStatus.FORBIDDEN, text)


def _text_busy() -> Response:
    return text_response(HTTPStatus.SERVICE_UNAVAILABLE, "server full, try again later")


def _metrics_response(body: bytes) -> Response:
    return response(HTTPStatus.OK, body, CONTENT_TYPE)
