"""Fire-and-forget tasks that cannot vanish halfway.

The event loop keeps only a weak reference to a task: one nobody else refers to may be
garbage-collected before it finishes (a follow half-done, a claim never adopted). Every
detached task of the server is started with :func:`spawn`, which holds it until it is done and
logs what it raised instead of losing it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["running", "spawn"]

log = logging.getLogger("moo.server")

_running: set[asyncio.Task[Any]] = set()


def spawn(coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    task = asyncio.get_running_loop().create_task(coro)
    _running.add(task)
    task.add_done_callback(_done)
    return task


def _done(task: asyncio.Task[Any]) -> None:
    _running.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("background task failed", exc_info=task.exception())


def running() -> frozenset[asyncio.Task[Any]]:
    """The detached tasks not finished yet: a harness that must wait for everything a request
    started (bench/fuzz) compares this before and after the request."""
    return frozenset(_running)
