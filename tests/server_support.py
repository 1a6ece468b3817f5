"""Shared helpers for the server tests: a real server on a free port and a raw client.

The client is the SDK's socket (:class:`clients.sdk.wire.Wire`, the one place the project
opens, encodes and decodes protocol frames) without the SDK session on top: no automatic hello,
resume, retry or dedup, so the tests check the wire contract itself, malformed frames included.
Every wait ends at its message and has a timeout only as a safety net, so that a test fails
instead of hanging: a timeout given here is in seconds on an idle machine, grown for the
machine's load (tests/patience.py). Nothing waits on a sleep.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection

from clients.sdk.wire import Wire
from moo.protocol import Codec
from server.app import App
from server.settings import Settings
from server.storage import Store
from server.storage_sqlite import SQLiteStore
from tests.patience import patience

WAIT = 30.0  # seconds on an idle machine (see above)
ENCODINGS = ["moo.v1.json", "moo.v1.msgpack"]


def server_settings(tmp_path: Path, **overrides: Any) -> Settings:
    base = Settings(
        host="127.0.0.1",
        port=0,
        db=str(tmp_path / "moo.sqlite3"),
        bot_delay_ms=0,
        sqlite_synchronous="NORMAL",
        commit_window_ms=0.5,
        static_dir=str(tmp_path / "web"),
    )
    return dataclasses.replace(base, **overrides)


@asynccontextmanager
async def running(settings: Settings, store: Store | None = None) -> AsyncIterator[App]:
    app = App(settings, store)
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


class Client:
    """A protocol-level test client; keeps every message it received."""

    _ids = itertools.count(1)

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.inbox: list[dict[str, Any]] = []
        self.seen: list[dict[str, Any]] = []
        self.name: str | None = None
        self.token: str | None = None

    @classmethod
    async def open(
        cls, port: int, subprotocol: str = "moo.v1.json", **kwargs: Any
    ) -> Client:
        return cls(await Wire.open(f"ws://127.0.0.1:{port}/", subprotocol, **kwargs))

    @classmethod
    async def open_unix(
        cls, path: str, subprotocol: str = "moo.v1.json", **kwargs: Any
    ) -> Client:
        """A connection through a server's ``--unix`` socket, as a reverse proxy on the host
        makes it."""
        return cls(await Wire.open_unix(path, subprotocol, **kwargs))

    @classmethod
    async def hello(
        cls, port: int, name: str, subprotocol: str = "moo.v1.json", **fields: Any
    ) -> Client:
        client = await cls.open(port, subprotocol)
        welcome = await client.request({"type": "hello", "name": name, **fields})
        assert welcome["type"] == "welcome", welcome
        client.name = welcome["name"]
        client.token = welcome.get("token", fields.get("token"))
        return client

    async def send(self, msg: dict[str, Any]) -> Any:
        if "id" not in msg:
            msg = {**msg, "id": next(self._ids)}
        await self.wire.send(msg)
        return msg["id"]

    async def send_raw(self, frame: str | bytes) -> None:
        await self.wire.send_frame(frame)

    async def _next(self) -> dict[str, Any]:
        msg = await self.wire.receive()
        self.seen.append(msg)
        return msg

    async def expect(
        self, pred: Callable[[dict[str, Any]], bool], timeout: float = WAIT
    ) -> dict[str, Any]:
        """The first message (buffered or new) satisfying ``pred``; others stay buffered."""
        for i, msg in enumerate(self.inbox):
            if pred(msg):
                return self.inbox.pop(i)
        async with asyncio.timeout(patience(timeout)):
            while True:
                msg = await self._next()
                if pred(msg):
                    return msg
                self.inbox.append(msg)

    async def request(self, msg: dict[str, Any], timeout: float = WAIT) -> dict[str, Any]:
        """Send ``msg`` and wait for the reply that carries its ``id`` as ``ref`` (a refusal
        by the rate limiter too: docs/protocol.md)."""
        ref = await self.send(msg)
        try:
            return await self.expect(lambda m: m.get("ref") == ref, timeout)
        except TimeoutError:
            raise AssertionError(
                f"no reply to {msg} within {patience(timeout):g}s"
            ) from None

    async def event(self, match_id: str, kind: str, **match: Any) -> dict[str, Any]:
        return await self.expect(
            lambda m: m.get("type") == "event"
            and m.get("match_id") == match_id
            and m.get("kind") == kind
            and all(m.get(k) == v for k, v in match.items())
        )

    async def of_type(self, kind: str) -> dict[str, Any]:
        return await self.expect(lambda m: m.get("type") == kind)

    async def closed(self, timeout: float = WAIT) -> int | None:
        """Wait for the server to close us; returns the close code."""
        async with asyncio.timeout(patience(timeout)):
            try:
                while True:
                    await self._next()
            except Exception:
                pass
            await self.wire.wait_closed()
        return self.wire.close_code

    def events(self, match_id: str) -> list[dict[str, Any]]:
        return [m for m in self.seen if m.get("type") == "event" and m.get("match_id") == match_id]

    @property
    def ws(self) -> ClientConnection:
        """The connection under the wire (tests pause its transport or read its close code)."""
        return self.wire.ws

    @property
    def codec(self) -> Codec:
        return self.wire.codec

    async def close(self) -> None:
        await self.wire.close()


async def free_match(port: int) -> tuple[Client, Client, str]:
    """ann (JSON) and bob (MessagePack) on the server at ``port``: a free-paced match, both
    secrets set (ann's 0123, bob's 4567) and started; the two clients and the match id."""
    ann = await Client.hello(port, "ann")
    bob = await Client.hello(port, "bob", "moo.v1.msgpack")
    sent = await ann.request({"type": "challenge", "opponent": "bob", "pacing": "free"})
    offer = await bob.expect(lambda m: m.get("challenge_id") == sent["challenge_id"])
    mid = (await bob.request({"type": "accept", "challenge_id": offer["challenge_id"]}))[
        "match_id"
    ]
    await ann.request({"type": "secret", "match_id": mid, "secret": "0123"})
    await bob.request({"type": "secret", "match_id": mid, "secret": "4567"})
    await ann.event(mid, "started")
    return ann, bob, mid


# -- a single node's SQLite store made to fail --------------------------------------------------
async def break_store(app: App, how: Callable[[sqlite3.Connection], Any]) -> None:
    """Run ``how`` on the store's own connection (the writer's: it then fails as a real disk
    would)."""
    store = app.store
    assert isinstance(store, SQLiteStore)
    try:
        async with asyncio.timeout(patience(WAIT)):
            await store._call(how)
    except TimeoutError:
        # a safety net that names the wait: once (stop 29, load 10) this test's player sat
        # idle for the server's 300 s idle timeout somewhere between its secret and its first
        # guess, and the failure said only that the connection was closed
        raise AssertionError(f"the store's writer did not run {how.__name__} within "
                             f"{patience(WAIT):g} s") from None


def disk_full(conn: sqlite3.Connection) -> None:
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")


def read_only(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA query_only = ON")
