"""The frames and log bodies encoded by msgspec are what msgpack and the standard library's JSON
made before it: MessagePack byte for byte, JSON character for character wherever there is no
float (with floats, the same values), and what msgspec cannot encode goes the old way.

Clients written from docs/protocol.md, stored logs and the browser all read these bytes, so a
difference would be a protocol change, not a speed-up."""

from __future__ import annotations

import json
import math
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moo.protocol import JSON_SUBPROTOCOL, MSGPACK_SUBPROTOCOL, Codec, compact_json

#: every string, unprintable and astral ones too, but no lone surrogate (nothing that can be
#: written as UTF-8 ever holds one: the decoder refuses them)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
INTS = st.integers(min_value=-(2**63), max_value=2**64 - 1)
SCALARS = st.none() | st.booleans() | INTS | TEXT
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
WITH_FLOATS = st.recursive(
    SCALARS | FLOATS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
CI = settings(max_examples=100, derandomize=True, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])


def _stdlib(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@CI
@given(st.dictionaries(TEXT, VALUES, max_size=6))
def test_without_floats_both_encodings_are_the_old_ones_exactly(message: dict[str, Any]) -> None:
    assert Codec(MSGPACK_SUBPROTOCOL).encode(message) == msgpack.packb(message, use_bin_type=True)
    assert Codec(JSON_SUBPROTOCOL).encode(message) == _stdlib(message)
    assert compact_json(message) == _stdlib(message)


@CI
@given(st.dictionaries(TEXT, WITH_FLOATS, max_size=6))
def test_with_floats_the_values_are_the_same(message: dict[str, Any]) -> None:
    assert Codec(MSGPACK_SUBPROTOCOL).encode(message) == msgpack.packb(message, use_bin_type=True)
    for text in (Codec(JSON_SUBPROTOCOL).encode(message), compact_json(message)):
        assert isinstance(text, str)
        assert json.loads(text) == json.loads(_stdlib(message))


def test_a_guess_event_is_encoded_as_before() -> None:
    event = {"type": "event", "match_id": "m0197a3b1c2d4e5f6a7b8", "seq": 7, "kind": "guess",
             "at": 1795959193123, "seat": 1, "guess": "0123", "bulls": 1, "cows": 2, "n": 3,
             "ref": "a-7", "name": "Zoë 😀", "ok": True, "none": None}
    assert Codec(MSGPACK_SUBPROTOCOL).encode(event) == msgpack.packb(event, use_bin_type=True)
    assert Codec(JSON_SUBPROTOCOL).encode(event) == _stdlib(event)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_json_has_no_nan_so_it_is_null(value: float) -> None:
    assert json.loads(compact_json({"x": value})) == {"x": None}
    assert json.loads(Codec(JSON_SUBPROTOCOL).encode({"x": value})) == {"x": None}
    decoded = msgpack.unpackb(Codec(MSGPACK_SUBPROTOCOL).encode({"x": value}))
    assert math.isnan(decoded["x"]) if math.isnan(value) else decoded["x"] == value


@pytest.mark.parametrize("message", [
    {"big": 2**70},                 # beyond msgspec's 64 bits: the standard library's JSON
    {"keys": {True: 1, None: 2}},   # keys msgspec will not write: json.dumps's words for them
])
def test_what_msgspec_cannot_encode_goes_the_old_way(message: dict[str, Any]) -> None:
    assert compact_json(message) == _stdlib(message)
    assert Codec(JSON_SUBPROTOCOL).encode(message) == _stdlib(message)


def test_what_neither_can_encode_fails_as_before() -> None:
    with pytest.raises(TypeError):
        compact_json({"x": object()})
    with pytest.raises(TypeError):
        Codec(JSON_SUBPROTOCOL).encode({"x": object()})
    with pytest.raises(OverflowError):
        Codec(MSGPACK_SUBPROTOCOL).encode({"big": 2**70})
