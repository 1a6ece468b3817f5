"""The registry of strategies, and the one loader of every strategy spec a command accepts.

Why a module of its own: it imports the strategies (the tree bots, the relabelling wrapper, the
external-program bot) to build them, and they all import the contract in :mod:`bots.base`; with
the registry in the contract's module the imports went round in a cycle.

Specs: a registered name, ``package.module:Class``, ``path/to/file.py:Class``, a ``file:PATH``
decision-tree dump, or ``cmd:PROGRAM ARGS`` (an external program, :mod:`bots.external`).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import shlex
import shutil
import sys
from collections.abc import Sequence
from types import ModuleType

from bots.base import Strategy, StrategyFactory
from bots.external import DEFAULT_MOVE_TIMEOUT, ExternalStrategy, split_command
from bots.relabel import relabelled
from moo.errors import MooError, UnknownStrategy

__all__ = [
    "available",
    "close_strategy",
    "create",
    "describe",
    "display_names",
    "register",
]

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


def create(spec: str, *, relabel: bool = True,
           move_timeout: float = DEFAULT_MOVE_TIMEOUT) -> Strategy:
    """A new strategy instance from any spec a command accepts: a registered name,
    ``package.module:Class``, ``path/to/file.py:Class``, a ``file:PATH`` decision-tree dump or
    ``cmd:PROGRAM ARGS`` (an external program, :mod:`bots.external`, each of whose moves may
    take ``move_timeout`` seconds).

    By default an in-process strategy is wrapped in :func:`bots.relabel.relabelled`, which
    draws a random relabelling of the code space from each match's rng so that no secret is a
    known weak spot of a fixed strategy. ``relabel=False`` gives the bare strategy (evaluation,
    tree dumps). External programs are played as they are: their play is theirs to vary.
    """
    if spec.startswith("cmd:"):
        try:
            argv = split_command(spec)
        except ValueError as exc:  # an empty or unparsable command line
            raise UnknownStrategy(f"{spec!r}: {exc}") from None
        _check_program(spec, argv[0])
        return ExternalStrategy(argv, move_timeout=move_timeout)
    strategy = _create(spec)
    if not relabel:
        return strategy
    return relabelled(strategy)


def _check_program(spec: str, program: str) -> None:
    """A ``cmd:`` program that is not there or not executable: one line now, naming the spec,
    rather than a failure in the first match (a person's typo, so a usage error)."""
    if "/" in program or os.sep in program:
        if not os.path.exists(program):
            raise UnknownStrategy(f"{spec!r}: no such program {program!r}")
        if os.path.isdir(program):
            raise UnknownStrategy(f"{spec!r}: {program!r} is a directory, not a program")
        if not os.access(program, os.X_OK):
            raise UnknownStrategy(f"{spec!r}: {program!r} is not executable "
                                  f"(chmod +x {shlex.quote(program)})")
    elif shutil.which(program) is None:
        raise UnknownStrategy(f"{spec!r}: no program {program!r} on the PATH "
                              f"(a program in this folder is ./{program})")


def _create(spec: str) -> Strategy:
    if spec in _REGISTERED:
        return _REGISTERED[spec]()
    if spec in _BUILTIN:
        return _load(_BUILTIN[spec], user=False)()
    if spec.startswith("file:"):
        from bots.tree import TreeStrategy  # lazy: the table bots' module is large

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
