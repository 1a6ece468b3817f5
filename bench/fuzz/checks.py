"""The server's promises the fuzzer checks, and the figures it keeps.

Both drivers (:mod:`bench.fuzz.inproc`, :mod:`bench.fuzz.sockets`) judge replies by the same
rules: a refusal carries a *specific* code of ``moo/errors.py``, echoes a sane ``id`` as
``ref``, changes no state, and nothing is logged at ERROR level. Those rules, and the helpers
that compare and describe state, live here once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import Counter
from typing import Any

import moo.errors as errors_module
from moo.errors import MooError
from moo.protocol import Codec

#: Codes of the base classes: a refusal must be more specific than these.
GENERIC_CODES = {"error", "bad_message", "match_error", "lobby_error"}
SPECIFIC_CODES = {
    cls.code
    for cls in vars(errors_module).values()
    if isinstance(cls, type) and issubclass(cls, MooError)
} - GENERIC_CODES

#: Requests that docs/protocol.md lets succeed without a reply to the sender: none (even
#: ``decline`` answers ``declined`` to the decliner).
SILENT_WHEN_ACCEPTED: set[str] = set()


class Violation(AssertionError):
    """A broken promise, with the frame that broke it."""


@dataclasses.dataclass
class Stats:
    frames: int = 0
    refused: int = 0
    accepted: int = 0
    by_label: Counter[str] = dataclasses.field(default_factory=Counter)
    by_code: Counter[str] = dataclasses.field(default_factory=Counter)
    violations: list[str] = dataclasses.field(default_factory=list)
    harness_errors: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        rate = self.frames / self.seconds if self.seconds else 0.0
        return (
            f"{self.frames} frames in {self.seconds:.1f} s ({rate:.0f}/s): "
            f"{self.refused} refused, {self.accepted} accepted, "
            f"{len(self.violations)} violations, {len(self.harness_errors)} harness errors"
        )



#: Exceptions nobody handled (asyncio's "Exception in callback ..."), from any world.
LOOP_ERRORS: list[str] = []


def loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    exc = context.get("exception")
    LOOP_ERRORS.append(f"unhandled in event loop: {context.get('message')}: {exc!r}"[:300])


class ErrorCollector(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(level=logging.ERROR)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        cause = f": {record.exc_info[1]!r}" if record.exc_info else ""
        self.sink.append((record.getMessage() + cause)[:300])


def match_state(m: Any) -> str:
    """Everything a match's replay produces (the seats in full, phase, result, clocks)."""
    return repr(
        (m.seats, m.phase, m.rounds_done, m.result, m.secret_deadline, m.last_at, len(m.events))
    )


def first_difference(before: Any, after: Any) -> str:
    """The first differing leaf of two snapshots, short enough for a report line."""
    if isinstance(before, tuple) and isinstance(after, tuple) and len(before) == len(after):
        for b, a in zip(before, after):
            if b != a:
                return first_difference(b, a)
    if isinstance(before, str) and isinstance(after, str):
        i = next((i for i, (x, y) in enumerate(zip(before, after)) if x != y), 0)
        return f"{before[max(0, i - 60) : i + 60]!r} -> {after[max(0, i - 60) : i + 60]!r}"
    return f"{str(before)[:160]} -> {str(after)[:160]}"


def probe_frame(codec: Codec, frame: str | bytes) -> dict[str, Any]:
    """The frame's id, type and match_id as the harness can see them (nothing if undecodable)."""
    with contextlib.suppress(Exception):
        value = codec.decode(frame)
        if isinstance(value, dict):
            return {k: value[k] for k in ("id", "type", "match_id") if k in value}
    return {}


def sane_id(rid: Any) -> bool:
    return (isinstance(rid, str) and len(rid) <= 64) or (
        isinstance(rid, int) and not isinstance(rid, bool) and 0 <= rid < 2**53
    )
