"""One client session: hello, then a validated request loop until the socket closes.

Every frame is checked in this order before anything can change: rate (token bucket), size,
decoding and schema (``moo.protocol``), then the request's own rules in the lobby or the match.
A refused request gets ``{type: "error", code, message, ref}`` and leaves all state as it was;
only flooding (and, at the transport, frames over ``TRANSPORT_FACTOR`` times the message limit)
ends the connection.

The session is typed against :class:`server.context.ServerContext`, not the ``App`` that
creates it, so ``server.app`` imports this module and never the other way round.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from functools import cache
from typing import Any

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
    SchemaError,
    TooManyAttempts,
    TooManyNames,
)
from moo.protocol import (
    JSON_SUBPROTOCOL,
    PROTOCOL_VERSION,
    Codec,
    valid_id,
    validate_client,
)
from moo.variants import CLASSIC_SPEC, is_classic, parse_rules_spec, rules_spec
from server.accounts import CLOSE_SIGNED_OUT, hash_token, new_token
from server.connection import (
    CLOSE_INTERNAL_ERROR,
    CLOSE_POLICY,
    CLOSE_REPLACED,
    Connection,
    FrameConnection,
    error_message,
)
from server.context import ServerContext
from server.proxy import UNIX_PEER, client_address
from server.ratelimit import TokenBucket
from server.requests import MATCH_REQUESTS, answer_from_log
from server.storage import PlayerRecord

__all__ = ["hash_token", "run_session", "valid_name"]

log = logging.getLogger("moo.session")

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,24}$")


@cache
def _codec(subprotocol: str, max_bytes: int) -> Codec:
    """One codec per subprotocol (and limit) for the whole server: a codec holds a MessagePack
    packer whose buffer would otherwise cost every connection its own pages."""
    return Codec(subprotocol, max_bytes)


#: Refused messages in a row (over the rate) before the connection is closed with 1008.
_MAX_STRIKES = 10


def valid_name(name: str) -> bool:
    return bool(_NAME_RE.match(name))


class _Stop:
    """:meth:`_Receiver.check`'s verdict on a connection over the rate too long: close it."""


_STOP = _Stop()


class _Receiver:
    """The checks every frame goes through, and the moves handled as the frame arrives.

    :meth:`check` is the order of docs/protocol.md (rate, size, decoding, schema), and a
    refused frame is answered there. :meth:`on_frame` is the handler a
    :class:`~server.connection.FrameConnection` calls while the session's task waits idle:
    a move (the hot path) is applied in the same callback that parsed its frame; anything
    that must await is left, checked, in :attr:`deferred` for the task.
    """

    __slots__ = ("app", "bucket", "clock", "codec", "conn", "deferred", "handler", "strikes")

    def __init__(self, app: ServerContext, conn: Connection, codec: Codec) -> None:
        self.app = app
        self.conn = conn
        self.codec = codec
        settings = app.settings
        self.bucket = TokenBucket(settings.rate_per_s, settings.rate_burst)
        #: refused (over-rate) messages in a row, before and after hello alike
        self.strikes = 0
        # Idle timeout and keepalive: server/heartbeat.py reads the stamp set on every frame.
        self.clock = asyncio.get_running_loop().time
        #: a checked request :meth:`on_frame` left for the task (the frame ``recv()`` returns
        #: next is the one it came in), or the verdict to close
        self.deferred: dict[str, Any] | _Stop | None = None
        self.handler = self.on_frame  # one bound method, set again and again as on_message

    def check(self, frame: str | bytes) -> dict[str, Any] | _Stop | None:
        """The frame's valid message; None if it was refused (and answered)."""
        conn = self.conn
        conn.last_in = self.clock()
        if not self.bucket.take():
            self.strikes += 1
            if self.strikes >= _MAX_STRIKES:
                return _STOP
            # answered with the refused request's id when the frame decodes, so that the
            # client knows which of its requests to send again (docs/protocol.md, "Rate")
            conn.send(_error_reply(RateLimited("too many messages: slow down"),
                                   self._peek(frame)))
            return None
        self.strikes = 0
        raw: Any = None
        try:
            raw = self.codec.decode(frame)
            return validate_client(raw)
        except MooError as exc:
            conn.send(_error_reply(exc, raw))
            return None

    def _peek(self, frame: str | bytes) -> Any:
        """The decoded frame, unchecked, or None: only for the ``id`` a refusal echoes (a
        refused message is not acted on, whatever it says)."""
        try:
            return self.codec.decode(frame)
        except MooError:
            return None

    def on_frame(self, frame: str | bytes) -> bool:
        """A whole message, straight from the parser; False: let the task have it."""
        conn = self.conn
        if conn.closing:  # replaced or closing: its seats belong to somebody else now
            return True
        try:
            received = time.perf_counter()
            msg = self.check(frame)
            if msg is None:
                return True
            # (a bot worker's connection has no player and no seat: its task refuses moves)
            if isinstance(msg, dict) and msg["type"] in _MOVES and conn.player is not None:
                try:
                    _move(self.app, conn, msg, received)
                except MooError as exc:
                    conn.send(_error_reply(exc, msg))
                return True
            self.deferred = msg
            return False
        except Exception:  # the task would have died with it: the same 1011 close
            log.exception("request of %s failed; closing", conn.player)
            conn.close(CLOSE_INTERNAL_ERROR, "internal error")
            return True


async def run_session(app: ServerContext, ws: ServerConnection) -> None:
    settings = app.settings
    codec = _codec(ws.subprotocol or JSON_SUBPROTOCOL, settings.max_message_bytes)
    conn = Connection(ws, codec=codec, queue_max=settings.send_queue_max)
    app.connections.add(conn)
    rx = _Receiver(app, conn, codec)
    # While this task waits with nothing queued, a FrameConnection hands each message to
    # rx.on_frame as it is parsed (moves end there); what reaches recv() is a request that
    # awaits something, already checked (rx.deferred), or one that took websockets' path.
    direct = ws if isinstance(ws, FrameConnection) else None
    try:
        # -- hello, within the handshake timeout ----------------------------------------------
        listed: list[dict[str, Any]] = []  # welcome.matches: the seats given back
        #: a bot worker's connection (``worker_hello`` instead of ``hello``): no player
        worker = False
        try:
            async with asyncio.timeout(settings.handshake_timeout_s):
                while conn.player is None and not worker:
                    frame = await ws.recv()
                    if direct is not None:
                        direct.queued -= 1
                    msg = rx.check(frame)
                    if msg is None:
                        continue
                    if isinstance(msg, _Stop):
                        conn.close(CLOSE_POLICY, "rate limit exceeded")
                        return
                    try:
                        if msg["type"] == "ping":  # "any time": before hello too
                            conn.send(_ref({"type": "pong"}, msg.get("id")))
                            continue
                        if msg["type"] == "worker_hello":  # docs/protocol.md, "Bot workers"
                            worker = app.ladder.worker_hello(conn, msg)
                            continue
                        if msg["type"] != "hello":
                            raise NotHello("the first message must be hello")
                        listed = await _hello(app, conn, msg)
                    except MooError as exc:
                        conn.send(_error_reply(exc, msg))
        except TimeoutError:
            conn.close(CLOSE_POLICY, "no hello in time")
            return
        # Back into every seat at once (`match`, the events so far, then live events), outside
        # the handshake timeout: a program with many matches may take a while to replay.
        if conn.player is not None:
            await app.matches.rejoin(conn, conn.player, listed)
        conn.seats_given_back()
        # -- requests -----------------------------------------------------------------------------
        # The handshake is over: its headers are only memory now (~2.5 KiB a connection).
        # websockets' parser keeps the request object itself alive, so it is emptied in place.
        for message in (ws.request, ws.response):
            if message is not None:
                message.headers.clear()
        msg = None
        frame = b""
        while not conn.closing:
            if direct is not None and direct.queued == 0:
                direct.deliver_to(rx.handler)
            frame = await ws.recv()
            if direct is not None:
                direct.queued -= 1
            msg, rx.deferred = rx.deferred, None
            if msg is None:
                if conn.closing:  # replaced while it waited: its seats belong to the newer one
                    break
                received = time.perf_counter()
                msg = rx.check(frame)
                if msg is None:
                    continue
            else:
                received = time.perf_counter()
            if isinstance(msg, _Stop):
                conn.close(CLOSE_POLICY, "rate limit exceeded")
                return
            try:
                if worker:
                    await _worker_dispatch(app, conn, msg)
                elif msg["type"] in _MOVES:
                    _move(app, conn, msg, received)
                else:
                    await _dispatch(app, conn, msg)
            except MooError as exc:
                conn.send(_error_reply(exc, msg))
            # Nothing of this request stays alive while the connection waits for the next one.
            msg, frame = None, b""
    except ConnectionClosed:
        pass
    finally:
        if direct is not None:
            direct.deliver_to(None)
        app.connections.discard(conn)
        app.matches.detach(conn)
        app.lobby.leave(conn)
        app.tournaments.forget(conn)
        app.ladder.forget(conn)
        await conn.finish()


async def _hello(
    app: ServerContext, conn: Connection, msg: dict[str, Any]
) -> list[dict[str, Any]]:
    token = msg.get("token")
    if "name" not in msg and token is None:  # a token alone names the player
        raise SchemaError("'hello' needs field 'name'")
    name = str(msg.get("name", "")).strip()
    password = msg.get("password")
    bot = bool(msg.get("bot", False))
    new_token_: str | None = None
    if password is not None:  # signing in to a secured name, from any device
        if token is not None:
            raise SchemaError("send either 'token' or 'password' in hello, not both")
        account, new_token_ = await app.accounts.sign_in(name, password, _address(app, conn))
        record = PlayerRecord(account.name, account.bot, 0, secured=True)
        name = record.name
    elif token is not None:
        found = await app.store.player_by_token(hash_token(token))
        if found is None:
            raise BadToken("unknown token: it does not belong to any player")
        record = found
        name = record.name
    else:
        if not valid_name(name):
            raise InvalidName("a name is 1-24 letters, digits, '_', '-' or '.'")
        if name.casefold() in app.reserved_names:
            raise NameTaken(f"the name {name!r} is reserved for a hosted bot")
        await app.accounts.spend_new_name(_address(app, conn))
        new_token_ = new_token()
        try:
            record = await app.store.register_player(name, hash_token(new_token_), bot)
        except NameTaken:
            # the name is owned: only its token or its password takes it back
            # (docs/protocol.md: bad_token)
            raise BadToken(
                f"the name {name!r} belongs to another player: sign in with its password or"
                " token, or pick another name"
            ) from None
        name = record.name
    if conn.closing:
        return []
    conn.player = name
    old = app.lobby.arrive(conn, name, record.bot or bot)
    if old is not None:
        # The seats pass straight to this connection (below): the opponent sees no away/back,
        # because the seat never lacked a connection.
        app.matches.release(old)
        old.close(CLOSE_REPLACED, "replaced by a newer connection")
    # The seats given back right after the welcome are exactly the matches it lists: what
    # runs where may change between the two (a takeover, the database back), and a match the
    # client was not told of it resumes itself, so a second list would replay it twice.
    matches = await app.matches.player_matches(name)
    reply: dict[str, Any] = {
        "type": "welcome",
        "name": name,
        "protocol": PROTOCOL_VERSION,
        "server": f"moo-arena/{__version__}",
        "matches": matches,
        "secured": record.secured,
        # the rules this server offers, the default first (docs/protocol.md, "Variants")
        "variants": [rules.to_dict() for rules in app.arena.variants],
    }
    if new_token_ is not None:
        reply["token"] = new_token_
    if msg.get("id") is not None:
        reply["ref"] = msg["id"]
    conn.send(reply)
    return matches


async def _dispatch(app: ServerContext, conn: Connection, msg: dict[str, Any]) -> None:
    """Every request but the moves (``_move``): lobby, replays, queries."""
    kind = msg["type"]
    ref = msg.get("id")
    matches, lobby = app.matches, app.lobby
    if "request_id" in msg and kind in MATCH_REQUESTS and await answer_from_log(
        app.store, matches, app.arena.match_message, conn, msg
    ):
        return
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
    elif kind == "room_cancel":
        lobby.room_cancel(conn, msg)
    elif kind == "room_join":
        lobby.room_join(conn, msg)
    elif kind == "play_bot":
        lobby.play_bot(conn, msg)
    elif kind == "rematch":
        await lobby.rematch(conn, msg)
    elif kind == "resume":
        await matches.resume(conn, msg["match_id"], msg.get("last_seq", 0), ref)
    elif kind == "watch":
        await matches.watch(conn, msg["match_id"], msg.get("last_seq", 0), ref)
    elif kind == "unwatch":
        matches.unwatch(conn, msg["match_id"])
        conn.send(_ref({"type": "unwatched", "match_id": msg["match_id"]}, ref))
    elif kind == "matches":
        conn.send(_ref({"type": "matches", "matches": await matches.list_matches()}, ref))
    elif kind == "leaderboard":
        by = msg.get("by", "rating")
        rules = parse_rules_spec(msg.get("variant") or CLASSIC_SPEC)
        family = "" if is_classic(rules) else rules_spec(rules)
        rows = await app.history.decorate(await app.hooks.ratings.board(by, variant=family))
        conn.send(_ref({"type": "leaderboard", "by": by, "variant": rules_spec(rules),
                        "players": rows}, ref))
    elif kind == "analysis":
        match_id = msg["match_id"]
        live = matches.is_live(match_id)
        conn.send(_ref(await app.arena.analysis.analysis(match_id, live), ref))
    elif kind in _ACCOUNT_REQUESTS:
        await _account_request(app, conn, msg)
    elif kind in _TOURNAMENT_REQUESTS:
        _tournament_request(app, conn, msg)
    elif kind.startswith("ladder_"):  # docs/protocol.md, "Ladder"
        await app.ladder.request(conn, msg)
    elif kind.startswith("worker_"):
        raise NotAvailable("only a bot worker's connection (worker_hello instead of hello) "
                           "sends worker_* messages")
    else:  # pragma: no cover - the schema admits only the types above and the moves
        raise NotAvailable(f"{kind!r} is not supported by this server")


_MOVES = frozenset(("secret", "guess", "resign"))
_ACCOUNT_REQUESTS = frozenset(
    ("set_password", "sign_out_all", "history", "match_record", "player")
)


_TOURNAMENT_REQUESTS = frozenset((
    "tournament_create", "tournaments", "tournament_join", "tournament_leave",
    "tournament_watch", "tournament_unwatch", "tournament_start",
))


async def _worker_dispatch(app: ServerContext, conn: Connection, msg: dict[str, Any]) -> None:
    """A bot worker's connection: its ``worker_*`` messages and ``ping``, nothing else (it
    has no player: docs/protocol.md, "Bot workers")."""
    kind = msg["type"]
    if kind == "ping":
        conn.send(_ref({"type": "pong"}, msg.get("id")))
    elif kind == "worker_hello":
        raise NotAvailable("worker_hello was already said on this connection")
    elif kind.startswith("worker_"):
        await app.ladder.worker_request(conn, msg)
    else:
        raise NotAvailable(f"a bot worker's connection sends only worker_* messages, not "
                           f"{kind!r}")


def _tournament_request(app: ServerContext, conn: Connection, msg: dict[str, Any]) -> None:
    """Hosted tournaments (server/tournaments.py; docs/protocol.md, "Tournaments"): run here,
    or on a cluster by the lobby's leader."""
    app.tournaments.request(conn, msg)


async def _account_request(app: ServerContext, conn: Connection, msg: dict[str, Any]) -> None:
    """Accounts (server/accounts.py) and history (server/history.py): docs/protocol.md."""
    kind = msg["type"]
    ref = msg.get("id")
    me = conn.player
    assert me is not None
    if kind == "set_password":
        await app.accounts.set_password(
            me, msg["password"], msg.get("old_password"), _address(app, conn)
        )
        conn.send(_ref({"type": "password_set"}, ref))
    elif kind == "sign_out_all":
        token = await app.accounts.sign_out_all(me)
        folded = me.casefold()
        for other in list(app.connections):
            if other is not conn and other.player is not None and (
                other.player.casefold() == folded
            ):
                app.matches.detach(other)
                other.close(CLOSE_SIGNED_OUT, "signed_out")
        conn.send(_ref({"type": "signed_out", "token": token}, ref))
    elif kind == "history":
        conn.send(_ref(await app.history.history(me, msg), ref))
    elif kind == "match_record":
        match_id = msg["match_id"]
        reply = await app.history.match_record(match_id, app.matches.is_live(match_id))
        conn.send(_ref(reply, ref))
    else:
        conn.send(_ref(await app.history.player(msg["name"]), ref))


def _address(app: ServerContext, conn: Connection) -> str:
    """The client's IP address, the key of the per-address sign-in limit: the TCP peer's, or,
    when the peer is a trusted proxy (``trusted_proxies``), the one its X-Forwarded-For names
    (server/proxy.py)."""
    peer = getattr(conn.ws, "remote_address", None)
    if isinstance(peer, tuple) and peer:
        address = str(peer[0])
    else:  # a Unix socket (``--unix``) has no peer address: the proxy on this host
        address = UNIX_PEER if isinstance(peer, str) else "?"
    if app.settings.trusted_proxies:
        request = getattr(conn.ws, "request", None)
        headers = getattr(request, "headers", None)
        forwarded = headers.get_all("X-Forwarded-For") if headers is not None else []
        address = client_address(address, forwarded, tuple(app.settings.trusted_proxies))
    return address


def _move(
    app: ServerContext, conn: Connection, msg: dict[str, Any], received: float | None
) -> None:
    """A seat's ``secret`` / ``guess`` / ``resign``: synchronous all the way to the store (or,
    for a match another node runs, to the bus)."""
    app.matches.act(conn, msg, received)


def _error_reply(exc: MooError, raw: Any) -> dict[str, Any]:
    """The error for a refused frame, echoing its ``id`` and ``match_id`` when they are sane."""
    ref = match_id = None
    if isinstance(raw, dict):
        rid = raw.get("id")
        if rid is not None and valid_id(rid):
            ref = rid
        mid = raw.get("match_id")
        if isinstance(mid, str) and len(mid) <= 40:
            match_id = mid
    reply = error_message(exc, ref)
    if isinstance(exc, TooManyAttempts | TooManyNames):
        reply["retry_after_ms"] = exc.retry_after_ms
    if match_id is not None and "match_id" not in reply:  # in_match names the live one
        reply["match_id"] = match_id
    return reply


def _ref(msg: dict[str, Any], ref: Any) -> dict[str, Any]:
    if ref is not None:
        msg["ref"] = ref
    return msg
