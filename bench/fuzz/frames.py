"""The frame generator: well-formed requests, mutated ones, broken encodings, oversized and
deeply nested frames, all from one seeded random source.

Shared by both drivers, so a seed names the same stream of frames in-process and over sockets;
:class:`World` holds the names and ids the generator aims at so most frames reach real state.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from typing import Any

import msgpack

from moo.protocol import CLIENT_MESSAGES, MAX_MESSAGE_BYTES, TRANSPORT_FACTOR, Codec, Field

JSON, MSGPACK = "moo.v1.json", "moo.v1.msgpack"

WEIRD_STRINGS = [
    "",
    " ",
    "\x00",
    "😀" * 8,
    "\u202eevil",
    "\u200b\u200b",
    "ｆｕｌｌ",
    "١٢٣٤",
    "a" * 65,
    "a" * 200,
    "名前",
    "\ud800",
    "\udfff x",
    "null",
    "0123\n",
    "<script>",
    "' OR 1=1 --",
    "%s%n",
]
WEIRD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**31,
    2**53,
    2**63,
    -(2**63),
    2**64 - 1,
    1.5,
    float("inf"),
    [],
    {},
    [1, [2, [3]]],
    {"a": {"b": 1}},
    b"\x00\x01",
]


class World:
    """What the generator may aim at: names and ids that exist (or nearly do)."""

    def __init__(self) -> None:
        self.own_matches: dict[str, list[str]] = {}
        self.other_matches: dict[str, list[str]] = {}
        self.finished: list[str] = []
        self.names: list[str] = []
        self.challenges: list[str] = []
        self.rooms: list[str] = []


class FrameGen:
    """Frames for one session: valid, nearly valid, and garbage, deterministically seeded."""

    def __init__(self, rng: random.Random, world: World) -> None:
        self.rng = rng
        self.world = world
        self.kinds: list[tuple[str, Callable[[str, Codec], tuple[str | bytes, str]]]] = [
            ("game", self.game),
            ("game", self.game),
            ("game", self.game),
            ("schema", self.schema_valid),
            ("mutated", self.mutated),
            ("mutated", self.mutated),
            ("mutated", self.mutated),
            ("truncated", self.truncated),
            ("bitflip", self.bitflip),
            ("random", self.random_frame),
            ("oversized", self.oversized),
            ("deep", self.deep),
            ("quirks", self.quirks),
            ("wrong_frame_type", self.wrong_frame_type),
        ]

    def frame(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        label, make = self.rng.choice(self.kinds)
        frame, sub = make(player, codec)
        return frame, f"{label}:{sub}" if sub else label

    # -- encoding helpers
    def encode(self, codec: Codec, msg: Any) -> str | bytes:
        if codec.binary:
            return bytes(
                msgpack.packb(
                    msg,
                    use_bin_type=self.rng.random() < 0.9,
                    unicode_errors="surrogatepass",  # lone surrogates become invalid UTF-8
                )
            )
        text = json.dumps(msg, ensure_ascii=self.rng.random() < 0.5)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # A text frame on the wire is valid UTF-8 (websockets checks), so a lone surrogate
            # can only arrive escaped: "\ud800".
            text = json.dumps(msg, ensure_ascii=True)
        return text

    def text(self) -> str:
        r = self.rng.random()
        if r < 0.3:
            return self.rng.choice(WEIRD_STRINGS)
        if r < 0.6:
            alphabet = string.printable + "éß漢字😀\u0301\u200d"
            return "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(0, 20)))
        return "".join(self.rng.choice("0123456789") for _ in range(self.rng.randint(0, 6)))

    def match_id(self, player: str) -> str:
        w, r = self.world, self.rng.random()
        own, other = w.own_matches.get(player, []), w.other_matches.get(player, [])
        if r < 0.55 and own:
            return self.rng.choice(own)
        if r < 0.7 and other:
            return self.rng.choice(other)
        if r < 0.8 and w.finished:
            return self.rng.choice(w.finished)
        if r < 0.9:
            return "m" + "".join(self.rng.choice("0123456789abcdef") for _ in range(12))
        return self.text()[:40]

    def code(self) -> str:
        r = self.rng.random()
        if r < 0.6:
            return "".join(self.rng.sample("0123456789", 4))
        if r < 0.7:
            return " " + "".join(self.rng.sample("0123456789", 4)) + " "
        return self.text()[:16]

    def value_for(self, player: str, name: str, spec: Field) -> Any:
        if name == "match_id":
            return self.match_id(player)
        if name in ("secret", "guess"):
            return self.code()
        if name in ("opponent",) and self.world.names and self.rng.random() < 0.7:
            return self.rng.choice(self.world.names)
        if name == "challenge_id" and self.world.challenges and self.rng.random() < 0.5:
            return self.rng.choice(self.world.challenges)
        if name == "code" and self.world.rooms and self.rng.random() < 0.5:
            return self.rng.choice(self.world.rooms)
        if name == "strategy":
            return self.rng.choice(["random", "nope", "bots.base:Strategy", self.text()])
        if spec.choices:
            return self.rng.choice(spec.choices)
        if spec.type is bool:
            return self.rng.random() < 0.5
        if spec.type is int:
            return self.rng.choice([0, 1, 5, 1000, spec.max])
        return self.text()[: spec.max_len]

    def message(self, player: str, kinds: list[str] | None = None) -> dict[str, Any]:
        kind = self.rng.choice(kinds or list(CLIENT_MESSAGES))
        msg: dict[str, Any] = {"type": kind}
        for name, spec in CLIENT_MESSAGES[kind].items():
            if spec.required or self.rng.random() < 0.5:
                msg[name] = self.value_for(player, name, spec)
        if self.rng.random() < 0.8:
            msg["id"] = self.rng.choice([self.rng.randint(0, 10**6), f"r{self.rng.randint(0, 99)}"])
        return msg

    # -- frame families
    def game(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        """Well-formed match traffic, aimed at own, other, finished and unknown matches."""
        kinds = ["guess", "guess", "guess", "secret", "resign", "resume", "watch", "unwatch"]
        msg = self.message(player, kinds)
        if msg["type"] == "resign" and self.rng.random() < 0.9:
            msg["match_id"] = "m-nope"  # keep matches alive long enough to be useful
        return self.encode(codec, msg), msg["type"]

    def schema_valid(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        msg = self.message(player, [k for k in CLIENT_MESSAGES if k not in ("resign",)])
        return self.encode(codec, msg), msg["type"]

    def mutated(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        msg = self.message(player)
        how = self.rng.choice(
            ["drop", "unknown_field", "wrong_type", "weird_id", "weird_type", "non_str_key",
             "not_a_map"]
        )
        fields = [k for k in msg if k != "type"]
        if how == "drop" and fields:
            del msg[self.rng.choice(fields)]
        elif how == "unknown_field":
            msg[self.rng.choice(["x", "secret", "seat", "__proto__", self.text()])] = 1
        elif how == "wrong_type" and fields:
            msg[self.rng.choice(fields)] = self.rng.choice([*WEIRD_VALUES, self.text()])
        elif how == "weird_id":
            msg["id"] = self.rng.choice(WEIRD_VALUES + WEIRD_STRINGS)
        elif how == "weird_type":
            msg["type"] = self.rng.choice(WEIRD_VALUES + WEIRD_STRINGS + ["GUESS", "guess "])
        elif how == "non_str_key" and codec.binary:
            msg[self.rng.choice([1, -5, 2.5, b"k", None, True])] = "v"  # type: ignore[index]
        elif how == "not_a_map":
            return self.encode(codec, self.rng.choice([list(msg.items()), msg["type"], 7])), how
        if not codec.binary:
            msg = {str(k): v for k, v in msg.items()}
            msg = json.loads(json.dumps(msg, default=lambda b: list(b)))
        return self.encode(codec, msg), how

    def truncated(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        frame = self.encode(codec, self.message(player))
        return frame[: self.rng.randint(0, max(0, len(frame) - 1))], ""

    def bitflip(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        encoded = self.encode(codec, self.message(player))
        data = bytearray(
            encoded.encode("utf-8", "surrogatepass") if isinstance(encoded, str) else encoded
        )
        for _ in range(self.rng.randint(1, 4)):
            if data:
                data[self.rng.randrange(len(data))] ^= 1 << self.rng.randrange(8)
        if codec.binary:
            return bytes(data), ""
        return data.decode("utf-8", errors="replace"), ""

    def random_frame(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        n = self.rng.choice([0, 1, 2, 8, 64, 512, 4096])
        raw = self.rng.randbytes(self.rng.randint(0, n))
        if codec.binary:
            return raw, "bytes"
        return raw.decode("utf-8", errors="replace"), "text"

    def oversized(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        msg = self.message(player)
        # half just over the message limit (too_large, the connection goes on), half over the
        # transport ceiling (closed with 1009)
        ceiling = MAX_MESSAGE_BYTES * TRANSPORT_FACTOR
        if self.rng.random() < 0.5:
            msg["pad"] = "x" * self.rng.randint(MAX_MESSAGE_BYTES - 40, MAX_MESSAGE_BYTES * 2)
        else:
            msg["pad"] = "x" * self.rng.randint(ceiling, ceiling + MAX_MESSAGE_BYTES)
        return self.encode(codec, msg), ""

    def deep(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        depth = self.rng.choice([50, 500, 1000, 2000, 4000])
        if codec.binary:
            return b"\x91" * depth + b"\xc0", ""
        if self.rng.random() < 0.5:
            return "[" * depth + "]" * depth, "list"
        return '{"type":' * depth + "1" + "}" * depth, "map"

    def quirks(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        if codec.binary:
            options: list[bytes] = [
                b"\xc1",  # never used
                b"\xd4\x01\x00",  # ext type
                b"\x81\xa4type\xc7\x01\x05\x00",  # map with ext value
                b"\x82\xa4type\xa4ping\xa4type\xa4pong",  # duplicate keys
                b"\xdf\xff\xff\xff\xff",  # map claiming 4 G entries
                b"\xdb\xff\xff\xff\xff",  # str claiming 4 GB
                b"\x81\xa4type\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00",  # NaN type
                b"\x81\xa4type\xa4ping\x00",  # trailing garbage
            ]
            return self.rng.choice(options), ""
        texts = [
            '{"type":"ping","id":NaN}',
            '{"type":"ping","id":Infinity}',
            '{"type":"ping","id":1e999}',
            '{"type":"ping","id":-0}',
            '{"type":"ping","id":1.0}',
            '{"type":"ping","type":"guess"}',
            '\ufeff{"type":"ping"}',
            '{"type":"ping"} trailing',
            '{"type":"ping","id":"\\ud800"}',
            '{"type":"\\u0000ping"}',
            '{"type":"ping","id":' + "9" * 4000 + "}",
            "null",
            '"ping"',
            "",
        ]
        return self.rng.choice(texts), ""

    def wrong_frame_type(self, player: str, codec: Codec) -> tuple[str | bytes, str]:
        msg = self.message(player)
        if codec.binary:
            return json.dumps(msg), ""
        return bytes(msgpack.packb(msg, unicode_errors="surrogatepass")), ""
