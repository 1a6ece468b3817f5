"""The MQTT event stream: publish public match events, results, ratings and server stats.

Design goal: *a slow, absent or restarting broker never delays or breaks a match.* The arena
only ever calls the non-blocking ``Publisher.offer`` (via :class:`ArenaPublisher`), which puts
the message on a bounded queue or, when the queue is full, drops it and counts the drop. One
supervised task owns the broker connection (aiomqtt): it drains the queue, and when the
connection fails it reconnects with exponential backoff while the queue keeps absorbing (and,
if the outage lasts, dropping) messages. Drops are counted in :attr:`Publisher.dropped`, shown
in the stats topic, and logged at most every few seconds.

Topics (see docs/mqtt.md)::

    moo/v1/matches/{match_id}/events   every public match event (the spectator view), QoS 0
    moo/v1/matches/{match_id}/result   the final result with secrets and salts, retained
    moo/v1/server/stats                lobby/server statistics, periodically
    moo/v1/players/{name}/rating       rating after each rated match, retained
    moo/v1/tournaments/{id}/state      a hosted tournament's object after each change, retained

Payloads are JSON (default) or MessagePack (``mqtt://host:port?encoding=msgpack``); the URL
form, topic names and codec are the core's (:mod:`moo.mqtt`), shared with ``moo watch``. Secrets
appear only in the result topic: the ``finished`` event on the events topic has them removed.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiomqtt

from moo.match import Event, Match
from moo.mqtt import (
    MqttUrl,
    encode_payload,
    events_topic,
    ladder_topic,
    parse_mqtt_url,
    rating_topic,
    result_topic,
    stats_topic,
    tournament_topic,
)

__all__ = ["ArenaPublisher", "Publisher"]

log = logging.getLogger("moo.mqtt")

#: fields of ``finished`` that only the result topic carries
_SECRET_FIELDS = ("secrets", "salts")


@dataclass(frozen=True)
class _Message:
    topic: str
    payload: bytes
    retain: bool


class Publisher:
    """Bounded queue + one supervised aiomqtt connection with its own reconnect loop."""

    def __init__(
        self,
        url: str | MqttUrl,
        *,
        queue_size: int = 10_000,
        backoff_min_s: float = 0.2,
        backoff_max_s: float = 10.0,
        client_id: str | None = None,
        stats: Callable[[], dict[str, Any]] | None = None,
        stats_interval_s: float = 10.0,
    ) -> None:
        self.url = parse_mqtt_url(url) if isinstance(url, str) else url
        self.encoding = self.url.encoding
        self.queue: asyncio.Queue[_Message] = asyncio.Queue(maxsize=queue_size)
        self.backoff_min_s, self.backoff_max_s = backoff_min_s, backoff_max_s
        self.client_id = client_id or f"moo-arena-{random.getrandbits(32):08x}"
        self.stats_fn = stats
        self.stats_interval_s = stats_interval_s
        self.published = 0
        self.dropped = 0
        self.connects = 0
        self.connected = asyncio.Event()
        self._connect_changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._stats_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._pending: _Message | None = None
        self._last_drop_log = 0.0
        self._drops_logged = 0
        #: why the last connection attempt failed or the connection was lost (for /healthz)
        self.last_error: str | None = None

    # -- the non-blocking side (called from the arena) ------------------------------------------
    def offer(self, topic: str, data: dict[str, Any], *, retain: bool = False) -> bool:
        """Queue a message; never blocks, never raises. False when it had to be dropped."""
        try:
            message = _Message(topic, encode_payload(data, self.encoding), retain)
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            self._drop(1, "queue full")
            return False
        except Exception:  # an unencodable payload is a bug, not a reason to stop a match
            log.exception("cannot encode MQTT payload for %s", topic)
            self._drop(1, "unencodable")
            return False
        return True

    def _drop(self, n: int, why: str) -> None:
        self.dropped += n
        now = time.monotonic()
        if now - self._last_drop_log >= 5.0:
            log.warning(
                "MQTT: dropped %d event(s) so far (%s; %d since last report)",
                self.dropped, why, self.dropped - self._drops_logged,
            )
            self._last_drop_log = now
            self._drops_logged = self.dropped

    # -- the supervised side ---------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name="mqtt-publisher")
            if self.stats_fn is not None and self.stats_interval_s > 0:
                self._stats_task = asyncio.create_task(self._stats_loop(), name="mqtt-stats")

    async def stop(self, drain_s: float = 1.0) -> None:
        """Stop; waits up to ``drain_s`` for queued messages while connected."""
        if self._task is None:
            return
        if self.connected.is_set() and drain_s > 0:
            deadline = time.monotonic() + drain_s
            while not self.queue.empty() and time.monotonic() < deadline:
                if not self.connected.is_set():
                    break
                await asyncio.sleep(0.01)
        self._stopping = True
        for task in (self._stats_task, self._task):
            if task is not None:
                task.cancel()
        for task in (self._stats_task, self._task):
            if task is not None:
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        self._task = self._stats_task = None

    async def _supervise(self) -> None:
        """Connect, drain, and on any failure back off and reconnect; never gives up.

        An absent broker is said once at WARNING (then at DEBUG on every retry), so that an
        operator who asked for ``--mqtt`` learns at once that nothing is being published.
        """
        backoff = self.backoff_min_s
        told = False  # the current outage has been logged at WARNING
        log.info("MQTT: publishing to %s:%d", self.url.host, self.url.port)
        while not self._stopping:
            try:
                async with aiomqtt.Client(
                    self.url.host,
                    self.url.port,
                    username=self.url.username,
                    password=self.url.password,
                    identifier=self.client_id,
                    timeout=5.0,
                    keepalive=15,
                ) as client:
                    self.connects += 1
                    self.connected.set()
                    async with self._connect_changed:
                        self._connect_changed.notify_all()
                    backoff = self.backoff_min_s
                    told = False
                    self.last_error = None
                    log.info("MQTT: connected to %s:%d", self.url.host, self.url.port)
                    await self._drain(client)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # aiomqtt.MqttError, OSError, anything: reconnect
                self.last_error = str(exc) or type(exc).__name__
                if self.connected.is_set():
                    log.warning("MQTT: connection lost: %s; reconnecting", self.last_error)
                    told = True
                elif not told:
                    log.warning(
                        "MQTT: cannot connect to broker %s:%d: %s; retrying in the background"
                        " (events are queued meanwhile, dropped when the queue is full)",
                        self.url.host, self.url.port, self.last_error,
                    )
                    told = True
                else:
                    log.debug("MQTT: cannot connect: %s", self.last_error)
            finally:
                self.connected.clear()
            # full jitter keeps a restarted broker from being hit by every server at once
            await asyncio.sleep(backoff * (0.5 + random.random() / 2))
            backoff = min(self.backoff_max_s, backoff * 2)

    async def _drain(self, client: aiomqtt.Client) -> None:
        while True:
            if self._pending is None:
                self._pending = await self.queue.get()
            message = self._pending
            # Retained messages (results, ratings) are the ones a late subscriber relies on:
            # QoS 1, so the broker acknowledges them. Events are QoS 0: a live stream.
            await client.publish(
                message.topic,
                message.payload,
                qos=1 if message.retain else 0,
                retain=message.retain,
                timeout=5.0,
            )
            # A message the client refused (not connected) stays pending for the next
            # connection instead of being lost.
            self._pending = None
            self.published += 1

    async def _stats_loop(self) -> None:
        assert self.stats_fn is not None
        while True:
            await asyncio.sleep(self.stats_interval_s)
            try:
                data = dict(self.stats_fn())
            except Exception:
                log.exception("MQTT: stats callback failed")
                continue
            data["mqtt"] = self.counters()
            data["at"] = int(time.time() * 1000)
            self.offer(stats_topic(), data)

    async def wait_connects(self, n: int) -> None:
        """Until the publisher has connected ``n`` times in all (for tests and tooling)."""
        async with self._connect_changed:
            await self._connect_changed.wait_for(
                lambda: self.connects >= n and self.connected.is_set()
            )

    def counters(self) -> dict[str, Any]:
        return {
            "broker": f"{self.url.host}:{self.url.port}",
            "connected": self.connected.is_set(),
            "last_error": self.last_error,
            "published": self.published,
            "dropped": self.dropped,
            "queued": self.queue.qsize(),
            "connects": self.connects,
        }

    # -- topics ----------------------------------------------------------------------------------
    def match_event(
        self, match_id: str, view: Event, players: list[str] | None = None
    ) -> None:
        """One spectator event; ``players`` rides along so that a subscriber who joins
        mid-match (and never saw ``created``) can still name the seats."""
        data = {"match_id": match_id, **view}
        if players is not None:
            data["players"] = players
        if data.get("kind") == "finished":
            for key in _SECRET_FIELDS:
                data.pop(key, None)
        self.offer(events_topic(match_id), data)

    def match_result(self, match_id: str, data: dict[str, Any]) -> None:
        self.offer(result_topic(match_id), data, retain=True)

    def tournament(self, tournament_id: str, data: dict[str, Any]) -> None:
        """A hosted tournament's object after a change (retained: the latest state)."""
        self.offer(tournament_topic(tournament_id), data, retain=True)

    def ladder(self, family: str, data: dict[str, Any]) -> None:
        """A ladder pairing's two results and the standings after them (retained: the
        latest)."""
        self.offer(ladder_topic(family), data, retain=True)

    def rating(self, name: str, data: dict[str, Any]) -> None:
        self.offer(rating_topic(name), data, retain=True)


class ArenaPublisher:
    """Arena listener: turns every durable batch of match events into MQTT messages.

    Registered with ``arena.listeners``; the arena calls it after the events are committed and
    sent to the players, so the stream never shows anything a crash could take back.
    """

    def __init__(self, publisher: Publisher) -> None:
        self.publisher = publisher

    def __call__(self, match: Match, events: list[Event]) -> None:
        for event in events:
            view = match.view(event, "spectator")
            if view is None:
                continue
            self.publisher.match_event(match.match_id, view, list(match.players))
            if event["kind"] == "finished":
                self.publisher.match_result(match.match_id, result_payload(match, event))


def result_payload(match: Match, event: Event) -> dict[str, Any]:
    """The final result: outcome, counts, both guess lists, secrets, salts and commitments
    (and the hosted tournament's id for a tournament's game)."""
    extra = ({"tournament_id": match.config.tournament_id}
             if match.config.tournament_id is not None else {})
    return {
        **extra,
        "match_id": match.match_id,
        "players": list(match.players),
        "winner": event.get("winner"),
        "winner_name": None if event.get("winner") is None else match.players[event["winner"]],
        "reason": event.get("reason"),
        "counts": event.get("counts"),
        "solved": event.get("solved"),
        "secrets": event.get("secrets"),
        "salts": event.get("salts"),
        "commitments": event.get("commitments"),
        "guesses": [[g for g, _, _ in s.guesses] for s in match.seats],
        "pacing": match.config.pacing,
        "rated": match.config.rated,
        "started_at": match.created_at if match.seq else None,
        "finished_at": event.get("at"),
    }


class Hooks:
    """What this module adds to a running server: ratings always, MQTT when configured.

    ``install(app)`` is the whole integration: the arena gets two listeners (ratings and,
    with ``--mqtt``, the publisher), and the app starts/stops this object with itself.
    """

    def __init__(self, ratings: Any, publisher: Publisher | None) -> None:
        self.ratings = ratings
        self.publisher = publisher

    async def start(self) -> None:
        await self.ratings.start()
        if self.publisher is not None:
            self.publisher.start()

    async def stop(self) -> None:
        await self.ratings.stop()
        if self.publisher is not None:
            await self.publisher.stop()

    def mqtt_state(self) -> dict[str, Any] | None:
        """The publisher's state for ``/healthz`` (None: no ``--mqtt``)."""
        return None if self.publisher is None else self.publisher.counters()


def install(app: Any) -> Hooks:
    """Wire ratings and the optional MQTT publisher into ``app`` (a :class:`server.app.App`)."""
    from server.ratings import PlayerRating, RatingChange, Ratings, ratings_path

    settings = app.settings
    url = getattr(settings, "mqtt_url", "") or ""
    publisher = Publisher(url, stats=app.health) if url else None

    def on_change(change: RatingChange, player: PlayerRating) -> None:
        if publisher is not None:
            publisher.rating(change.name, {**change.to_dict(), **player.row()})

    ratings: Ratings
    if getattr(app.store, "finish_hooks", None) is not None:
        # PostgreSQL (a cluster): ratings are rows every node shares (server/ratings_pg.py)
        from server.ratings_pg import PgRatings

        ratings = PgRatings(app.store, on_change=on_change)
    else:
        ratings = Ratings(ratings_path(settings.db), on_change=on_change)
    # The publisher listens first: a match's last events and its result are queued before
    # the rating changes the match caused, so subscribers see them in that order.
    if publisher is not None:
        app.arena.listeners.append(ArenaPublisher(publisher))
    app.arena.listeners.append(ratings)
    return Hooks(ratings, publisher)
