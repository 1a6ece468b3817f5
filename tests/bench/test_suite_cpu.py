"""bench/suite_cpu.py sums tests/cpu_usage.py's lines by folder and file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import suite_cpu


def test_lines_are_summed_by_folder_and_file_the_most_cpu_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {"test": "tests/a/test_x.py::t1", "wall": 2.0, "cpu": 0.5, "children": 1.0},
        {"test": "tests/a/test_x.py::t2", "wall": 1.0, "cpu": 0.3, "children": 0.0},
        {"test": "tests/b/test_y.py::t3[p]", "wall": 9.0, "cpu": 0.5, "children": 0.0},
        {"test": "tests/test_top.py::t4", "wall": 0.5, "cpu": 3.0, "children": 0.0},
    ]
    path = tmp_path / "cpu.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert suite_cpu.main([str(path), "--json", "--top", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["tests"], out["wall"], out["cpu"]) == (4, 12.5, 5.3)
    assert [(f["name"], f["tests"], f["total"]) for f in out["folders"]] == [
        ("tests/test_top.py", 1, 3.0), ("tests/a", 2, 1.8), ("tests/b", 1, 0.5)]
    assert [f["name"] for f in out["files"]] == ["tests/test_top.py", "tests/a/test_x.py"]
    assert [t["test"] for t in out["top"]] == ["tests/test_top.py::t4", "tests/a/test_x.py::t1"]


def test_an_unreadable_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert suite_cpu.main([str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("suite_cpu: cannot read")
