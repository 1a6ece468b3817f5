"""Seams, not patches: no object in ``server/`` replaces another's methods or reaches into
another module's private names (docs/cluster.md, "Design").

The cluster used to work by assigning its own functions over the arena's and the lobby's
methods at run time and by calling their private helpers; which ``act`` ran depended on a
patch. These checks read every module of ``server/`` with :mod:`ast` and fail on:

* an assignment to an attribute of another object whose value is a method, a function or a
  lambda (``arena.act = self.act``), and any ``setattr``;
* ``x._name`` where ``x`` is not ``self``/``cls``/``super()`` (another object's private
  attribute or method, or a module's private function), and ``from m import _name``.

Each check is itself tested on a planted example, so it cannot pass by looking away.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "server"


def _method_names() -> set[str]:
    names: set[str] = set()
    for path in ROOT.glob("*/**/*.py"):
        if ".venv" in path.parts or "build" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(item.name)
    return names


def _is_own(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return (  # super()._hook: overriding a base class's own hook
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id == "super"
    )


def violations(source: str, where: str, methods: set[str]) -> list[str]:
    out = []
    tree = ast.parse(source)
    functions = {
        n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not (
            node.attr.startswith("__") and node.attr.endswith("__")
        ):
            if not _is_own(node.value):
                out.append(f"{where}:{node.lineno}: private name {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(f"{where}:{node.lineno}: imports private {alias.name}")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            replaces = isinstance(value, ast.Lambda) or (
                isinstance(value, ast.Attribute) and value.attr in methods
            ) or (isinstance(value, ast.Name) and value.id in functions)
            for target in targets:
                if isinstance(target, ast.Attribute) and not _is_own(target.value) and replaces:
                    out.append(f"{where}:{node.lineno}: replaces {ast.unparse(target)}")
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
        ):
            out.append(f"{where}:{node.lineno}: setattr")
    return out


def test_no_patches_and_no_private_names_in_server() -> None:
    methods = _method_names()
    found: list[str] = []
    for path in sorted(SERVER.glob("**/*.py")):
        found += violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)),
                            methods)
    assert found == [], "\n".join(found)


def test_the_checks_catch_planted_examples() -> None:
    methods = {"act", "leave"}
    planted = '''
from server.lobby import _free
def helper(): pass
class Bus:
    def __init__(self, arena, lobby):
        arena.act = self.act
        lobby.leave = lambda conn: None
        arena.on_move = helper
        setattr(lobby, "enqueue", self.enqueue)
        lobby._free("ann")
        self.store = arena._store
        self._own = 1          # fine: its own
        arena.player = "ann"   # fine: data, not a method
        super()._hook()        # fine: a base class's own hook
'''
    found = violations(planted, "x.py", methods)
    kinds = sorted(line.split(": ", 1)[1].split(" ")[0] for line in found)
    assert kinds == ["imports", "private", "private", "replaces", "replaces", "replaces",
                     "setattr"], found
