"""The browser client in real headless Chromium against a real ``moo serve``.

(a) two pages play a complete match against each other (with a spectator and a rematch),
(b) one page plays a built-in bot to the end, then finds itself on the leaderboard,
(c) a reload mid-match resumes it, and so does a server restart (the page reconnects alone).

Without Chromium these tests fail under CI (CI=true) and skip with the reason elsewhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.web_harness import MooServer, chromium_problem, launch_chromium
from moo.rules import DEFAULT_RULES, score

pytestmark = pytest.mark.browser

WAIT_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    problem = chromium_problem()
    if problem is not None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"browser tests cannot run in CI: {problem}", pytrace=False)
        pytest.skip(f"browser tests need Chromium: {problem}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = launch_chromium(pw)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MooServer]:
    """One server for the tests that only need a server (they use distinct names)."""
    db = tmp_path_factory.mktemp("moo") / "moo.sqlite3"
    with MooServer(db, extra=["--bot-delay-ms", "0"]) as srv:
        yield srv


@pytest.fixture
def server(tmp_path: Path) -> Iterator[MooServer]:
    """A server of the test's own, which it may stop and start."""
    with MooServer(tmp_path / "moo.sqlite3", extra=["--bot-delay-ms", "0"]) as srv:
        yield srv


def new_page(browser: Any, url: str, **context: Any) -> Any:
    ctx = browser.new_context(**context)
    page = ctx.new_page()
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.moo_errors = errors
    page.goto(url)
    return page


def login(page: Any, name: str) -> None:
    page.fill("#name-input", name)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#conn[data-state=online]")
    page.wait_for_selector("body[data-view=play]")


def assert_fits(page: Any) -> None:
    """Nothing sticks out sideways (a phone would zoom out or scroll)."""
    width, inner = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    assert width <= inner, (width, inner)


def set_secret(page: Any, secret: str) -> None:
    page.wait_for_selector("#entry[data-mode=secret]")
    page.fill("#code-input", secret)
    page.press("#code-input", "Enter")


def type_guess(page: Any, guess: str) -> None:
    """Keyboard entry: focus leaves the input, digits typed on the page land in it."""
    page.wait_for_selector("#entry[data-mode=guess] #code-input:not([disabled])")
    page.keyboard.type(guess)
    page.keyboard.press("Enter")


def tap_guess(page: Any, guess: str) -> None:
    """On-screen pad entry."""
    page.wait_for_selector("#entry[data-mode=guess] #code-input:not([disabled])")
    for ch in guess:
        page.click(f"#pad .key[data-key='{ch}']")
    page.click("#code-submit")


def rows(page: Any, column: int) -> list[dict[str, str]]:
    return list(
        page.eval_on_selector_all(
            f"#hist-{column} .hist-row",
            "els => els.map(e => ({n: e.dataset.n, guess: e.dataset.guess,"
            " bulls: e.dataset.bulls, cows: e.dataset.cows,"
            " badge: e.querySelector('.badge').textContent}))",
        )
    )


def wait_revealed(page: Any, column: int, n: int) -> None:
    """Row n of a history column has its response, or the match is over."""
    page.wait_for_function(
        """([column, n]) => document.querySelector(
               `#hist-${column} .hist-row[data-n="${n}"]:not(.pending)`) !== null
             || document.querySelector('#view-match').dataset.phase === 'finished'""",
        arg=[column, n],
    )


def next_consistent(history: list[dict[str, str]]) -> str:
    """The first secret consistent with every response so far (a tiny solver)."""
    for code in DEFAULT_RULES.secrets:
        if all(
            tuple(score(code, row["guess"])) == (int(row["bulls"]), int(row["cows"]))
            for row in history
        ):
            return code
    raise AssertionError(f"no code is consistent with {history}")


def finished(page: Any) -> bool:
    return bool(page.eval_on_selector("#view-match", "e => e.dataset.phase === 'finished'"))


def solve(page: Any, max_guesses: int = 12) -> None:
    """Guess consistently until the match ends (either side may win)."""
    for _ in range(max_guesses):
        if finished(page):
            return
        history = [r for r in rows(page, 0) if r["bulls"] != ""]
        n = len(rows(page, 0)) + 1
        page.wait_for_function(
            """() => document.querySelector('#view-match').dataset.phase === 'finished'
                 || !document.querySelector('#code-input').disabled"""
        )
        if finished(page):
            return
        enter = tap_guess if n % 2 else type_guess  # both ways of entering a guess
        enter(page, next_consistent(history))
        wait_revealed(page, 0, n)
    page.wait_for_selector("#view-match[data-phase=finished]")


def assert_fair(page: Any) -> None:
    page.wait_for_selector("#fairness .fair[data-seat='1']:not([data-ok=checking])")
    marks = page.eval_on_selector_all(
        "#fairness .fair",
        "els => els.map(e => [e.dataset.ok, e.querySelector('.mark').textContent])",
    )
    assert marks == [["ok", "✓"], ["ok", "✓"]], marks


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


def test_one_page_plays_a_bot_to_the_end(browser: Any, shared_server: MooServer) -> None:
    server = shared_server
    page = new_page(browser, server.url)
    login(page, "carol")
    page.select_option("#bot-select", "random")
    page.click("#btn-bot")
    page.wait_for_selector("body[data-view=match]")
    assert page.text_content("#side-1 .pname") == "random-bot"
    set_secret(page, "5031")
    # The lobby stays reachable mid-match; the match tab leads back, and a second match is
    # refused while this one is on.
    page.click("#nav .tab[data-tab=play]")
    page.wait_for_selector("body[data-view=play]")
    page.click("#btn-bot")
    assert "already in a match" in page.text_content("#lobby-error")
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
    page.wait_for_selector("#conn[data-state=online]", timeout=30_000)
    page.wait_for_selector("#banner", state="hidden")
    assert page.evaluate("window.moo.state.m.id") == match_id
    assert rows(page, 0) == before
    solve(page)
    assert_fair(page)
    assert page.moo_errors == []


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
    samples = ["0123", "0012", "12", "01234", "ab12", " 9876 ", "", "abcde", "ABCDE", "AABC",
               "aab", "aaa", "xy13", "x'1\\", "1379", "12a4567"]
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
