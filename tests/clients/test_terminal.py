"""``moo play`` driven as a person would: in a pseudo-terminal, typing and reading the screen."""

from __future__ import annotations

import subprocess
import sys

import pexpect
import pytest

from clients.terminal import choices_text, parse_entry
from moo.rules import DEFAULT_RULES, Response, parse_response
from tests.client_support import ROOT, client_env, moo_command, moo_serve
from tests.patience import patience

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

RULES = DEFAULT_RULES
PROMPT = r"TYPE 4 NUMBERS\? "
EACH = "each of the 4 digits should be one of digits 0-9"


def spawn(tmp_path, *args: str) -> pexpect.spawn:
    env = client_env(tmp_path)
    env["TERM"] = "dumb"
    child = pexpect.spawn(sys.executable, ["-m", "cli", "play", *args], cwd=str(ROOT),
                          env=env, encoding="utf-8", timeout=patience(30), dimensions=(40, 120))
    return child


@pytest.mark.parametrize(
    ("typed", "kind", "value"),
    [
        ("0123", "guess", "0123"),
        ("0 1 2 3", "guess", "0123"),
        ("0,1,2,3", "guess", "0123"),
        ("0.1.2.3", "guess", "0123"),
        ("  9876 ", "guess", "9876"),
        ("0012", "error", "digits must be distinct (0 repeated)"),
        ("01234", "error", "expected 4 digits, got 5"),
        ("3.14159.6.9.3", "error", f"{EACH} ('14159' is not)"),
        ("2,-2,5,6", "error", f"{EACH} ('-2' is not)"),
        ("12a4", "error", "only digits 0-9 (not 'a')"),
        ("-1,0,0,0", "command", "quit"),
        ("QUIT", "command", "quit"),
        ("?", "command", "rules"),
        ("left", "command", "left"),
        ("", "empty", ""),
    ],
)
def test_parse_entry(typed, kind, value):
    entry = parse_entry(typed, RULES)
    assert (entry.kind, entry.value) == (kind, value)


def test_choices_text_follows_the_j_essay():
    assert choices_text([]).startswith("NO CHOICES LEFT")
    assert choices_text(["0123"]) == "ONE CHOICE LEFT; IT MUST BE 0123"
    assert choices_text(["0123", "3210"]) == "2 CHOICES LEFT"


def read_response(child: pexpect.spawn) -> Response:
    child.expect(r"-> (\d[BC]\d?C?)\s+(B*,C*)")
    response = parse_response(child.match.group(1))
    assert child.match.group(2) == response.teletype
    return response


def test_solo_game_as_in_1971(tmp_path):
    child = spawn(tmp_path, "--solo", "--seed", "7", "--helper")
    child.expect("TRY TO GUESS THEM")
    child.expect(PROMPT)
    # Mistakes are explained with the rules' words and not counted.
    child.sendline("0012")
    child.expect(r"digits must be distinct \(0 repeated\): not counted")
    child.expect(PROMPT)
    child.sendline("1 2 3 4 5")
    child.expect("expected 4 digits, got 5: not counted")
    child.expect(PROMPT)
    child.sendline("rules")
    child.expect("THE RULES OF MOO")
    child.expect(PROMPT)
    left = list(RULES.secrets)
    tries = 0
    spellings = ["{0}", "{0[0]} {0[1]} {0[2]} {0[3]}", "{0[0]},{0[1]},{0[2]},{0[3]}"]
    while True:
        guess = left[0]
        child.sendline(spellings[tries % 3].format(guess))
        tries += 1
        response = read_response(child)
        left = RULES.consistent(left, guess, response)
        if response == RULES.solved:
            break
        child.expect(r"(\d+ CHOICES LEFT|ONE CHOICE LEFT; IT MUST BE \d{4})")
        assert child.match.group(1) == choices_text(left)
        child.expect(PROMPT)
        assert tries < 12
    child.expect(rf"GAME 1: TRIES = {tries}, AVERAGE = {tries}\b")
    # Game 2: quitting mid-game is antisocial; "no" goes on, "yes" gives up the game.
    child.expect(PROMPT)
    child.sendline("0123")
    read_response(child)
    child.expect(PROMPT)
    child.sendline("quit")
    child.expect("IT IS ANTISOCIAL TO TRY TO QUIT IN THE MIDDLE")
    child.expect(r"GIVE UP THIS GAME \(YES OR NO\)\? ")
    child.sendline("no")
    child.expect("PLEASE CONTINUE")
    child.expect(PROMPT)
    child.sendline("-1,0,0,0")
    child.expect("ANTISOCIAL")
    child.expect(r"\(YES OR NO\)\? ")
    child.sendline("yes")
    child.expect(r"THE NUMBER WAS \d{4}\. THIS GAME DOES NOT COUNT")
    # At the start of a game, quitting is fine.
    child.expect(PROMPT)
    child.sendline("quit")
    child.expect(rf"1 GAME PLAYED, AVERAGE {tries} TRIES\. GOODBYE\.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_online_game_against_the_servers_bot(tmp_path):
    with moo_serve(tmp_path) as url:
        child = spawn(tmp_path, "--url", url, "--bot", "random", "--name", "ann", "--helper")
        child.expect("HELLO, ann")
        child.expect(r"MATCH \S+: YOU \(ann\) VS random-bot")
        child.expect(r"CHOOSE YOUR SECRET: 4 DIFFERENT DIGITS.*\? ")
        child.sendline("1 1 2 3")
        child.expect(r"digits must be distinct \(1 repeated\): try again")
        child.sendline("0123")
        child.expect("YOUR SECRET IS 0123")
        child.expect("THE RACE IS ON")
        left = list(RULES.secrets)
        typo_done = False
        tries = 0
        while True:
            i = child.expect([r"GUESS (\d+): TYPE 4 NUMBERS\? ",
                              r"\*\*\* (YOU WIN!|YOU LOSE\.|A DRAW\.) \*\*\*"])
            if i == 1:
                break
            assert int(child.match.group(1)) == tries + 1  # the typo was not counted
            if not typo_done:
                child.sendline("98765")
                child.expect("expected 4 digits, got 5: not counted")
                typo_done = True
                continue
            guess = left[0]
            child.sendline(guess)
            tries += 1
            child.expect(rf"ROUND {tries}: {guess} -> (\S+)\s+(B*,C*)")
            response = parse_response(child.match.group(1))
            assert child.match.group(2) == response.teletype
            child.expect(r"random-bot: \d{4} -> \S+")
            left = RULES.consistent(left, guess, response)
            assert tries < 15
        child.expect(r"YOU: (\d+) GUESS(?:ES)?, (SOLVED|NOT SOLVED); random-bot: \d+ GUESS")
        assert int(child.match.group(1)) == tries
        solved = child.match.group(2) == "SOLVED"
        child.expect(r"SECRETS: YOURS 0123, random-bot'S \d{4}\.")
        child.expect("FAIRNESS CHECK: BOTH SECRETS MATCH THE COMMITMENTS")
        if solved:
            child.expect(rf"GAME 1: TRIES = {tries}, AVERAGE = {tries}\b")
        else:  # the bot was faster: a loss that does not count toward the average
            child.expect("THIS GAME DOES NOT COUNT TOWARD YOUR AVERAGE")
        child.expect(r"PLAY AGAIN \(YES OR NO\)\? ")
        child.sendline("no")
        child.expect("GOODBYE")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0


def test_online_resign_needs_confirmation(tmp_path):
    with moo_serve(tmp_path) as url:
        child = spawn(tmp_path, "--url", url, "--bot", "random", "--name", "quitter")
        child.expect(r"CHOOSE YOUR SECRET.*\? ")
        child.sendline("")  # a random secret
        child.expect(r"YOUR SECRET IS \d{4}")
        child.expect(r"GUESS 1: TYPE 4 NUMBERS\? ")
        child.sendline("quit")
        child.expect("IT IS ANTISOCIAL")
        child.expect(r"RESIGN THIS MATCH \(YES OR NO\)\? ")
        child.sendline("no")
        child.expect("PLEASE CONTINUE")
        child.expect(r"GUESS 1: TYPE 4 NUMBERS\? ")
        child.sendline("quit")
        child.expect(r"RESIGN THIS MATCH \(YES OR NO\)\? ")
        child.sendline("yes")
        child.expect("YOU RESIGNED")
        child.expect(r"\*\*\* YOU LOSE\. \*\*\* BY RESIGNATION")
        child.expect(r"PLAY AGAIN \(YES OR NO\)\? ")
        child.sendline("no")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0


def play_a_match(child: pexpect.spawn, opponent: str, secret: str = "0123") -> tuple[str, int]:
    """Type a secret, then solve by first-consistent guesses; returns (banner, tries)."""
    child.expect(rf"MATCH \S+: YOU \(\S+\) VS {opponent}")
    child.expect(r"CHOOSE YOUR SECRET.*\? ")
    child.sendline(secret)
    child.expect(f"YOUR SECRET IS {secret}")
    left = list(RULES.secrets)
    tries = 0
    while True:
        i = child.expect([r"GUESS (\d+): TYPE 4 NUMBERS\? ",
                          r"\*\*\* (YOU WIN!|YOU LOSE\.|A DRAW\.) \*\*\*"])
        if i == 1:
            return child.match.group(1), tries
        guess = left[0]
        child.sendline(guess)
        tries += 1
        child.expect(rf"ROUND {tries}: {guess} -> (\S+)")
        left = RULES.consistent(left, guess, parse_response(child.match.group(1)))
        assert tries < 15


def test_room_with_a_bot_guest_and_a_rematch(tmp_path):
    with moo_serve(tmp_path) as url:
        child = spawn(tmp_path, "--url", url, "--create-room", "--name", "host")
        child.expect(r"ROOM CODE: (\S+)")
        code = child.match.group(1)
        child.expect(rf"moo play --room {code}")
        guest = subprocess.Popen(
            moo_command("bot", "random", "--url", url, "--room", code, "--games", "2",
                        "--name", "guest"),
            cwd=ROOT, env=client_env(tmp_path), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            play_a_match(child, "guest")
            child.expect(r"PLAY AGAIN \(YES OR NO\)\? ")
            child.sendline("yes")
            play_a_match(child, "guest", secret="9876")
            child.expect(r"PLAY AGAIN \(YES OR NO\)\? ")
            child.sendline("no")
            child.expect("GOODBYE")
            child.expect(pexpect.EOF)
            out, err = guest.communicate(timeout=patience(30))
        finally:
            if guest.poll() is None:
                guest.kill()
        assert guest.returncode == 0, err
        assert out.count(" guest vs host: ") == 2
        assert "2 matches:" in out


def test_clocks_are_shown_and_running_out_loses(tmp_path):
    # The hosted bot must make its first guess within the per-guess clock, or both clocks run
    # out and the match is a draw on time: on a busy machine its thread may wait seconds for
    # the CPU, so the clock grows with the machine's load (4 s on an idle one).
    per_guess = round(patience(4.0))
    clocks = {"MOO_CLOCK_TOTAL_MS": "300000", "MOO_CLOCK_GUESS_MS": str(per_guess * 1000)}
    with moo_serve(tmp_path, env=clocks) as url:
        child = spawn(tmp_path, "--url", url, "--bot", "random", "--name", "slowpoke")
        child.expect(rf"CLOCK: 5:00 IN TOTAL, {per_guess} S A GUESS\.")
        child.expect(r"CHOOSE YOUR SECRET.*\? ")
        child.sendline("0123")
        child.expect(rf"GUESS 1 \[\d:\d\d LEFT, {per_guess} S A GUESS\]: TYPE 4 NUMBERS\? ")
        child.sendline("clock")
        child.expect(rf"YOUR CLOCK: \[\d:\d\d LEFT, {per_guess} S A GUESS\]")
        # Then the person thinks too long: the server's per-guess clock decides.
        child.expect("YOUR GUESS CLOCK RAN OUT")
        child.expect(r"\*\*\* YOU LOSE\. \*\*\* ON TIME\.")
        child.expect("THIS GAME DOES NOT COUNT")
        child.expect(r"PLAY AGAIN \(YES OR NO\)\? ")
        child.sendline("no")
        child.expect(pexpect.EOF)


def test_online_game_survives_a_server_restart(tmp_path):
    with moo_serve(tmp_path) as url:
        child = spawn(tmp_path, "--url", url, "--bot", "random", "--name", "steady")
        child.expect(r"CHOOSE YOUR SECRET.*\? ")
        child.sendline("0123")
        child.expect(r"GUESS 1: TYPE 4 NUMBERS\? ")
        child.sendline("4567")
        child.expect(r"ROUND 1: 4567 -> ")
        child.expect(r"GUESS 2: TYPE 4 NUMBERS\? ")
    # The server stopped (SIGTERM: close code 1012); the client keeps trying to reconnect.
    child.expect("CONNECTION LOST. RECONNECTING")
    port = int(url.rsplit(":", 1)[1].strip("/"))
    with moo_serve(tmp_path, port=port):
        child.expect("RECONNECTED")
        child.expect("THE SERVER RESTARTED")
        child.expect(r"GUESS 2: TYPE 4 NUMBERS\? ")
        child.sendline("history")
        child.expect(r"1  4567 ")
        child.sendline("quit")
        child.expect(r"RESIGN THIS MATCH \(YES OR NO\)\? ")
        child.sendline("yes")
        child.expect(r"\*\*\* YOU LOSE\. \*\*\* BY RESIGNATION")
        child.expect("FAIRNESS CHECK: BOTH SECRETS MATCH")
        child.expect(r"PLAY AGAIN \(YES OR NO\)\? ")
        child.sendline("no")
        child.expect(pexpect.EOF)


def test_quick_pair_through_the_queue(tmp_path):
    with moo_serve(tmp_path) as url:
        # Nobody there: waiting, then leaving the queue at once is fine.
        alone = spawn(tmp_path, "--url", url, "--name", "early")
        alone.expect(r"WAITING FOR AN OPPONENT \(lockstep; TYPE \?QUIT TO STOP\)")
        alone.sendline("quit")
        alone.expect("GOODBYE")
        alone.expect(pexpect.EOF)
        alone.close()
        assert alone.exitstatus == 0
        # A person and a queued bot are paired.
        child = spawn(tmp_path, "--url", url, "--name", "queuer")
        child.expect("WAITING FOR AN OPPONENT")
        bot = subprocess.Popen(
            moo_command("bot", "random", "--url", url, "--games", "1", "--name", "qbot"),
            cwd=ROOT, env=client_env(tmp_path), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            banner, _ = play_a_match(child, "qbot")
            child.expect(r"PLAY AGAIN \(YES OR NO\)\? ")
            child.sendline("no")
            child.expect(pexpect.EOF)
            out, err = bot.communicate(timeout=patience(60))
        finally:
            if bot.poll() is None:
                bot.kill()
        assert bot.returncode == 0, err
        expected = {"YOU WIN!": "LOSS", "YOU LOSE.": "WIN", "A DRAW.": "DRAW"}[banner]
        assert f"qbot vs queuer: {expected}" in out


def test_closing_the_terminal_mid_match_and_coming_back(tmp_path):
    with moo_serve(tmp_path) as url:
        first = spawn(tmp_path, "--url", url, "--bot", "random", "--name", "comeback")
        first.expect(r"CHOOSE YOUR SECRET.*\? ")
        first.sendline("0123")
        first.expect(r"GUESS 1: TYPE 4 NUMBERS\? ")
        first.sendline("4567")
        first.expect(r"ROUND 1: 4567 -> ")
        first.expect(r"GUESS 2: TYPE 4 NUMBERS\? ")
        first.terminate(force=True)  # the window is closed: no resignation, no goodbye
        # Same name, same remembered token: the match is waiting within the grace window.
        again = spawn(tmp_path, "--url", url, "--bot", "random", "--name", "comeback")
        again.expect(r"YOU HAVE AN UNFINISHED MATCH \((\S+)\): BACK TO IT")
        again.expect(r"MATCH \S+: YOU \(comeback\) VS random-bot")
        again.expect(r"ROUND 1: 4567 -> ")  # the replay shows what happened so far
        again.expect(r"GUESS 2: TYPE 4 NUMBERS\? ")
        again.sendline("quit")
        again.expect(r"RESIGN THIS MATCH \(YES OR NO\)\? ")
        again.sendline("yes")
        again.expect(r"SECRETS: YOURS 0123, ")
        again.expect(r"PLAY AGAIN \(YES OR NO\)\? ")
        again.sendline("no")
        again.expect(pexpect.EOF)


def test_free_pacing_online(tmp_path):
    with moo_serve(tmp_path) as url:
        child = spawn(tmp_path, "--url", url, "--bot", "random", "--pacing", "free",
                      "--name", "racer")
        child.expect("FREE PACING: GUESS AT YOUR OWN SPEED")
        child.expect(r"CHOOSE YOUR SECRET.*\? ")
        child.sendline("0123")
        left = list(RULES.secrets)
        tries = 0
        saw_opponent = False
        while True:
            i = child.expect([r"GUESS (\d+): TYPE 4 NUMBERS\? ",
                              r"\*\*\* (YOU WIN!|YOU LOSE\.|A DRAW\.) \*\*\*"])
            saw_opponent = saw_opponent or "random-bot: GUESS " in child.before
            if i == 1:
                break
            guess = left[0]
            child.sendline(guess)
            tries += 1
            # Free pacing: our response comes at once, not with a round. Or the match is
            # already over: the bot plays at its own speed (it starts late, once the server
            # has built its response table, then catches up in milliseconds), and when it
            # solves in fewer guesses than we have made, its move ends the match while ours
            # is on its way; ours is then refused ("the match is over: not counted") or
            # arrives after the end. Only a loss can end the match under us like that.
            j = child.expect([r"  -> (\S+)\s+(B*,C*)",
                              r"\*\*\* (YOU WIN!|YOU LOSE\.|A DRAW\.) \*\*\*"])
            saw_opponent = saw_opponent or "random-bot: GUESS " in child.before
            if j == 1:
                assert child.match.group(1) == "YOU LOSE.", child.before
                break
            left = RULES.consistent(left, guess, parse_response(child.match.group(1)))
            assert tries < 15
        assert saw_opponent  # the bot's guesses and responses are shown as they happen
        child.expect(r"PLAY AGAIN \(YES OR NO\)\? ")
        child.sendline("no")
        child.expect(pexpect.EOF)
