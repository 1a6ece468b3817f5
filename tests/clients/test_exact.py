"""Exact scores of a submitted program (clients/hosted/exact.py): its whole tree, in the
sandbox, scored with the same code as ``moo eval``."""

from __future__ import annotations

import json
import os
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from bots.evaluate import evaluate, match_probabilities
from clients.hosted.exact import ExactResult, exact_result, exact_scores
from moo.rules import DEFAULT_RULES
from moo.variants import parse_rules_spec
from tests.cli.test_cli_errors import MOO
from tests.client_support import client_env

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
LADDER = REPO / "examples" / "ladder"


def eval_scores(name: str) -> tuple[Fraction, Fraction, int]:
    """(score against minimum, against strongest, total guesses) as ``moo eval`` computes them:
    the strategy's exact distribution and :func:`bots.evaluate.match_probabilities`."""
    mine = evaluate(name, DEFAULT_RULES, show_progress=False)
    scores = []
    for other in ("minimum", "strongest"):
        win, draw, _ = match_probabilities(
            mine.distribution, evaluate(other, DEFAULT_RULES, show_progress=False).distribution)
        scores.append(win + draw / 2)
    return scores[0], scores[1], mine.total


def assert_equals_eval(result: ExactResult, name: str) -> None:
    assert result.scores is not None, result.reason
    vs_minimum, vs_strongest, total = eval_scores(name)
    scores = result.scores
    assert (scores.vs_minimum, scores.vs_strongest, scores.total_guesses) == (
        vs_minimum, vs_strongest, total)
    assert scores.secrets == len(DEFAULT_RULES.secrets)
    assert scores.average == Fraction(total, scores.secrets)
    assert result.distribution == evaluate(name, DEFAULT_RULES, show_progress=False).distribution


#: A whole tree in the sandbox takes 13 s or more: the suite scores one, minimum.py's, through
#: the worker and the server (tests/clients/test_worker.py, held to moo eval's figures);
#: ``./dev verify`` (MOO_VERIFY_ALL=1) scores first.py here too, and every example bot in
#: tests/clients/test_ladder_bots.py. Not collected in the suite (no skip).
EVERY = os.environ.get("MOO_VERIFY_ALL") == "1"

if EVERY:
    async def test_the_first_script_scores_exactly_what_moo_eval_gives_for_first(
            tmp_path: Path) -> None:
        result = await exact_result((LADDER / "first.py").read_bytes())
        assert result.name == "first"
        assert_equals_eval(result, "first")
        # and what the command prints (its JSON rounds the fractions to floats)
        out = subprocess.run([*MOO, "eval", "first", "--json"], capture_output=True,
                             text=True, env=client_env(tmp_path), timeout=600, check=True)
        printed = json.loads(out.stdout)
        assert result.scores is not None
        assert printed["total"] == result.scores.total_guesses
        assert printed["score"] == float(result.scores.vs_minimum)


async def test_other_rules_have_no_exact_score() -> None:
    result = await exact_result((LADDER / "first.py").read_bytes(), parse_rules_spec("moo:5"))
    assert result.scores is None
    assert "classic MOO only" in result.reason


async def test_a_random_program_has_no_exact_score_with_the_reason() -> None:
    result = await exact_result((LADDER / "random.py").read_bytes())
    assert result.scores is None
    assert result.reason.startswith("not deterministic: "), result.reason
    assert " in one game and " in result.reason


async def test_a_failing_program_has_no_exact_score_with_its_failure() -> None:
    program = b"#!/bin/sh\necho ready quitter\nread a\nread b\nexit 3\n"
    result = await exact_result(program)
    assert result.scores is None
    assert "game against secret 0123: crash" in result.reason, result.reason
    assert "code 3" in result.reason


async def test_a_program_that_never_finds_a_secret_has_no_exact_score() -> None:
    program = (b"#!/bin/sh\nwhile read w rest; do case $w in moo) echo ready stubborn;; "
               b"guess) echo 9876;; quit) exit 0;; esac; done\n")
    result = await exact_result(program)
    assert result.scores is None
    assert result.reason == "it did not find the secret 0123 in 50 guesses"


#: ``first`` with its order of candidates shuffled once per run: the same tree all through
#: one session (each history's answer is remembered), another tree in the next session
SEEDED_PER_RUN = (LADDER / "first.py").read_text().replace(
    '            self.memo = {(): ["".join(p) for p in itertools.permutations(alphabet, '
    'length)]}',
    '            codes = ["".join(p) for p in itertools.permutations(alphabet, length)]\n'
    '            __import__("random").SystemRandom().shuffle(codes)\n'
    '            self.memo = {(): codes}')


@pytest.mark.slow(15)
async def test_a_program_seeded_per_run_is_caught_by_the_fresh_session() -> None:
    assert "SystemRandom().shuffle" in SEEDED_PER_RUN
    result = await exact_result(SEEDED_PER_RUN.encode())
    assert result.scores is None
    assert result.reason.startswith("not deterministic: replaying secret "), result.reason
    assert "in a fresh session" in result.reason


async def test_a_file_that_cannot_run_has_no_exact_score() -> None:
    result = await exact_result(b"print('hello')\n")
    assert result.scores is None
    assert result.reason == ("the file is neither a script starting with #! nor a Linux "
                             "binary (ELF)")


def test_the_synchronous_call_returns_none_without_a_tree() -> None:
    assert exact_scores((LADDER / "random.py").read_bytes()) is None
