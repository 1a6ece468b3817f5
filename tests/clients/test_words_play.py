"""``moo play --words``: offline word MOO at the terminal (clients/wordplay.py)."""

from __future__ import annotations

import argparse
import random
import subprocess
import sys

import pytest

from bots.dictionary import load_answers, load_words
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
    """The game's first secret: the seed's first draw from the answer list."""
    return random.Random(seed).choice(load_answers(n))


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
    left = rules.consistent(load_answers(5), "GUPPY", answer)
    assert f"{len(left)} WORDS STILL POSSIBLE." in text
    assert "YOU GOT IT IN 2 GUESSES." in text
    assert "1 WORDS, AVERAGE 2.00 GUESSES." in text


def test_bad_guesses_are_not_counted_and_quit_reveals() -> None:
    secret = _secret(11)
    rc, text = _play(["ab", "sk8nk", "?left", "?quit"])
    assert rc == 0
    assert "expected 5 letters, got 2: not counted" in text
    assert "only letters A-Z" in text
    assert f"{len(load_answers(5))} WORDS STILL POSSIBLE." in text
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
    left = WordRules(5).consistent(load_answers(5), "GUPPY", (answer[0], answer[1]))
    line = next(x for x in text.splitlines() if x.startswith("TRY "))
    assert line.endswith(f"({len(left)} WORDS STILL POSSIBLE).")
    assert line.split()[1] in left


@pytest.mark.parametrize("n", [4, 5, 9])
def test_secrets_come_only_from_the_answer_list(n: int) -> None:
    """Each word of a session (revealed by ?quit, or solved and ANOTHER WORD) is an answer,
    over many seeds; and a dictionary word that is no answer is still a counted guess."""
    answers = set(load_answers(n))
    outside = sorted(set(load_words(n)) - answers)
    assert outside  # the dictionary is larger: otherwise this test proves nothing
    for seed in range(40):
        rc, text = _play([outside[seed % len(outside)], "?quit"], words=n, seed=seed)
        assert rc == 0
        assert "  -> " in text and "not counted" not in text  # the guess was scored
        word = text.rsplit("THE WORD WAS ", 1)[1].split(".")[0]
        assert word in answers, (seed, word)
        assert word == _secret(seed, n)


@pytest.mark.parametrize("n", [5, 8])
def test_tournament_secrets_are_answers(n: int) -> None:
    """``moo tournament``'s secrets (``--secrets server``: the seeded pair of each round;
    ``--secrets bots``: the word bot's own) come from the answer list."""
    from bots.words import WordBot
    from clients.tournament.runner import choose_secret, secret_pair

    rules = WordRules(n)
    answers = set(load_answers(n))
    drawn = [w for r in range(60) for w in secret_pair(3, r, rules)]
    bot = WordBot()  # as the runner plays it (a Strategy by its methods, not its class)
    drawn += [choose_secret(bot, rules, random.Random(s))  # type: ignore[arg-type]
              for s in range(60)]
    assert set(drawn) <= answers, sorted(set(drawn) - answers)
    assert len(set(drawn)) > 100  # really drawn, not one word over and over
