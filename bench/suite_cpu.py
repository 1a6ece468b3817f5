"""The suite's CPU, summed up from a ``MOO_TEST_CPU`` file (tests/cpu_usage.py).

    MOO_TEST_CPU=/tmp/cpu.jsonl ./dev test
    python -m bench.suite_cpu /tmp/cpu.jsonl [--top 25] [--json]

By folder and by file: tests, wall seconds, CPU seconds (the test process and the children it
reaped); then the tests that took the most CPU. On two cores the suite cannot end sooner than
its CPU over two, whatever the workers: that, not the wall times a busy machine stretches, is
what to cut.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def load(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            row["total"] = row["cpu"] + row["children"]
            rows.append(row)
    return rows


def grouped(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Rows summed by ``folder`` (tests/<folder>/) or ``file``, the most CPU first."""
    sums: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"tests": 0, "wall": 0.0, "cpu": 0.0, "children": 0.0, "total": 0.0})
    for row in rows:
        path = row["test"].split("::")[0]
        parts = path.split("/")
        name = "/".join(parts[:2]) if key == "folder" and len(parts) > 2 else path
        s = sums[name]
        s["tests"] += 1
        for k in ("wall", "cpu", "children", "total"):
            s[k] += row[k]
    out = [{"name": k, **{f: round(v, 1) if isinstance(v, float) else v for f, v in s.items()}}
           for k, s in sums.items()]
    return sorted(out, key=lambda s: -s["total"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.suite_cpu", description=__doc__.split(
        "\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--top", type=int, default=25, help="tests listed (default 25)")
    ap.add_argument("--json", action="store_true", help="the summary as JSON")
    args = ap.parse_args(argv)
    try:
        rows = load(args.file)
    except (OSError, ValueError, KeyError) as exc:
        print(f"suite_cpu: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    tests = sorted(rows, key=lambda r: -r["total"])[: args.top]
    summary = {
        "tests": len(rows),
        "wall": round(sum(r["wall"] for r in rows), 1),
        "cpu": round(sum(r["total"] for r in rows), 1),
        "folders": grouped(rows, "folder"),
        "files": grouped(rows, "file")[: args.top],
        "top": [{k: r[k] for k in ("test", "wall", "cpu", "children", "total")} for r in tests],
    }
    if args.json:
        json.dump(summary, sys.stdout, indent=1)
        print()
        return 0
    print(f"{summary['tests']} tests: {summary['wall']} test-seconds of wall, "
          f"{summary['cpu']} s of CPU (over 2 cores: at least {summary['cpu'] / 2:.0f} s)")
    for title, key in (("by folder", "folders"), ("by file", "files")):
        print(f"\n{title}: tests, wall s, CPU s (process + children)")
        for s in summary[key]:
            print(f"  {s['name']:<60} {s['tests']:>5} {s['wall']:>8.1f} {s['total']:>8.1f}"
                  f"  ({s['cpu']:.1f} + {s['children']:.1f})")
    print("\nthe tests that took the most CPU: wall s, CPU s")
    for r in summary["top"]:
        print(f"  {r['test'][:100]:<100} {r['wall']:>7.1f} {r['total']:>7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
