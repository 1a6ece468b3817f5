"""Run a piece of test code in a new interpreter, for what must not run in a pytest-xdist worker.

The solvers' ``--jobs`` fork their worker pools, which is safe from the single-threaded
``moo solve`` but not from a process that has other threads: pytest-xdist's worker has
execnet's, and a child forked while one of them held a lock hung forever (seen in a run of the
suite on a busy machine).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def in_a_fresh_process(code: str) -> dict[str, Any]:
    """Run ``code``, which prints one JSON object last, in a new interpreter; that object."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
