"""Screenshots of the browser client's key screens, taken in headless Chromium.

    python -m clients.web_screenshots [--out docs/img]

Starts a private ``moo serve`` (temporary database), seeds the leaderboard with a few games
played over the protocol, then drives real pages through the screens: sign-in, lobby, a match
in progress (desktop and phone, light and dark), a challenge arriving mid-match, the result with
its fairness check, live matches, the leaderboard, the account page, a player's page and a
finished match replayed from its link, tournaments, and the ladder (bots submitted from their
owners' pages, checked and played by the server's own bot worker in the sandbox: the Ladder tab,
a bot's page with its rating chart, your bots with a refused and an accepted version).
Everything is awaited on page conditions; nothing sleeps. ``--ladder-only`` takes the ladder's
screens alone.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from clients.sdk.wire import Wire
from clients.web_harness import ROOT, MooServer, chromium_problem, launch_chromium
from moo.rules import DEFAULT_RULES, Response, score

WAIT_MS = 20_000
DESKTOP = {"width": 1200, "height": 820}
PHONE = {"width": 390, "height": 844}

#: Leaderboard seed: (player, bot opponent, games).
SEED = [
    ("ada", "random", 5),
    ("grace", "random", 4),
    ("linus", "random", 3),
    ("margaret", "random", 3),
    ("tanaka", "random", 2),
]


def consistent(history: list[tuple[str, int, int]]) -> list[str]:
    return [
        code
        for code in DEFAULT_RULES.secrets
        if all(score(code, g) == Response(b, c) for g, b, c in history)
    ]


async def _play_bot_game(ws: Wire, strategy: str, rng: random.Random) -> None:
    await ws.send({"type": "play_bot", "strategy": strategy})
    seat: int | None = None
    match_id = ""
    history: list[tuple[str, int, int]] = []
    while True:
        msg = await ws.receive()
        if msg["type"] == "error":
            raise RuntimeError(f"seeding failed: {msg}")
        if msg["type"] == "match":
            seat, match_id = msg["seat"], msg["match_id"]
            secret = "".join(rng.sample(DEFAULT_RULES.alphabet, DEFAULT_RULES.length))
            await ws.send({"type": "secret", "match_id": match_id, "secret": secret})
            continue
        if msg["type"] != "event" or msg.get("match_id") != match_id or seat is None:
            continue
        kind = msg["kind"]
        if kind == "finished":
            return
        solved = False
        if kind == "round":
            guess, bulls, cows = msg["results"][seat]
            history.append((guess, bulls, cows))
            solved = any(r[1] == DEFAULT_RULES.length for r in msg["results"])
        if kind in ("started", "round") and not solved:
            guess = rng.choice(consistent(history))
            await ws.send({"type": "guess", "match_id": match_id, "guess": guess})


async def seed_leaderboard(port: int) -> None:
    for name, strategy, games in SEED:
        rng = random.Random(name)
        ws = await Wire.open(f"ws://127.0.0.1:{port}/")
        try:
            await ws.send({"type": "hello", "name": name})
            welcome = await ws.receive()
            if welcome["type"] != "welcome":
                raise RuntimeError(f"hello refused: {welcome}")
            for _ in range(games):
                await _play_bot_game(ws, strategy, rng)
        finally:
            await ws.close()


# -- pages -------------------------------------------------------------------------------------
def _page(browser: Any, url: str, **context: Any) -> Any:
    page = browser.new_context(**context).new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(url)
    return page


def _login(page: Any, name: str) -> None:
    page.fill("#name-input", name)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#conn[data-state=online]")


def _rows(page: Any) -> list[tuple[str, int, int]]:
    raw = page.eval_on_selector_all(
        "#hist-0 .hist-row:not(.pending)",
        "els => els.map(e => [e.dataset.guess, +e.dataset.bulls, +e.dataset.cows])",
    )
    return [(g, b, c) for g, b, c in raw]


def _finished(page: Any) -> bool:
    return bool(page.eval_on_selector("#view-match", "e => e.dataset.phase === 'finished'"))


def _guess(page: Any, rng: random.Random, *, best: bool = False) -> None:
    """One consistent guess through the on-screen pad, then wait for its response."""
    page.wait_for_function(
        "() => document.querySelector('#view-match').dataset.phase === 'finished'"
        " || !document.querySelector('#code-input').disabled"
    )
    if _finished(page):
        return
    history = _rows(page)
    left = consistent(history)
    code = left[0] if best else rng.choice(left)
    for ch in code:
        page.click(f"#pad .key[data-key='{ch}']")
    page.click("#code-submit")
    page.wait_for_function(
        """(n) => document.querySelector(`#hist-0 .hist-row[data-n="${n}"]:not(.pending)`)
             || document.querySelector('#view-match').dataset.phase === 'finished'""",
        arg=len(history) + 1,
    )


def _play_tournament_game(pages: list[Any], secrets: list[str], match_id: str) -> None:
    """Both players of a lockstep tournament game set their secret and guess the first code
    still possible, round by round, until this game ends (the next may start at once)."""
    done = """(id) => { const m = window.moo.state.m;
      return !m || m.id !== id || m.phase === 'finished'; }"""
    for page, secret in zip(pages, secrets, strict=True):
        page.wait_for_selector("#entry[data-mode=secret]")
        page.fill("#code-input", secret)
        page.click("#code-submit")
    for n in range(1, 13):
        for page in pages:
            page.wait_for_function(
                "(id) => { const m = window.moo.state.m; return !m || m.id !== id"
                " || m.phase === 'finished' || (m.phase === 'playing'"
                " && !document.querySelector('#code-input').disabled); }", arg=match_id)
            if page.evaluate(done, match_id):
                continue
            page.fill("#code-input", consistent(_rows(page))[0])
            page.click("#code-submit")
        for page in pages:
            page.wait_for_function(
                f"([id, n]) => ({done})(id) || document.querySelector("
                "`#hist-0 .hist-row[data-n='${n}']:not(.pending)`) !== null", arg=[match_id, n])
        if all(page.evaluate(done, match_id) for page in pages):
            return


def _start_bot_match(page: Any, strategy: str, secret: str) -> None:
    page.click("#nav .tab[data-tab=play]")
    page.select_option("#bot-select", strategy)
    page.click("#btn-bot")
    page.wait_for_selector("#entry[data-mode=secret]")
    page.fill("#code-input", secret)
    page.click("#code-submit")
    page.wait_for_selector("#entry[data-mode=guess]")


#: programs the ladder's screenshots submit (examples/ladder/: single-file ladder bots)
LADDER_BOTS = ROOT / "examples" / "ladder"
#: a program the compliance check refuses: it answers the protocol's hello with garbage
BROKEN_BOT = b"#!/bin/sh\necho hello\n"
#: games are played by the server's own worker in the sandbox: their waits get more room
LADDER_WAIT_MS = 300_000


def _submit_bot(page: Any, name: str, program: Path | bytes) -> str:
    """Submit a bot from the page's upload form (the owner's own player page); its id once the
    check's verdict is on its card."""
    page.click("#nav .tab[data-tab=ladder]")
    page.click("#ladder-submit-link")
    page.wait_for_selector("#ladder-mine:not([hidden])")
    if isinstance(program, Path):
        page.set_input_files("#sf-file", str(program))
    else:
        page.set_input_files("#sf-file", {"name": "bot.sh", "mimeType": "text/plain",
                                          "buffer": program})
    page.fill("#sf-name", name)
    page.click("#sf-submit")
    card = f"#mine-list .mine-bot:has(.mine-name:text-is('{name}'))"
    page.wait_for_selector(f"{card} .mine-note.ok, {card} .mine-note.error",
                           timeout=LADDER_WAIT_MS)
    return str(page.get_attribute(card, "data-bot"))


def take_ladder(browser: Any, url: str, shot: Any) -> None:
    """The ladder: three owners submit from their pages (quinn's first version refused, her
    second accepted), the worker plays them; then the Ladder tab, a bot's page, your bots."""
    pages = []
    for owner, file in (("bea", "first.py"), ("cy", "random.py")):
        p = _page(browser, url, viewport=DESKTOP)
        _login(p, owner)
        _submit_bot(p, f"{owner}-{file.removesuffix('.py')}", LADDER_BOTS / file)
        pages.append(p)
    page = _page(browser, url, viewport=DESKTOP)
    _login(page, "quinn")  # a name of its own: the tour above signed in as alice
    bot_id = _submit_bot(page, "quinn-bot", BROKEN_BOT)
    card = f"#mine-list .mine-bot[data-bot='{bot_id}']"
    with page.expect_file_chooser() as chooser:
        page.click(f"{card} [data-action=version]")
    chooser.value.set_files(str(LADDER_BOTS / "minimum.py"))
    page.wait_for_selector(f"{card} .mine-note.ok", timeout=LADDER_WAIT_MS)
    page.click(f"{card} .error-log summary")
    # the card just under the sticky top bar (an element's shot is taken where it is on screen)
    page.evaluate("""() => { const box = document.querySelector('#ladder-mine');
      window.scrollTo(0, box.getBoundingClientRect().top + scrollY - 90); }""")
    shot(page.locator("#ladder-mine"), "ladder-mine")
    # the standings once every bot has played a few pairings and the exact scores are in
    page.click("#nav .tab[data-tab=ladder]")
    page.wait_for_function(
        """() => { const rows = [...document.querySelectorAll('#ladder-body tr')];
             return rows.length === 3 && rows.every((r) =>
               Number(r.querySelector('td.num.hide-sm').textContent) >= 8
               && r.querySelector('td.exact').dataset.exact !== 'pending'); }""",
        timeout=LADDER_WAIT_MS)
    shot(page, "ladder")
    phone = _page(browser, url, viewport=PHONE, device_scale_factor=2, is_mobile=True,
                  has_touch=True)
    _login(phone, "dora")  # a new context: another name (quinn's token is in hers)
    phone.click("#nav .tab[data-tab=ladder]")
    phone.wait_for_selector("#ladder-body tr")
    shot(phone, "ladder-phone")
    phone.context.close()
    page.click(f"#ladder-body tr[data-bot='{bot_id}'] th.player a")
    page.wait_for_selector("#bot-chart svg")
    shot(page, "bot", full=True)
    for p in [page, *pages]:
        p.context.close()


def take(out: Path, url: str, port: int, *, ladder_only: bool = False) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []

    def shot(page: Any, name: str, *, full: bool = False) -> None:
        path = out / f"{name}.png"
        if hasattr(page, "goto"):
            page.screenshot(path=str(path), full_page=full, animations="disabled")
        else:  # an element (a locator)
            page.screenshot(path=str(path), animations="disabled")
        shots.append(path)

    if ladder_only:
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                take_ladder(browser, url, shot)
            finally:
                browser.close()
        return shots

    rng = random.Random(1971)
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            # Sign-in and lobby.
            page = _page(browser, url, viewport=DESKTOP)
            page.wait_for_selector("#view-login:not([hidden])")
            page.fill("#name-input", "alice")
            shot(page, "login")
            page.click("#login-form button[type=submit]")
            page.wait_for_selector("#conn[data-state=online]")
            page.wait_for_selector("body[data-view=play]")
            shot(page, "lobby")

            # A match in progress: a few rounds against a bot (again if the bot wins early).
            for _ in range(6):
                _start_bot_match(page, "random", "2907")
                for _ in range(3):
                    _guess(page, rng)
                if not _finished(page):
                    break
                page.click("#btn-leave")
            page.wait_for_selector("#hist-1 .hist-row")
            # The player's own notes on the pad, as a person would deduce them from the history:
            # digits in no remaining candidate marked out (✗), digits in all of them in (✓).
            left = consistent(_rows(page))
            marks = [(d, 1) for d in DEFAULT_RULES.alphabet if all(d not in c for c in left)][:3]
            marks += [(d, 2) for d in DEFAULT_RULES.alphabet if all(d in c for c in left)][:2]
            page.click("#btn-notes")
            for key, taps in marks:
                for _ in range(taps):
                    page.click(f"#pad .key[data-key='{key}']")
            page.click("#btn-notes")
            shot(page, "playing", full=True)

            # The same match on a phone, light and dark: the page resumes it by the token.
            state = page.context.storage_state()
            for scheme in ("light", "dark"):
                phone = _page(
                    browser, url, viewport=PHONE, device_scale_factor=2, is_mobile=True,
                    has_touch=True, storage_state=state, color_scheme=scheme,
                )
                phone.wait_for_selector("#hist-0 .hist-row:not(.pending)")
                shot(phone, "phone" if scheme == "light" else "phone-dark")
                phone.context.close()
            page.reload()  # the phones took its seat over (close code 4001): take it back
            page.wait_for_selector("#hist-0 .hist-row:not(.pending)")

            # A challenge arrives mid-match: a notice with a clear choice, the focus stays put.
            rival = _page(browser, url, viewport=DESKTOP)
            _login(rival, "hedy")
            rival.fill("#challenge-input", "alice")
            rival.click("#challenge-form button[type=submit]")
            page.wait_for_selector("#toast:not([hidden])")
            page.evaluate("window.scrollTo(0, 0)")
            shot(page, "challenge")
            page.click("#toast-no")
            rival.context.close()

            # Play it out: the result with both secrets and the fairness check.
            for _ in range(12):
                if _finished(page):
                    break
                _guess(page, rng, best=True)
            page.wait_for_selector("#fairness .fair[data-ok=ok] >> nth=1")
            page.evaluate("window.scrollTo(0, 0)")
            shot(page, "result", full=True)

            # The same match replayed from the result's link, halfway through.
            page.click("#result-link")
            page.wait_for_selector("#record-body:not([hidden])")
            page.wait_for_selector("#record-fairness .fair[data-ok=ok] >> nth=1")
            for _ in range(3):
                page.click("#rp-next")
            page.evaluate("window.scrollTo(0, 0)")
            shot(page, "replay", full=True)
            page.click("#nav .tab[data-tab=play]")

            # Live matches: two people in a room, seen from a third page.
            ann = _page(browser, url, viewport=DESKTOP)
            bob = _page(browser, url, viewport=DESKTOP)
            _login(ann, "ann")
            _login(bob, "bob")
            ann.click("#btn-room-create")
            code = ann.wait_for_selector("#room-code:not(:empty)").text_content()
            bob.fill("#room-input", code)
            bob.click("#join-form button[type=submit]")
            for p, secret in ((ann, "0123"), (bob, "4567")):
                p.wait_for_selector("#entry[data-mode=secret]")
                p.fill("#code-input", secret)
                p.click("#code-submit")
            page.click("#nav .tab[data-tab=watch]")
            page.wait_for_selector("#live-list .live-item")
            shot(page, "watch")
            page.click("#live-list .live-item button[data-watch]")
            page.wait_for_selector("#view-match[data-mode=watch][data-phase=playing]")
            for p, g in ((ann, "8901"), (bob, "0132")):
                p.wait_for_selector("#code-input:not([disabled])")
                p.fill("#code-input", g)
                p.click("#code-submit")
            page.wait_for_selector("#hist-1 .hist-row[data-n='1']:not(.pending)")
            shot(page, "spectate")
            page.click("#btn-stop-watch")

            # Leaderboard, on a desktop and on a phone.
            page.click("#nav .tab[data-tab=board]")
            page.wait_for_selector("#board-body tr[data-player=alice]")
            shot(page, "leaderboard")
            phone = _page(browser, url, viewport=PHONE, device_scale_factor=2, is_mobile=True,
                          has_touch=True)
            _login(phone, "linus-t")
            phone.click("#nav .tab[data-tab=board]")
            phone.wait_for_selector("#board-body tr[data-player=alice]")
            shot(phone, "leaderboard-phone")
            phone.context.close()

            # A player's page: rating, record, guesses needed, score against minimum, history.
            page.click("#board-body tr[data-player=ada] a")
            page.wait_for_selector("#player-body:not([hidden])")
            page.wait_for_selector("#history-list .hrow")
            shot(page, "player", full=True)

            # The account page: a password for signing in anywhere, signing out everywhere.
            page.click("#me-name")
            page.wait_for_selector("body[data-view=account]")
            shot(page, "account")

            # Tournaments: the tab with the form, then a round robin two people played.
            page.click("#nav .tab[data-tab=tourneys]")
            page.click("#btn-new-tourney")
            page.fill("#tf-name", "Friday cup")
            page.select_option("#tf-pool", "humans")
            page.fill("#tf-start", "8")
            shot(page, "tournaments")
            page.click("#tf-submit")
            page.wait_for_selector("#tourney-body:not([hidden])")
            tid = page.evaluate("() => window.moo.state.tourney.id")
            players = []
            for name in ("tess", "umar"):
                p = _page(browser, url, viewport=DESKTOP)
                _login(p, name)
                p.goto(f"{url.rstrip('/')}/tournament/{tid}")
                p.click("#btn-tourney-join")
                p.wait_for_selector("#btn-tourney-leave:not([hidden])")
                players.append(p)
            seen: list[str] = []
            for secrets in (["3815", "0462"], ["7204", "5931"]):
                for p in players:
                    p.wait_for_function(
                        "(seen) => { const m = window.moo.state.m;"
                        " return !!m && !seen.includes(m.id) && m.phase === 'secrets'; }",
                        arg=seen, timeout=60000)
                match_id = players[0].evaluate("() => window.moo.state.m.id")
                _play_tournament_game(players, secrets, match_id)
                seen.append(match_id)
            page.wait_for_selector("#standings[data-final=true]")
            shot(page, "tournament", full=True)
            for p in players:
                p.context.close()
            take_ladder(browser, url, shot)
        finally:
            browser.close()
    return shots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clients.web_screenshots", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--ladder-only", action="store_true",
                        help="take only the ladder's screenshots")
    args = parser.parse_args(argv)
    problem = chromium_problem()
    if problem:
        print(f"cannot take screenshots: {problem}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        server = MooServer(Path(tmp) / "moo.sqlite3", extra=["--bot-delay-ms", "0"])
        with server:
            if not args.ladder_only:
                asyncio.run(seed_leaderboard(server.port))
            for path in take(args.out, server.url, server.port, ladder_only=args.ladder_only):
                print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
