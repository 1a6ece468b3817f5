"""Accounts, players' pages, replays and the server's one-match rule, in real headless Chromium.

These use the protocol additions of issue 12 (docs/protocol.md): ``hello`` with a password,
``set_password``, ``sign_out_all``, ``history``, ``player``, ``match_record``, the
``/player/<name>`` and ``/match/<id>`` page routes, ``room_cancel`` / ``room_closed`` and the
match-start clean-up (``unqueued`` / ``room_closed`` with reason ``matched``).

1. a person secures their name with a password, then signs in on a second browser (another
   context: no shared storage) and gets their name, match history and rating back;
2. changing the password and signing out everywhere: the other browser's kept token stops
   working and the page asks for the (new) password;
3. a player's page with paged history (rows appended, not rebuilt) and a finished match
   replayed guess by guess with its commitments checked, also opened by its link;
4. a room is cancelled; starting a bot match closes an open room and leaves the queue.

Without Chromium these tests fail, never skip (`./dev test --quick` leaves them out, counted).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from clients.web_harness import MooServer
from tests import browser_support
from tests.browser_support import (
    login,
    new_page,
    rows,
    set_secret,
    solve,
)

pytestmark = pytest.mark.browser

browser = browser_support.browser
shared_server = browser_support.shared_server


def sign_in_with_password(page: Any, name: str, password: str) -> None:
    """The sign-in screen, name and password (the field appears when the name is taken)."""
    page.wait_for_selector("body[data-view=login]")
    page.fill("#name-input", name)
    if page.is_visible("#btn-show-password"):
        page.click("#btn-show-password")
    page.fill("#password-input", password)
    page.click("#login-form button[type=submit]")


def set_password(page: Any, password: str, old: str | None = None) -> None:
    page.click("#me-name")
    page.wait_for_selector("body[data-view=account]")
    if old is not None:
        page.fill("#old-password", old)
    page.fill("#new-password", password)
    page.fill("#new-password-2", password)
    page.click("#btn-set-password")


def board_rating(page: Any, name: str) -> str:
    page.click("#nav .tab[data-tab=board]")
    return str(page.wait_for_selector(f"#board-body tr[data-player='{name}'] td.rating")
               .text_content())


def test_password_sign_in_on_a_second_browser_brings_everything_back(
    browser: Any, shared_server: MooServer
) -> None:
    first = new_page(browser, shared_server.url)
    login(first, "rosa")
    first.click("#btn-bot")
    set_secret(first, "2468")
    solve(first)
    title = first.text_content("#result-title")
    played = first.evaluate("window.moo.state.m.id")
    first.click("#btn-leave")
    rating = board_rating(first, "rosa")
    assert re.fullmatch(r"\d{3,4}\?", rating), rating

    # Secure the name. The page checks the two entries before anything is sent.
    first.click("#me-name")
    assert "kept only by this browser" in first.text_content("#account-status")
    assert first.is_hidden("#old-password-row")
    first.fill("#new-password", "short")
    first.fill("#new-password-2", "short")
    first.click("#btn-set-password")
    assert first.text_content("#password-error") == "A password has 8 to 128 characters."
    set_password(first, "correct horse 12")
    first.wait_for_selector("#password-done:has-text('Password saved')")
    assert "secured with a password" in first.text_content("#account-status")
    assert first.text_content("#btn-set-password") == "Change password"

    # Another browser (nothing shared): the name is taken, a wrong password is refused, the
    # right one signs in.
    second = new_page(browser, shared_server.url)
    second.fill("#name-input", "rosa")
    second.click("#login-form button[type=submit]")
    second.wait_for_selector("#login-error:has-text('already taken')")
    assert second.is_visible("#password-row")
    sign_in_with_password(second, "rosa", "wrong horse 12")
    second.wait_for_selector("#login-error:has-text('That name and password do not match.')")
    sign_in_with_password(second, "rosa", "correct horse 12")
    second.wait_for_selector("#conn[data-state=online]")
    second.wait_for_selector("body[data-view=play]")
    assert second.text_content("#me-name") == "rosa"
    # The first browser's connection was replaced by this one.
    first.wait_for_selector("#banner:has-text('signed in somewhere else')")

    # Rating, history and the match itself are all there.
    assert board_rating(second, "rosa") == rating
    second.click("#board-body tr[data-player='rosa'] a")
    second.wait_for_selector("body[data-view=player]")
    assert second.evaluate("location.pathname") == "/player/rosa"
    second.wait_for_selector(f"#history-list .hrow[data-match='{played}']")
    assert second.text_content("#player-games") == "1"
    assert second.text_content("#player-rating") == rating
    letter = second.text_content(f"#history-list .hrow[data-match='{played}'] .res")
    assert letter == {"You win!": "W", "You lose": "L", "Draw": "D"}[title]
    # The device keeps a token, never the password; a reload signs in with it.
    stored = second.evaluate("localStorage.getItem('moo.tokens')")
    assert "rosa" in json.loads(stored) and "horse" not in stored
    second.reload()
    second.wait_for_selector("#conn[data-state=online]")
    assert second.text_content("#me-name") == "rosa"
    assert first.moo_errors == [] and second.moo_errors == []


def test_change_password_and_sign_out_everywhere(
    browser: Any, shared_server: MooServer
) -> None:
    laptop = new_page(browser, shared_server.url)
    login(laptop, "sam")
    set_password(laptop, "first-password")
    laptop.wait_for_selector("#password-done:not([hidden])")

    phone = new_page(browser, shared_server.url)
    sign_in_with_password(phone, "sam", "first-password")
    phone.wait_for_selector("#conn[data-state=online]")
    laptop.wait_for_selector("#banner:has-text('signed in somewhere else')")

    # Changing it needs the current one.
    set_password(phone, "second-password", old="not-the-password")
    phone.wait_for_selector("#password-error:has-text('The current password is not right.')")
    set_password(phone, "second-password", old="first-password")
    phone.wait_for_selector("#password-done:has-text('Password saved')")

    # Sign out everywhere takes two taps; then the laptop's kept token no longer works.
    phone.click("#btn-sign-out-all")
    assert phone.get_attribute("#btn-sign-out-all", "data-armed") == "true"
    phone.click("#btn-sign-out-all")
    phone.wait_for_selector("#signout-done:not([hidden])")
    laptop.click("#btn-retry")
    laptop.wait_for_selector("body[data-view=login]")
    laptop.wait_for_selector("#login-error:has-text('no longer signed in as “sam”')")
    assert laptop.is_visible("#password-row")
    sign_in_with_password(laptop, "sam", "first-password")
    laptop.wait_for_selector("#login-error:has-text('do not match')")
    sign_in_with_password(laptop, "sam", "second-password")
    laptop.wait_for_selector("#conn[data-state=online]")
    assert laptop.text_content("#me-name") == "sam"
    # The phone, signed out in turn by the laptop's new sign-in, is told why.
    phone.wait_for_selector("#banner:has-text('signed in somewhere else')")
    assert laptop.moo_errors == [] and phone.moo_errors == []


def test_player_page_paged_history_and_a_match_replayed(
    browser: Any, shared_server: MooServer
) -> None:
    browser_support.play_resigned_games(shared_server.port, "pat", 21)
    viewer = new_page(browser, shared_server.url)
    login(viewer, "vic")
    viewer.click("#nav .tab[data-tab=board]")
    viewer.click("#board-body tr[data-player='pat'] a")
    viewer.wait_for_selector("#history-list .hrow >> nth=19")
    assert viewer.evaluate("location.pathname") == "/player/pat"
    assert viewer.text_content("#player-title") == "pat"
    assert re.fullmatch(r"\d{3,4}\??", viewer.text_content("#player-rating"))
    assert [viewer.text_content(f"#player-{k}") for k in ("games", "wins", "draws", "losses")] \
        == ["21", "0", "0", "21"]
    assert viewer.text_content("#vsmin-text") == "Not enough solved matches yet."
    assert viewer.locator("#history-list .hrow").count() == 20
    # Older matches are appended: the first twenty rows stay the same nodes.
    viewer.evaluate("window.__top = document.querySelector('#history-list .hrow')")
    viewer.click("#btn-history-more")
    viewer.wait_for_selector("#history-list .hrow >> nth=20")
    assert viewer.locator("#history-list .hrow").count() == 21
    assert viewer.evaluate("window.__top === document.querySelector('#history-list .hrow')")
    assert viewer.is_hidden("#btn-history-more")
    assert viewer.locator("#history-list .res.loss").count() == 21

    # vic plays a bot to the end, then replays the match from the result's link.
    viewer.click("#nav .tab[data-tab=play]")
    viewer.click("#btn-bot")
    set_secret(viewer, "1357")
    solve(viewer)
    match_id = viewer.evaluate("window.moo.state.m.id")
    mine, theirs = rows(viewer, 0), rows(viewer, 1)
    viewer.click("#result-link")
    viewer.wait_for_selector("body[data-view=record] #record-body:not([hidden])")
    assert viewer.evaluate("location.pathname") == f"/match/{match_id}"
    assert viewer.text_content("#rp-step") == "Before the first guess"
    assert viewer.locator("#rhist-0 .hist-row").count() == 0
    viewer.click("#rp-next")
    assert viewer.text_content("#rp-step").startswith("Round 1 of ")
    assert viewer.locator("#rhist-0 .hist-row").count() == 1
    first_row = viewer.eval_on_selector(
        "#rhist-0 .hist-row", "e => [e.dataset.guess, e.dataset.bulls, e.dataset.cows]"
    )
    assert first_row == [mine[0]["guess"], mine[0]["bulls"], mine[0]["cows"]]
    viewer.keyboard.press("End")
    assert viewer.text_content("#rp-step").startswith("End: ")
    assert viewer.locator("#rhist-0 .hist-row").count() == len(mine)
    assert viewer.locator("#rhist-1 .hist-row").count() == len(theirs)
    viewer.keyboard.press("ArrowLeft")
    assert viewer.locator("#rhist-0 .hist-row").count() == len(mine) - 1
    viewer.keyboard.press("ArrowRight")
    assert_fair_record(viewer, first_seat="0")

    # The link works on its own, in another browser signed in as someone else.
    other = new_page(browser, f"{shared_server.url}match/{match_id}")
    other.wait_for_selector("#login-note:has-text('Sign in to replay this match.')")
    login_to(other, "wyn", "record")
    other.wait_for_selector("#record-body:not([hidden])")
    other.click("#rp-last")
    assert other.locator("#rhist-0 .hist-row").count() == len(mine)
    assert_fair_record(other, first_seat="0")
    assert other.text_content("#record-title") == "vic vs random-bot"

    # A match still being played says so, and offers to watch it.
    other.click("#nav .tab[data-tab=play]")
    other.click("#btn-bot")
    set_secret(other, "8642")
    live = other.evaluate("window.moo.state.m.id")
    viewer.goto(f"{shared_server.url}match/{live}")
    viewer.wait_for_selector("#record-live:not([hidden])")
    viewer.click("#btn-record-watch")
    viewer.wait_for_selector("#view-match[data-mode=watch]")
    assert viewer.evaluate("location.pathname") == "/"
    assert viewer.moo_errors == [] and other.moo_errors == []


def login_to(page: Any, name: str, view: str) -> None:
    page.fill("#name-input", name)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#conn[data-state=online]")
    page.wait_for_selector(f"body[data-view={view}]")


def assert_fair_record(page: Any, first_seat: str) -> None:
    page.wait_for_selector("#record-fairness .fair:not([data-ok=checking]) >> nth=1")
    marks = page.eval_on_selector_all(
        "#record-fairness .fair", "els => els.map(e => [e.dataset.seat, e.dataset.ok])"
    )
    assert marks[0] == [first_seat, "ok"] and marks[1][1] == "ok", marks


def test_room_cancel_and_a_match_start_closing_room_and_queue(
    browser: Any, shared_server: MooServer
) -> None:
    ann = new_page(browser, shared_server.url)
    bob = new_page(browser, shared_server.url)
    login(ann, "ann7")
    login(bob, "bob7")

    ann.click("#btn-room-create")
    ann.wait_for_selector("#room-code:not(:empty)")
    ann.click("#btn-room-cancel")
    ann.wait_for_selector("#room-status", state="hidden")
    assert ann.is_visible("#btn-room-create")

    # An open room and a place in the queue, then a bot match: the server closes the room and
    # drops the queue entry, so nobody can join ann into a second match.
    ann.click("#btn-room-create")
    code = ann.wait_for_selector("#room-code:not(:empty)").text_content()
    ann.click("#btn-queue")
    ann.wait_for_selector("#queue-status:not([hidden])")
    ann.click("#btn-bot")
    ann.wait_for_selector("#entry[data-mode=secret]")
    first = ann.evaluate("window.moo.state.m.id")
    bob.fill("#room-input", code)
    bob.click("#join-form button[type=submit]")
    bob.wait_for_selector("#lobby-error:has-text('no open room')")
    assert bob.get_attribute("body", "data-view") == "play"
    ann.click("#nav .tab[data-tab=play]")
    ann.wait_for_selector("#room-status", state="hidden")
    ann.wait_for_selector("#queue-status", state="hidden")
    assert ann.evaluate("window.moo.state.m.id") == first
    assert ann.evaluate("window.moo.state.extra") is None
    assert ann.moo_errors == [] and bob.moo_errors == []
