"""Issue 20's page defects, each tried in real headless Chromium at 1280x800 and 390x844.

1. the code box is empty at every new match and every phase change (text left from the last
   match once prefixed the next secret: "1237" + "06718" set 12037);
2. the analysis table fits its box: every column, the mark included, on a phone and in the
   desktop result card, and on the replay page, whose history cards keep their distance from
   the analysis card;
3. history rows and the replay page name the game; the player page says its rating and record
   are classic MOO 4 of 10 beside a list of other games' matches;
4. a 24-character name and an opponent's history title are shown whole; one tab looks active;
5. a rematch asked while the player is in another match is a notice (resign and accept);
6. a challenge notice covers nothing: not the lowest history rows, not the entry.

Layout is measured, not eyeballed: an element's scrollWidth against its clientWidth (text not
cut), bounding boxes against each other and the viewport.
"""

from __future__ import annotations

from typing import Any

import pytest

from clients.web_harness import MooServer
from tests import browser_support
from tests.browser_support import (
    DESKTOP,
    PHONE,
    SIZES,
    WAIT_MS,
    assert_fits,
    click,
    cut,
    login,
    new_page,
    set_secret,
    solve,
    type_guess,
    wait_revealed,
)

pytestmark = pytest.mark.browser

browser = browser_support.browser
shared_server = browser_support.shared_server


BOX = """(selector) => {
  const e = document.querySelector(selector);
  if (!e || e.getClientRects().length === 0) return null;
  const r = e.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right};
}"""


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    return (a["left"] < b["right"] - 0.5 and b["left"] < a["right"] - 0.5
            and a["top"] < b["bottom"] - 0.5 and b["top"] < a["bottom"] - 0.5)


def box(page: Any, selector: str) -> dict[str, float]:
    found = page.evaluate(BOX, selector)
    assert found is not None, f"{selector} is not on screen"
    return dict(found)


def boxes(page: Any, selector: str) -> list[dict[str, float]]:
    return list(page.eval_on_selector_all(
        selector, "els => els.map(e => { const r = e.getBoundingClientRect();"
        " return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; })"))


def start_bot(page: Any, strategy: str = "random", rules: str = "moo:4:0123456789") -> None:
    click(page, "#nav .tab[data-tab=play]")
    page.select_option("#variant-select", rules)
    page.select_option("#bot-select", strategy)
    click(page, "#btn-bot")
    page.wait_for_selector("body[data-view=match] #entry[data-mode=secret]")


def resign(page: Any) -> None:
    click(page, "#btn-resign")
    click(page, "#btn-resign")
    page.wait_for_selector("#view-match[data-phase=finished]")


def code_box(page: Any) -> str:
    return str(page.eval_on_selector("#code-input", "e => e.value"))


@pytest.mark.parametrize("size", SIZES)
def test_the_code_box_is_empty_at_every_new_match(
    browser: Any, shared_server: MooServer, size: str
) -> None:
    page = new_page(browser, shared_server.url, **SIZES[size])
    login(page, f"box-{size}")
    # A half-typed secret, then a half-typed guess, are left behind at each phase change.
    start_bot(page)
    page.fill("#code-input", "98")  # typed, never sent
    click(page, "#btn-random")
    page.press("#code-input", "Enter")
    page.wait_for_selector("#entry[data-mode=guess]")
    assert code_box(page) == ""
    page.fill("#code-input", "1237")  # a guess typed, never sent: the match is resigned
    resign(page)
    assert code_box(page) == ""
    click(page, "#btn-leave")
    # The next match (5 of 10) starts with an empty box: the secret typed is the secret set.
    start_bot(page, rules="moo:5:0123456789")
    assert code_box(page) == ""
    page.focus("#code-input")
    page.keyboard.type("06718")
    page.keyboard.press("Enter")
    page.wait_for_selector("#entry[data-mode=guess]")
    assert page.evaluate("() => window.moo.state.m.mySecret") == "06718"
    assert code_box(page) == ""
    # A guess half typed when the match ends by resignation is gone in the rematch.
    page.fill("#code-input", "98")
    resign(page)
    click(page, "#btn-rematch")  # the bot accepts at once
    page.wait_for_function(
        "() => window.moo.state.m && window.moo.state.m.phase === 'secrets'"
        " && document.querySelector('#entry').dataset.mode === 'secret'")
    assert code_box(page) == ""
    assert page.moo_errors == []


def play_with_a_blunder(page: Any) -> None:
    """Guess 0123 twice (the second tells nothing new: a blunder for the solver), then solve."""
    page.wait_for_selector("#entry[data-mode=secret]")
    set_secret(page, "9876")
    for n, guess in ((1, "0123"), (2, "0123")):
        type_guess(page, guess)
        wait_revealed(page, 0, n)
    solve(page)


@pytest.mark.parametrize("size", SIZES)
def test_the_analysis_table_fits_with_its_mark_column(
    browser: Any, shared_server: MooServer, size: str
) -> None:
    page = new_page(browser, shared_server.url, **SIZES[size])
    login(page, f"an-{size}")
    click(page, "#nav .tab[data-tab=play]")
    # "first" needs six guesses against 9876: the repeated guess is always played (the random
    # bot solves in two guesses now and then, which would end the match before it)
    page.select_option("#bot-select", "first")
    click(page, "#btn-bot")
    page.wait_for_selector("body[data-view=match]")
    play_with_a_blunder(page)
    click(page, "#result-panel .btn-analyse")
    page.wait_for_selector("#result-analysis[data-state=done]", timeout=WAIT_MS * 4)
    marks = page.eval_on_selector_all(
        "#result-analysis .analysis-player[data-seat] tbody td.mark",
        "els => els.map(e => e.textContent)")
    assert "blunder" in marks, marks  # the repeated guess is judged, and its mark is shown

    def assert_table_fits(scope: str) -> None:
        for wrap in page.eval_on_selector_all(
            f"{scope} .table-wrap", "ws => ws.map(w => [w.scrollWidth, w.clientWidth])"
        ):
            assert wrap[0] <= wrap[1], wrap  # no sideways scrolling
        assert cut(page, f"{scope} th, {scope} td") == []
        # every cell lies inside its table's box, and every mark is written out in full
        for seat in (0, 1):
            table = box(page, f"{scope} .analysis-player[data-seat='{seat}'] .table-wrap")
            for cell in boxes(page, f"{scope} .analysis-player[data-seat='{seat}'] td.mark"):
                assert cell["right"] <= table["right"] + 0.5, (cell, table)
        shown = page.eval_on_selector_all(
            f"{scope} td.mark", "els => els.filter(e => e.offsetParent).map(e => e.textContent)")
        assert set(shown) <= {"", "inaccuracy", "mistake", "blunder"}
        assert "blunder" in shown
        assert page.eval_on_selector_all(
            f"{scope} .scroll-hint", "hs => hs.filter(h => !h.hidden).length") == 0
        assert_fits(page)

    assert_table_fits("#result-analysis")
    if size == "desktop":
        # on a desktop the card has room for every column, the expected guesses included
        assert page.eval_on_selector_all(
            "#result-analysis .analysis-player[data-seat='0'] thead th",
            "ths => ths.filter(t => t.offsetParent).map(t => t.textContent)",
        ) == ["#", "guess", "answer", "left", "loss", "mark", "best guess", "best", "played"]

    # The replay page: the same table fits, and the history cards keep off the analysis card.
    click(page, "#result-link")
    page.wait_for_selector("#view-record:not([hidden]) #record-body:not([hidden])")
    click(page, "#record-body .btn-analyse")
    page.wait_for_selector("#record-analysis[data-state=done]")
    assert_table_fits("#record-analysis")
    histories = box(page, "#record-body > .histories")
    analysis = box(page, "#record-body > .card:has(#record-analysis)")
    assert histories["bottom"] + 8 <= analysis["top"], (histories, analysis)
    for card in boxes(page, "#record-body > .histories > .hist"):
        assert not overlaps(card, analysis)
    assert page.moo_errors == []


@pytest.mark.parametrize("size", SIZES)
def test_history_rows_and_the_replay_name_the_game(
    browser: Any, shared_server: MooServer, size: str
) -> None:
    page = new_page(browser, shared_server.url, **SIZES[size])
    name = f"games-{size}"
    login(page, name)
    start_bot(page, rules="mastermind:4:123456")
    click(page, "#btn-random")
    page.press("#code-input", "Enter")
    page.wait_for_selector("#entry[data-mode=guess]")
    resign(page)
    match = page.evaluate("() => window.moo.state.m.id")
    click(page, "#btn-leave")
    page.goto(f"{shared_server.url.rstrip('/')}/player/{name}")
    page.wait_for_selector(f"#history-list .hrow[data-match='{match}']")
    row = f"#history-list .hrow[data-match='{match}']"
    assert page.text_content(f"{row} .chip.game") == "Mastermind 4 of 6"
    # the rating and record are the classic game's, and the page says so
    page.wait_for_selector("#player-body:not([hidden])")
    assert page.text_content("#player-games") == "0"
    scope = page.text_content("#player-record-scope") or ""
    assert "No rated MOO 4 of 10 match yet" in scope and "other games" in scope
    assert page.text_content(".rating-scope") == "MOO 4 of 10 rating"
    assert cut(page, "#history-list .hrow .chip, #player-record-scope") == []
    assert_fits(page)
    click(page, f"{row} a.btn")
    page.wait_for_selector("#record-body:not([hidden])")
    assert (page.text_content("#record-game") or "").startswith("Mastermind 4 of 6 · lockstep")
    assert_fits(page)
    assert page.moo_errors == []


LONG = "W" * 24


@pytest.mark.parametrize("size", SIZES)
def test_long_names_and_titles_are_whole_and_one_tab_looks_active(
    browser: Any, shared_server: MooServer, size: str
) -> None:
    page = new_page(browser, shared_server.url, **SIZES[size])
    name = f"{LONG[:-len(size)]}{size}"[:24]
    login(page, name)
    assert len(name) == 24
    # one tab looks active, whichever were tapped before (a phone keeps a tapped tab hovered)
    for tab in ("watch", "board", "play"):
        click(page, f"#nav .tab[data-tab={tab}]")
        page.wait_for_selector(f"body[data-view={tab}]")
        looks_active = page.eval_on_selector_all(
            "#nav .tab:not([hidden])",
            "ts => ts.filter(t => getComputedStyle(t).backgroundColor !== 'rgba(0, 0, 0, 0)')"
            ".map(t => t.dataset.tab)")
        assert looks_active == [tab], looks_active
    start_bot(page, strategy="random")
    set_secret(page, "0123")
    type_guess(page, "4567")
    wait_revealed(page, 0, 1)
    # the names and the opponent's history title are whole: nothing cut, nothing off screen
    assert page.text_content("#me-name") == name
    assert page.text_content("#side-0 .pname") == name
    assert page.text_content("#hist-title-1") == "random-bot's guesses"
    assert cut(page, "#me-name, .pname, .hist-title, .side-name, .tab") == []
    assert_fits(page)
    resign(page)
    assert cut(page, "#me-name, .pname, .hist-title, .fair-name, .fair-body") == []
    assert_fits(page)
    # an opponent with a 24-character name: their history title is whole too
    other = new_page(browser, shared_server.url)
    rival = f"{'M' * 24}{size}"[-24:]
    login(other, rival)
    click(page, "#btn-leave")
    click(page, "#btn-room-create")
    code = page.wait_for_selector("#room-code:not(:empty)").text_content()
    other.fill("#room-input", code)
    other.click("#join-form button[type=submit]")
    set_secret(page, "0123")
    set_secret(other, "4567")
    page.wait_for_selector("#entry[data-mode=guess]")
    assert page.text_content("#hist-title-1") == f"{rival}'s guesses"
    assert cut(page, "#me-name, .pname, .hist-title, .side-name, .tab") == []
    for i in (0, 1):  # each title inside its card
        title = box(page, f"#hist-title-{i}")
        card = box(page, f".hist:has(#hist-title-{i})")
        assert card["left"] <= title["left"] and title["right"] <= card["right"], (title, card)
    assert_fits(page)
    assert page.moo_errors == [] and other.moo_errors == []


def test_a_rematch_asked_during_another_match_is_a_notice(
    browser: Any, shared_server: MooServer
) -> None:
    ann = new_page(browser, shared_server.url, **DESKTOP)
    bob = new_page(browser, shared_server.url, **PHONE)
    login(ann, "rm-ann")
    login(bob, "rm-bob")
    ann.click("#btn-room-create")
    code = ann.wait_for_selector("#room-code:not(:empty)").text_content()
    bob.fill("#room-input", code)
    bob.tap("#join-form button[type=submit]")
    for page in (ann, bob):
        page.wait_for_selector("#entry[data-mode=secret]")
    first = ann.evaluate("() => window.moo.state.m.id")
    resign(ann)
    bob.wait_for_selector("#view-match[data-phase=finished]")
    # bob has left for the lobby when ann asks for a rematch: a notice there
    bob.tap("#btn-leave")
    ann.click("#btn-rematch")
    bob.wait_for_selector("#toast[data-kind=rematch]:not([hidden])")
    assert bob.text_content("#toast-text") == "rm-ann wants a rematch of your last match."
    assert bob.text_content("#toast-yes") == "Accept rematch"
    # bob starts a bot match meanwhile: the offer stays, now as "resign and accept"
    start_bot(bob)
    bob.wait_for_selector("#toast[data-kind=rematch]:not([hidden])")
    text = bob.text_content("#toast-text") or ""
    assert "rm-ann wants a rematch" in text and "You are playing random-bot" in text
    assert bob.text_content("#toast-yes") == "Resign and accept"
    assert bob.text_content("#toast-no") == "Dismiss"
    assert cut(bob, "#toast-text, #toast button") == []
    assert not overlaps(box(bob, "#toast"), box(bob, "#entry"))
    bob.tap("#toast-yes")  # resigns the bot match, then asks for the rematch: both agreed
    for page in (ann, bob):
        page.wait_for_function(
            "(first) => { const m = window.moo.state.m; return m && m.id !== first"
            " && m.phase === 'secrets' && !m.watch && m.players.includes('rm-ann')"
            " && m.players.includes('rm-bob'); }", arg=first)
    assert ann.evaluate("() => window.moo.state.m.id") == bob.evaluate(
        "() => window.moo.state.m.id")
    assert bob.is_hidden("#toast")
    assert ann.moo_errors == [] and bob.moo_errors == []


@pytest.mark.parametrize("size", SIZES)
def test_a_challenge_notice_covers_no_history_row(
    browser: Any, shared_server: MooServer, size: str
) -> None:
    ann = new_page(browser, shared_server.url, **SIZES[size])
    bob = new_page(browser, shared_server.url)
    carl = new_page(browser, shared_server.url)
    login(ann, f"cn-ann-{size}")
    login(bob, f"cn-bob-{size}")
    login(carl, f"cn-carl-{size}")
    click(ann, "#btn-room-create")
    code = ann.wait_for_selector("#room-code:not(:empty)").text_content()
    bob.fill("#room-input", code)
    bob.click("#join-form button[type=submit]")
    set_secret(ann, "0123")
    set_secret(bob, "9876")
    # eight rounds that solve nothing: long histories, the lowest rows near the fold
    guesses = ("1234", "2345", "3456", "4567", "5678", "6789", "1235", "1236")
    for n, guess in enumerate(guesses, start=1):
        type_guess(ann, guess)
        type_guess(bob, "5678")
        wait_revealed(ann, 0, n)
    carl.fill("#challenge-input", f"cn-ann-{size}")
    carl.click("#challenge-form button[type=submit]")
    ann.wait_for_selector("#toast:not([hidden])")
    notice = box(ann, "#toast")
    covered = [b for b in boxes(ann, ".hist-row, #entry, .hist-title, .scoreboard .side")
               if overlaps(b, notice)]
    assert covered == []
    # the newest rows of both lists are still on screen
    height = ann.evaluate("() => innerHeight")
    for column in (0, 1):
        row = box(ann, f"#hist-{column} .hist-row[data-n='8']")
        assert row["bottom"] <= height, (column, row, height)
    assert_fits(ann)
    assert ann.moo_errors == [] and bob.moo_errors == [] and carl.moo_errors == []
