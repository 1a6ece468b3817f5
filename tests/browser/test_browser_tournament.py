"""Issue 20's tournaments in the page, in real headless Chromium against a real ``moo serve``.

Two people (two browser contexts: no shared storage) find a tournament on the Tournaments tab,
join it from its page, are taken into each of their games when the server pairs them, play
them, come back to the tournament page and see the final table; a third watches a game from
the tournament's page and comes back to it; at 1280x800 and at 390x844.
Issue 32: the first game's result (outcome, fairness check, the opponent's secret) stays on
screen with a countdown while the second game has started, until the player moves on ("Play it
now") or the countdown runs out; the focus goes to the result's next step; on a phone every
control of the result and of the finished tournament's page is a 44 x 44 px tap target.
The tournament is a round-robin of one round in the humans pool with secrets set by the
players, created from the page's form: one pairing, two games (seats swapped).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from clients.web_harness import MooServer
from tests import browser_support
from tests.browser_support import (
    SIZES,
    assert_fair,
    assert_fits,
    click,
    cut,
    login,
    new_page,
    next_consistent,
    rows,
    set_secret,
    tap_targets,
    type_guess,
)

pytestmark = pytest.mark.browser

browser = browser_support.browser
shared_server = browser_support.shared_server

# Far off: the creator starts it with "Start now" once both have joined (the test waits for
# events, never for a time to come).
START_IN_S = 600


DONE = """(id) => { const m = window.moo.state.m;
  return !m || m.id !== id || m.phase === 'finished'; }"""


def play_game(pages: list[Any], secrets: list[str], match_id: str) -> None:
    """Both pages set their secret and guess consistently, round by round, to the end of this
    game (the next game of the pairing may take the screen the moment it ends)."""
    for page, secret in zip(pages, secrets, strict=True):
        set_secret(page, secret)
    for n in range(1, 13):
        for page in pages:
            page.wait_for_function(
                "(id) => { const m = window.moo.state.m; return !m || m.id !== id"
                " || m.phase === 'finished' || (m.phase === 'playing'"
                " && document.querySelector('#entry').dataset.mode === 'guess'"
                " && !document.querySelector('#code-input').disabled); }", arg=match_id)
            if page.evaluate(DONE, match_id):
                continue
            history = [r for r in rows(page, 0) if r["bulls"] != ""]
            type_guess(page, next_consistent(history))
        for page in pages:
            page.wait_for_function(
                f"([id, n]) => ({DONE})(id) || document.querySelector("
                "`#hist-0 .hist-row[data-n='${n}']:not(.pending)`) !== null", arg=[match_id, n])
        if all(page.evaluate(DONE, match_id) for page in pages):
            return
    raise AssertionError("the game did not end within 12 rounds")


@pytest.mark.slow(20)
@pytest.mark.parametrize("size", SIZES)
def test_two_people_join_a_tournament_play_their_games_and_see_the_final_table(
    browser: Any, shared_server: MooServer, size: str
) -> None:
    ann_name, bob_name = f"tann-{size}", f"tbob-{size}"
    measured: list[str] = []  # the tap targets measured on a phone (issue 32)
    ann = new_page(browser, shared_server.url, **SIZES[size])
    bob = new_page(browser, shared_server.url, **SIZES[size])
    carl = new_page(browser, shared_server.url, **SIZES[size])
    login(ann, ann_name)
    login(bob, bob_name)
    login(carl, f"tcarl-{size}")

    # ann creates it from the Tournaments tab's form
    click(ann, "#nav .tab[data-tab=tourneys]")
    ann.wait_for_selector("body[data-view=tourneys]")
    click(ann, "#btn-new-tourney")
    name = f"Friday cup {size}"
    ann.fill("#tf-name", name)
    ann.select_option("#tf-format", "round-robin")
    ann.fill("#tf-rounds", "1")
    ann.select_option("#tf-pool", "humans")
    ann.select_option("#tf-secrets", "players")
    ann.fill("#tf-start", str(START_IN_S))
    assert_fits(ann)
    click(ann, "#tf-submit")
    ann.wait_for_selector("body[data-view=tourney]")
    ann.wait_for_selector(f"#tourney-title:text-is('{name}')")
    tid = str(ann.evaluate("() => window.moo.state.tourney.id"))
    assert ann.evaluate("() => location.pathname") == f"/tournament/{tid}"
    assert ann.text_content("#tourney-status") == "upcoming"
    facts = ann.text_content("#tourney-facts") or ""
    assert facts.startswith("Round robin · once each · MOO 4 of 10 · people only")
    assert "secrets by the players" in facts
    assert (ann.text_content("#tourney-when") or "").startswith("Starts in ")
    click(ann, "#btn-tourney-join")
    ann.wait_for_selector(f"#tourney-players:has-text('{ann_name}')")
    assert ann.is_hidden("#btn-tourney-join") and ann.is_visible("#btn-tourney-leave")

    # bob finds it among the upcoming ones and joins from its page
    click(bob, "#nav .tab[data-tab=tourneys]")
    item = f"#tourney-groups [data-status=upcoming] [data-tournament='{tid}']"
    bob.wait_for_selector(item)
    assert name in (bob.text_content(item) or "")
    assert cut(bob, "#tourney-groups .tourney-name, #tourney-groups .chip, .tab") == []
    assert_fits(bob)
    click(bob, f"{item} a.btn")
    bob.wait_for_selector(f"body[data-view=tourney] #tourney-title:text-is('{name}')")
    click(bob, "#btn-tourney-join")
    for page in (ann, bob):  # ann's page is live: it watches the tournament
        page.wait_for_selector("#tourney-players:has-text('2 players')")
    assert bob.text_content("#tourney-players") == f"2 players: {ann_name}, {bob_name}"
    # exactly one tab looks current: Tournaments
    assert bob.eval_on_selector_all(
        "#nav .tab[aria-current=page]", "ts => ts.map(t => t.dataset.tab)") == ["tourneys"]

    # only its creator may start it early: ann does, now that both are in
    assert bob.is_hidden("#btn-tourney-start")
    click(ann, "#btn-tourney-start")
    # At the start the server pairs them: both pages go into the first game by themselves.
    seen: list[str] = []
    for game in (1, 2):
        for page in (ann, bob):
            page.wait_for_function(
                "(seen) => { const m = window.moo.state.m; return !!m && !m.watch"
                " && !seen.includes(m.id) && m.phase === 'secrets'"
                " && document.body.dataset.view === 'match'; }",
                arg=seen)
        match = str(ann.evaluate("() => window.moo.state.m.id"))
        assert bob.evaluate("() => window.moo.state.m.id") == match
        assert ann.evaluate("() => window.moo.state.m.tournamentId") == tid
        assert ann.text_content("#match-variant") == f"Tournament: {name}"
        assert_fits(ann)
        # six tabs now (the Ladder's, and the Match tab too), each whole
        assert ann.eval_on_selector_all("#nav .tab:not([hidden])", "ts => ts.length") == 6
        assert cut(ann, ".tab, #match-variant, .pname, .hist-title") == []
        if game == 1:
            # a third person watches the game from the tournament's page, and comes back to it
            carl.goto(f"{shared_server.url.rstrip('/')}/tournament/{tid}")
            carl.wait_for_selector(f"#tourney-games [data-match='{match}'] [data-watch]")
            click(carl, f"#tourney-games [data-match='{match}'] [data-watch]")
            carl.wait_for_selector("body[data-view=match] #view-match[data-mode=watch]")
            carl.wait_for_selector(f"#match-variant:text-is('Tournament: {name}')")
            assert carl.text_content("#side-0 .pname") in (ann_name, bob_name)
            click(carl, "#btn-stop-watch")
            carl.wait_for_selector(f"body[data-view=tourney] #tourney-title:text-is('{name}')")
            assert carl.evaluate("() => location.pathname") == f"/tournament/{tid}"
            # a reload mid-game resumes it, and the page finds the tournament's name again
            bob.reload()
            bob.wait_for_selector(f"#match-variant:text-is('Tournament: {name}')")
            bob.wait_for_selector("body[data-view=match] #entry[data-mode=secret]")
            assert bob.evaluate("() => window.moo.state.m.id") == match
        secrets = ["0123", "4567"] if game == 1 else ["8901", "2345"]
        play_game([ann, bob], secrets, match)
        seen.append(match)
        if game == 2:
            break
        # The second game has started, but the first one's result stays on screen: the outcome,
        # the fairness check with the opponent's secret, a countdown to the next game, and the
        # focus on "Play it now".
        for page in (ann, bob):
            page.wait_for_selector("#next-game:not([hidden])")
            assert page.evaluate("() => window.moo.state.m.id") == match
            assert page.is_visible("#result-panel") and page.is_hidden("#entry")
            assert page.text_content("#result-title") in ("You win!", "You lose", "Draw")
            assert_fair(page)
            shown = page.eval_on_selector_all(
                "#fairness .secret", "ss => ss.map(s => s.textContent)")
            assert sorted(shown) == sorted(secrets)
            assert re.fullmatch(r"Your next game, against t(ann|bob)-\w+, starts in \d+ s\.",
                                page.text_content("#next-game-text") or "")
            assert page.evaluate("() => document.activeElement.id") == "btn-next-game"
            assert page.evaluate("() => window.moo.state.next.msg.match_id") != match
        if size == "phone":
            tap_targets(ann, "a tournament game's result", measured)
        # the tournament's page lists the finished game with its result, to replay
        carl.wait_for_selector(f"#tourney-games [data-match='{match}']:not([data-result='']) a.btn")
        # ann moves on at once; bob's countdown runs out and the next game takes his screen
        click(ann, "#btn-next-game")
    # The second game was the last: its result stays, and leads back to the tournament (not to
    # a rematch), with the focus on that button.
    for page in (ann, bob):
        page.wait_for_selector("#result-panel:not([hidden])")
        assert page.evaluate("() => window.moo.state.m.id") == seen[1]
        assert page.is_visible("#btn-to-tourney") and page.is_hidden("#btn-rematch")
        assert page.is_hidden("#next-game")
        assert page.evaluate("() => document.activeElement.id") == "btn-to-tourney"

    # Back on the tournament page: the final table, both games, each replayable.
    for page in (ann, bob):
        click(page, "#btn-to-tourney")
        page.wait_for_selector("body[data-view=tourney]")
        page.wait_for_selector("#standings[data-final=true]")
        assert page.evaluate("() => location.pathname") == f"/tournament/{tid}"
        assert page.text_content("#tourney-status") == "finished"
        assert page.text_content("#standings-title") == "Final standings"
        table = page.eval_on_selector_all(
            "#standings-body tr",
            "rs => rs.map(r => [r.dataset.player, r.children[2].textContent,"
            " r.children[3].textContent, r.querySelector('.score').textContent])")
        games = page.eval_on_selector_all(
            "#tourney-games .tgame", "gs => gs.map(g => [g.dataset.match, g.dataset.result,"
            " [...g.querySelectorAll('.hrow-vs a')].map(a => a.textContent),"
            " g.querySelector('a.btn') ? g.querySelector('a.btn').textContent : ''])")
        assert sorted(g[0] for g in games) == sorted(seen)
        assert all(g[1] in ("1-0", "0-1", "1/2-1/2") and g[3] == "Replay" for g in games)
        # the table adds up the games' results
        won = {ann_name: 0, bob_name: 0}
        drawn = {ann_name: 0, bob_name: 0}
        for _, result, (first, second), _ in games:
            if result == "1/2-1/2":
                drawn[first] += 1
                drawn[second] += 1
            else:
                won[first if result == "1-0" else second] += 1
        expected = {
            who: ["2", f"{won[who]}–{drawn[who]}–{2 - won[who] - drawn[who]}",
                  f"{won[who] + drawn[who] / 2:g}"]
            for who in (ann_name, bob_name)
        }
        assert {r[0]: r[1:] for r in table} == expected
        order = [r[0] for r in table]
        assert sorted(order, key=lambda w: -float(expected[w][2])) == order
        assert page.is_hidden("#btn-tourney-join") and page.is_hidden("#btn-tourney-leave")
        assert (page.text_content("#tourney-me") or "").startswith("You finished ")
        wrap = page.eval_on_selector(
            "#view-tourney .table-wrap", "w => [w.scrollWidth, w.clientWidth]")
        assert wrap[0] <= wrap[1], wrap
        assert cut(page, "#standings th, #standings td, #tourney-title, #tourney-facts,"
                   " #tourney-games .hrow-vs, .tab") == []
        assert_fits(page)
        if size == "phone":
            tap_targets(page, "a finished tournament", measured)

    # The Tournaments tab lists it among the finished ones.
    click(ann, "#nav .tab[data-tab=tourneys]")
    ann.wait_for_selector(f"#tourney-groups [data-status=finished] [data-tournament='{tid}']")
    assert ann.moo_errors == [] and bob.moo_errors == [] and carl.moo_errors == []
    print("\n".join(measured))
