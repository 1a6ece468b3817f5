"""Protocol v1: the message schema and its two encodings, JSON and MessagePack.

The same messages travel as JSON in text frames (subprotocol ``moo.v1.json``) or as MessagePack
in binary frames (``moo.v1.msgpack``). Decoding validates everything a client sends against
:data:`CLIENT_MESSAGES` before any other code sees it, so the lobby and the match state machine
only ever receive well-typed values; every rejection raises a specific
:class:`~moo.errors.ProtocolError` whose ``code`` goes back to the client. See docs/protocol.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgpack
import msgspec

from moo.errors import DecodeError, MessageTooLarge, SchemaError, UnknownMessage

__all__ = [
    "CLIENT_MESSAGES",
    "MAX_ID",
    "MAX_MESSAGE_BYTES",
    "MAX_PROGRAM_BYTES",
    "PROTOCOL_VERSION",
    "REQUEST_ID_TYPES",
    "SUBPROTOCOLS",
    "TRANSPORT_FACTOR",
    "Codec",
    "Field",
    "codec_for",
    "compact_json",
    "decode_client",
    "valid_id",
    "validate_client",
]

PROTOCOL_VERSION = 1
JSON_SUBPROTOCOL = "moo.v1.json"
MSGPACK_SUBPROTOCOL = "moo.v1.msgpack"
SUBPROTOCOLS = (JSON_SUBPROTOCOL, MSGPACK_SUBPROTOCOL)
MAX_MESSAGE_BYTES = 4096
#: The transport's ceiling, as a multiple of the message limit: a frame up to this many times
#: ``max_message_bytes`` is read and refused with ``too_large`` (the connection stays usable);
#: only a larger one makes the WebSocket layer close the connection with 1009.
TRANSPORT_FACTOR = 16

POOLS = ("any", "humans", "bots")
PACINGS = ("lockstep", "free")
BOARDS = ("rating", "average")
TOURNAMENT_FORMATS = ("round-robin", "swiss", "arena")
TOURNAMENT_SECRETS = ("server", "players")


@dataclass(frozen=True)
class Field:
    """One field of a client message: its Python type, whether required, and its bounds."""

    type: type
    required: bool = True
    max_len: int = 64
    choices: tuple[str, ...] | None = None
    min: int = 0
    max: int = 2**31 - 1

    def check(self, name: str, value: Any) -> None:
        kind = type(value)
        if kind is str and self.type is str and self.choices is None:  # the common case
            if len(value) > self.max_len:
                raise SchemaError(f"field {name!r} is longer than {self.max_len} characters")
            return
        # bool is an int subclass; never accept one for the other.
        if isinstance(value, bool) != (self.type is bool) or not isinstance(value, self.type):
            raise SchemaError(f"field {name!r} must be {_TYPE_NAMES[self.type]}")
        if isinstance(value, str):
            if len(value) > self.max_len:
                raise SchemaError(f"field {name!r} is longer than {self.max_len} characters")
            if self.choices is not None and value not in self.choices:
                raise SchemaError(f"field {name!r} must be one of: {', '.join(self.choices)}")
        if isinstance(value, int) and not isinstance(value, bool) and not (
            self.min <= value <= self.max
        ):
            raise SchemaError(f"field {name!r} must be between {self.min} and {self.max}")


_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true or false", dict: "an object"}

_MATCH = Field(str, max_len=40)
_PACING = Field(str, required=False, choices=PACINGS)
#: a secret or guess: no cap of its own below the message size, so that the rules answer
#: ``wrong_length`` with the characters actually sent, however many (docs/protocol.md)
_CODE = Field(str, max_len=MAX_MESSAGE_BYTES)
_RATED = Field(bool, required=False)
#: the match's rules; its contents are checked by moo.variants.parse_rules (code bad_rules)
_RULES = Field(dict, required=False)
#: the opt-in assistant of practice matches (needs rated: false; docs/protocol.md, Variants)
_ASSIST = Field(bool, required=False)
_TOURNAMENT = Field(str, max_len=40)
_BOT = Field(str, max_len=40)
_JOB = Field(str, max_len=40)
#: a client's id for one lobby or tournament request, so that sending it again is safe: the
#: server answers the same id with what it first did (docs/protocol.md, "Retrying safely");
#: 1-64 characters (the empty string is refused: :func:`validate_client`)
_REQUEST_ID = Field(str, required=False, max_len=64)
#: the requests that take ``request_id``: each one makes something (an entry, a room, a
#: challenge, a match, a tournament, a participant) that a blind second copy would make again
REQUEST_ID_TYPES = frozenset((
    "queue", "challenge", "accept", "room_create", "room_join", "play_bot", "rematch",
    "tournament_create", "tournament_join", "ladder_submit",
))
#: ``id`` is echoed as ``ref``; integers stay within what a JavaScript number holds exactly.
MAX_ID = 2**53 - 1
#: a hosted bot's program, bytes at most (docs/protocol.md, "Ladder"; docs/ladder.md): the
#: upload's limit, the server's and the compliance check's
MAX_PROGRAM_BYTES = 1 << 20

#: type -> fields. Every client message may also carry ``id`` (echoed back as ``ref``).
CLIENT_MESSAGES: dict[str, dict[str, Field]] = {
    "hello": {
        # required unless a token names the player (checked by the session, which says so
        # with the same words as a missing required field)
        "name": Field(str, required=False, max_len=64),
        "token": Field(str, required=False, max_len=128),
        "password": Field(str, required=False, max_len=128),
        "bot": Field(bool, required=False),
        "client": Field(str, required=False, max_len=64),
        "protocol": Field(int, required=False, max=1000),
    },
    "ping": {},
    "queue": {
        "pool": Field(str, required=False, choices=POOLS),
        "pacing": _PACING,
        "rated": _RATED,
        "rules": _RULES,
        "assist": _ASSIST,
    },
    "unqueue": {},
    "challenge": {
        "opponent": Field(str, max_len=64), "pacing": _PACING, "rated": _RATED, "rules": _RULES,
        "assist": _ASSIST,
    },
    "accept": {"challenge_id": Field(str, max_len=40)},
    "decline": {"challenge_id": Field(str, max_len=40)},
    "room_create": {"pacing": _PACING, "rated": _RATED, "rules": _RULES, "assist": _ASSIST},
    "room_cancel": {"code": Field(str, required=False, max_len=16)},
    "room_join": {"code": Field(str, max_len=16)},
    "play_bot": {
        "strategy": Field(str, max_len=64), "pacing": _PACING, "rated": _RATED, "rules": _RULES,
        "assist": _ASSIST,
    },
    "secret": {"match_id": _MATCH, "secret": _CODE},
    # n: the guess's number in the match (1 for the first), which makes a retry safe; the
    # largest guess cap is 10000 (moo.match.MatchConfig)
    "guess": {
        "match_id": _MATCH, "guess": _CODE, "n": Field(int, required=False, min=1, max=10_000),
    },
    "resign": {"match_id": _MATCH},
    "resume": {"match_id": _MATCH, "last_seq": Field(int, required=False)},
    "watch": {"match_id": _MATCH, "last_seq": Field(int, required=False)},
    "unwatch": {"match_id": _MATCH},
    "rematch": {"match_id": _MATCH},
    "matches": {},
    "leaderboard": {
        "by": Field(str, required=False, choices=BOARDS),
        "variant": Field(str, required=False, max_len=40),
    },
    # accounts (docs/protocol.md, "Accounts")
    "set_password": {
        "password": Field(str, max_len=128),
        "old_password": Field(str, required=False, max_len=128),
    },
    "sign_out_all": {},
    # history and players (docs/protocol.md, "History and players")
    "history": {
        "player": Field(str, required=False, max_len=64),
        "cursor": Field(str, required=False, max_len=128),
        "limit": Field(int, required=False, min=1, max=50),
    },
    "match_record": {"match_id": _MATCH},
    # post-match analysis (docs/analysis.md, "On the match page")
    "analysis": {"match_id": _MATCH},
    "player": {"name": Field(str, max_len=64)},
    # hosted tournaments (docs/protocol.md, "Tournaments")
    "tournament_create": {
        "name": Field(str, max_len=64),
        "format": Field(str, choices=TOURNAMENT_FORMATS),
        "rounds": Field(int, required=False, min=1, max=50),
        "duration_s": Field(int, required=False, min=10, max=86400),
        "rules": _RULES,
        "pool": Field(str, required=False, choices=POOLS),
        "start_in_s": Field(int, required=False, max=86400),
        "secrets": Field(str, required=False, choices=TOURNAMENT_SECRETS),
        "rated": _RATED,
        "pacing": _PACING,
    },
    "tournaments": {},
    "tournament_join": {"tournament_id": _TOURNAMENT},
    "tournament_leave": {"tournament_id": _TOURNAMENT},
    "tournament_watch": {"tournament_id": _TOURNAMENT},
    "tournament_unwatch": {"tournament_id": _TOURNAMENT},
    "tournament_start": {"tournament_id": _TOURNAMENT},
    # hosted bots and the ladder (docs/protocol.md, "Ladder")
    "ladder_upload": {
        "upload": Field(str, required=False, max_len=40),
        "offset": Field(int, max=MAX_PROGRAM_BYTES),
        "data": Field(str, max_len=3072),
    },
    "ladder_submit": {
        "upload": Field(str, max_len=40),
        "sha256": Field(str, max_len=64),
        "name": Field(str, required=False, max_len=64),
        "rules": _RULES,
        "bot_id": Field(str, required=False, max_len=40),
    },
    "ladder_mine": {},
    "ladder_pause": {"bot_id": _BOT},
    "ladder_resume": {"bot_id": _BOT},
    "ladder_withdraw": {"bot_id": _BOT},
    "ladder_show": {"rules": _RULES},
    "ladder_page": {"bot_id": _BOT},
    # a connected bot opts in (and out): docs/ladder.md, "Connected bots"
    "ladder_join": {"rules": _RULES},
    "ladder_leave": {},
    # bot workers (docs/protocol.md, "Bot workers"); worker_hello replaces hello
    "worker_hello": {
        "key": Field(str, max_len=128),
        "slots": Field(int, min=1, max=64),
        "name": Field(str, required=False, max_len=64),
    },
    "worker_claim": {},
    "worker_renew": {"job_id": _JOB},
    "worker_game": {
        "job_id": _JOB,
        "match_id": _MATCH,
        "seat": Field(int, max=1),
        "failure": Field(str, required=False, max_len=1024),
        "stderr": Field(str, required=False, max_len=2048),
    },
    "worker_done": {
        "job_id": _JOB,
        "accepted": Field(bool, required=False),
        "reason": Field(str, required=False, max_len=1024),
        "name": Field(str, required=False, max_len=64),
        "exact": Field(dict, required=False),
    },
}

for _kind in REQUEST_ID_TYPES:
    CLIENT_MESSAGES[_kind]["request_id"] = _REQUEST_ID


#: type -> the fields it must carry, checked in one set operation
_REQUIRED = {
    kind: frozenset(key for key, spec in fields.items() if spec.required)
    for kind, fields in CLIENT_MESSAGES.items()
}


def validate_client(message: Any) -> dict[str, Any]:
    """Check a decoded client message against the schema; return it unchanged if valid."""
    if not isinstance(message, dict):
        raise SchemaError("a message is an object (map) with a 'type' field")
    kind = message.get("type")
    if not isinstance(kind, str):
        raise SchemaError("a message needs a string 'type' field")
    fields = CLIENT_MESSAGES.get(kind)
    if fields is None:
        shown = kind if len(kind) <= 32 else kind[:32] + "..."
        raise UnknownMessage(f"unknown message type {shown!r}")
    if "id" in message:  # inline: every message takes this path
        msg_id = message["id"]
        id_type = type(msg_id)
        if not (
            (id_type is str and len(msg_id) <= 64) or (id_type is int and 0 <= msg_id <= MAX_ID)
        ):
            raise SchemaError(
                f"field 'id' must be a string of at most 64 characters or an integer 0-{MAX_ID}"
            )
    for key, value in message.items():
        if key in ("type", "id"):
            continue
        spec = fields.get(key) if isinstance(key, str) else None
        if spec is None:
            shown = key if isinstance(key, str) and len(key) <= 32 else "(non-text key)"
            raise SchemaError(f"unknown field {shown!r} in {kind!r}")
        spec.check(key, value)
    if message.get("request_id") == "":
        raise SchemaError("field 'request_id' must be 1-64 characters")
    if not _REQUIRED[kind] <= message.keys():
        missing = next(key for key in fields if fields[key].required and key not in message)
        raise SchemaError(f"{kind!r} needs field {missing!r}")
    return message


def valid_id(value: Any) -> bool:
    """Whether ``value`` may be a request ``id`` (and so be echoed back as ``ref``)."""
    kind = type(value)
    if kind is str:
        return len(value) <= 64
    return kind is int and 0 <= value <= MAX_ID


def _reject_constant(value: str) -> Any:
    raise DecodeError(f"{value} is not valid in a message")


class Codec:
    """Encoder/decoder for one subprotocol; ``binary`` tells which frame type it uses."""

    def __init__(self, subprotocol: str, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
        if subprotocol not in SUBPROTOCOLS:
            raise ValueError(f"unknown subprotocol {subprotocol!r}")
        self.subprotocol = subprotocol
        #: larger messages are refused with ``too_large`` (see :data:`TRANSPORT_FACTOR`)
        self.max_bytes = max_bytes
        self.binary = subprotocol == MSGPACK_SUBPROTOCOL
        self._packer = msgpack.Packer(use_bin_type=True)

    def encode(self, message: dict[str, Any]) -> str | bytes:
        """The frame of ``message``: compact JSON text, or MessagePack.

        Encoded by msgspec, which is three times as fast as msgpack's packer and four times as
        fast as the standard library's JSON (every guess sends two or three of these frames).
        Its MessagePack is the packer's, byte for byte, and whatever msgspec cannot encode
        (an integer beyond 64 bits) goes the packer's way, failing as it did; its JSON is
        :func:`compact_json`'s.
        """
        if self.binary:
            try:
                return _MSGPACK.encode(message)
            except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
                return bytes(self._packer.pack(message))
        return compact_json(message)

    def decode(self, frame: str | bytes) -> Any:
        """Frame -> Python value; raises DecodeError/MessageTooLarge, never anything else."""
        size = len(frame.encode("utf-8") if isinstance(frame, str) else frame)
        if size > self.max_bytes:
            raise MessageTooLarge(f"message of {size} bytes exceeds {self.max_bytes}")
        if self.binary:
            if not isinstance(frame, bytes | bytearray | memoryview):
                raise DecodeError("this connection speaks MessagePack: send binary frames")
            try:
                return msgpack.unpackb(
                    frame,
                    raw=False,
                    strict_map_key=False,
                    max_bin_len=self.max_bytes,
                    max_str_len=self.max_bytes,
                    max_array_len=256,
                    max_map_len=64,
                    max_ext_len=0,
                )
            except Exception as exc:  # msgpack raises many unrelated types on garbage
                raise DecodeError(f"not valid MessagePack: {type(exc).__name__}") from None
        if not isinstance(frame, str):
            raise DecodeError("this connection speaks JSON: send text frames")
        try:
            value = json.loads(frame, parse_constant=_reject_constant)
        except DecodeError:
            raise
        except (ValueError, RecursionError) as exc:
            raise DecodeError(f"not valid JSON: {str(exc)[:80]}") from None
        if _has_lone_surrogate(value):
            # JSON may escape a lone UTF-16 surrogate ("\\ud800"); such a str can never be
            # encoded back to UTF-8, so echoing it (an id as ref, a bad type in a message) would
            # break the reply. Refuse it here, before anything can echo it.
            raise DecodeError("strings must be valid Unicode (lone surrogate escape)")
        return value


_MSGPACK = msgspec.msgpack.Encoder()
_JSON = msgspec.json.Encoder()


def compact_json(value: Any) -> str:
    """Compact JSON, as ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``, but
    for floats in exponent form (``1e-7``, not ``1e-07``: the same number) and NaN or an
    infinity (``null``: JSON has no such numbers, and PostgreSQL's ``jsonb`` refuses them).

    The text frames and the stored log's events are written so: msgspec, four times as fast
    as the standard library. What it cannot encode (an integer beyond 64 bits, a key that is
    not a string or number) goes the standard library's way, failing as it did."""
    try:
        return _JSON.encode(value).decode()
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _has_lone_surrogate(value: Any) -> bool:
    """Iterative (a message may nest as deep as the JSON parser allows)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def codec_for(subprotocol: str | None) -> Codec:
    return Codec(subprotocol or JSON_SUBPROTOCOL)


def decode_client(codec: Codec, frame: str | bytes) -> dict[str, Any]:
    """The whole inbound path before dispatch: size, decode, validate."""
    return validate_client(codec.decode(frame))
