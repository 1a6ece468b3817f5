"""One client session: hello, then a validated request loop until the socket closes.

Every frame is checked in this order before anything can change: rate (token bucket), size,
decoding and schema (``moo.protocol``), then the request's own rules in the lobby or the match.
A refused request gets ``{type: "error", code, message, ref}`` and leaves all state as it was;
only flooding (and, at the transport, oversized frames) ends the connection.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import secrets
import time
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from moo import __version__
from moo.errors import (
    BadToken,
    InvalidName,
    MooError,
    NameTaken,
    NotAvailable,
    NotHello,
    RateLimited,
    StorageError,
)
from moo.protocol import (
    JSON_SUBPROTOCOL,
    PROTOCOL_VERSION,
    SUBPROTOCOLS,
    Codec,
    validate_client,
)
from server.connection import (
    CLOSE_POLICY,
    CLOSE_REPLACED,
    Connection,
    error_message,
)
from server.ratelimit import TokenBucket

if TYPE_CHECKING:
    from server.app import App

__all__ = ["hash_token", "run_session", "valid_name"]

log = logging.getLogger("moo.session")

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,24}$")
#: One codec per subprotocol for the whole server: a codec holds a MessagePack packer whose
#: buffer would otherwise cost every connection its own pages.
_CODECS = {name: Codec(name) for name in SUBPROTOCOLS}
#: Refused messages in a row (over the rate) before the connection is closed with 1008.
_MAX_STRIKES = 10


def hash_token(token: str) -> str:
    """Only this digest is stored, so a leaked database does not leak anyone's seat."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def valid_name(name: str) -> bool:
    return bool(_NAME_RE.match(name))


async def run_session(app: App, ws: ServerConnection) -> None:
    settings = app.settings
    codec = _CODECS[ws.subprotocol or JSON_SUBPROTOCOL]
    conn = Connection(ws, codec=codec, queue_max=settings.send_queue_max)
    app.connections.add(conn)
    bucket = TokenBucket(settings.rate_per_s, settings.rate_burst)
    strikes = 0
    # Idle timeout and keepalive: server/heartbeat.py reads the stamp set on every frame.
    clock = asyncio.get_running_loop().time
    try:
        # -- hello, within the handshake timeout ----------------------------------------------
        try:
            async with asyncio.timeout(settings.handshake_timeout_s):
                while conn.player is None:
                    frame = await ws.recv()
                    conn.last_in = clock()
                    if not bucket.take():
                        conn.close(CLOSE_POLICY, "rate limit exceeded")
                        return
                    raw: Any = None
                    try:
                        raw = codec.decode(frame)
                        msg = validate_client(raw)
                        if msg["type"] != "hello":
                            raise NotHello("the first message must be hello")
                        await _hello(app, conn, msg)
                    except MooError as exc:
                        conn.send(_error_reply(exc, raw))
        except TimeoutError:
            conn.close(CLOSE_POLICY, "no hello in time")
            return
        # -- requests -----------------------------------------------------------------------------
        # The handshake is over: its headers are only memory now (~2.5 KiB a connection).
        # websockets' parser keeps the request object itself alive, so it is emptied in place.
        for message in (ws.request, ws.response):
            if message is not None:
                message.headers.clear()
        raw, msg, frame = None, {}, b""
        while not conn.closing:
            frame = await ws.recv()
            conn.last_in = clock()
            if not bucket.take():
                strikes += 1
                if strikes >= _MAX_STRIKES:
                    conn.close(CLOSE_POLICY, "rate limit exceeded")
                    return
                conn.send_error(RateLimited("too many messages: slow down"))
                continue
            strikes = 0
            raw = None
            received = time.perf_counter()
            try:
                raw = codec.decode(frame)
                msg = validate_client(raw)
                if msg["type"] in _MOVES:  # the hot path: no coroutine, nothing awaited
                    _move(app, conn, msg, received)
                else:
                    await _dispatch(app, conn, msg)
            except MooError as exc:
                conn.send(_error_reply(exc, raw))
            # Nothing of this request stays alive while the connection waits for the next one.
            raw, frame = None, b""
    except ConnectionClosed:
        pass
    finally:
        app.connections.discard(conn)
        app.arena.detach(conn)
        app.lobby.leave(conn)
        await conn.finish()


async def _hello(app: App, conn: Connection, msg: dict[str, Any]) -> None:
    name = msg["name"].strip()
    token = msg.get("token")
    bot = bool(msg.get("bot", False))
    new_token: str | None = None
    if token is not None:
        record = await app.store.player_by_token(hash_token(token))
        if record is None:
            raise BadToken("unknown token: it does not belong to any player")
        name = record.name
    else:
        if not valid_name(name):
            raise InvalidName("a name is 1-24 letters, digits, '_', '-' or '.'")
        if name.casefold() in app.reserved_names:
            raise NameTaken(f"the name {name!r} is reserved for a hosted bot")
        new_token = secrets.token_urlsafe(24)
        try:
            record = await app.store.register_player(name, hash_token(new_token), bot)
        except NameTaken:
            raise NameTaken(
                f"the name {name!r} is taken; send its token to reclaim it, or pick another"
            ) from None
        except StorageError:
            raise
        name = record.name
    if conn.closing:
        return
    conn.player = name
    old = app.lobby.arrive(conn, name, record.bot or bot)
    if old is not None:
        app.arena.detach(old)
        old.close(CLOSE_REPLACED, "replaced by a newer connection")
    reply: dict[str, Any] = {
        "type": "welcome",
        "name": name,
        "protocol": PROTOCOL_VERSION,
        "server": f"moo-arena/{__version__}",
        "matches": app.arena.player_matches(name),
    }
    if new_token is not None:
        reply["token"] = new_token
    if msg.get("id") is not None:
        reply["ref"] = msg["id"]
    conn.send(reply)


async def _dispatch(app: App, conn: Connection, msg: dict[str, Any]) -> None:
    """Every request but the moves (``_move``): lobby, replays, queries."""
    kind = msg["type"]
    ref = msg.get("id")
    arena, lobby = app.arena, app.lobby
    if kind == "ping":
        conn.send(_ref({"type": "pong"}, ref))
    elif kind == "hello":
        raise NotAvailable("hello was already said on this connection")
    elif kind == "queue":
        lobby.enqueue(conn, msg)
    elif kind == "unqueue":
        lobby.unqueue(conn, ref)
    elif kind == "challenge":
        lobby.challenge(conn, msg)
    elif kind in ("accept", "decline"):
        lobby.answer(conn, msg)
    elif kind == "room_create":
        lobby.room_create(conn, msg)
    elif kind == "room_join":
        lobby.room_join(conn, msg)
    elif kind == "play_bot":
        lobby.play_bot(conn, msg)
    elif kind == "rematch":
        lobby.rematch(conn, msg)
    elif kind == "resume":
        await arena.resume(conn, msg["match_id"], msg.get("last_seq", 0), ref)
    elif kind == "watch":
        await arena.watch(conn, msg["match_id"], msg.get("last_seq", 0), ref)
    elif kind == "unwatch":
        arena.unwatch(conn, msg["match_id"])
        conn.send(_ref({"type": "unwatched", "match_id": msg["match_id"]}, ref))
    elif kind == "matches":
        conn.send(_ref({"type": "matches", "matches": arena.listing()}, ref))
    elif kind == "leaderboard":
        by = msg.get("by", "rating")
        rows = app.hooks.ratings.leaderboard(by)
        conn.send(_ref({"type": "leaderboard", "by": by, "players": rows}, ref))
    else:  # pragma: no cover - the schema admits only the types above and the moves
        raise NotAvailable(f"{kind!r} is not supported by this server")


_MOVES = frozenset(("secret", "guess", "resign"))


def _move(app: App, conn: Connection, msg: dict[str, Any], received: float | None) -> None:
    """A seat's ``secret`` / ``guess`` / ``resign``: synchronous all the way to the store."""
    arena = app.arena
    if msg["match_id"] not in arena.live:
        arena.check_finished(msg["match_id"])
    arena.act(conn, msg, received)


def _error_reply(exc: MooError, raw: Any) -> dict[str, Any]:
    """The error for a refused frame, echoing its ``id`` and ``match_id`` when they are sane."""
    ref = match_id = None
    if isinstance(raw, dict):
        rid = raw.get("id")
        if (isinstance(rid, str) and len(rid) <= 64) or (
            isinstance(rid, int) and not isinstance(rid, bool) and 0 <= rid < 2**53
        ):
            ref = rid
        mid = raw.get("match_id")
        if isinstance(mid, str) and len(mid) <= 40:
            match_id = mid
    reply = error_message(exc, ref)
    if match_id is not None:
        reply["match_id"] = match_id
    return reply


def _ref(msg: dict[str, Any], ref: Any) -> dict[str, Any]:
    if ref is not None:
        msg["ref"] = ref
    return msg
