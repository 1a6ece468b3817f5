"""Settings: the embedded defaults, config/default.toml and the override order agree."""

from __future__ import annotations

import tomllib
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from server.settings import SECTIONS, ConfigError, Settings, load_settings
from tests.patience import patience

ROOT = Path(__file__).resolve().parents[2]


def test_default_toml_documents_exactly_the_embedded_defaults() -> None:
    data = tomllib.loads((ROOT / "config" / "default.toml").read_text())
    flat = {k: v for section in data.values() for k, v in section.items()}
    defaults = asdict(Settings())
    assert flat == defaults
    assert {k for keys in SECTIONS.values() for k in keys} == {f.name for f in fields(Settings)}
    assert set(data) == set(SECTIONS)
    for section, keys in SECTIONS.items():
        assert tuple(data[section]) == keys


def test_default_toml_loads_as_a_config_file() -> None:
    assert load_settings(ROOT / "config" / "default.toml", env={}) == Settings()


def test_precedence_file_then_env_then_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[server]\nport = 9001\nhost = "0.0.0.0"\n[match]\npacing = "free"\n')
    s = load_settings(cfg, env={"MOO_PORT": "9002", "MOO_ORIGINS": "https://a, https://b"})
    assert (s.port, s.host, s.pacing) == (9002, "0.0.0.0", "free")
    assert s.origins == ["https://a", "https://b"]
    s = load_settings(cfg, env={"MOO_PORT": "9002"}, overrides={"port": 9003, "host": None})
    assert (s.port, s.host) == (9003, "0.0.0.0")


@pytest.mark.parametrize(
    "text",
    [
        "[server]\nport = 'x'\n",
        "[server]\nnope = 1\n",
        "[nope]\nport = 1\n",
        "[match]\npacing = 'sideways'\n",
        "[server]\nport = 70000\n",
        "[limits]\nrate_burst = true\n",
        "not toml = = =",
    ],
)
def test_bad_config_files_are_refused_with_a_message(tmp_path: Path, text: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError):
        load_settings(cfg, env={})


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="MOO_PORT"):
        load_settings(env={"MOO_PORT": "eighty"})
    assert load_settings(env={"MOO_SHOW_GUESSES": "no"}).show_guesses is False


def test_serve_moves_startup_objects_out_of_the_collector() -> None:
    """moo serve's GC policy (server/cli.py tune_gc), checked in a fresh interpreter."""
    import subprocess
    import sys

    code = (
        "import gc; from server.cli import tune_gc; tune_gc(); "
        "print(gc.get_threshold(), gc.get_freeze_count() > 1000)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        timeout=patience(60),
    ).stdout.split(")")
    assert out[0] + ")" == "(20000, 50, 100)" and out[1].strip() == "True"
