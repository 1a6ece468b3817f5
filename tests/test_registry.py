"""The strategy registry resolves every kind of spec the CLI commands accept."""

from __future__ import annotations

import random

import pytest

from bots.base import available, create
from moo.errors import UnknownStrategy
from moo.rules import DEFAULT_RULES, score


def play(spec: str, secret: str) -> int:
    strategy = create(spec)
    strategy.new_match(DEFAULT_RULES, random.Random(7))
    for n in range(1, 20):
        guess = strategy.next_guess()
        response = score(secret, guess)
        if response.bulls == 4:
            return n
        strategy.observe(guess, response)
    raise AssertionError(f"{spec} did not solve {secret}")


def test_external_program_spec_plays_through_the_registry() -> None:
    strategy = create("cmd:./examples/bots/first_consistent.sh")
    try:
        strategy.new_match(DEFAULT_RULES, random.Random(1))
        guess = strategy.next_guess()
        assert DEFAULT_RULES.is_secret(guess)
    finally:
        close = getattr(strategy, "close", None)
        if close is not None:
            close()


@pytest.mark.parametrize("spec", ["random", "minimum", "strongest", "bots.first:FirstConsistent"])
def test_named_and_module_specs_solve(spec: str) -> None:
    assert 1 <= play(spec, "9876") <= 9


def test_unknown_spec_is_a_clear_error() -> None:
    with pytest.raises(UnknownStrategy, match="available"):
        create("no-such-bot")
    assert {"minimum", "strongest", "random", "entropy"} <= set(available())
