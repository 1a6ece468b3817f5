"""``moo play --words``: offline word MOO at the terminal (clients/wordplay.py)."""

from __future__ import annotations

import argparse
import random
import subprocess
import sys

import pytest

from bots.dictionary import load_words
from clients.wordplay import describe_answer, play_words
from moo.words import WordRules, score_bulls_cows, score_hits_misses


@pytest.fixture(autouse=True)
def _installed_dictionary() -> None:
    """Word MOO's rules get the real list the way the programs do it (no import does it)."""
    from bots.dictionary import install

    install()


def _play(lines: list[str], **kw: object) -> tuple[int, str]:
    args = argparse.Namespace(words=5, scoring="bulls_cows", helper=False, seed=11)
    for k, v in kw.items():
        setattr(args, k, v)
    feed = iter(lines)
    out: list[str] = []

    def read(prompt: str) -> str | None:
        out.append(prompt)
        return next(feed, None)

    rc = play_words(args, read, out.append)
    return rc, "\n".join(out)


def _secret(seed: int, n: int = 5) -> str:
    return random.Random(seed).choice(load_words(n))


def test_describe_answer() -> None:
    assert describe_answer(WordRules(5), (1, 2)) == "1 BULL, 2 COWS"
    assert describe_answer(WordRules(5, "hits_misses"), (2, 1)) == "2 HITS, 1 MISS"


@pytest.mark.parametrize("scoring", ["bulls_cows", "hits_misses"])
def test_a_game_to_the_end(scoring: str) -> None:
    secret = _secret(11)
    rules = WordRules(5, scoring)  # type: ignore[arg-type]
    rc, text = _play(["GUPPY", secret, "no"], scoring=scoring, helper=True)
    assert rc == 0
    scorer = score_hits_misses if scoring == "hits_misses" else score_bulls_cows
    answer = (scorer(secret, "GUPPY")[0], scorer(secret, "GUPPY")[1])
    assert f"-> {describe_answer(rules, answer)}" in text
    left = rules.consistent(load_words(5), "GUPPY", answer)
    assert f"{len(left)} WORDS STILL POSSIBLE." in text
    assert "YOU GOT IT IN 2 GUESSES." in text
    assert "1 WORDS, AVERAGE 2.00 GUESSES." in text


def test_bad_guesses_are_not_counted_and_quit_reveals() -> None:
    secret = _secret(11)
    rc, text = _play(["ab", "sk8nk", "?left", "?quit"])
    assert rc == 0
    assert "expected 5 letters, got 2: not counted" in text
    assert "only letters A-Z" in text
    assert f"{len(load_words(5))} WORDS STILL POSSIBLE." in text
    assert f"THE WORD WAS {secret}." in text


def test_a_bare_quit_that_could_be_a_guess_is_asked_about() -> None:
    # QUIT is 4 letters: typed bare it is neither played nor obeyed (issue 32); =QUIT plays
    # it, ?QUIT quits. In a 5-letter game it cannot be a guess, so it quits.
    rc, text = _play(["quit", "=quit", "?quit"], words=4)
    assert rc == 0
    assert "QUIT IS A GUESS HERE AS WELL AS A COMMAND: TYPE ?QUIT TO QUIT, OR =QUIT TO PLAY IT " \
        "AS A GUESS (NOTHING WAS SENT)." in text
    assert text.count("-> ") == 1  # only =quit was played
    assert f"THE WORD WAS {_secret(11, 4)}." in text
    rc, text = _play(["quit"], words=5)
    assert rc == 0 and "-> " not in text and f"THE WORD WAS {_secret(11, 5)}." in text


def test_cli_length_mistake_is_one_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "cli", "play", "--words", "10"],
                          capture_output=True, text=True, input="")
    assert proc.returncode == 2
    assert proc.stderr == "moo play: --words takes a length of 4-9 letters, got 10\n"


def test_hint_suggests_a_possible_word() -> None:
    rc, text = _play(["GUPPY", "?hint", "?quit"])
    assert rc == 0
    secret = _secret(11)
    answer = score_bulls_cows(secret, "GUPPY")
    left = WordRules(5).consistent(load_words(5), "GUPPY", (answer[0], answer[1]))
    line = next(x for x in text.splitlines() if x.startswith("TRY "))
    assert line.endswith(f"({len(left)} WORDS STILL POSSIBLE).")
    assert line.split()[1] in left
