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

import contextlib
import importlib
import importlib.util
import os
import random
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import ClassVar

from moo.errors import MooError, UnknownStrategy
from moo.rules import Response, Rules

__all__ = [
    "Strategy",
    "available",
    "close_strategy",
    "create",
    "describe",
    "display_names",
    "register",
]


class Strategy(ABC):
    """Base class of every guessing strategy (see the module docstring)."""

    name: ClassVar[str] = ""
    #: One-line description shown by ``moo strategy list`` and the lobby.
    summary: ClassVar[str] = ""
    #: True when the guesses are a function of the responses alone (a fixed strategy): then
    #: one game per secret gives its exact guess-count distribution and decisions can be cached.
    deterministic: ClassVar[bool] = False
    #: True when the guesses are a function of the own responses *and* the opponent's visible
    #: progress, with no randomness (an adaptive strategy): ``moo eval`` then enumerates the
    #: race exactly, branching copies of the strategy made by :meth:`fork`.
    adaptive: ClassVar[bool] = False

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

        Fixed strategies ignore it. Adaptive strategies override
        :meth:`observe_opponent_move`, which also carries the opponent's guess.
        """

    def observe_opponent_move(
        self, count: int, guess: str | None, response: Response | None
    ) -> None:
        """The opponent's ``count``-th move as far as it is visible: its guess (None when the
        match hides guesses) and its response (None when not revealed yet).

        Runners call this one; the default passes the response on to
        :meth:`observe_opponent`, so strategies written before guesses were passed still work.
        """
        self.observe_opponent(count, response)

    def fork(self) -> Strategy:
        """An independent copy in the same state, for exact race enumeration.

        The default deep-copies; strategies with large shared tables override it.
        """
        import copy

        return copy.deepcopy(self)


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
    "adaptive": "bots.adaptive:Adaptive",
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


def _load(path: str, *, user: bool = True) -> StrategyFactory:
    """``package.module:Attr`` or ``path/to/file.py:Attr`` -> the attribute (a factory).

    This is the one plug-in loader of every command (``eval``, ``report``, ``tournament``,
    ``bot``, the server's bot list), so a spec that works in one works in all:

    * a spec whose module part ends in ``.py`` or contains a ``/`` is a file, loaded under a
      private module name (its own folder is importable, as for ``python path/file.py``);
    * otherwise the module is imported, with the current folder importable first, as for
      ``python -m``: ``moo`` is a console script, whose ``sys.path`` does not hold it.

    Whatever goes wrong while importing the user's code (a syntax error, a failing import, a
    missing class) becomes one :class:`UnknownStrategy` line naming the spec, not a traceback.
    Built-ins (``user=False``) are the project's own modules: ``sys.path`` is left alone.
    """
    module_name, _, attr = path.rpartition(":")
    if not module_name or not attr:
        raise UnknownStrategy(
            f"{path!r} is not of the form 'package.module:Class' or 'path/to/file.py:Class'"
        )
    try:
        if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
            module = _import_file(module_name)
        else:
            if user and os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except UnknownStrategy:
        raise
    except Exception as exc:
        raise UnknownStrategy(
            f"cannot load strategy {path!r}: {type(exc).__name__}: {exc}"
        ) from exc
    factory = getattr(module, attr, None)
    if factory is None:
        raise UnknownStrategy(f"cannot load strategy {path!r}: {module_name} has no {attr!r}")
    if not callable(factory):
        raise UnknownStrategy(f"{path!r} is not callable")
    return factory  # type: ignore[no-any-return]


def _import_file(file: str) -> ModuleType:
    """Import ``file`` once per process under a name derived from its absolute path."""
    full = os.path.abspath(file)
    if not os.path.isfile(full):
        raise UnknownStrategy(f"cannot load strategy file {file!r}: no such file")
    name = "moo_user_" + re.sub(r"\W", "_", full)
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise UnknownStrategy(f"cannot load strategy file {file!r}: not a Python file")
    folder = os.path.dirname(full)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def create(spec: str, *, relabel: bool = True) -> Strategy:
    """A new strategy instance from any spec a command accepts: a registered name,
    ``package.module:Class``, ``path/to/file.py:Class``, a ``file:PATH`` decision-tree dump or
    ``cmd:PROGRAM ARGS`` (an external program, :mod:`bots.external`).

    By default an in-process strategy is wrapped in :func:`bots.relabel.relabelled`, which
    draws a random relabelling of the code space from each match's rng so that no secret is a
    known weak spot of a fixed strategy. ``relabel=False`` gives the bare strategy (evaluation,
    tree dumps). External programs are played as they are: their play is theirs to vary.
    """
    if spec.startswith("cmd:"):
        from bots.external import ExternalStrategy

        try:
            return ExternalStrategy(spec)
        except ValueError as exc:  # an empty or unparsable command line
            raise UnknownStrategy(f"{spec!r}: {exc}") from None
    strategy = _create(spec)
    if not relabel:
        return strategy
    from bots.relabel import relabelled

    return relabelled(strategy)


def _create(spec: str) -> Strategy:
    if spec in _REGISTERED:
        return _REGISTERED[spec]()
    if spec in _BUILTIN:
        return _load(_BUILTIN[spec], user=False)()
    if spec.startswith("file:"):
        from bots.tree import TreeStrategy

        return TreeStrategy(spec[len("file:") :])
    if ":" in spec:
        factory = _load(spec)
        try:
            strategy = factory()
        except MooError:
            raise
        except Exception as exc:  # the user's constructor failed: one line, naming the spec
            raise UnknownStrategy(
                f"cannot create strategy {spec!r}: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(strategy, Strategy):
            raise UnknownStrategy(f"{spec!r} does not implement bots.base.Strategy")
        return strategy
    raise UnknownStrategy(
        f"unknown strategy {spec!r}; available: {', '.join(available())}"
    )


def close_strategy(strategy: Strategy) -> None:
    """Release what a strategy holds (an external program's process); never raises."""
    closer = getattr(strategy, "close", None)
    if callable(closer):
        with contextlib.suppress(Exception):
            closer()


def display_names(specs: Sequence[str]) -> list[str]:
    """Readable, unique labels: ``cmd:./prog`` -> ``prog``, ``pkg.mod:Class`` -> ``Class``."""
    out: list[str] = []
    for spec in specs:
        if spec.startswith("cmd:"):
            words = spec[4:].strip().split()
            base = (words[0].rstrip("/").rsplit("/", 1)[-1] if words else "") or "cmd"
        elif ":" in spec:
            base = spec.rsplit(":", 1)[-1]
        else:
            base = spec
        name, n = base, 2
        while name in out:
            name, n = f"{base}#{n}", n + 1
        out.append(name)
    return out


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
        cls = _load(_BUILTIN[name], user=False)
    except UnknownStrategy as exc:
        return "", str(exc)
    summary = str(getattr(cls, "summary", ""))
    check = getattr(cls, "unavailable", None)
    problem = str(check()) if callable(check) else ""
    return summary, problem
