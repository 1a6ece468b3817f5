"""Imports point one way: cli -> clients -> server -> bots -> moo (README, "Layout"), and no
module of the project takes part in an import cycle.

Checked by parsing every module's source with ``ast``, so an arrow the wrong way fails here
even when it hides inside a function (a lazy import), under ``TYPE_CHECKING``, or behind
``importlib.import_module("literal")`` / ``__import__("literal")``. The pure core ``moo/`` is
held to more: it imports nothing of the project outside itself in any way, so it may not even
name another package's module in a string (as a table of modules to import later would).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: lower may never import higher
RANK = {"moo": 0, "bots": 1, "server": 2, "clients": 3, "cli": 4}
#: every top-level package of the project (the cycle check covers them all)
PACKAGES = (*RANK, "tests", "bench")
#: calls that import a module named by their first argument
DYNAMIC = frozenset({"import_module", "__import__", "find_spec", "run_module", "import_file"})
#: a string that names a module of the project outside moo/ ("server.cli", "bots.tree:Minimum")
FOREIGN = re.compile(rf"^({'|'.join(p for p in PACKAGES if p != 'moo')})((\.\w+)+(:\w+)?|:\w+)$")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def imported_modules(path: Path, members: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, relative ones resolved.

    With ``members``, ``from a.b import c`` also yields ``a.b.c`` (``c`` may be a module of
    package ``a.b``: the import graph needs it); a dynamic import with a literal name yields
    that name; one whose name is computed yields ``?`` (unknowable from the source).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            if members:
                found.extend((node.lineno, f"{name}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Call) and _call_name(node) in DYNAMIC and node.args:
            first = node.args[0]
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            found.append((node.lineno, str(getattr(first, "value", "")) if literal else "?"))
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of ``tree`` (prose may name any module)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def violations() -> list[str]:
    out = []
    for top, rank in RANK.items():
        for path in sorted((ROOT / top).rglob("*.py")):
            where = path.relative_to(ROOT)
            for line, name in imported_modules(path):
                target = name.split(".")[0]
                if target in RANK and RANK[target] > rank:
                    out.append(f"{where}:{line} imports {name}")
                elif top == "moo" and (name == "?" or (target in PACKAGES and target != "moo")):
                    out.append(f"{where}:{line} imports {name} (moo/ imports only moo/)")
            if top == "moo":
                out.extend(f"{where}:{line} names {text!r} (moo/ imports only moo/)"
                           for line, text in _foreign_names(path))
    return out


def _foreign_names(path: Path) -> list[tuple[int, str]]:
    """Strings in ``path`` (docstrings aside) that name a module of the project outside moo/."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip = _docstrings(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in skip and FOREIGN.match(node.value)]


def import_graph() -> dict[str, set[str]]:
    """module -> the project's modules it imports (anywhere in it, lazily or not)."""
    paths = {_module_name(p): p for top in PACKAGES if (ROOT / top).is_dir()
             for p in (ROOT / top).rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        targets = {resolve(name) for _, name in imported_modules(path, members=True)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_imports_point_from_cli_to_clients_to_server_to_bots_to_moo() -> None:
    assert violations() == []


def test_no_module_of_the_project_is_in_an_import_cycle() -> None:
    graph = import_graph()
    assert "cli.main" in graph and "bots.registry" in graph["bots.evaluate"]  # it sees the tree
    assert cycles(graph) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import clients.sdk\n", "clients.sdk"),
        ("def f():\n    from server.publisher import Publisher\n", "server.publisher"),
        ("import importlib\nimportlib.import_module('clients.external')\n", "clients.external"),
        ("__import__('cli.main')\n", "cli.main"),
    ],
)
def test_the_checker_sees_every_kind_of_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, expected: str
) -> None:
    """The check above would pass vacuously if the parser missed lazy or dynamic imports."""
    fake = tmp_path / "bots" / "sneaky.py"
    fake.parent.mkdir()
    fake.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert expected in [name for _, name in imported_modules(fake)]
    assert violations() == [f"bots/sneaky.py:{source.count(chr(10))} imports {expected}"]


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ("import tests.client_support\n", "imports tests.client_support"),
        ("import importlib\nNAME = 'x'\nimportlib.import_module(NAME)\n", "imports ?"),
        ("COMMANDS = {'serve': ('server.cli', 'run the server')}\n", "names 'server.cli'"),
        ("BOT = 'bots.tree:Minimum'\n", "names 'bots.tree:Minimum'"),
    ],
)
def test_the_core_may_not_reach_the_project_even_through_strings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, flagged: str
) -> None:
    """How the old ``moo/cli.py`` started the applications: a table of module names and
    ``importlib``; the core must hold no such table."""
    fake = tmp_path / "moo" / "sneaky.py"
    fake.parent.mkdir()
    fake.write_text('"""Prose may say server.cli."""\n' + source)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (found,) = violations()
    assert found.startswith("moo/sneaky.py:") and flagged in found


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bots").mkdir()
    (tmp_path / "bots" / "a.py").write_text("from bots.b import thing\n")
    (tmp_path / "bots" / "b.py").write_text("def thing():\n    from bots import a\n")
    (tmp_path / "bots" / "c.py").write_text("import bots.a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert cycles(import_graph()) == [["bots.a", "bots.b"]]


def test_relative_imports_resolve_inside_their_package() -> None:
    names = [name for _, name in imported_modules(ROOT / "bots" / "solver" / "full.py")]
    assert "bots.solver.core" in names


#: The modules that open WebSocket connections themselves instead of through the SDK's socket
#: (clients/sdk/wire.py), each with its written reason ("Why ... SDK") at the top.
OWN_SOCKETS = frozenset({
    "clients/sdk/wire.py",
    "bench/flood.py",
    "bench/fuzz/sockets.py",
    "bench/harness/player.py",
    "bench/rawbot.py",
    "bench/server_bench.py",
    "tests/server/test_conformance.py",
    "tests/server/test_hostile.py",
    "tests/server/test_server_http.py",
})


def _opens_sockets(path: Path) -> bool:
    """True if the module imports websockets' client ``connect``/``unix_connect``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return any(
        isinstance(node, ast.ImportFrom) and (node.module or "").startswith("websockets")
        and any(alias.name in ("connect", "unix_connect") for alias in node.names)
        for node in ast.walk(tree)
    )


def test_one_protocol_client() -> None:
    """Every program talks to a server through the SDK (issue 18, "one client"): only the
    SDK's socket and the few modules with a written reason open connections of their own."""
    opening = {
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if _opens_sockets(path)
    }
    assert opening <= OWN_SOCKETS, sorted(opening - OWN_SOCKETS)
    for name in OWN_SOCKETS - {"clients/sdk/wire.py"}:
        doc = ast.get_docstring(ast.parse((ROOT / name).read_text(encoding="utf-8"))) or ""
        assert "SDK" in doc, f"{name} opens its own sockets without saying why not the SDK"
