"""Remember resume tokens between runs, per server URL and player name.

The server issues a token only on a name's first ``hello`` and from then on refuses the name
without it; a client that forgot it could never use that name (or rejoin its matches) again.
So ``moo play`` and ``moo bot`` keep them in a small JSON file, by default
``$XDG_CONFIG_HOME/moo/tokens.json`` (``~/.config/moo/tokens.json``), mode 0600 because a token
is a password for the name. ``MOO_TOKENS`` overrides the path.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

__all__ = ["TokenStore", "default_path"]


def default_path() -> Path:
    env = os.environ.get("MOO_TOKENS")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "moo" / "tokens.json"


class TokenStore:
    """A best-effort store: an unreadable or unwritable file just means no remembered tokens."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_path()

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    @staticmethod
    def _key(url: str, name: str) -> str:
        return f"{url.rstrip('/')}/ {name.lower()}"

    def get(self, url: str, name: str) -> str | None:
        return self._load().get(self._key(url, name))

    def put(self, url: str, name: str, token: str) -> None:
        data = self._load()
        data[self._key(url, name)] = token
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
