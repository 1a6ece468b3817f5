"""Protocol v1 decoding and validation: both encodings, every rejection specific."""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest

from moo.errors import DecodeError, MessageTooLarge, SchemaError, UnknownMessage
from moo.protocol import CLIENT_MESSAGES, SUBPROTOCOLS, Codec, decode_client

JSON, MSGPACK = (Codec(s) for s in SUBPROTOCOLS)


def frame(codec: Codec, message: Any) -> str | bytes:
    return msgpack.packb(message) if codec.binary else json.dumps(message)


@pytest.mark.parametrize("codec", [JSON, MSGPACK], ids=["json", "msgpack"])
def test_valid_messages_round_trip(codec: Codec) -> None:
    msg = {"type": "guess", "match_id": "m1", "guess": "0123", "id": 7}
    assert decode_client(codec, frame(codec, msg)) == msg
    assert codec.decode(codec.encode(msg)) == msg


@pytest.mark.parametrize("codec", [JSON, MSGPACK], ids=["json", "msgpack"])
@pytest.mark.parametrize(
    ("message", "error", "text"),
    [
        ([1, 2], SchemaError, "a message is an object"),
        ({"guess": "0123"}, SchemaError, "'type'"),
        ({"type": "teleport"}, UnknownMessage, "teleport"),
        ({"type": "guess", "match_id": "m1"}, SchemaError, "needs field 'guess'"),
        ({"type": "guess", "match_id": "m1", "guess": 123}, SchemaError, "must be a string"),
        ({"type": "guess", "match_id": "m", "guess": "0123", "x": 1}, SchemaError, "unknown field"),
        ({"type": "hello", "name": "a", "bot": 1}, SchemaError, "true or false"),
        ({"type": "resume", "match_id": "m", "last_seq": True}, SchemaError, "integer"),
        ({"type": "resume", "match_id": "m", "last_seq": -1}, SchemaError, "between"),
        ({"type": "resume", "match_id": "m", "last_seq": 2**40}, SchemaError, "between"),
        ({"type": "queue", "pool": "robots"}, SchemaError, "one of"),
        ({"type": "hello", "name": "x" * 65}, SchemaError, "longer than"),
        ({"type": "ping", "id": {"a": 1}}, SchemaError, "'id'"),
        ({"type": "ping", "id": None}, SchemaError, "'id'"),
        ({"type": "ping", "id": -1}, SchemaError, "'id'"),
        ({"type": "ping", "id": 2**53}, SchemaError, "'id'"),
        ({"type": "ping", "id": 1.0}, SchemaError, "'id'"),
        ({"type": "ping", "id": True}, SchemaError, "'id'"),
        ({"type": "ping", "id": "x" * 65}, SchemaError, "'id'"),
        ({"type": "play_bot", "strategy": "random", "rated": 0}, SchemaError, "true or false"),
        ({"type": "room_cancel", "code": 5}, SchemaError, "must be a string"),
        ({"type": "guess", "match_id": "m", "guess": "0123", "n": 0}, SchemaError, "between 1"),
        ({"type": "guess", "match_id": "m", "guess": "0123", "n": 10_001}, SchemaError,
         "between 1 and 10000"),
        ({"type": "guess", "match_id": "m", "guess": "0123", "n": "1"}, SchemaError, "integer"),
        ({"type": "guess", "match_id": "m", "guess": "0123", "n": 1.0}, SchemaError, "integer"),
        ({"type": "guess", "match_id": "m", "guess": "0123", "n": True}, SchemaError, "integer"),
        ({"type": "guess", "match_id": "m", "guess": "0123", "n": None}, SchemaError, "integer"),
    ],
)
def test_rejections_are_specific(codec: Codec, message: Any, error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        decode_client(codec, frame(codec, message))


@pytest.mark.parametrize("codec", [JSON, MSGPACK], ids=["json", "msgpack"])
def test_guess_numbers_at_the_bounds_are_accepted(codec: Codec) -> None:
    for n in (1, 10_000):
        msg = {"type": "guess", "match_id": "m", "guess": "0123", "n": n}
        assert decode_client(codec, frame(codec, msg)) == msg


@pytest.mark.parametrize("codec", [JSON, MSGPACK], ids=["json", "msgpack"])
def test_ids_at_the_bounds_and_rated_everywhere_are_accepted(codec: Codec) -> None:
    for msg_id in (0, 2**53 - 1, "", "x" * 64):
        msg = {"type": "ping", "id": msg_id}
        assert decode_client(codec, frame(codec, msg)) == msg
    for kind, extra in (("queue", {}), ("room_create", {}), ("challenge", {"opponent": "a"}),
                        ("play_bot", {"strategy": "random"})):
        msg = {"type": kind, "rated": False, **extra}
        assert decode_client(codec, frame(codec, msg)) == msg


def test_the_size_limit_is_the_codecs() -> None:
    small = Codec("moo.v1.json", max_bytes=300)
    with pytest.raises(MessageTooLarge, match="exceeds 300"):
        small.decode(json.dumps({"type": "ping", "pad": "x" * 300}))
    assert JSON.decode(json.dumps({"type": "ping", "pad": "x" * 300}))["pad"] == "x" * 300


def test_decode_errors() -> None:
    with pytest.raises(DecodeError):
        JSON.decode("{not json")
    with pytest.raises(DecodeError):
        JSON.decode(b'{"type":"ping"}')  # binary frame on a JSON connection
    with pytest.raises(DecodeError):
        MSGPACK.decode('{"type":"ping"}')
    with pytest.raises(DecodeError):
        MSGPACK.decode(b"\xc1")  # never-used msgpack byte
    with pytest.raises(DecodeError):
        JSON.decode('{"type": NaN}')
    with pytest.raises(DecodeError, match="surrogate"):
        JSON.decode('{"type": "ping", "id": "\\ud800"}')
    with pytest.raises(DecodeError, match="surrogate"):
        JSON.decode('{"type": "hello", "name": ["\\udfff"]}')
    with pytest.raises(DecodeError):
        JSON.decode("[" * 2000 + "]" * 2000)
    with pytest.raises(MessageTooLarge):
        JSON.decode(json.dumps({"type": "ping", "pad": "x" * 5000}))
    with pytest.raises(MessageTooLarge):
        MSGPACK.decode(b"\x00" * 4097)


def test_schema_covers_documented_types() -> None:
    with open("docs/protocol.md", encoding="utf-8") as f:
        doc = f.read()
    for kind in CLIENT_MESSAGES:
        assert f"`{kind}`" in doc, f"{kind} is not documented in docs/protocol.md"


def test_retrying_safely_names_every_request() -> None:
    """docs/protocol.md says, for every request, whether it is safe to send again."""
    with open("docs/protocol.md", encoding="utf-8") as f:
        doc = f.read()
    section = doc.split("## Retrying safely", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    named = {name for cell in rows for name in cell.replace(",", " ").split()
             if name.startswith("`")}
    for kind in CLIENT_MESSAGES:
        assert f"`{kind}`" in named, f"{kind} is missing from 'Retrying safely'"


def test_deep_msgpack_nesting_is_a_decode_error() -> None:
    deep = b"\x91" * 4000 + b"\xc0"
    with pytest.raises(DecodeError):
        MSGPACK.decode(deep)
