"""Build hook for the native parts (the solver's hot loop); everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).parent
NATIVE = [
    ("bots.solver._native", ["bots/solver/_native.c"]),
]

setup(
    ext_modules=[
        Extension(
            name,
            sources,
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra"],
        )
        for name, sources in NATIVE
        if all((HERE / s).exists() for s in sources)
    ]
)
