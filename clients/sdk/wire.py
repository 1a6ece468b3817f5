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
from websockets.exceptions import InvalidHandshake, InvalidMessage, InvalidStatus
from websockets.typing import Subprotocol

from moo.errors import MooError
from moo.protocol import SUBPROTOCOLS, Codec

__all__ = ["ENCODINGS", "HandshakeRefused", "NotAnArena", "Wire", "decode_frame", "subprotocol_of"]

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


class HandshakeRefused(InvalidHandshake, MooError):
    """The WebSocket handshake failed: the message says where and what answered, in one line.

    Why classes of their own: websockets' own words ("did not receive a valid HTTP response")
    do not tell a person what is wrong, so every command that takes ``--url`` prints this one
    line instead (docs/sdk.md, "Connecting"). It is still an ``InvalidHandshake``, so the
    reconnect loops that wait out a restarting server (a proxy answering 502 meanwhile) keep
    treating it as a failed attempt, and a :class:`~moo.errors.MooError`, so ``moo`` prints it
    as one line. This class itself is an arena's own refusal (HTTP 403 for a browser origin it
    does not allow, 503 when full: docs/protocol.md).
    """

    code = "handshake_refused"

    def __init__(self, url: str, text: str) -> None:
        super().__init__(text)
        #: the address tried
        self.url = url


class NotAnArena(HandshakeRefused):
    """The address answered, but not as a MOO arena would: an HTTP server that is something
    else, or a WebSocket server that does not speak the protocol."""

    code = "not_an_arena"

    def __init__(self, url: str, found: str) -> None:
        super().__init__(url, f"{url} is not a MOO arena: {found}")
        #: what answered there, for programs that word it otherwise
        self.found = found


#: the statuses an arena itself refuses a handshake with (docs/protocol.md, the table at top)
_ARENA_REFUSALS = frozenset({403, 503})


def _refusal(url: str, exc: InvalidHandshake) -> HandshakeRefused:
    """What answered instead of a MOO handshake, in a person's words."""
    if isinstance(exc, InvalidStatus):
        response = exc.response
        body = response.body.decode("utf-8", "replace").strip() if response.body else ""
        said = f" ({body.splitlines()[0][:80]})" if body and not body.startswith("<") else ""
        status = f"HTTP {response.status_code} {response.reason_phrase}{said}"
        if response.status_code in _ARENA_REFUSALS:
            return HandshakeRefused(url, f"{url} refused the connection: {status}")
        return NotAnArena(url, f"it answered {status} to the WebSocket handshake")
    if isinstance(exc, InvalidMessage):
        cause = str(exc.__cause__ or "")
        first = cause.rsplit(": ", 1)[-1].strip() if "expected HTTP/1.1" in cause else ""
        if first:
            return NotAnArena(url, f"it answered {first!r}, an HTTP server but not a "
                                   "WebSocket one")
        return NotAnArena(url, f"it did not answer in HTTP ({cause or exc})")
    return NotAnArena(url, f"its WebSocket handshake is not a MOO arena's ({exc})")


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
        offered = subprotocol_of(encoding)
        try:
            ws = await connect(url, subprotocols=[Subprotocol(offered)], **kwargs)
        except HandshakeRefused:
            raise
        except InvalidHandshake as exc:
            raise _refusal(url, exc) from exc
        if ws.subprotocol != offered:
            # an arena always selects a v1 subprotocol it is offered (docs/protocol.md, "Encodings")
            await ws.close()
            raise NotAnArena(url, f"a WebSocket server that does not speak {offered}")
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
