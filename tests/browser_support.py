"""Fixtures and page helpers shared by the browser tests (tests/browser/test_browser*.py).

Every wait is on a page condition through Playwright (no sleeps); a page records its uncaught
errors in ``page.moo_errors`` so a test can assert there were none.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.web_harness import MooServer, chromium_problem, launch_chromium
from moo.rules import DEFAULT_RULES, score
from tests.patience import patience
from tests.server_support import Client

WAIT_MS = int(patience(30) * 1000)  # a safety net: waits end at their page condition


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    problem = chromium_problem()
    if problem is not None:  # an error, never a skip (./dev test --quick leaves these out)
        pytest.fail(f"the browser tests need Chromium: {problem}", pytrace=False)
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


#: the browser contexts new_page made in the running test (tests/browser/conftest.py closes
#: them when it ends)
OPENED: list[Any] = []


def new_page(browser: Any, url: str, **context: Any) -> Any:
    """A page in a context of its own. Unless the test says otherwise the context prefers
    reduced motion, as a person may ask of their system (style.css then stops every animation
    and transition): the pulsing dots and spinners run forever otherwise, and painting them
    was a fifth of the CPU of the browser tests. The test of the animations themselves asks for
    them (``reduced_motion="no-preference"``)."""
    context.setdefault("reduced_motion", "reduce")
    ctx = browser.new_context(**context)
    OPENED.append(ctx)
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


DESKTOP: dict[str, Any] = {"viewport": {"width": 1280, "height": 800}}
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "is_mobile": True,
    "has_touch": True,
    "device_scale_factor": 2,
}
#: the two sizes every layout and tournament test runs at
SIZES = {"desktop": DESKTOP, "phone": PHONE}


def click(page: Any, selector: str) -> None:
    """A tap on a touch screen, a click with a mouse (a tap leaves the hover state behind)."""
    if page.evaluate("() => matchMedia('(pointer: coarse)').matches"):
        page.tap(selector)
    else:
        page.click(selector)

# Elements among `selector` whose text is cut (wider than their box) or that stick out of the
# viewport sideways: [selector index, text, scrollWidth, clientWidth, left, right].
CUT = """(selector) => [...document.querySelectorAll(selector)]
  .filter((e) => e.getClientRects().length > 0)  // laid out (fixed ones too)
  .map((e, i) => {
    const r = e.getBoundingClientRect();
    return [i, e.textContent, e.scrollWidth, e.clientWidth, r.left, r.right];
  })
  .filter(([, , sw, cw, left, right]) => sw > cw + 1 || left < -0.5 || right > innerWidth + 0.5)"""


def cut(page: Any, selector: str) -> list[Any]:
    """The visible elements among ``selector`` whose text is cut or that stick out sideways."""
    return list(page.evaluate(CUT, selector))


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




def play_resigned_games(port: int, name: str, games: int, strategy: str = "random") -> None:
    """``games`` rated matches of ``name`` against a hosted bot over the protocol, each resigned
    at once (the quickest way to give a player a record). Ten games per connection (the name
    comes back with its token), well inside the per-connection rate limit."""

    async def run() -> None:
        token: str | None = None
        left = games
        while left > 0:
            c = await Client.hello(port, name, **({"token": token} if token else {}))
            token = token or c.token
            for _ in range(min(10, left)):
                match = await c.request({"type": "play_bot", "strategy": strategy})
                assert match["type"] == "match", match
                resigned = await c.request({"type": "resign", "match_id": match["match_id"]})
                assert resigned["type"] != "error", resigned
                await c.event(match["match_id"], "finished")
                left -= 1
            await c.close()

    # Playwright's sync API keeps an event loop running in this thread: use a thread of our own.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result(timeout=60)


# Every visible interactive control of the page, with its tap target's size. A checkbox or a
# radio button inside a <label> is measured as that label (tapping the label toggles it; the
# segmented choices hide their radio and draw the label). Controls inside [hidden] or
# display:none, not laid out, or off the screen sideways (the "Skip to content" link until it
# is focused) are not visible. Names: #id, else the aria-label, else the text.
TAP_TARGETS = """() => {
  const sel = 'a[href], button, input:not([type=hidden]), select, textarea, summary,'
    + ' [tabindex]:not([tabindex="-1"]), label:has(> input[type=checkbox]),'
    + ' label:has(> input[type=radio])';
  const out = [];
  for (const e of document.querySelectorAll(sel)) {
    if (e.matches('input[type=checkbox], input[type=radio]') && e.closest('label')) continue;
    if (e.closest('[hidden]')) continue;
    const cs = getComputedStyle(e);
    if (cs.display === 'none' || cs.visibility === 'hidden') continue;
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.right <= 0 || r.left >= innerWidth) continue;
    const text = (e.getAttribute('aria-label') || e.textContent || e.value || '')
      .replace(/\\s+/g, ' ').trim().slice(0, 32);
    const name = e.id ? `#${e.id}` : text || e.tagName.toLowerCase();
    out.push({name: `${e.tagName.toLowerCase()} ${name}`, w: r.width, h: r.height});
  }
  return out;
}"""

def settle(page: Any) -> None:
    """Wait for the page's finite animations to end: a card popping in is scaled down until
    then, so its boxes are measured at rest (the pulsing dots and spinners never end)."""
    page.evaluate("""() => Promise.all(document.getAnimations()
      .filter((a) => a.effect && a.effect.getTiming().iterations !== Infinity)
      .map((a) => a.finished.catch(() => null)))""")


#: the smallest tap target on a phone, in CSS px (the common guideline: Apple's 44 pt)
TAP_MIN = 44.0


def tap_targets(page: Any, screen: str, measured: list[str]) -> None:
    """Measure every visible control of the page at its current state, append each one to
    ``measured`` (``screen: tag name WxH``) and fail, listing them all, if any is smaller than
    TAP_MIN in either direction."""
    settle(page)
    found = page.evaluate(TAP_TARGETS)
    assert found, f"{screen}: no control found"
    lines = [f"{screen}: {c['name']} {c['w']:.0f}x{c['h']:.0f}" for c in found]
    measured.extend(lines)
    small = [line for c, line in zip(found, lines, strict=True)
             if c["w"] < TAP_MIN - 0.01 or c["h"] < TAP_MIN - 0.01]
    assert small == [], "controls under 44x44 px:\n" + "\n".join(small) + (
        "\n\nevery control measured:\n" + "\n".join(measured))
