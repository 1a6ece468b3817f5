"""Every page a browser test opened is closed when the test ends.

A page left open keeps its WebSocket, its timers and its animations running in the module's
Chromium, and every later test of the module shares the cores with them: a module of a dozen
tests had twenty pages live by its end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tests.browser_support import OPENED


@pytest.fixture(autouse=True)
def _close_pages() -> Iterator[None]:
    yield
    while OPENED:
        ctx = OPENED.pop()
        with contextlib.suppress(Exception):  # closed by the test itself, or its browser gone
            ctx.close()
