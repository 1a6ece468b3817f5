"""Build hook for the native parts (the solver's hot loop); everything else is in pyproject.toml."""

import os
import platform
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).parent
# The solver's probe kernel uses SSSE3 byte shuffles and popcnt when the compiler may emit
# them (every x86-64 CPU of the last fifteen years has both); elsewhere it falls back to C.
SIMD = ["-mssse3", "-mpopcnt"] if platform.machine().lower() in ("x86_64", "amd64") else []
NATIVE = [
    ("bots.solver._native", ["bots/solver/_native.c"]),
    ("bots.solver._table", ["bots/solver/_table.c"]),
    ("bots.solver._race", ["bots/solver/_race.c"]),
    ("bots.solver._mastermind", ["bots/solver/_mastermind.c"]),
    ("bots.judge._search", ["bots/judge/_search.c"]),
]

setup(
    # the five modules compiled side by side: a fresh clone's setup waits on them (about 10 s
    # of -O3 one after another, _native.c twice)
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
    ext_modules=[
        Extension(
            name,
            sources,
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", *SIMD],
            # _mastermind.c is _native.c built a second time under another module name.
            depends=["bots/solver/_native.c", "bots/solver/_native.h"],
        )
        for name, sources in NATIVE
        if all((HERE / s).exists() for s in sources)
    ]
)
