"""Imports point one way: clients -> server -> bots -> moo (README, "Layout").

Checked by parsing every module's source with ``ast``, so an arrow the wrong way fails here
even when it hides inside a function (a lazy import), under ``TYPE_CHECKING``, or behind
``importlib.import_module("literal")``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: lower may never import higher
RANK = {"moo": 0, "bots": 1, "server": 2, "clients": 3}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, relative ones resolved."""
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
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def violations() -> list[str]:
    out = []
    for top, rank in RANK.items():
        for path in sorted((ROOT / top).rglob("*.py")):
            for line, name in imported_modules(path):
                target = name.split(".")[0]
                if target in RANK and RANK[target] > rank:
                    out.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return out


def test_imports_point_from_clients_to_server_to_bots_to_moo() -> None:
    assert violations() == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import clients.sdk\n", "clients.sdk"),
        ("def f():\n    from server.publisher import Publisher\n", "server.publisher"),
        ("import importlib\nimportlib.import_module('clients.external')\n", "clients.external"),
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


def test_relative_imports_resolve_inside_their_package() -> None:
    names = [name for _, name in imported_modules(ROOT / "bots" / "solver" / "full.py")]
    assert "bots.solver.core" in names
