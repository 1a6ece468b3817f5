"""The MQTT event stream's shared vocabulary: broker URLs, topic names and the payload codec.

Both ends use it: the server's publisher (``server/publisher.py``) writes with it and
``moo watch`` (``clients/watch.py``) reads with it, so it lives in the core that both may
import (imports point clients -> server -> bots -> moo). Pure: no broker, no I/O. The topics
and payloads are documented in docs/mqtt.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgpack

__all__ = [
    "ENCODINGS",
    "PREFIX",
    "MqttUrl",
    "decode_payload",
    "encode_payload",
    "events_topic",
    "ladder_topic",
    "match_topics",
    "parse_mqtt_url",
    "rating_topic",
    "result_topic",
    "stats_topic",
    "tournament_topic",
]

#: every topic starts with this (docs/mqtt.md); ``PREFIX/#`` is the whole stream
PREFIX = "moo/v1"
ENCODINGS = ("json", "msgpack")


@dataclass(frozen=True)
class MqttUrl:
    host: str
    port: int
    encoding: str = "json"
    username: str | None = None
    password: str | None = None


def parse_mqtt_url(url: str) -> MqttUrl:
    """``mqtt://[user:pass@]HOST[:PORT][?encoding=json|msgpack]`` (port 1883 by default).

    Raises ValueError with a message fit for a person (the CLI prints it as it is).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("mqtt", "tcp"):
        raise ValueError(f"an MQTT URL starts with mqtt://, got {url!r}")
    try:
        port = parts.port or 1883
    except ValueError:
        raise ValueError(f"bad port in MQTT URL {url!r}") from None
    if not parts.hostname:
        raise ValueError(f"no host in MQTT URL {url!r}")
    query = parse_qs(parts.query)
    encoding = query.get("encoding", ["json"])[0]
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be json or msgpack, got {encoding!r} in {url!r}")
    return MqttUrl(parts.hostname, port, encoding, parts.username, parts.password)


def events_topic(match_id: str) -> str:
    return f"{PREFIX}/matches/{match_id}/events"


def result_topic(match_id: str) -> str:
    return f"{PREFIX}/matches/{match_id}/result"


def match_topics(match_id: str) -> str:
    """The subscription filter for everything about one match."""
    return f"{PREFIX}/matches/{match_id}/#"


def rating_topic(name: str) -> str:
    return f"{PREFIX}/players/{name}/rating"


def tournament_topic(tournament_id: str) -> str:
    """A hosted tournament's latest object (docs/protocol.md, "Tournaments"), retained."""
    return f"{PREFIX}/tournaments/{tournament_id}/state"


def ladder_topic(family: str) -> str:
    """A ladder's finished pairings with its standings after each (docs/protocol.md, "Ladder");
    the family is a rules spec (``moo:4:0123456789``): no ``/``, ``+`` or ``#`` in it."""
    return f"{PREFIX}/ladder/{family}/results"


def stats_topic() -> str:
    return f"{PREFIX}/server/stats"


def encode_payload(data: dict[str, Any], encoding: str) -> bytes:
    if encoding == "msgpack":
        return bytes(msgpack.packb(data, use_bin_type=True))
    return json.dumps(data, separators=(",", ":")).encode("utf-8")


def decode_payload(payload: bytes, encoding: str | None = None) -> Any:
    """JSON or MessagePack; with no ``encoding`` given, JSON first then MessagePack."""
    if encoding == "msgpack":
        return msgpack.unpackb(payload, raw=False)
    try:
        return json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        if encoding == "json":
            raise
        return msgpack.unpackb(payload, raw=False)
