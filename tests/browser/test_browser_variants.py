"""Issue 13 in real headless Chromium against a real ``moo serve``: two players pick
Mastermind 4 of 6 in the lobby's Game picker, play it to the end with colour pegs, and the
result, the export and the Mastermind leaderboard know the variant; a player plays word MOO
(hits and misses) against the hosted word bot to the end.

Without Chromium these tests fail, never skip (`./dev test --quick` leaves them out, counted).
"""

from __future__ import annotations

from typing import Any

import pytest

from bots.dictionary import load_words
from bots.judge.assistant import assist
from bots.judge.review import analyse_guesses
from clients.web_harness import MooServer
from moo.mastermind import MastermindRules, mastermind_score
from moo.rules import DEFAULT_RULES, Response, score
from moo.words import WordRules
from server import review_worker
from server.export import records
from tests import browser_support
from tests.browser_support import finished, login, new_page, rows, set_secret, wait_revealed


@pytest.fixture(autouse=True)
def _installed_dictionary() -> None:
    """Word MOO's rules get the real list the way the programs do it (no import does it)."""
    from bots.dictionary import install

    install()

pytestmark = pytest.mark.browser

browser = browser_support.browser
server = browser_support.server
shared_server = browser_support.shared_server

MASTERMIND = "mastermind:4:123456"


def pick_and_queue(page: Any) -> None:
    page.click("#nav .tab[data-tab=play]")
    labels = page.eval_on_selector_all("#variant-select option", "os => os.map(o => o.text)")
    assert labels == ["MOO 4 of 10", "MOO 3 of 10", "MOO 5 of 10", "MOO 6 of 10",
                      "MOO 4 of hex", "Mastermind 4 of 6", "Word MOO 5 letters",
                      "Word MOO 5 letters (hits and misses)"]
    page.select_option("#variant-select", MASTERMIND)
    page.click("#btn-queue")


def tap(page: Any, code: str) -> None:
    page.wait_for_selector("#entry[data-mode=guess] #code-input:not([disabled])")
    for ch in code:
        page.click(f"#pad .key.peg[data-key='{ch}']")
    page.click("#code-submit")


@pytest.mark.slow(15)
def test_two_players_play_mastermind_from_the_lobby(browser: Any, server: MooServer) -> None:
    ann = new_page(browser, server.url)
    bob = new_page(browser, server.url)
    login(ann, "ann")
    login(bob, "bob")
    # a bot for Mastermind: only the bots that can play it are offered
    ann.click("#nav .tab[data-tab=play]")
    ann.select_option("#variant-select", MASTERMIND)
    enabled = ann.eval_on_selector_all(
        "#bot-select option:not([disabled])", "os => os.map(o => o.value).sort()")
    assert enabled == ["minimum", "random", "strongest"]
    pick_and_queue(ann)
    pick_and_queue(bob)
    for page in (ann, bob):
        page.wait_for_selector("body[data-view=match]")
        assert page.text_content("#match-variant") == "Mastermind 4 of 6"
        assert page.get_attribute("#view-match", "data-game") == "mastermind"
    seats = {p: p.evaluate("window.moo.state.m.seat") for p in (ann, bob)}
    secrets = {ann: "1122", bob: "6543"}  # a repeated colour is a legal Mastermind secret
    for page in (ann, bob):
        set_secret(page, secrets[page])
    # the pad is six colour pegs; a guess may repeat one
    pegs = ann.eval_on_selector_all("#pad .key.peg", "ks => ks.map(k => k.dataset.key)")
    assert pegs == list("123456")
    tap(ann, "6666")
    tap(bob, "1111")
    wait_revealed(ann, 0, 1)
    mine = rows(ann, 0)[0]
    black, white = mastermind_score("6543", "6666")
    assert (mine["guess"], mine["bulls"], mine["cows"]) == ("6666", str(black), str(white))
    assert ann.eval_on_selector_all("#hist-0 .hist-row[data-n='1'] .cpeg",
                                    "ps => ps.length") == 4
    assert ann.eval_on_selector_all("#hist-0 .hist-row[data-n='1'] .pip.black",
                                    "ps => ps.length") == black
    tap(ann, "6543")  # ann solves in 2
    tap(bob, "2211")  # bob does not: 0 black, 4 white
    for page in (ann, bob):
        page.wait_for_selector("#view-match[data-phase=finished]")
    assert ann.get_attribute("#result-panel", "data-outcome") == "win"
    assert bob.get_attribute("#result-panel", "data-outcome") == "loss"
    bob_rows = rows(bob, 0)
    assert [(r["guess"], r["bulls"], r["cows"]) for r in bob_rows] == [
        ("1111", "2", "0"), ("2211", "0", "4")]
    # the post-match analysis on the result panel: the solver's figures, per player
    ann.click("#result-panel .btn-analyse")
    # the server answers within its analysis time limit, however busy the machine
    ann.wait_for_selector("#result-analysis[data-state=done]",
                          timeout=(review_worker.TIME_LIMIT_S + 30) * 1000)
    rules = MastermindRules()
    expected = {seats[ann]: analyse_guesses(rules, "6543", ["6666", "6543"]),
                seats[bob]: analyse_guesses(rules, "1122", ["1111", "2211"])}
    for seat, figures in expected.items():
        shown = ann.eval_on_selector_all(
            f"#result-analysis .analysis-player[data-seat='{seat}'] tbody tr",
            "rs => rs.map(r => [r.children[1].textContent, r.children[4].textContent])")
        assert shown == [[a.guess, f"{a.loss:.3f}"] for a in figures]
    # the leaderboard of the Mastermind family has both; the classic one has neither
    ann.click("#btn-leave")
    ann.click("#nav .tab[data-tab=board]")
    ann.select_option("#board-variant", MASTERMIND)
    ann.wait_for_selector("#board-body tr[data-player=ann]")
    ranked = ann.eval_on_selector_all("#board-body tr", "rs => rs.map(r => r.dataset.player)")
    assert ranked == ["ann", "bob"]
    ann.select_option("#board-variant", "moo:4:0123456789")
    ann.wait_for_function("() => window.moo.state.board.variant === 'moo:4:0123456789'")
    assert ann.eval_on_selector_all("#board-body tr", "rs => rs.length") == 0
    assert ann.moo_errors == [] and bob.moo_errors == []
    assert seats[ann] != seats[bob]
    server.stop()
    exported = list(records(str(server.db)))
    assert [r["variant"] for r in exported] == [MASTERMIND]
    assert sorted(exported[0]["secrets"]) == ["1122", "6543"]


def test_practice_assistant_in_the_page(browser: Any, server: MooServer) -> None:
    """The lobby's Assistant switch makes an unrated assisted match; under the entry the page
    shows the codes still possible (at first, and after each answer: the assistant's count)
    and suggests a guess only when the review rates it best (loss 0)."""
    from bots.judge.values import judge_for

    page = new_page(browser, server.url)
    login(page, "cy")
    page.click("#nav .tab[data-tab=play]")
    page.check("#assist-toggle")
    page.select_option("#bot-select", "random")
    page.click("#btn-bot")
    page.wait_for_selector("body[data-view=match]")
    config = page.evaluate("window.moo.state.m.config")
    assert config["assist"] is True and config["rated"] is False
    assert page.text_content("#match-variant") == "Practice with the assistant (unrated)"
    set_secret(page, "0123")
    page.wait_for_selector("#assist-line:not([hidden])")
    assert page.text_content("#assist-line") == "Assistant: at first 5040 possible codes · try 0123"
    tap_classic(page, "4567")
    wait_revealed(page, 0, 1)
    first = rows(page, 0)[0]
    turns = [("4567", int(first["bulls"]), int(first["cows"]))]
    expected = assist(DEFAULT_RULES, turns)
    if not page.eval_on_selector("#view-match", "e => e.dataset.phase === 'finished'"):
        page.wait_for_function(
            "n => document.querySelector('#assist-line').textContent.includes(n)",
            arg=f"{expected.left} codes",
        )
        line = page.text_content("#assist-line")
        assert line.startswith(f"Assistant: {expected.left} codes still possible")
        if " · try " in line:  # the page's own pick must be one the review rates best
            pick = line.split(" · try ")[1]
            judge = judge_for(DEFAULT_RULES)
            history = [(g, Response(b, c)) for g, b, c in turns]
            cand = [i for i, c in enumerate(judge.codes)
                    if all(score(c, g) == r for g, r in history)]
            assert judge.played(history, cand, pick) == judge.best(history, cand)[0]
    assert page.moo_errors == []


def tap_classic(page: Any, code: str) -> None:
    page.wait_for_selector("#entry[data-mode=guess] #code-input:not([disabled])")
    for ch in code:
        page.click(f"#pad .key[data-key='{ch}']")
    page.click("#code-submit")


def test_hex_room_and_five_of_ten_queue_from_the_page(browser: Any, server: MooServer) -> None:
    """A room for MOO 4 of hex (the pad has the 16 hex digits) and a quick match at 5 of 10:
    the matches, and their export, are of the rules picked."""
    ann = new_page(browser, server.url)
    bob = new_page(browser, server.url)
    login(ann, "ann")
    login(bob, "bob")
    ann.click("#nav .tab[data-tab=play]")
    ann.select_option("#variant-select", "moo:4:0123456789ABCDEF")
    ann.click("#btn-room-create")
    code = ann.wait_for_selector("#room-code:not(:empty)").text_content()
    bob.click("#nav .tab[data-tab=play]")
    bob.fill("#room-input", code)
    bob.click("#join-form button[type=submit]")
    for page in (ann, bob):
        page.wait_for_selector("body[data-view=match]")
        assert page.text_content("#match-variant") == "MOO 4 of hex"
        keys = page.eval_on_selector_all("#pad .key:not(.wide)", "ks => ks.map(k => k.dataset.key)")
        assert "".join(keys) == "0123456789ABCDEF"
    set_secret(ann, "fa09")  # letters in either case, echoed upper-case
    set_secret(bob, "0123")
    ann.wait_for_selector("#entry[data-mode=guess]")
    assert ann.evaluate("window.moo.state.m.mySecret") == "FA09"
    for _ in range(2):
        ann.click("#btn-resign")
    for page in (ann, bob):
        page.wait_for_selector("#view-match[data-phase=finished]")
        page.click("#btn-leave")
    for page in (ann, bob):
        page.click("#nav .tab[data-tab=play]")
        page.select_option("#variant-select", "moo:5:0123456789")
        page.click("#btn-queue")
    for page in (ann, bob):
        page.wait_for_selector("body[data-view=match]")
        assert page.text_content("#match-variant") == "MOO 5 of 10"
        assert page.get_attribute("#code-input", "maxlength") == "5"
    ann.click("#btn-resign")
    ann.click("#btn-resign")
    ann.wait_for_selector("#view-match[data-phase=finished]")
    assert ann.moo_errors == [] and bob.moo_errors == []
    server.stop()
    assert [r["variant"] for r in records(str(server.db))] == [
        "moo:4:0123456789ABCDEF", "moo:5:0123456789"]


HITS_MISSES = "words:5:hits_misses"


def test_word_moo_against_the_word_bot(browser: Any, server: MooServer) -> None:
    """Word MOO from the lobby: only the word bot is offered, a secret that is no word is
    refused with the server's message, guesses are typed (either case) or tapped on a letter
    pad, answers read as hits and misses, and the match, its export and the word leaderboard
    know the variant."""
    words = load_words(5)
    rules = WordRules(5, "hits_misses", words)
    page = new_page(browser, server.url)
    login(page, "dee")
    page.click("#nav .tab[data-tab=play]")
    page.select_option("#variant-select", HITS_MISSES)
    enabled = page.eval_on_selector_all(
        "#bot-select option:not([disabled])", "os => os.map(o => o.value)")
    assert enabled == ["words"]
    assert page.input_value("#bot-select") == "words"
    page.click("#btn-bot")
    page.wait_for_selector("body[data-view=match]")
    assert page.text_content("#match-variant") == "Word MOO 5 letters (hits and misses)"
    assert page.get_attribute("#view-match", "data-game") == "words"
    assert page.is_hidden("#btn-random")  # a random word needs the server's dictionary
    # a secret of five letters that is no word: the server's not_a_word, shown, nothing set
    set_secret(page, "xqzzy")
    page.wait_for_selector("#code-error:not(:empty)")
    assert page.text_content("#code-error") == (
        "Not set: XQZZY is not a 5-letter word of the dictionary — choose another word")
    assert page.get_attribute("#entry", "data-mode") == "secret"
    page.fill("#code-input", "")
    set_secret(page, "skunk")
    page.wait_for_selector("#entry[data-mode=guess]")
    assert page.evaluate("window.moo.state.m.mySecret") == "SKUNK"
    keys = page.eval_on_selector_all("#pad .key:not(.wide)", "ks => ks.map(k => k.dataset.key)")
    assert "".join(keys) == "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    left = list(words)
    for n in range(1, 16):
        if finished(page):
            break
        page.wait_for_function(
            """() => document.querySelector('#view-match').dataset.phase === 'finished'
                 || !document.querySelector('#code-input').disabled"""
        )
        if finished(page):
            break
        guess = "EEEEE" if n == 1 else left[0]  # a probe that is no word, then words
        if n % 2:
            page.keyboard.type(guess.lower())  # typed letters land in the entry upper-cased
            page.keyboard.press("Enter")
        else:
            for ch in guess:
                page.click(f"#pad .key[data-key='{ch}']")
            page.click("#code-submit")
        wait_revealed(page, 0, n)
        row = next((r for r in rows(page, 0) if r["n"] == str(n)), None)
        if row is None or row["bulls"] == "":
            break  # the bot finished the match first; this guess was never scored
        hits, misses = int(row["bulls"]), int(row["cows"])
        assert row["guess"] == guess and row["badge"] == f"{hits}H{misses}M"
        left = rules.consistent(left, guess, (hits, misses))
    page.wait_for_selector("#view-match[data-phase=finished]")
    secrets = page.evaluate("window.moo.state.m.result.secrets")
    seat = page.evaluate("window.moo.state.m.seat")
    bot_secret = secrets[1 - seat]
    assert bot_secret in words and secrets[seat] == "SKUNK"
    for row in rows(page, 0):  # every answer on the page is the POTM's score of that guess
        if row["bulls"] != "":
            assert (int(row["bulls"]), int(row["cows"])) == rules.score(bot_secret, row["guess"])
            assert row["badge"] == "{}H{}M".format(*rules.score(bot_secret, row["guess"]))
    label = page.get_attribute("#hist-0 .hist-row[data-n='1'] .badge", "aria-label")
    assert label is not None and "hit" in label and "miss" in label
    for row in rows(page, 1):  # the bot guessed dictionary words only
        assert row["guess"] in words
    assert page.moo_errors == []
    page.click("#btn-leave")
    page.click("#nav .tab[data-tab=board]")
    page.select_option("#board-variant", HITS_MISSES)
    page.wait_for_selector("#board-body tr[data-player=dee]")
    server.stop()
    assert [r["variant"] for r in records(str(server.db))] == [HITS_MISSES]


def test_page_word_rules_agree_with_python(browser: Any, shared_server: MooServer) -> None:
    """rules.js checks word-MOO entries with moo/words.py's verdicts and messages (the format;
    whether a secret is a word only the server knows), names the rules as moo/variants.py
    does, and words the answers by the scoring."""
    from moo.errors import InvalidCode
    from moo.variants import DEFAULT_VARIANTS, parse_rules_spec, rules_label, rules_spec

    variants = [WordRules(5), WordRules(4, "hits_misses"), WordRules(9)]
    samples = ["skunk", "SKUNK", "EEEEE", "sk8nk", " skunk", "skun", "skunks", "", "ÉCLAT",
               "abcd", "ABCDEFGHI", "a\tbcd", "zzzzz"]
    expected = []
    for rules in variants:
        for text in samples:
            try:
                expected.append(["ok", rules.check_guess(text)])
            except InvalidCode as exc:
                expected.append([exc.code, str(exc)])
    page = new_page(browser, shared_server.url)
    got = page.evaluate(
        """async ([variants, samples]) => {
             const r = await import('/rules.js');
             const out = [];
             for (const rules of variants) {
               for (const text of samples) {
                 try { out.push(['ok', r.checkCode(rules, text, {secret: true})]); }
                 catch (e) { out.push([e.code, e.message]); }
               }
             }
             return out;
           }""",
        [[r.to_dict() for r in variants], samples],
    )
    assert got == expected
    offered = [parse_rules_spec(s) for s in DEFAULT_VARIANTS] + variants
    names = page.evaluate(
        """async (list) => {
             const r = await import('/rules.js');
             return list.map((x) => [r.rulesSpec(x), r.rulesLabel(x)]);
           }""",
        [r.to_dict() for r in offered],
    )
    assert names == [[rules_spec(r), rules_label(r)] for r in offered]
    answers = page.evaluate(
        """async (list) => {
             const r = await import('/rules.js');
             return list.map(([x, b, c]) => [r.formatAnswer(x, b, c), r.answerWords(x, b, c)]);
           }""",
        [[WordRules(5).to_dict(), 1, 2], [WordRules(5, "hits_misses").to_dict(), 2, 1],
         [WordRules(5, "hits_misses").to_dict(), 0, 5]],
    )
    assert answers == [["1B2C", "1 bull, 2 cows"], ["2H1M", "2 hits, 1 miss"],
                       ["0H5M", "0 hits, 5 misses"]]
    assert page.moo_errors == []


def test_bot_picker_offers_variant_bots_and_says_when_a_tree_falls_back(
    browser: Any, server: MooServer
) -> None:
    """Other MOO rules: the picker enables random, the trees and the heuristics (not
    adaptive); minimum's description says whether it plays the exact tree or entropy."""
    page = new_page(browser, server.url)
    login(page, "cleo")
    page.click("#nav .tab[data-tab=play]")
    page.select_option("#variant-select", "moo:5:0123456789")
    enabled = page.eval_on_selector_all(
        "#bot-select option:not([disabled])", "os => os.map(o => o.value).sort()")
    assert enabled == ["entropy", "expected", "first", "larmouth", "minimax", "minimum",
                       "parts", "random", "strongest"]
    page.select_option("#bot-select", "minimum")
    assert "entropy heuristic" in page.text_content("#bot-desc")
    page.select_option("#variant-select", "moo:3:0123456789")
    page.select_option("#bot-select", "strongest")
    assert "exact solver's strongest tree" in page.text_content("#bot-desc")
