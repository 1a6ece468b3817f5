"""Issue 31's page side for lobby requests, in real headless Chromium: a ``play_bot`` carries
a ``request_id``; when its connection is cut after the request reached the server and before
the answer came, the page sends it again on the next connection under the same
``request_id``, and the server answers with the match the first one started: one match on
screen, none announced besides it (docs/protocol.md, "Retrying safely")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from clients.web_harness import MooServer
from tests import browser_support
from tests.browser_support import SIZES, WAIT_MS, click, login, new_page

pytestmark = pytest.mark.browser

browser = browser_support.browser
server = browser_support.server

#: the page's reconnect backoff may have grown meanwhile
RECONNECT_MS = WAIT_MS + 15_000


@pytest.mark.parametrize("size", SIZES)
def test_a_play_bot_whose_answer_is_lost_is_sent_again_under_its_request_id(
    browser: Any, server: MooServer, size: str
) -> None:
    page = new_page(browser, server.url, **SIZES[size])
    sent: list[dict[str, Any]] = []

    def route(ws: Any) -> None:
        """Proxy the page's connections; the first ``play_bot`` is forwarded to the server
        and the page's side closed at once: the request is done, its answer lost."""
        upstream = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            msg = json.loads(message)
            if msg.get("type") == "play_bot":
                sent.append(msg)
                upstream.send(message)
                if len(sent) == 1:
                    ws.close(code=1000, reason="cut by the test")
                return
            upstream.send(message)

        ws.on_message(from_page)

    page.route_web_socket(lambda url: True, route)
    login(page, f"rid-{size}")
    page.select_option("#bot-select", "first")
    click(page, "#btn-bot")
    page.wait_for_selector("body[data-view=match]", timeout=RECONNECT_MS)
    # answered on the new connection: nothing of it pending nor left to send
    page.wait_for_function(
        "() => moo.state.welcomed && moo.state.m !== null && moo.state.unanswered.length === 0"
        " && ![...moo.state.pending.values()].some((c) => c.type === 'play_bot')",
        timeout=RECONNECT_MS)
    assert len(sent) == 2, sent
    assert sent[0]["request_id"] == sent[1]["request_id"] and sent[0]["request_id"]
    assert sent[0]["id"] != sent[1]["id"]
    # one match: the one on screen; no second one announced beside it
    assert page.evaluate("() => moo.state.extra") is None
    assert page.moo_errors == []
