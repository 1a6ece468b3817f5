"""The SDK's socket: one WebSocket connection that speaks the protocol's two encodings.

Why a layer of its own, under :class:`~clients.sdk.Client`: every program of the project that
talks to a server opens, encodes and decodes its frames here, so a fix to any of that (the
subprotocol offer, the frame size, how a frame that is not a map is refused) reaches all of
them. The :class:`~clients.sdk.Client` builds the session on it (hello, tokens, reconnects,
``resume`` with retries, dedup by ``seq``); the test suite's protocol client
(``tests/server_support.py``) uses it bare, because a test must see and send the wire exactly
as it is, malformed frames included, with none of the Client's repairs in between.

Only two programs keep a socket of their own, each with its reason at the top of its file:
``tests/server/test_conformance.py`` and ``bench/harness/player.py`` are written from
docs/protocol.md alone (they check that the document is enough), and ``bench/rawbot.py``
measures the server with as little client as possible.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import msgpack
from websockets.asyncio.client import ClientConnection, connect, unix_connect
from websockets.typing import Subprotocol

from moo.protocol import SUBPROTOCOLS, Codec

__all__ = ["ENCODINGS", "Wire", "decode_frame", "subprotocol_of"]

#: The encodings by their short name (``--encoding json``) and their subprotocol.
ENCODINGS = {"json": SUBPROTOCOLS[0], "msgpack": SUBPROTOCOLS[1]}
#: Frames up to this size are accepted from the server (a ``leaderboard`` or a long
#: ``history`` page is larger than the 4096 bytes a client may send).
MAX_FRAME = 2**20


def subprotocol_of(encoding: str) -> str:
    """``json``/``msgpack`` or a subprotocol name (``moo.v1.json``) -> the subprotocol."""
    if encoding in ENCODINGS:
        return ENCODINGS[encoding]
    if encoding in SUBPROTOCOLS:
        return encoding
    raise ValueError(f"encoding must be one of {sorted(ENCODINGS)}, got {encoding!r}")


def decode_frame(frame: str | bytes) -> dict[str, Any]:
    """Decode a server frame: a text frame is JSON, a binary one MessagePack, always a map.

    Raises ValueError for anything else. Unlike the server's :class:`~moo.protocol.Codec` it
    has no 4096-byte cap: replies may be larger than requests.
    """
    if isinstance(frame, str):
        try:
            value = json.loads(frame)
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from None
    else:
        try:
            value = msgpack.unpackb(frame, raw=False, strict_map_key=False)
        except Exception as exc:
            raise ValueError(f"not MessagePack: {type(exc).__name__}") from None
    if not isinstance(value, dict):
        raise ValueError("a server message is a map")
    return value


class Wire:
    """One open connection: messages (maps) in and out, in the negotiated encoding."""

    def __init__(self, ws: ClientConnection) -> None:
        #: The underlying connection (a test aborts its transport to simulate a network
        #: failure, or reads its close code).
        self.ws = ws
        self.codec = Codec(ws.subprotocol or SUBPROTOCOLS[0])

    @classmethod
    async def open(cls, url: str, encoding: str = "json", **kwargs: Any) -> Wire:
        """Connect to ``url`` offering one subprotocol; ``kwargs`` go to websockets' connect."""
        kwargs.setdefault("max_size", MAX_FRAME)
        ws = await connect(url, subprotocols=[Subprotocol(subprotocol_of(encoding))], **kwargs)
        return cls(ws)

    @classmethod
    async def open_unix(cls, path: str, encoding: str = "json", **kwargs: Any) -> Wire:
        """Connect through a server's Unix socket (``--unix``), as a reverse proxy on the host
        does."""
        kwargs.setdefault("max_size", MAX_FRAME)
        ws = await unix_connect(
            path, "ws://localhost/", subprotocols=[Subprotocol(subprotocol_of(encoding))],
            **kwargs,
        )
        return cls(ws)

    @property
    def subprotocol(self) -> str:
        return self.codec.subprotocol

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(self.codec.encode(message))

    async def send_frame(self, frame: str | bytes) -> None:
        """Send a frame as it is: tests send malformed ones on purpose."""
        await self.ws.send(frame)

    async def receive(self) -> dict[str, Any]:
        """The next message; raises ConnectionClosed at the end, ValueError for a bad frame."""
        return decode_frame(await self.ws.recv())

    async def frames(self) -> AsyncIterator[str | bytes]:
        """Every frame until the connection closes (then the iteration just ends)."""
        async for frame in self.ws:
            yield frame

    @property
    def close_code(self) -> int | None:
        return self.ws.close_code

    @property
    def close_reason(self) -> str:
        return self.ws.close_reason or ""

    async def wait_closed(self) -> None:
        await self.ws.wait_closed()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self.ws.close(code, reason)
