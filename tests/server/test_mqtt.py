"""The MQTT event stream against a real Mosquitto, and its promise: the broker never matters."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from clients.tournament.remote import RemoteEngine
from clients.tournament.runner import make_plan, run_tournament
from moo.mqtt import decode_payload, parse_mqtt_url
from server.app import App
from server.publisher import Publisher
from tests.ladder_support import GOOD, check, claim, play_pairing, submit, worker
from tests.mqtt_support import WAIT, Broker
from tests.patience import patience
from tests.server_support import Client, running, server_settings
from tests.tournament_support import FIRST


class Subscriber:
    """Collects every message on ``moo/v1/#`` and lets a test wait for one."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.messages: list[tuple[str, Any, bool]] = []
        self._new = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def __aenter__(self) -> Subscriber:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self._ready.wait(), WAIT)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
            await self._task

    async def _run(self) -> None:
        async with aiomqtt.Client("127.0.0.1", self.port) as client:
            await client.subscribe("moo/v1/#", qos=1)
            self._ready.set()
            async for msg in client.messages:
                payload = msg.payload if isinstance(msg.payload, bytes) else b""
                self.messages.append((str(msg.topic), decode_payload(payload), msg.retain))
                self._new.set()

    async def wait_for(self, topic: str, timeout: float = WAIT) -> Any:
        async with asyncio.timeout(timeout):
            while True:
                for t, data, _ in self.messages:
                    if t == topic:
                        return data
                self._new.clear()
                await self._new.wait()

    async def wait_until(self, topic: str, pred: Any, timeout: float = WAIT) -> Any:
        """The first message on ``topic`` (so far or to come) that satisfies ``pred``."""
        async with asyncio.timeout(patience(timeout)):
            while True:
                for t, data, _ in self.messages:
                    if t == topic and pred(data):
                        return data
                self._new.clear()
                await self._new.wait()

    def on(self, topic: str) -> list[Any]:
        return [data for t, data, _ in self.messages if t == topic]


@contextlib.asynccontextmanager
async def broker_and_server(
    broker: Broker, tmp_path: Path, **settings: Any
) -> AsyncIterator[tuple[Broker, App]]:
    await broker.start()
    try:
        conf = server_settings(tmp_path, mqtt_url=broker.url, **settings)
        async with running(conf) as app:
            assert app.hooks.publisher is not None
            await asyncio.wait_for(app.hooks.publisher.connected.wait(), WAIT)
            yield broker, app
    finally:
        await broker.stop()


def test_mqtt_url_parsing() -> None:
    u = parse_mqtt_url("mqtt://10.0.0.1:1884?encoding=msgpack")
    assert (u.host, u.port, u.encoding) == ("10.0.0.1", 1884, "msgpack")
    assert parse_mqtt_url("mqtt://broker").port == 1883
    with pytest.raises(ValueError):
        parse_mqtt_url("http://x")
    with pytest.raises(ValueError):
        parse_mqtt_url("mqtt://x?encoding=xml")


async def test_bounded_queue_drops_and_counts_without_a_broker() -> None:
    pub = Publisher("mqtt://127.0.0.1:1", queue_size=3)  # never started: nothing drains
    assert all(pub.offer("moo/v1/x", {"i": i}) for i in range(3))
    assert pub.offer("moo/v1/x", {"i": 3}) is False
    assert pub.dropped == 1 and pub.queue.qsize() == 3


async def test_subscriber_sees_events_result_and_ratings_of_a_server_match(
    broker: Broker, tmp_path: Path,
) -> None:
    async with broker_and_server(broker, tmp_path) as (broker, app):
        async with Subscriber(broker.port) as sub:
            jobs = make_plan([FIRST, "random"], rounds=1, seed=3)[:1]
            engine = RemoteEngine(f"ws://127.0.0.1:{app.port}/", prefix="mq-")
            result = await asyncio.wait_for(run_tournament(jobs, engine), WAIT)
            (record,) = result.records
            mid = record.match_id
            res = await sub.wait_for(f"moo/v1/matches/{mid}/result")
            for name in record_names(record.players):
                rating = await sub.wait_for(f"moo/v1/players/{name}/rating")
                assert rating["name"] == name and rating["games"] == 1
        events = sub.on(f"moo/v1/matches/{mid}/events")
        kinds = [e["kind"] for e in events]
        assert kinds[0] == "created" and kinds[-1] == "finished"
        assert "started" in kinds and "round" in kinds
        assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
        # secrets appear only in the final result
        for e in events:
            assert "secret" not in e and "secrets" not in e and "salts" not in e
        assert res["secrets"] == record.secrets
        assert res["counts"] == record.counts and res["winner"] == record.winner
        assert res["guesses"] == record.guesses
        retained = [r for t, _, r in sub.messages if t.endswith("/result")]
        assert retained == [False]  # delivered live; a late subscriber gets it retained
        async with Subscriber(broker.port) as late:
            again = await late.wait_for(f"moo/v1/matches/{mid}/result")
            assert again == res
            assert any(r for t, _, r in late.messages if t.endswith("/result"))
        board = app.hooks.ratings.leaderboard("rating")
        assert {row["name"] for row in board} == set(record_names(record.players))


def record_names(players: list[str]) -> list[str]:
    return [f"mq-{p}-1" for p in players]


async def _play_round(p0: Client, p1: Client, mid: str, g0: str, g1: str, n: int) -> Any:
    a = await p0.request({"type": "guess", "match_id": mid, "guess": g0})
    assert a["type"] == "event", a
    b = await p1.request({"type": "guess", "match_id": mid, "guess": g1})
    assert b["type"] == "event", b
    return await p0.event(mid, "round", n=n)


async def test_broker_stop_and_restart_mid_match_changes_nothing(
    broker: Broker, tmp_path: Path,
) -> None:
    async with broker_and_server(broker, tmp_path) as (broker, app):
        publisher = app.hooks.publisher
        assert publisher is not None
        p0 = await Client.hello(app.port, "ann")
        p1 = await Client.hello(app.port, "bob")
        room = await p0.request({"type": "room_create"})
        await p1.request({"type": "room_join", "code": room["code"]})
        mid = (await p0.of_type("match"))["match_id"]
        async with Subscriber(broker.port) as sub:
            await p0.request({"type": "secret", "match_id": mid, "secret": "0123"})
            await p1.request({"type": "secret", "match_id": mid, "secret": "4567"})
            r1 = await _play_round(p0, p1, mid, "8901", "8901", 1)
            assert r1["results"] == [["8901", 0, 0], ["8901", 0, 2]]
            await sub.wait_for(f"moo/v1/matches/{mid}/events")
        # the broker goes away mid-match: every request is still answered at once
        await broker.stop()
        r2 = await _play_round(p0, p1, mid, "2345", "2345", 2)
        assert r2["results"] == [["2345", 0, 2], ["2345", 0, 2]]
        # ... and comes back on the same port: the publisher reconnects by itself
        await broker.start()
        await asyncio.wait_for(publisher.wait_connects(2), patience(30))
        async with Subscriber(broker.port) as sub2:
            r3 = await _play_round(p0, p1, mid, "4567", "1234", 3)
            assert r3["results"][0] == ["4567", 4, 0]
            fin = await p0.event(mid, "finished")
            assert fin["winner"] == 0 and fin["reason"] == "solved" and fin["counts"] == [3, 3]
            res = await sub2.wait_for(f"moo/v1/matches/{mid}/result")
            assert res["winner"] == 0 and res["secrets"] == ["0123", "4567"]
            late_events = sub2.on(f"moo/v1/matches/{mid}/events")
            assert {"round", "finished"} <= {e["kind"] for e in late_events}
        assert publisher.connects >= 2
        await p0.close()
        await p1.close()


async def test_server_without_broker_plays_normally(broker: Broker, tmp_path: Path) -> None:
    # ``broker`` is configured but never started: nobody listens there
    conf = dataclasses.replace(server_settings(tmp_path), mqtt_url=broker.url)
    async with running(conf) as app:
        jobs = make_plan([FIRST, "random"], rounds=1, seed=5)
        engine = RemoteEngine(f"ws://127.0.0.1:{app.port}/", prefix="nb-")
        result = await asyncio.wait_for(run_tournament(jobs, engine), WAIT)
        assert len(result.records) == 2
        assert app.hooks.publisher is not None
        assert not app.hooks.publisher.connected.is_set()


async def test_an_absent_broker_is_logged_and_shown_in_healthz(
    broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``--mqtt`` to nobody: one WARNING naming the broker, and /healthz says not connected."""
    # ``broker`` is never started
    conf = dataclasses.replace(server_settings(tmp_path), mqtt_url=broker.url)
    caplog.set_level(logging.INFO, logger="moo.mqtt")
    async with running(conf) as app:
        publisher = app.hooks.publisher
        assert publisher is not None
        async with asyncio.timeout(WAIT):
            while publisher.last_error is None:
                await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", app.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        body = (await reader.read()).split(b"\r\n\r\n", 1)[1]
        writer.close()
        mqtt = json.loads(body)["mqtt"]
        assert mqtt["broker"] == f"127.0.0.1:{broker.port}"
        assert mqtt["connected"] is False and mqtt["connects"] == 0
        assert mqtt["last_error"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]  # said once, not per retry
    assert f"cannot connect to broker 127.0.0.1:{broker.port}" in warnings[0].getMessage()


async def test_healthz_without_mqtt_says_so(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        assert app.health()["mqtt"] is None


async def test_ratings_come_after_the_matchs_last_events(broker: Broker, tmp_path: Path) -> None:
    async with broker_and_server(broker, tmp_path) as (broker, app):
        async with Subscriber(broker.port) as sub:
            p0 = await Client.hello(app.port, "ann")
            p1 = await Client.hello(app.port, "bob")
            room = await p0.request({"type": "room_create"})
            await p1.request({"type": "room_join", "code": room["code"]})
            mid = (await p0.of_type("match"))["match_id"]
            await p0.request({"type": "secret", "match_id": mid, "secret": "0123"})
            await p1.request({"type": "secret", "match_id": mid, "secret": "4567"})
            await _play_round(p0, p1, mid, "4567", "4567", 1)
            for name in ("ann", "bob"):
                await sub.wait_for(f"moo/v1/players/{name}/rating")
            await sub.wait_for(f"moo/v1/matches/{mid}/result")
            await p0.close()
            await p1.close()
        topics = [t for t, _, _ in sub.messages if "/matches/" in t or "/players/" in t]
        finished = next(i for i, (t, d, _) in enumerate(sub.messages)
                        if t.endswith("/events") and d["kind"] == "finished")
        ratings = [i for i, (t, _, _) in enumerate(sub.messages) if t.endswith("/rating")]
        assert len(ratings) == 2, topics
        assert finished < min(ratings), topics
        result = topics.index(f"moo/v1/matches/{mid}/result")
        assert all(t.endswith("/rating") for t in topics[result + 1 :]), topics


async def test_msgpack_payloads(broker: Broker, tmp_path: Path) -> None:
    await broker.start()
    try:
        pub = Publisher(broker.url + "?encoding=msgpack")
        pub.start()
        await asyncio.wait_for(pub.connected.wait(), WAIT)
        async with Subscriber(broker.port) as sub:
            pub.rating("zed", {"name": "zed", "rating": 1.5})
            data = await sub.wait_for("moo/v1/players/zed/rating")
            assert data == {"name": "zed", "rating": 1.5}
            raw = json.dumps(data).encode()
            assert decode_payload(raw) == data
        await pub.stop()
    finally:
        await broker.stop()


async def test_moo_watch_follows_one_match_until_its_result(broker: Broker, tmp_path: Path) -> None:
    import io

    from clients.watch import watch

    async with broker_and_server(broker, tmp_path) as (broker, app):
        p0 = await Client.hello(app.port, "ann")
        p1 = await Client.hello(app.port, "bob")
        room = await p0.request({"type": "room_create"})
        await p1.request({"type": "room_join", "code": room["code"]})
        mid = (await p0.of_type("match"))["match_id"]
        out = io.StringIO()
        ready = asyncio.Event()
        task = asyncio.create_task(watch(broker.url, mid, out=out, ready=ready))
        await asyncio.wait_for(ready.wait(), WAIT)
        await p0.request({"type": "secret", "match_id": mid, "secret": "0123"})
        await p1.request({"type": "secret", "match_id": mid, "secret": "4567"})
        await _play_round(p0, p1, mid, "4567", "4567", 1)
        assert await asyncio.wait_for(task, WAIT) == 0
        text = out.getvalue()
        # subscribed after `created`: every event carries the players, so seats have names
        assert "round 1: ann 4567 4B | bob 4567 0C" in text
        assert "seat 0" not in text and "seat 1" not in text
        assert f"[{mid}] RESULT ann wins in 1 (solved)" in text
        assert "secrets 0123 / 4567" in text
        await p0.close()
        await p1.close()


async def test_periodic_server_stats(broker: Broker, tmp_path: Path) -> None:
    await broker.start()
    try:
        pub = Publisher(broker.url, stats=lambda: {"live_matches": 3}, stats_interval_s=0.05)
        async with Subscriber(broker.port) as sub:
            pub.start()
            data = await sub.wait_for("moo/v1/server/stats")
            assert data["live_matches"] == 3
            assert set(data["mqtt"]) == {"broker", "connected", "last_error", "published",
                                         "dropped", "queued", "connects"}
            assert data["mqtt"]["connected"] is True and data["mqtt"]["last_error"] is None
        await pub.stop()
    finally:
        await broker.stop()


async def test_a_hosted_tournament_is_published_retained_with_its_games_results(
    broker: Broker, tmp_path: Path,
) -> None:
    """docs/mqtt.md: ``moo/v1/tournaments/{id}/state`` (retained) after each change, and the
    result of a tournament's game carries its id."""
    async with broker_and_server(broker, tmp_path) as (broker, app):
        async with Subscriber(broker.port) as sub:
            boss = await Client.hello(app.port, "boss", bot=True)
            a = await Client.hello(app.port, "qa", bot=True)
            b = await Client.hello(app.port, "qb", bot=True)
            reply = await boss.request({"type": "tournament_create", "name": "mq",
                                        "format": "round-robin", "pool": "bots",
                                        "start_in_s": 3600})
            tid = reply["tournament"]["tournament_id"]
            topic = f"moo/v1/tournaments/{tid}/state"
            first = await sub.wait_for(topic)
            assert first["tournament_id"] == tid and first["status"] == "upcoming"
            for c in (a, b):
                await c.request({"type": "tournament_join", "tournament_id": tid})
            app.tournaments.tournaments[tid].starts_at = app.arena.clock()  # the start comes
            games = [await a.of_type("match"), await a.of_type("match")]
            for m in games:
                await a.request({"type": "resign", "match_id": m["match_id"]})
            for m in games:
                result = await sub.wait_for(f"moo/v1/matches/{m['match_id']}/result")
                assert result["tournament_id"] == tid
            last = await sub.wait_until(topic, lambda o: o["status"] == "finished")
            assert last["game_count"] == 2
            assert {r["name"]: r["wins"] for r in last["standings"]} == {"qb": 2, "qa": 0}
        # retained: a subscriber who comes later gets the last state at once
        async with Subscriber(broker.port) as late:
            kept = await late.wait_for(topic)
            assert kept["status"] == "finished"


async def test_a_ladder_pairing_is_published_retained_with_the_standings(
    broker: Broker, tmp_path: Path,
) -> None:
    """docs/mqtt.md: ``moo/v1/ladder/{family}/results`` (retained) after each pairing: its two
    games and the standings after them."""
    async with broker_and_server(broker, tmp_path, ladder_worker_key="k") as (broker, app):
        async with Subscriber(broker.port) as sub:
            ann = await Client.hello(app.port, "ann")
            w = await worker(app.port)
            for name in ("qa", "qb"):
                await submit(ann, GOOD, name=name)
            for _ in range(2):
                await check(w, True)
            for _ in range(2):  # the exact evaluations
                job = await claim(w)
                assert job is not None
                await w.request({"type": "worker_done", "job_id": job["job_id"],
                                 "reason": "not deterministic"})
            await app.ladder.tick()
            job = await claim(w)
            assert job is not None and job["kind"] == "play"
            winner = next(i for i, b in enumerate(job["bots"]) if b["player"] == "qa")
            await play_pairing(app.port, job, winner)
            topic = "moo/v1/ladder/moo:4:0123456789/results"
            published = await sub.wait_for(topic)
            assert [g["match_id"] for g in published["games"]] == job["matches"]
            assert all(g["winner"] is not None and g["reason"] == "solved"
                       for g in published["games"])
            rows = {r["bot"]: r for r in published["standings"]}
            assert (rows["qa"]["wins"], rows["qb"]["losses"]) == (2, 2)
            assert rows["qa"]["rating"] > rows["qb"]["rating"]
        async with Subscriber(broker.port) as late:
            kept = await late.wait_for(topic)
            assert kept["pairing"] == published["pairing"]
