"""The sockets driver (``--mode sockets``): the same generated frames over real loopback
WebSockets to a server in this process, each answered or closed for cause.

Why raw frames and not the SDK: most fuzzed frames are ones no client library would send
(broken encodings, wrong types, unknown fields), so they are built and sent byte for byte over
websockets' own ``connect``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed

from bench.fuzz.checks import SPECIFIC_CODES, ErrorCollector, Stats
from bench.fuzz.frames import JSON, MSGPACK, FrameGen, World
from moo.protocol import MAX_MESSAGE_BYTES, TRANSPORT_FACTOR, Codec
from server.app import App
from server.settings import Settings


async def fuzz_sockets(frames: int, seed: int, reply_timeout: float = 5.0) -> Stats:
    """The same generator over loopback WebSockets: every frame answered or closed for cause."""
    from websockets.asyncio.client import connect

    rng = random.Random(seed)
    world = World()
    gen = FrameGen(rng, world)
    stats = Stats()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="moo-fuzz-") as tmp:
        settings = Settings(
            host="127.0.0.1",
            port=0,
            db=str(Path(tmp) / "fuzz.sqlite3"),
            sqlite_synchronous="OFF",
            rate_per_s=1e9,
            rate_burst=10**9,
            new_names_per_address=10**9,
            secret_ms=0,
            bot_delay_ms=10**9,
            argon2_time_cost=1,  # fuzzed set_password frames: hash cheaply
            argon2_memory_kib=64,
            argon2_parallelism=1,
            static_dir=str(Path(tmp) / "web"),
        )
        app = App(settings)
        await app.start()
        logged: list[str] = []
        logging.getLogger("moo").addHandler(ErrorCollector(logged))
        try:
            clients: dict[str, Any] = {}
            tokens: dict[str, str] = {}
            names = [("ann", JSON), ("bob", MSGPACK)]
            world.names = ["ann", "bob", "nobody"]

            async def dial(name: str, sub: str) -> Any:
                ws = await connect(
                    f"ws://127.0.0.1:{app.port}/", subprotocols=[sub], max_size=None  # type: ignore[list-item]
                )
                codec = Codec(sub)
                hello: dict[str, Any] = {"type": "hello", "name": name, "id": 0, "bot": True}
                if name in tokens:
                    hello["token"] = tokens[name]
                await ws.send(codec.encode(hello))
                welcome = codec.decode(await ws.recv())
                assert welcome["type"] == "welcome", welcome
                tokens.setdefault(name, welcome.get("token"))
                return ws

            for name, sub in names:
                clients[name] = await dial(name, sub)
            sent = 0
            while sent < frames:
                name, sub = rng.choice(names)
                codec = Codec(sub)
                frame, label = gen.frame(name, codec)
                ws = clients[name]
                raw = frame.encode("utf-8", "surrogatepass") if isinstance(frame, str) else frame
                size = len(raw)
                sent += 1
                stats.frames += 1
                stats.by_label[label.split(":")[0]] += 1
                try:
                    await ws.send(frame)
                    async with asyncio.timeout(reply_timeout):
                        reply = codec.decode(await ws.recv())
                except UnicodeEncodeError:
                    stats.by_code["(client cannot send)"] += 1
                    continue
                except Exception as exc:
                    code = getattr(getattr(exc, "rcvd", None), "code", None)
                    if size > MAX_MESSAGE_BYTES * TRANSPORT_FACTOR and code == 1009:
                        stats.refused += 1
                        stats.by_code["close 1009"] += 1
                    else:
                        stats.violations.append(
                            f"[{label}] {type(exc).__name__} close={code}; frame={frame[:120]!r}"
                        )
                    clients[name] = await dial(name, sub)
                    continue
                # drain anything else already queued (events of accepted actions)
                with contextlib.suppress(TimeoutError, ConnectionClosed):
                    async with asyncio.timeout(0.002):
                        while True:
                            await ws.recv()
                if ws.close_code is not None:  # closed right after what it had queued
                    if size > MAX_MESSAGE_BYTES * TRANSPORT_FACTOR and ws.close_code == 1009:
                        stats.by_code["close 1009"] += 1
                    else:
                        stats.violations.append(
                            f"[{label}] closed {ws.close_code}; frame={frame[:1000]!r}"
                        )
                    clients[name] = await dial(name, sub)
                if reply.get("type") == "signed_out":  # sign_out_all rotated the token
                    tokens[name] = reply["token"]
                if reply.get("type") == "error":
                    stats.refused += 1
                    stats.by_code[reply.get("code")] += 1
                    if reply.get("code") not in SPECIFIC_CODES:
                        stats.violations.append(f"[{label}] unspecific {reply}")
                else:
                    stats.accepted += 1
                if logged:
                    stats.violations.append(f"[{label}] server logged {logged[:2]}")
                    logged.clear()
            for ws in clients.values():
                await ws.close()
            health_ok = app.health()["status"] == "ok"
            if not health_ok:
                stats.violations.append("server unhealthy after the run")
        finally:
            await app.stop()
    stats.seconds = time.monotonic() - t0
    return stats
