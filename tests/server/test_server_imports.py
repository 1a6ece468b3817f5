"""The server's modules import one another one way only: no cycles, not even for typing.

``server/app.py`` wires everything and hands connections to ``server/session.py``; the session
is typed against ``server/context.py`` instead of importing the app back. Every import counts
here, also those under ``TYPE_CHECKING`` and inside functions, because a cycle hidden there is
still two modules that cannot be understood (or moved) one without the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "server"


def server_imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(SERVER.glob("*.py")):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
                if node.module == "server":  # from server import x
                    names = [f"server.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            deps |= {n for n in names if n.startswith("server.")}
        graph[f"server.{path.stem}"] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path of module names, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_server_package_has_no_import_cycle() -> None:
    graph = server_imports()
    assert "server.session" in graph and "server.app" in graph
    assert "server.session" in graph["server.app"]
    assert "server.app" not in graph["server.session"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above would catch the old app <-> session pair (and longer loops)."""
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
