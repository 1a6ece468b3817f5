"""``moo watch``: print the arena's live MQTT event stream in a readable form.

    moo watch --mqtt mqtt://127.0.0.1:1883              everything: matches, ratings, stats
    moo watch --mqtt mqtt://127.0.0.1:1883 m3f2a9c1d0e  one match, until its result
    moo watch --mqtt mqtt://127.0.0.1:1883 --json       one JSON object per message

It is an ordinary MQTT subscriber (topics in docs/mqtt.md), so anything the server publishes
can be followed without a WebSocket connection or an account. The connection is retried with
backoff if the broker goes away; one that cannot be reached at all is one line, status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, TextIO

import aiomqtt

from moo.mqtt import PREFIX, decode_payload, match_topics, parse_mqtt_url
from moo.rules import format_response

__all__ = ["Formatter", "configure", "main", "watch"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mqtt", required=True, metavar="URL",
                        help="the broker the server publishes to, mqtt://HOST:PORT")
    parser.add_argument("match_id", nargs="?", help="follow one match until its result")
    parser.add_argument("--json", action="store_true",
                        help="print {topic, payload} JSON lines instead of text")
    parser.add_argument("--count", type=int, default=0,
                        help="exit after this many messages (0 = never)")


def main(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(watch(args.mqtt, args.match_id, as_json=args.json, count=args.count))
    except ValueError as exc:
        print(f"moo watch: {exc}", file=sys.stderr)
        return 2


async def watch(
    url: str,
    match_id: str | None = None,
    *,
    as_json: bool = False,
    count: int = 0,
    out: TextIO | None = None,
    ready: asyncio.Event | None = None,
) -> int:
    """Subscribe and print until ``count`` messages, or the followed match's result."""
    target = parse_mqtt_url(url)
    stream = out or sys.stdout
    topic = match_topics(match_id) if match_id else f"{PREFIX}/#"
    fmt = Formatter()
    seen = 0
    backoff = 0.5
    reached = False
    while True:
        try:
            async with aiomqtt.Client(
                target.host, target.port, username=target.username, password=target.password
            ) as client:
                await client.subscribe(topic, qos=1)
                reached = True
                backoff = 0.5
                if ready is not None:
                    ready.set()
                async for message in client.messages:
                    payload = message.payload if isinstance(message.payload, bytes) else b""
                    data = decode_payload(payload, target.encoding)
                    name = str(message.topic)
                    if as_json:
                        line = json.dumps({"topic": name, "payload": data}, separators=(",", ":"))
                    else:
                        line = fmt.line(name, data)
                    if line:
                        print(line, file=stream, flush=True)
                    seen += 1
                    if count and seen >= count:
                        return 0
                    if match_id and name.endswith("/result"):
                        return 0
        except aiomqtt.MqttError as exc:
            if not reached:  # never connected: a wrong address, not a broker that went away
                print(f"moo watch: cannot reach the MQTT broker at {url}: {exc}",
                      file=sys.stderr)
                return 1
            print(f"moo watch: {exc}; reconnecting in {backoff:.1f} s", file=sys.stderr)
            await asyncio.sleep(backoff)
            backoff = min(10.0, backoff * 2)


class Formatter:
    """Turns topic + payload into one line; remembers each match's players for names."""

    def __init__(self) -> None:
        self.players: dict[str, list[str]] = {}

    def _who(self, match_id: str, seat: Any) -> str:
        names = self.players.get(match_id)
        if isinstance(seat, int) and names and 0 <= seat < len(names):
            return names[seat]
        return f"seat {seat}"

    def line(self, topic: str, data: Any) -> str:
        parts = topic.split("/")
        if not isinstance(data, dict):
            return f"{topic}: {data!r}"
        if len(parts) >= 5 and parts[2] == "matches":
            mid = parts[3]
            players = data.get("players")
            if isinstance(players, list) and len(players) == 2:
                # every event names the players, so joining mid-match still shows names
                self.players[mid] = [str(p) for p in players]
            if parts[4] == "events":
                return f"[{mid}] #{data.get('seq', '?')} {self.event(mid, data)}"
            if parts[4] == "result":
                return f"[{mid}] RESULT {self.result(mid, data)}"
        if len(parts) >= 5 and parts[2] == "players" and parts[4] == "rating":
            delta = data.get("delta")
            change = "" if delta is None else f" ({delta:+.2f})"
            return (
                f"rating {parts[3]}: {data.get('rating')}{change} after {data.get('games')} "
                f"games (W{data.get('wins')} D{data.get('draws')} L{data.get('losses')})"
            )
        if topic.endswith("/server/stats"):
            mqtt = data.get("mqtt") or {}
            return (
                f"server: {data.get('live_matches')} live matches, "
                f"{data.get('players_online')} players online, {data.get('connections')} "
                f"connections; mqtt published {mqtt.get('published')} dropped "
                f"{mqtt.get('dropped')}"
            )
        return f"{topic}: {json.dumps(data)}"

    def event(self, mid: str, e: dict[str, Any]) -> str:
        kind = e.get("kind")
        if kind == "created":
            players = [str(p) for p in e.get("players", [])]
            self.players[mid] = players
            config = e.get("config") or {}
            return f"created: {' vs '.join(players)} ({config.get('pacing', '?')})"
        if kind == "secret":
            return f"{self._who(mid, e.get('seat'))} set a secret"
        if kind == "started":
            return "started (secrets committed)"
        if kind == "guess":
            who = self._who(mid, e.get("seat"))
            if "bulls" in e:
                return (
                    f"{who} guess {e.get('n')}: {e.get('guess', '????')} "
                    f"{format_response((e['bulls'], e['cows']))}"
                )
            return f"{who} made guess {e.get('n')}"
        if kind == "round":
            shown = []
            for seat, (guess, bulls, cows) in enumerate(e.get("results", [])):
                shown.append(
                    f"{self._who(mid, seat)} {guess or '????'} {format_response((bulls, cows))}"
                )
            return f"round {e.get('n')}: " + " | ".join(shown)
        if kind == "finished":
            return f"finished: {self._outcome(mid, e)}"
        if kind in ("away", "back", "resign"):
            return f"{self._who(mid, e.get('seat'))} {kind}"
        if kind == "timeout":
            return f"{self._who(mid, e.get('seat'))} ran out of time ({e.get('clock')})"
        return str(kind)

    def _outcome(self, mid: str, e: dict[str, Any]) -> str:
        counts = e.get("counts") or []
        winner = e.get("winner")
        reason = e.get("reason")
        if winner is None:
            return f"draw ({reason}), guesses {counts}"
        n = counts[winner] if isinstance(winner, int) and winner < len(counts) else "?"
        return f"{self._who(mid, winner)} wins in {n} ({reason}), guesses {counts}"

    def result(self, mid: str, data: dict[str, Any]) -> str:
        if mid not in self.players and data.get("players"):
            self.players[mid] = [str(p) for p in data["players"]]
        secrets = data.get("secrets") or []
        return f"{self._outcome(mid, data)}; secrets {' / '.join(map(str, secrets))}"
