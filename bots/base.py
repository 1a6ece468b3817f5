"""The strategy plug-in contract and the registry of strategies by name.

A strategy is anything that can answer "what do you guess next?" given the responses so far.
The contract is deliberately tiny so that a new strategy is ten lines::

    class FirstConsistent(Strategy):
        name = "first"
        def new_match(self, rules, rng):
            self.rules, self.left = rules, list(rules.secrets)
        def next_guess(self):
            return self.left[0]
        def observe(self, guess, response):
            self.left = self.rules.consistent(self.left, guess, response)

The same object plays many matches in turn (``new_match`` resets it), so expensive tables are
built once per process, not once per match. Strategies never see the secret and never do I/O;
the server, the SDK's ``moo bot`` runner and the tournament runner all drive them the same way.
"""

from __future__ import annotations

import importlib
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar

from moo.errors import UnknownStrategy
from moo.rules import Response, Rules

__all__ = ["Strategy", "available", "create", "describe", "register"]


class Strategy(ABC):
    """Base class of every guessing strategy (see the module docstring)."""

    name: ClassVar[str] = ""
    #: One-line description shown by ``moo strategy list`` and the lobby.
    summary: ClassVar[str] = ""
    #: True when the guesses are a function of the responses alone (a fixed strategy): then
    #: one game per secret gives its exact guess-count distribution and decisions can be cached.
    deterministic: ClassVar[bool] = False

    @abstractmethod
    def new_match(self, rules: Rules, rng: random.Random) -> None:
        """Forget the previous match; ``rng`` is the only source of randomness allowed."""

    @abstractmethod
    def next_guess(self) -> str:
        """The next guess, a legal code under the match's rules."""

    @abstractmethod
    def observe(self, guess: str, response: Response) -> None:
        """The response to our own last guess."""

    def observe_opponent(self, count: int, response: Response | None) -> None:  # noqa: B027
        """The opponent's visible progress: their guess count and last response, if shown.

        Fixed strategies ignore it; adaptive bots (planned) use it.
        """


StrategyFactory = Callable[[], Strategy]

#: name -> "module:attribute" for built-in strategies, imported on first use so that
#: ``moo --help`` or the server's start-up do not pay for tables they never use.
_BUILTIN: dict[str, str] = {
    "random": "bots.random_consistent:RandomConsistent",
    "first": "bots.first:FirstConsistent",
    "entropy": "bots.entropy:Entropy",
    "expected": "bots.expected:ExpectedSize",
    "parts": "bots.parts:MostParts",
    "minimax": "bots.minimax:Minimax",
    "larmouth": "bots.larmouth:Larmouth",
    "minimum": "bots.tree:Minimum",
    "strongest": "bots.tree:Strongest",
}
_REGISTERED: dict[str, StrategyFactory] = {}


def register(name: str, target: str | StrategyFactory) -> None:
    """Register a strategy under ``name``: a factory, or a lazy ``"module:attr"`` path."""
    if isinstance(target, str):
        _BUILTIN[name] = target
    else:
        _REGISTERED[name] = target


def available() -> list[str]:
    """Names of every registered strategy, sorted."""
    return sorted(set(_BUILTIN) | set(_REGISTERED))


def _load(path: str) -> StrategyFactory:
    module_name, _, attr = path.partition(":")
    if not attr:
        raise UnknownStrategy(f"{path!r} is not of the form 'package.module:Class'")
    try:
        module = importlib.import_module(module_name)
        factory = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise UnknownStrategy(f"cannot load strategy {path!r}: {exc}") from exc
    if not callable(factory):
        raise UnknownStrategy(f"{path!r} is not callable")
    return factory  # type: ignore[no-any-return]


def create(spec: str, *, relabel: bool = True) -> Strategy:
    """A new strategy instance from a registered name, a ``package.module:Class`` path, a
    ``file:PATH`` decision-tree dump or a ``cmd:PROGRAM ARGS`` external program.

    By default the strategy is wrapped in :func:`bots.relabel.relabelled`, which draws a random
    relabelling of the code space from each match's rng so that no secret is a known weak spot
    of a fixed strategy. ``relabel=False`` gives the bare strategy (evaluation, tree dumps).
    """
    strategy = _create(spec)
    if not relabel:
        return strategy
    from bots.relabel import relabelled

    return relabelled(strategy)


def _create(spec: str) -> Strategy:
    if spec in _REGISTERED:
        return _REGISTERED[spec]()
    if spec in _BUILTIN:
        return _load(_BUILTIN[spec])()
    if spec.startswith("file:"):
        from bots.tree import TreeStrategy

        return TreeStrategy(spec[len("file:") :])
    if spec.startswith("cmd:"):
        # External programs (any language) speak the line protocol of docs/bot-protocol.md;
        # the adapter lives with the other process-facing code in clients/.
        from clients.external import ExternalStrategy

        return ExternalStrategy(spec)
    if ":" in spec:
        strategy = _load(spec)()
        if not isinstance(strategy, Strategy):
            raise UnknownStrategy(f"{spec!r} does not implement bots.base.Strategy")
        return strategy
    raise UnknownStrategy(
        f"unknown strategy {spec!r}; available: {', '.join(available())}"
    )


def describe(name: str) -> tuple[str, str]:
    """(summary, problem) of a registered strategy without building it.

    Lazy built-ins are imported but not instantiated, so a table bot whose data file is
    missing is listed with the problem instead of failing the whole listing.
    """
    if name in _REGISTERED:
        try:
            return _REGISTERED[name]().summary, ""
        except Exception as exc:  # a plug-in's failure is reported, not raised
            return "", str(exc)
    try:
        cls = _load(_BUILTIN[name])
    except UnknownStrategy as exc:
        return "", str(exc)
    summary = str(getattr(cls, "summary", ""))
    check = getattr(cls, "unavailable", None)
    problem = str(check()) if callable(check) else ""
    return summary, problem
