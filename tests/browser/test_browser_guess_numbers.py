"""Issue 31's page side, tried in real headless Chromium at 1280x800 and 390x844.

1. every guess the page sends carries its number in the match (`n`: 1 for the player's first,
   then one more each time), read from the WebSocket frames the page sends;
2. a guess typed while the server is down keeps the number it was given when typed: the resend
   after reconnection carries it, and the guess is played once;
3. a guess whose answer is lost with its connection (the connection is cut by the test right
   after the page sent it, before or after it reached the server) is kept and, on the next
   connection, sent again under the same number unless the resumed match shows it: played once;
4. `guess_ahead` and `guess_taken` are said at the entry and the page takes the server's number
   (`expected`) for the next try, which is played;
5. `too_many_names` on `hello` is said in one plain sentence with the wait.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clients.web_harness import MooServer
from tests import browser_support
from tests.browser_support import (
    SIZES,
    WAIT_MS,
    assert_fair,
    click,
    login,
    new_page,
    rows,
    set_secret,
    solve,
    type_guess,
    wait_revealed,
)

pytestmark = pytest.mark.browser

browser = browser_support.browser
server = browser_support.server

#: a restarted server: the page's backoff may have grown to 15 s meanwhile
RECONNECT_MS = WAIT_MS + 15_000


def record_guesses(page: Any) -> list[dict[str, Any]]:
    """Every `guess` request the page sends from now on, on any of its connections, in order.

    The list fills as frames go out; each entry is the request as sent (JSON-decoded)."""
    sent: list[dict[str, Any]] = []

    def on_frame(payload: str | bytes) -> None:
        try:
            msg = json.loads(payload)
        except ValueError:
            return
        if isinstance(msg, dict) and msg.get("type") == "guess":
            sent.append(msg)

    page.on("websocket", lambda ws: ws.on("framesent", on_frame))
    return sent


def start_bot_match(page: Any, name: str) -> None:
    login(page, name)
    # "first" plays the first code consistent with the responses: against 9876 it needs six
    # guesses, so the match is still on after the three guesses a test makes
    page.select_option("#bot-select", "first")
    click(page, "#btn-bot")
    page.wait_for_selector("body[data-view=match]")
    set_secret(page, "9876")


@pytest.mark.parametrize("size", SIZES)
def test_every_guess_carries_its_number_in_the_match(
    browser: Any, server: MooServer, size: str
) -> None:
    page = new_page(browser, server.url, **SIZES[size])
    sent = record_guesses(page)
    start_bot_match(page, f"num-{size}")
    solve(page)
    played = [(int(r["n"]), r["guess"]) for r in rows(page, 0)]
    assert len(played) >= 2, played  # more than one guess: the numbers must go up
    assert [(g.get("n"), g["guess"]) for g in sent] == played, (sent, played)
    assert_fair(page)
    assert page.moo_errors == []


@pytest.mark.parametrize("size", SIZES)
def test_a_guess_kept_offline_is_sent_with_the_number_it_was_typed_with_and_played_once(
    browser: Any, server: MooServer, size: str
) -> None:
    page = new_page(browser, server.url, **SIZES[size])
    sent = record_guesses(page)
    start_bot_match(page, f"kept-{size}")
    type_guess(page, "0123")
    wait_revealed(page, 0, 1)

    server.stop()
    page.wait_for_selector("#conn:not([data-state=online])")
    page.keyboard.type("1234")
    page.keyboard.press("Enter")
    page.wait_for_selector("#code-error[data-kind=queued]")
    # typed offline: numbered now (guess 2), not sent
    assert page.evaluate("() => moo.state.m.outbox && moo.state.m.outbox.n") == 2
    assert [(g["guess"], g.get("n")) for g in sent] == [("0123", 1)]

    server.start()
    page.wait_for_selector("#conn[data-state=online]", timeout=RECONNECT_MS)
    wait_revealed(page, 0, 2)
    assert [(g["guess"], g.get("n")) for g in sent] == [("0123", 1), ("1234", 2)]
    # played once: one row for it, and the next guess is number 3
    assert [(r["n"], r["guess"]) for r in rows(page, 0)][:2] == [("1", "0123"), ("2", "1234")]
    solve(page)
    played = [(int(r["n"]), r["guess"]) for r in rows(page, 0)]
    assert [(g.get("n"), g["guess"]) for g in sent] == played, (sent, played)
    assert page.moo_errors == []


@pytest.mark.parametrize("reached", [False, True], ids=["lost-on-the-way", "answer-lost"])
@pytest.mark.parametrize("size", SIZES)
def test_a_guess_whose_answer_is_lost_is_sent_again_under_its_number_and_played_once(
    browser: Any, server: MooServer, size: str, reached: bool
) -> None:
    page = new_page(browser, server.url, **SIZES[size])
    sent: list[dict[str, Any]] = []
    cut: list[str] = []

    def route(ws: Any) -> None:
        """Proxy the page's connections to the server; the first time the page sends 1234,
        close the page's side at once (the guess forwarded first when ``reached``)."""
        upstream = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            msg = json.loads(message)
            if msg.get("type") == "guess":
                sent.append(msg)
                if msg["guess"] == "1234" and not cut:
                    cut.append(msg["guess"])
                    if reached:
                        upstream.send(message)
                    ws.close(code=1000, reason="cut by the test")
                    return
            upstream.send(message)

        ws.on_message(from_page)

    page.route_web_socket(lambda url: True, route)
    start_bot_match(page, f"lost-{size}-{int(reached)}")
    type_guess(page, "0123")
    wait_revealed(page, 0, 1)
    type_guess(page, "1234")
    page.wait_for_selector("#hist-0 .hist-row[data-n='2']", timeout=RECONNECT_MS)
    wait_revealed(page, 0, 2)
    assert cut == ["1234"]
    # the guess that reached the server is not sent again (the resumed events show it); the
    # one lost on the way is, under the number it first went with
    resends = [] if reached else [("1234", 2)]
    assert [(g["guess"], g.get("n")) for g in sent] == [("0123", 1), ("1234", 2), *resends]
    assert [(r["n"], r["guess"]) for r in rows(page, 0)][:2] == [("1", "0123"), ("2", "1234")]
    assert page.eval_on_selector("#code-input", "e => e.value") == ""
    assert page.text_content("#code-error") == ""
    solve(page)
    played = [(int(r["n"]), r["guess"]) for r in rows(page, 0)]
    assert played[:2] == [(1, "0123"), (2, "1234")]
    assert sorted({(g.get("n"), g["guess"]) for g in sent}) == played
    assert page.moo_errors == []


@pytest.mark.parametrize("size", SIZES)
def test_guess_ahead_and_guess_taken_are_said_and_the_servers_number_is_taken(
    browser: Any, server: MooServer, size: str
) -> None:
    page = new_page(browser, server.url, **SIZES[size])
    sent = record_guesses(page)
    start_bot_match(page, f"ahead-{size}")
    type_guess(page, "0123")
    wait_revealed(page, 0, 1)

    # The page's count runs ahead (as if a guess of its own were still on its way): the server
    # refuses the number, says which one it expects, and the next try uses it.
    page.evaluate("() => { moo.state.m.sentN = 4; }")
    type_guess(page, "1234")
    page.wait_for_function(
        "() => document.querySelector('#code-error').textContent.startsWith('Not counted')")
    assert page.text_content("#code-error") == (
        "Not counted: it went as guess 5, but your next guess is number 2."
        " Press Enter to send it as guess 2.")
    assert page.eval_on_selector("#code-input", "e => e.value") == "1234"
    assert len(rows(page, 0)) == 1
    page.focus("#code-input")
    page.keyboard.press("Enter")
    wait_revealed(page, 0, 2)
    assert rows(page, 0)[1]["guess"] == "1234"
    assert page.text_content("#code-error") == ""

    # The page's count falls behind (events it has not seen yet): a different guess under a
    # taken number is refused, never a second guess, and the next try goes as guess 3.
    page.evaluate("() => { const m = moo.state.m; m.counts[m.seat] = 0; m.rounds = 0;"
                  " m.sentN = 0; }")
    type_guess(page, "2345")
    page.wait_for_function(
        "() => document.querySelector('#code-error').textContent.startsWith('Not counted')")
    assert page.text_content("#code-error") == (
        "Not counted: guess 1 was already played, with another code."
        " This one would be guess 3: press Enter to send it.")
    page.focus("#code-input")
    page.keyboard.press("Enter")
    wait_revealed(page, 0, 3)
    assert [(r["n"], r["guess"]) for r in rows(page, 0)][:3] == [
        ("1", "0123"), ("2", "1234"), ("3", "2345")]
    assert [(g["guess"], g.get("n")) for g in sent] == [
        ("0123", 1), ("1234", 5), ("1234", 2), ("2345", 1), ("2345", 3)]
    assert page.moo_errors == []


@pytest.mark.parametrize("size", SIZES)
def test_too_many_new_names_from_one_address_is_said_with_the_wait(
    browser: Any, tmp_path: Path, size: str
) -> None:
    extra = ["--bot-delay-ms", "0", "--new-names-per-address", "1"]
    with MooServer(tmp_path / "moo.sqlite3", extra=extra) as srv:
        first = new_page(browser, srv.url, **SIZES[size])
        login(first, f"first-{size}")  # spends the address's one new name
        page = new_page(browser, srv.url, **SIZES[size])
        page.fill("#name-input", f"second-{size}")
        click(page, "#login-form button[type=submit]")
        page.wait_for_function("() => document.querySelector('#login-error').textContent !== ''")
        text = page.text_content("#login-error") or ""
        prefix = "Too many new names from this address. Try again in "
        assert text.startswith(prefix) and text.endswith(" s."), text
        # the budget gives one name back every hour / 1: the wait is about an hour
        secs = int(text[len(prefix):-len(" s.")])
        assert 3000 < secs <= 3600, text
        assert page.is_visible("#password-input")  # an existing name can still sign in
        assert page.get_attribute("#conn", "data-state") == "offline"
        assert first.moo_errors == [] and page.moo_errors == []
