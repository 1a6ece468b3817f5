"""Issue 30's ladder in the page, in real headless Chromium against a real ``moo serve`` with its
own bot worker (programs checked and played in the sandbox; docs/web.md, "Ladder").

A person signs in, is told in plain words that a bot name is taken, submits a broken program
from the upload form on their own player page (its upload, kept by the server after the refused
submission, used again) and sees it refused with the check's reason, uploads a fixed version
from the bot's card and sees it accepted; a second player's bot (submitted over the protocol)
gives it games; then the Ladder tab lists it with its rating and interval, and its page draws
the rating history as an SVG line over its interval band, with its opponent, its games (one of
them replayed) and both versions. Pause, resume and withdraw (two taps) from the card. At
1280x800 and at 390x844; on the phone every control of the screens visited is a 44 x 44 px tap
target. A connected bot is marked on the tab and on its page.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.web_harness import MooServer
from tests import browser_support
from tests.browser_support import SIZES, assert_fits, click, cut, login, new_page, tap_targets
from tests.ladder_support import BROKEN, GOOD, submit
from tests.patience import patience
from tests.server_support import Client

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

browser = browser_support.browser
shared_server = browser_support.shared_server

#: games are played by the server's own worker in the sandbox: waits for them get more room
#: than a page's (they still end at their page condition)
GAMES_MS = int(patience(180) * 1000)

REASON = "game 1 of 3 against random: garbage: expected 'ready', got 'hello'"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[MooServer]:
    """A server of the test's own, with the bot worker ``moo serve`` starts by itself."""
    with MooServer(tmp_path / "moo.sqlite3") as srv:
        yield srv


def submit_over_protocol(port: int, owner: str, name: str, program: bytes) -> str:
    """A second player's bot, submitted as ``moo ladder submit`` does; its id."""

    async def run() -> str:
        client = await Client.hello(port, owner)
        try:
            reply = await submit(client, program, name=name)
        finally:
            await client.close()
        assert reply["type"] == "ladder_submitted", reply
        return str(reply["bot"]["bot_id"])

    # Playwright's sync API keeps an event loop running in this thread: use a thread of our own.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result(timeout=patience(60))


# Every text the form's status and error lines show, in order (a MutationObserver: the
# "checking" state is seen even if the page moves past it between two polls).
RECORD_FORM = """() => {
  window.formSaid = [];
  const note = () => {
    const said = [document.querySelector('#sf-status').textContent,
                  document.querySelector('#sf-error').textContent].join(' | ');
    if (window.formSaid[window.formSaid.length - 1] !== said) window.formSaid.push(said);
  };
  const obs = new MutationObserver(note);
  for (const id of ['#sf-status', '#sf-error']) {
    obs.observe(document.querySelector(id), {childList: true, characterData: true, subtree: true});
  }
}"""


@pytest.mark.parametrize("size", SIZES)
def test_submit_refused_then_fixed_then_ranked_with_its_chart(
    browser: Any, server: MooServer, size: str
) -> None:
    phone = size == "phone"
    measured: list[str] = []
    # the opponent first: checked while the page is signing in
    submit_over_protocol(server.port, f"bob-{size}", f"bobbot-{size}", GOOD)
    name = f"annbot-{size}"
    page = new_page(browser, server.url, **SIZES[size])
    sent: list[dict[str, Any]] = []  # the page's messages, as it sends them
    page.on("websocket", lambda ws: ws.on(
        "framesent", lambda frame: sent.append(json.loads(frame))))
    login(page, f"ann-{size}")

    # the Ladder tab leads to the upload form on your own player page
    click(page, "#nav .tab[data-tab=ladder]")
    page.wait_for_selector("body[data-view=ladder]")
    assert page.eval_on_selector_all(
        "#nav .tab[aria-current=page]", "ts => ts.map(t => t.dataset.tab)") == ["ladder"]
    click(page, "#ladder-submit-link")
    page.wait_for_selector("body[data-view=player] #ladder-mine:not([hidden])")
    assert page.evaluate("() => location.pathname") == f"/player/ann-{size}"
    assert_fits(page)
    if phone:
        tap_targets(page, "upload form", measured)
    # keyboard reachable: the form's controls follow each other in the tab order
    page.focus("#sf-file")
    for control in ("#sf-name", "#sf-rules", "#sf-submit"):
        page.keyboard.press("Tab")
        assert page.evaluate("() => '#' + document.activeElement.id") == control

    # a page-side mistake is said before anything is sent
    click(page, "#sf-submit")
    page.wait_for_selector("#sf-error:text-is(\"Choose the program's file first.\")")

    # a name that is taken (the other player's bot) is said in plain words; the upload the
    # server kept is used again for the next try of the same program, not sent twice
    page.set_input_files("#sf-file", {"name": "broken.sh", "mimeType": "text/plain",
                                      "buffer": BROKEN})
    page.fill("#sf-name", f"bobbot-{size}")
    click(page, "#sf-submit")
    page.wait_for_selector(f"#sf-error:text-is('The name “bobbot-{size}” is taken: every bot "
                           "plays under a player name of its own. Pick another.')")

    # the broken program: refused, with the check's reason in the form and on its card
    page.evaluate(RECORD_FORM)
    page.fill("#sf-name", name)
    click(page, "#sf-submit")
    page.wait_for_selector("#sf-error:has-text('Refused:')", timeout=GAMES_MS)
    error = page.text_content("#sf-error") or ""
    assert error == (f"Refused: version 1 of “{name}” failed the check: {REASON}. It is not on "
                     "the ladder: fix the program and submit a new version."), error
    said = page.evaluate("() => window.formSaid")
    checking = [i for i, s in enumerate(said) if s.startswith("Checking version 1:")]
    refused = [i for i, s in enumerate(said) if "Refused:" in s]
    assert checking and refused and checking[0] < refused[0], said
    uploads = [m for m in sent if m["type"] == "ladder_upload"]
    submits = [m for m in sent if m["type"] == "ladder_submit"]
    assert len(uploads) == 1 and uploads[0]["offset"] == 0, uploads
    assert [m["name"] for m in submits] == [f"bobbot-{size}", name], submits
    assert submits[0]["upload"] == submits[1]["upload"], submits
    assert submits[1]["sha256"] == hashlib.sha256(BROKEN).hexdigest()
    # each submission safe to send again: a request id of its own (docs/web.md)
    ids = [m.get("request_id") for m in submits]
    assert all(re.fullmatch(r"[0-9a-f]{32}", str(i)) for i in ids) and ids[0] != ids[1], ids
    assert base64.b64decode(uploads[0]["data"]) == BROKEN
    bot_id = str(page.get_attribute("#mine-list .mine-bot", "data-bot"))
    card = f"#mine-list .mine-bot[data-bot='{bot_id}']"
    assert re.fullmatch(r"b[0-9a-f]{12}", bot_id), bot_id
    page.wait_for_selector(f'{card}[data-status=refused] .mine-note.error:has-text("{REASON}")')
    assert_fits(page)

    # fixed: a new version from the bot's card, accepted
    with page.expect_file_chooser() as chooser:
        click(page, f"{card} [data-action=version]")
    chooser.value.set_files({"name": "good.py", "mimeType": "text/x-python", "buffer": GOOD})
    page.wait_for_selector(f"{card} .mine-note.ok", timeout=GAMES_MS)
    assert page.text_content(f"{card} .mine-note.ok") == (
        f"Accepted: version 2 of “{name}” plays on the ladder from its next pairing.")
    page.wait_for_selector(f"{card}[data-status=active]")
    assert page.text_content(f"{card} .status-chip") == "active"
    if phone:
        tap_targets(page, "your bots", measured)

    # on the ladder once it has played: the tab refreshes itself until its games are there
    click(page, "#nav .tab[data-tab=ladder]")
    row = f"#ladder-body tr[data-bot='{bot_id}']"
    page.wait_for_function(
        """(sel) => { const r = document.querySelector(sel);
             return r && /^\\d+$/.test(r.querySelector('td.rating').firstChild.textContent)
               && Number(r.querySelector('td.num:nth-child(6)').textContent.split('–')
                  .reduce((a, b) => Number(a) + Number(b))) >= 4; }""",
        arg=row, timeout=GAMES_MS)
    cells = page.eval_on_selector(row, """r => ({
        bot: r.querySelector('th.player a').textContent,
        rating: r.querySelector('td.rating').firstChild.textContent,
        interval: r.querySelector('td.rating .interval').textContent,
        title: r.querySelector('td.rating').title,
        wdl: r.querySelector('td.num:nth-child(6)').textContent})""")
    assert cells["bot"] == name
    low, high = (int(x) for x in cells["interval"].split("–"))
    assert low <= int(cells["rating"]) <= high, cells
    assert cells["title"] == f"95 % interval {cells['interval']}"
    assert page.is_visible(f"#ladder-body tr:has-text('bobbot-{size}')")
    assert_fits(page)
    if phone:
        tap_targets(page, "ladder", measured)

    # its page: the chart (a line over a band), its opponent, its games, its versions
    click(page, f"{row} th.player a")
    page.wait_for_selector("body[data-view=bot] #bot-title:text-is('" + name + "')")
    assert page.evaluate("() => location.pathname") == f"/bot/{bot_id}"
    page.wait_for_function(
        "() => { const s = document.querySelector('#bot-chart svg');"
        " return s && Number(s.dataset.points) >= 2; }", timeout=GAMES_MS)
    chart = page.eval_on_selector("#bot-chart svg", """s => ({
        points: Number(s.dataset.points),
        line: s.querySelector('.chart-line').getAttribute('points').trim().split(/\\s+/).length,
        band: s.querySelector('.chart-band').getAttribute('points').trim().split(/\\s+/).length,
        dots: s.querySelectorAll('.chart-dot').length,
        width: s.getBoundingClientRect().width,
        box: s.parentElement.getBoundingClientRect().width})""")
    assert chart["line"] == chart["points"] == chart["dots"], chart
    assert chart["band"] == 2 * chart["points"], chart
    assert chart["width"] <= chart["box"] + 0.5, chart
    assert page.is_visible(f"#bot-opponents tr:has-text('bobbot-{size}')")
    games = page.eval_on_selector_all("#bot-recent .hrow", "rs => rs.map(r => r.dataset.match)")
    assert len(games) >= 4, games
    assert page.eval_on_selector_all(
        "#bot-versions .version-row", "rs => rs.map(r => [r.dataset.version, r.dataset.check])"
    ) == [["2", "accepted"], ["1", "refused"]]
    assert_fits(page)
    if phone:
        tap_targets(page, "bot page", measured)
    click(page, f"#bot-recent .hrow[data-match='{games[0]}'] a.btn")
    page.wait_for_selector("body[data-view=record] #record-body:not([hidden])")
    assert page.evaluate("() => location.pathname") == f"/match/{games[0]}"
    page.go_back()
    page.wait_for_selector("body[data-view=bot] #bot-title:text-is('" + name + "')")

    # pause, resume, then withdraw (two taps) from its card on your page
    click(page, "#bot-facts a")
    page.wait_for_selector(f"body[data-view=player] {card}")
    # with the keyboard: the card is rebuilt with the answer, and the focus stays on its button
    page.focus(f"{card} [data-action=pause]")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"{card}[data-status=paused] [data-action=resume]")
    assert page.evaluate("() => document.activeElement.dataset.action") == "resume"
    click(page, f"{card} [data-action=resume]")
    page.wait_for_selector(f"{card}[data-status=active] [data-action=pause]")
    click(page, f"{card} .error-log summary")
    page.wait_for_selector(f"{card} .error-log[open] .stderr")
    click(page, f"{card} [data-action=withdraw]")
    page.wait_for_selector(f"{card} [data-action=withdraw]:has-text('Really withdraw?')")
    click(page, f"{card} [data-action=withdraw]")
    page.wait_for_selector(f"{card}[data-status=withdrawn]")
    click(page, "#nav .tab[data-tab=ladder]")
    page.wait_for_selector(f"#ladder-body tr:has-text('bobbot-{size}')")
    assert page.query_selector(row) is None
    assert page.moo_errors == []


def test_six_tabs_and_a_long_name_fit_at_every_width(browser: Any, shared_server: MooServer
                                                     ) -> None:
    """The Ladder's tab makes six during a match: at every width from a small phone to a
    desktop the top bar sticks out nowhere, each tab is whole and at least 44 px wide on a
    touch screen."""
    for width in (360, 390, 420, 480, 560, 640, 700, 900, 1100, 1199, 1280):
        touch = width <= 680
        page = new_page(browser, shared_server.url, viewport={"width": width, "height": 800},
                        is_mobile=touch, has_touch=touch)
        login(page, f"w{width}-" + "x" * (23 - len(str(width))))  # 24 characters
        click(page, "#btn-bot")
        page.wait_for_selector("#tab-match:not([hidden])")
        assert page.eval_on_selector_all("#nav .tab:not([hidden])", "ts => ts.length") == 6
        assert_fits(page)
        assert cut(page, ".tab, #me-name, #btn-logout") == [], width
        if touch:
            narrow = page.eval_on_selector_all(
                "#nav .tab:not([hidden])",
                "ts => ts.filter(t => t.getBoundingClientRect().width < 44)"
                ".map(t => t.textContent)")
            assert narrow == [], (width, narrow)
        page.context.close()


def test_a_connected_bot_is_marked_on_the_ladder_and_on_its_page(browser: Any,
                                                                 server: MooServer) -> None:
    """A connected bot (docs/ladder.md, "Connected bots": a client with ``bot: true`` that
    sent ``ladder_join``) is listed with a "connected" chip, then "offline" once it left;
    its page says what it is instead of a version."""
    joined, leave, left = threading.Event(), threading.Event(), threading.Event()
    box: dict[str, Any] = {}

    async def run() -> None:
        client = await Client.hello(server.port, "conbot-ui", bot=True)
        try:
            box["bot"] = (await client.request({"type": "ladder_join"}))["bot"]
            joined.set()
            await asyncio.to_thread(leave.wait, patience(120))
            box["left"] = (await client.request({"type": "ladder_leave"}))["bot"]
            left.set()
        finally:
            await client.close()

    thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    thread.start()
    try:
        assert joined.wait(patience(60)), "the bot did not join"
        bot_id = box["bot"]["bot_id"]
        page = new_page(browser, server.url, viewport={"width": 1280, "height": 800})
        login(page, "viewer-ui")
        click(page, "#nav .tab[data-tab=ladder]")
        row = f"#ladder-body tr[data-bot='{bot_id}']"
        page.wait_for_selector(f"{row} .chip[data-kind=connected]")
        assert page.text_content(f"{row} .chip[data-kind=connected]") == "connected"
        assert page.get_attribute(row, "data-status") == "active"
        click(page, f"{row} th.player a")
        page.wait_for_selector("body[data-view=bot] #bot-title:text-is('conbot-ui')")
        facts = page.text_content("#bot-facts") or ""
        assert "a connected bot" in facts and "version" not in facts, facts
        leave.set()
        assert left.wait(patience(60)) and box["left"]["status"] == "offline"
        page.go_back()
        page.wait_for_selector(row)
        click(page, "#btn-refresh-ladder")
        page.wait_for_selector(f"{row}[data-status=offline]")
        assert page.text_content(f"{row} th.player .chip") == "offline"
        assert page.moo_errors == []
        page.context.close()
    finally:
        leave.set()
        thread.join(patience(60))
