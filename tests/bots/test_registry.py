"""The strategy registry resolves every kind of spec the CLI commands accept."""

from __future__ import annotations

import random

import pytest

from bots.registry import available, close_strategy, create
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


def test_a_strategy_file_may_import_its_neighbours(tmp_path) -> None:
    """As for ``python path/file.py``: the file's own folder is importable."""
    (tmp_path / "helper_for_moo_test.py").write_text("FIRST = '9876'\n")
    (tmp_path / "fixed.py").write_text(
        "from bots.base import Strategy\n"
        "from helper_for_moo_test import FIRST\n\n\n"
        "class Fixed(Strategy):\n"
        "    def new_match(self, rules, rng):\n"
        "        self.rules, self.left = rules, [FIRST, *rules.secrets]\n"
        "    def next_guess(self):\n"
        "        return self.left[0]\n"
        "    def observe(self, guess, response):\n"
        "        self.left = self.rules.consistent(self.left, guess, response)\n"
    )
    strategy = create(f"{tmp_path}/fixed.py:Fixed", relabel=False)
    strategy.new_match(DEFAULT_RULES, random.Random(1))
    assert strategy.next_guess() == "9876"  # the neighbour's constant
    assert 1 <= play(f"{tmp_path}/fixed.py:Fixed", "0123") <= 9


@pytest.mark.parametrize(
    ("source", "expected"),
    [("class Broken:\n    def __init__(self):\n        raise RuntimeError('no tables')\n",
      "cannot create strategy '{spec}': RuntimeError: no tables"),
     ("class Broken:\n    pass\n", "'{spec}' does not implement bots.base.Strategy"),
     ("import no_such_module_for_moo\nclass Broken:\n    pass\n",
      "cannot load strategy '{spec}': ModuleNotFoundError: No module named "
      "'no_such_module_for_moo'")],
)
def test_user_code_that_fails_is_one_unknown_strategy_error(tmp_path, source: str,
                                                           expected: str) -> None:
    (tmp_path / "broken.py").write_text(source)
    spec = f"{tmp_path}/broken.py:Broken"
    with pytest.raises(UnknownStrategy) as caught:
        create(spec)
    assert str(caught.value) == expected.format(spec=spec)


def test_programs_are_not_relabelled_and_in_process_strategies_are() -> None:
    from bots.external import ExternalStrategy
    from bots.relabel import Relabelled

    program = create("cmd:./examples/bots/first_consistent.sh")
    try:
        assert isinstance(program, ExternalStrategy)
    finally:
        close_strategy(program)
    assert isinstance(create("bots.first:FirstConsistent"), Relabelled)
    assert not isinstance(create("bots.first:FirstConsistent", relabel=False), Relabelled)
