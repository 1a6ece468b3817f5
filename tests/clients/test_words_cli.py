"""Word MOO on the command line against a server: ``moo play --rules words:N`` (the terminal
client), ``moo bot words --rules words:N``, the solo game through ``--rules``, and one line for
each mistake (docs/variants.md, "Word MOO")."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import threading
from pathlib import Path

import pytest

from bots.dictionary import load_words
from clients.terminal import Entry, parse_entry, play_solo, rules_page
from moo.words import WordRules
from server.export import records
from tests.cli.test_cli_errors import moo, one_line
from tests.client_support import ROOT, client_env, moo_command, moo_serve
from tests.patience import patience

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e


def test_word_entries_commands_start_with_a_question_mark() -> None:
    rules = WordRules(4)
    assert parse_entry("left", rules) == Entry("guess", "LEFT")  # a word, so a guess
    assert parse_entry("?left", rules) == Entry("command", "left")
    assert parse_entry("?", rules) == Entry("command", "rules")
    assert parse_entry(" Quit ", rules) == Entry("ambiguous", "Quit")  # asked (issue 32)
    assert parse_entry("=quit", rules) == Entry("guess", "QUIT")
    assert parse_entry("?quit", rules) == Entry("command", "quit")
    assert parse_entry("?dance", rules).kind == "error"
    assert parse_entry("ab1d", rules) == Entry("error", "only letters A-Z (not '1')")
    assert parse_entry("abc", rules) == Entry("error", "expected 4 letters, got 3")
    assert "MISS: one of your letters is not in the word at all" in rules_page(
        WordRules(5, "hits_misses"))


def test_solo_with_word_rules_is_the_offline_word_game() -> None:
    said: list[str] = []
    typed = iter(["?quit"])
    args = argparse.Namespace(seed=4, helper=False, rules=WordRules(6, "hits_misses"))
    assert play_solo(args, lambda _prompt: next(typed, None), said.append) == 0
    assert said[0].startswith("WORD MOO\nI THINK OF A COMMON ENGLISH WORD OF 6 LETTERS")
    assert "MISS IS A GUESSED LETTER" in said[0]
    assert any(line.startswith("THE WORD WAS ") for line in said)


def test_word_mistakes_are_one_line(tmp_path: Path) -> None:
    line = one_line(moo(tmp_path, "play", "--solo", "--rules", "words:3"), "play")
    assert "argument --rules: word length must be 4-9 letters, got 3" in line
    line = one_line(moo(tmp_path, "bot", "random", "--rules", "words:5:hits_misses",
                        "--url", "ws://127.0.0.1:9/"), "bot")
    assert "bot 'random' cannot play Word MOO 5 letters (hits and misses)" in line
    assert line.endswith("bots that can: words")
    line = one_line(moo(tmp_path, "bot", "--cmd", "cat", "--rules", "words:5",
                        "--url", "ws://127.0.0.1:9/"), "bot")
    assert "external bot programs play MOO rules only" in line and "use words" in line
    line = one_line(moo(tmp_path, "play", "--bot", "words", "--rules", "words:5:points"), "play")
    assert "scoring must be 'bulls_cows' or 'hits_misses', got 'points'" in line


class Terminal:
    """``moo play`` driven like a person: answer each prompt once it is on the screen (typing
    ahead would only get WAIT FOR ... TO GUESS, as it would for a person)."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, bufsize=1,
        )
        self.out = ""
        self.seen = 0
        self.changed = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        while chunk := self.proc.stdout.read(1):
            with self.changed:
                self.out += chunk
                self.changed.notify_all()
        with self.changed:
            self.out += "\0"  # end of output
            self.changed.notify_all()

    def expect(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """The next match of ``pattern`` after the previous one (generous: loaded machines)."""
        wanted = re.compile(pattern)
        with self.changed:
            self.changed.wait_for(
                lambda: wanted.search(self.out, self.seen) is not None
                or self.out.endswith("\0"), timeout)
            found = wanted.search(self.out, self.seen)
            assert found is not None, f"{pattern!r} not in {self.out[self.seen:]!r}"
            self.seen = found.end()
            return found

    def type(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()


def test_moo_play_a_word_match_against_the_word_bot(tmp_path: Path) -> None:
    """A person at the terminal: a non-word secret is refused before it is sent, commands
    start with ?, any five letters are a guess, answers are words; the bot wins the race
    (we keep guessing the same letters) and the export knows the variant."""
    with moo_serve(tmp_path) as url:
        term = Terminal(moo_command("play", "--bot", "words", "--rules", "words:5", "--url",
                                    url, "--name", "wes"), client_env(tmp_path))
        try:
            term.expect(r"WORD MOO: A 5-LETTER ENGLISH WORD, BULLS AND COWS\.")
            term.expect(r"TYPE '\?RULES' FOR THE RULES, '\?QUIT' TO RESIGN\.")
            term.expect(r"CHOOSE YOUR SECRET: A 5-LETTER ENGLISH WORD")
            term.type("xqzzy")
            term.expect(r"XQZZY is not a 5-letter word of the dictionary: try again\.")
            term.type("skunk")
            term.expect(r"YOUR SECRET IS SKUNK\.")
            term.expect(r"GUESS 1: TYPE 5 LETTERS\? ")
            term.type("?rules")
            term.expect(r"THE RULES OF WORD MOO")
            term.type("eeeee")  # not a word, still a guess
            term.expect(r"ROUND 1: EEEEE -> \d BULLS?, \d COWS?\n")
            term.type("?left")
            term.expect(r"\d+ CHOICES LEFT|ONE CHOICE LEFT")
            while True:
                seen = term.expect(r"GUESS \d+: TYPE 5 LETTERS\? |\*\*\* YOU (WIN|LOSE)")
                if seen.group(0).startswith("***"):
                    break
                term.type("QQQQQ")  # no word, so never the bot's secret
            assert seen.group(0) == "*** YOU LOSE"  # the bot solves; QQQQQ again does not
            term.expect(r"PLAY AGAIN \(YES OR NO\)\? ")
            term.type("no")
            assert term.proc.wait(timeout=patience(60)) == 0
        finally:
            if term.proc.poll() is None:
                term.proc.kill()
                term.proc.wait()
    exported = list(records(str(tmp_path / "serve.sqlite3")))
    assert [r["variant"] for r in exported] == ["words:5:bulls_cows"]
    assert exported[0]["secrets"][exported[0]["players"].index("wes")] == "SKUNK"


def test_moo_bot_words_plays_word_matches_on_a_server(tmp_path: Path) -> None:
    """``moo bot words`` against the hosted word bot, at rules the operator configured
    (6 letters, hits and misses): both sides guess dictionary words and solve."""
    words = set(load_words(6))
    config = tmp_path / "words.toml"
    config.write_text('[match]\nvariants = ["moo:4:0123456789", "words:6:hits_misses"]\n')
    with moo_serve(tmp_path, "--config", str(config)) as url:
        done = subprocess.run(
            moo_command("bot", "words", "--rules", "words:6:hits_misses", "--vs-bot", "words",
                        "--url", url, "--games", "2", "--json", "--name", "lex"),
            cwd=ROOT, env=client_env(tmp_path), capture_output=True, text=True,
            timeout=patience(180),
        )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[-1]["type"] == "summary" and lines[-1]["matches"] == 2
    played = [line for line in lines if line["type"] == "match"]
    assert len(played) == 2 and all(m["reason"] == "solved" for m in played)
    exported = list(records(str(tmp_path / "serve.sqlite3")))
    assert [r["variant"] for r in exported] == ["words:6:hits_misses"] * 2
    for record in exported:
        assert all(secret in words for secret in record["secrets"])
        assert all(g["guess"] in words for seat in record["guesses"] for g in seat)


def test_word_tournament_locally(tmp_path: Path) -> None:
    line = one_line(moo(tmp_path, "tournament", "words", "random", "--rules", "words:5",
                        "--rounds", "1"), "tournament")
    assert line.endswith("bot 'random' cannot play Word MOO 5 letters (words:5:bulls_cows); "
                         "bots that can: words")
    done = moo(tmp_path, "tournament", "words", "words", "--rules", "words:5:hits_misses",
               "--rounds", "1", "--seed", "3", "--json", "--no-progress", timeout=patience(180))
    assert done.returncode == 0, done.stderr
    standings = json.loads(done.stdout)
    assert standings["rules"] == "words:5:hits_misses"
    assert sum(p["games"] for p in standings["players"]) == 4


def test_two_terminals_play_a_word_room(tmp_path: Path) -> None:
    """``moo play --create-room --rules words:5:hits_misses`` and ``moo play --room CODE``:
    the guest plays the room's word rules; answers are hits and misses."""
    with moo_serve(tmp_path) as url:
        host = Terminal(moo_command("play", "--create-room", "--rules", "words:5:hits_misses",
                                    "--url", url, "--name", "hana"), client_env(tmp_path))
        guest: Terminal | None = None
        try:
            code = host.expect(r"ROOM CODE: (\w+)").group(1)
            guest = Terminal(moo_command("play", "--room", code, "--url", url, "--name", "gus"),
                             client_env(tmp_path))
            for term, secret in ((host, "skunk"), (guest, "moose")):
                term.expect(r"WORD MOO: A 5-LETTER ENGLISH WORD, HITS AND MISSES\.")
                term.expect(r"CHOOSE YOUR SECRET: A 5-LETTER ENGLISH WORD")
                term.type(secret)
            for term, guess in ((host, "moose"), (guest, "qqqqq")):
                term.expect(r"GUESS 1: TYPE 5 LETTERS\? ")
                term.type(guess)
            host.expect(r"ROUND 1: MOOSE -> 5 HITS, 0 MISSES\n")
            host.expect(r"gus: QQQQQ -> 0 HITS, 5 MISSES\n")
            guest.expect(r"ROUND 1: QQQQQ -> 0 HITS, 5 MISSES\n")
            host.expect(r"\*\*\* YOU WIN! \*\*\*")
            guest.expect(r"\*\*\* YOU LOSE\. \*\*\*")
            for term in (host, guest):
                term.expect(r"\(YES OR NO\)\? ")
                term.type("no")
            assert host.proc.wait(timeout=patience(60)) == 0
            assert guest.proc.wait(timeout=patience(60)) == 0
        finally:
            for term_ in (host, guest):
                if term_ is not None and term_.proc.poll() is None:
                    term_.proc.kill()
                    term_.proc.wait()
    exported = list(records(str(tmp_path / "serve.sqlite3")))
    assert [r["variant"] for r in exported] == ["words:5:hits_misses"]
    assert exported[0]["secrets"] == ["SKUNK", "MOOSE"]
