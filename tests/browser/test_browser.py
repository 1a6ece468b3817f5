"""The browser client in real headless Chromium against a real ``moo serve``.

(a) two pages play a complete match against each other (with a spectator and a rematch),
(b) one page plays a built-in bot to the end, then finds itself on the leaderboard,
(c) a reload mid-match resumes it, and so does a server restart (the page reconnects alone).
The issue-12 points are in tests/browser/test_browser_match.py (today's protocol) and
tests/browser/test_browser_accounts.py (accounts, history, the one-match rule on the server).

Without Chromium these tests fail, never skip (`./dev test --quick` leaves them out, counted).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from clients.web_harness import MooServer
from moo.rules import DEFAULT_RULES
from tests import browser_support
from tests.browser_support import (
    WAIT_MS,
    assert_fair,
    assert_fits,
    login,
    new_page,
    rows,
    set_secret,
    solve,
    tap_guess,
    type_guess,
    wait_revealed,
)

browser = browser_support.browser
shared_server = browser_support.shared_server
server = browser_support.server

pytestmark = pytest.mark.browser
#: the page retries with a backoff capped at 15 s (clients/web/app.js), then reconnects
RECONNECT_MS = WAIT_MS + 15_000


def test_two_pages_play_a_match_with_a_spectator_and_a_rematch(
    browser: Any, shared_server: MooServer
) -> None:
    server = shared_server
    ann = new_page(browser, server.url)
    bob = new_page(browser, server.url, viewport={"width": 360, "height": 740}, is_mobile=True,
                   has_touch=True)
    eve = new_page(browser, server.url)
    login(ann, "ann")
    login(bob, "bob")
    login(eve, "eve")
    assert_fits(bob)

    ann.click("#btn-room-create")
    code = ann.wait_for_selector("#room-code:not(:empty)").text_content()
    bob.fill("#room-input", code)
    bob.click("#join-form button[type=submit]")
    for page in (ann, bob):
        page.wait_for_selector("body[data-view=match]")
        page.wait_for_selector("#entry[data-mode=secret]")

    # A bad secret is explained and never sent; a good one is.
    ann.fill("#code-input", "0012")
    ann.press("#code-input", "Enter")
    assert "digits must be distinct (0 repeated)" in ann.text_content("#code-error")
    assert ann.get_attribute("#code-input", "aria-invalid") == "true"
    set_secret(ann, "0123")
    bob.click("#btn-random")
    assert len(bob.input_value("#code-input")) == 4
    bob.fill("#code-input", "4567")
    bob.click("#code-submit")
    ann.wait_for_selector("#entry[data-mode=guess]")
    bob.wait_for_selector("#entry[data-mode=guess]")
    assert "4567" in bob.text_content("#my-secret")

    # Eve finds the match in the live list and watches it.
    match_id = ann.evaluate("window.moo.state.m.id")
    eve.click("#nav .tab[data-tab=watch]")
    eve.click(f"#live-list .live-item[data-match='{match_id}'] button[data-watch]")
    eve.wait_for_selector("body[data-view=match]")
    eve.wait_for_selector("#view-match[data-mode=watch][data-phase=playing]")
    assert eve.is_hidden("#entry")

    # Invalid guesses are refused in the page: nothing is sent, nothing is counted.
    ann.wait_for_selector("#code-input:not([disabled])")
    ann.keyboard.type("12")
    ann.keyboard.press("Enter")
    assert "expected 4 digits, got 2" in ann.text_content("#code-error")
    ann.fill("#code-input", "")

    # Round 1 (lockstep): ann cracks it at once, bob does not.
    type_guess(ann, "4567")
    ann.wait_for_selector("#hist-0 .hist-row[data-n='1'].pending")
    ann.wait_for_selector("#code-input[disabled]")
    tap_guess(bob, "8901")
    for page in (ann, bob, eve):
        page.wait_for_selector("#view-match[data-phase=finished]")
        assert_fair(page)
    assert rows(ann, 0) == [{"n": "1", "guess": "4567", "bulls": "4", "cows": "0", "badge": "4B"}]
    assert rows(ann, 1) == [{"n": "1", "guess": "8901", "bulls": "0", "cows": "2", "badge": "2C"}]
    assert rows(bob, 0)[0]["badge"] == "2C"
    assert_fits(bob)
    assert ann.text_content("#result-title") == "You win!"
    assert bob.text_content("#result-title") == "You lose"
    assert eve.text_content("#result-title") == "ann wins"
    assert "0123" in ann.text_content("#fairness") and "4567" in ann.text_content("#fairness")
    assert ann.get_attribute("#result-panel", "data-outcome") == "win"

    # Rematch: ann asks, bob sees the offer and accepts; both are seated in a new match.
    first = match_id
    ann.click("#btn-rematch")
    bob.wait_for_selector("#btn-rematch:has-text('Accept rematch')")
    bob.click("#btn-rematch")
    for page in (ann, bob):
        page.wait_for_selector("#entry[data-mode=secret]")
        assert page.evaluate("window.moo.state.m.id") != first
    for page in (ann, bob, eve):
        assert page.moo_errors == []


@pytest.mark.slow(15)
def test_one_page_plays_a_bot_to_the_end(browser: Any, shared_server: MooServer) -> None:
    server = shared_server
    page = new_page(browser, server.url)
    login(page, "carol")
    page.select_option("#bot-select", "random")
    page.click("#btn-bot")
    page.wait_for_selector("body[data-view=match]")
    assert page.text_content("#side-1 .pname") == "random-bot"
    set_secret(page, "5031")
    # The lobby stays reachable mid-match; the match tab leads back, and nothing there can
    # start a second match while this one is on (tests/browser/test_browser_match.py has the rest).
    page.click("#nav .tab[data-tab=play]")
    page.wait_for_selector("body[data-view=play]")
    assert page.is_disabled("#btn-bot")
    assert "You are playing random-bot" in page.text_content("#lobby-busy")
    page.click("#tab-match")
    page.wait_for_selector("body[data-view=match] #entry[data-mode=guess]")
    # Notes mode: pad taps mark digits (✗, then ✓, then nothing) and type nothing.
    page.click("#btn-notes")
    page.click("#pad .key[data-key='7']")
    assert page.get_attribute("#pad .key[data-key='7']", "data-note") == "out"
    page.click("#pad .key[data-key='7']")
    assert page.get_attribute("#pad .key[data-key='7']", "data-note") == "in"
    page.click("#pad .key[data-key='8']")
    assert page.input_value("#code-input") == ""
    page.click("#btn-notes")
    assert page.get_attribute("#btn-notes", "aria-pressed") == "false"
    label = page.get_attribute("#pad .key[data-key='8']", "aria-label")
    assert label == "8, marked not in the code"
    solve(page)
    page.wait_for_selector("#view-match[data-phase=finished]")
    assert_fair(page)
    title = page.text_content("#result-title")
    assert title in ("You win!", "You lose", "Draw"), title
    mine = rows(page, 0)
    assert all(r["badge"] for r in mine) and mine
    if title == "You win!":
        assert mine[-1]["badge"] == "4B"
    if title == "You lose":
        assert rows(page, 1)[-1]["badge"] == "4B"

    # The finished game shows on the leaderboard, both orders.
    page.click("#btn-leave")
    page.click("#nav .tab[data-tab=board]")
    page.wait_for_selector("#board-body tr[data-player=carol]")
    page.click("text=By average")
    page.wait_for_selector("#board-body tr[data-player=carol]")
    me = page.eval_on_selector("#board-body tr[data-player=carol]", "e => e.className")
    assert me == "me"
    assert page.moo_errors == []


def test_reload_and_server_restart_resume_the_match(browser: Any, server: MooServer) -> None:
    page = new_page(browser, server.url)
    login(page, "dave")
    page.click("#btn-bot")
    page.wait_for_selector("body[data-view=match]")
    set_secret(page, "9876")
    type_guess(page, "0123")
    wait_revealed(page, 0, 1)
    before = rows(page, 0)
    match_id = page.evaluate("window.moo.state.m.id")
    assert page.evaluate("localStorage.getItem('moo.tokens')")

    # A reload replays the whole match from the server with the stored token.
    page.reload()
    page.wait_for_selector("#conn[data-state=online]")
    page.wait_for_selector("#hist-0 .hist-row[data-n='1']:not(.pending)")
    assert page.evaluate("window.moo.state.m.id") == match_id
    assert rows(page, 0) == before
    assert "9876" in page.text_content("#my-secret")

    # The server goes away and comes back on the same port: the page reconnects by itself.
    server.stop()
    page.wait_for_selector("#conn:not([data-state=online])")
    page.wait_for_selector("#banner:not([hidden])")
    server.start()
    page.wait_for_selector("#conn[data-state=online]", timeout=RECONNECT_MS)
    page.wait_for_selector("#banner", state="hidden")
    assert page.evaluate("window.moo.state.m.id") == match_id
    assert rows(page, 0) == before
    solve(page)
    assert_fair(page)
    assert page.moo_errors == []


@pytest.mark.slow(20)
def test_a_server_crash_mid_match_is_ridden_out(browser: Any, server: MooServer) -> None:
    """The stand-in for a cluster node's death behind a proxy: the server is killed with
    SIGKILL (the socket just breaks, no 1012) and started again on the same port (the same
    origin, as HAProxy would be). The page reconnects by itself, says hello with its token,
    resumes the match from the last event it had, and the match is played to its end."""
    page = new_page(browser, server.url)
    login(page, "erin")
    page.click("#btn-bot")
    page.wait_for_selector("body[data-view=match]")
    set_secret(page, "9876")
    type_guess(page, "0123")
    wait_revealed(page, 0, 1)
    before = rows(page, 0)
    match_id = page.evaluate("window.moo.state.m.id")
    server.kill()
    page.wait_for_selector("#conn:not([data-state=online])")
    page.wait_for_selector("#banner:not([hidden])")
    server.start()
    page.wait_for_selector("#conn[data-state=online]", timeout=RECONNECT_MS)
    page.wait_for_selector("#banner", state="hidden")
    assert page.evaluate("window.moo.state.m.id") == match_id
    assert rows(page, 0) == before
    type_guess(page, "1234")  # the match accepts moves again
    wait_revealed(page, 0, 2)
    solve(page)
    assert_fair(page)
    assert page.moo_errors == []


@pytest.mark.slow(25)
def test_quick_match_free_race_with_clocks_challenges_and_resign(
    browser: Any, tmp_path: Path
) -> None:
    clocks = {"MOO_CLOCK_TOTAL_MS": "600000", "MOO_CLOCK_GUESS_MS": "120000"}
    with MooServer(tmp_path / "moo.sqlite3", env=clocks) as srv:
        ann = new_page(browser, srv.url)
        bob = new_page(browser, srv.url)
        login(ann, "ann")
        login(bob, "bob")

        # Quick match, free pacing: both queue and are paired.
        for page in (ann, bob):
            page.check("input[name=pacing][value=free]", force=True)
            page.click("#btn-queue")
        for page in (ann, bob):
            page.wait_for_selector("#entry[data-mode=secret]")
        # The secret deadline runs while secrets are chosen.
        ann.wait_for_selector("#side-0 .clock.running")
        set_secret(ann, "0123")
        set_secret(bob, "4567")
        for page in (ann, bob):
            page.wait_for_selector("#entry[data-mode=guess]")
            # Configured clocks show (per-guess limit 2:00, within the 10:00 total) and run.
            page.wait_for_selector("#side-0 .clock.running")
            for side in ("#side-0", "#side-1"):
                assert re.fullmatch(r"2:00|1:[45]\d", page.text_content(f"{side} .clock"))

        # Free race: ann's response shows at once, before bob has guessed.
        type_guess(ann, "4567")
        ann.wait_for_selector("#hist-0 .hist-row[data-n='1'][data-bulls='4']")
        assert rows(ann, 0)[0]["badge"] == "4B"
        ann.wait_for_selector("#match-status:has-text('You cracked it in 1')")
        bob.wait_for_selector("#hist-1 .hist-row[data-n='1'][data-bulls='4']")
        type_guess(bob, "5678")
        for page in (ann, bob):
            page.wait_for_selector("#view-match[data-phase=finished]")
            assert_fair(page)
        assert ann.text_content("#result-title") == "You win!"

        # A challenge by name: declined first, then accepted.
        for page in (ann, bob):
            page.click("#btn-leave")
            page.wait_for_selector("body[data-view=play]")
        ann.fill("#challenge-input", "bob")
        ann.click("#challenge-form button[type=submit]")
        ann.wait_for_selector("#challenge-status:has-text('Challenge sent to bob')")
        bob.wait_for_selector("#toast:has-text('ann challenges you')")
        bob.click("#toast-no")
        ann.wait_for_selector("#challenge-status:has-text('bob declined')")
        ann.click("#challenge-form button[type=submit]")
        bob.wait_for_selector("#toast:has-text('ann challenges you')")
        bob.click("#toast-yes")
        for page in (ann, bob):
            page.wait_for_selector("#entry[data-mode=secret]")

        # bob drops out: ann sees him away with the grace countdown; resigning takes two taps.
        set_secret(ann, "1234")
        set_secret(bob, "5678")
        ann.wait_for_selector("#entry[data-mode=guess]")
        assert bob.moo_errors == []
        bob.context.close()
        ann.wait_for_selector("#side-1.away .away-note:has-text('to return')")
        assert "bob has dropped out" in ann.text_content("#match-status")
        ann.click("#btn-resign")
        assert ann.get_attribute("#btn-resign", "data-armed") == "true"
        assert ann.is_visible("#entry")  # nothing was sent yet
        ann.click("#btn-resign")
        ann.wait_for_selector("#view-match[data-phase=finished]")
        assert ann.text_content("#result-title") == "You lose"
        assert ann.text_content("#result-detail") == "ann resigned."
        assert ann.moo_errors == []


def test_page_rules_and_hash_agree_with_python(browser: Any, shared_server: MooServer) -> None:
    server = shared_server
    """rules.js gives the same verdicts and messages as moo/rules.py, and the same hashes."""
    from moo.commitment import commit
    from moo.errors import InvalidCode
    from moo.rules import Rules

    variants = [
        DEFAULT_RULES,
        Rules(length=5, alphabet="ABCDEFGH"),
        Rules(length=3, alphabet="abcdef", repeats_in_guess=True),
        Rules(length=4, alphabet="13579xyz"),
    ]
    # Whitespace is never stripped (docs/protocol.md): it is refused, named as Python names it.
    samples = ["0123", "0012", "12", "01234", "ab12", " 9876 ", "", "abcde", "ABCDE", "AABC",
               "aab", "aaa", "xy13", "x'1\\", "1379", "12a4567", " 123", "12\t3", "0123\n",
               "\u00a0123", "12\u20033", "\u00a0\u2003\t\n \x7f"]
    expected = []
    for rules in variants:
        for text in samples:
            for secret in (False, True):
                try:
                    code = rules.check_secret(text) if secret else rules.check_guess(text)
                    expected.append(["ok", code])
                except InvalidCode as exc:
                    expected.append([exc.code, str(exc)])
    page = new_page(browser, server.url)
    got = page.evaluate(
        """async ([variants, samples]) => {
             const r = await import('/rules.js');
             const out = [];
             for (const rules of variants) {
               for (const text of samples) {
                 for (const secret of [false, true]) {
                   try { out.push(['ok', r.checkCode(rules, text, {secret})]); }
                   catch (e) { out.push([e.code, e.message]); }
                 }
               }
             }
             return out;
           }""",
        [[r.to_dict() for r in variants], samples],
    )
    assert got == expected

    pairs = [("0123", "a1" * 16), ("9876", ""), ("ABCDE", "é✓" * 40)]
    hashes = page.evaluate(
        """async (pairs) => {
             const r = await import('/rules.js');
             const hex = (b) => [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
             const out = [];
             for (const [secret, salt] of pairs) {
               out.push([await r.commitment(secret, salt),
                         hex(r.sha256Fallback(new TextEncoder().encode(salt + secret)))]);
             }
             return out;
           }""",
        [list(p) for p in pairs],
    )
    assert hashes == [[commit(s, salt), commit(s, salt)] for s, salt in pairs]
