"""Remember resume tokens between runs, per server and player name.

The server issues a token only on a name's first ``hello`` and from then on refuses the name
without it; a client that forgot it could never use that name (or rejoin its matches) again.
So ``moo play`` and ``moo bot`` keep them in a small JSON file, by default
``$XDG_CONFIG_HOME/moo/tokens.json`` (``~/.config/moo/tokens.json``), mode 0600 because a token
is a password for the name. ``MOO_TOKENS`` overrides the path.

Why tokens are keyed by the server (:func:`server_key`) and not by the URL as typed: one
server has many spellings (``ws://127.0.0.1:8765/``, ``ws://localhost:8765``,
``ws://LOCALHOST:8765/``), and a token saved under one spelling was not found under another,
so the server refused the person's own name as another player's (issue 32). Entries written
under the old URL keys are still found, and rewritten under the server's key when next saved.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["TokenStore", "default_path", "server_key"]

#: the port a URL without one means
_DEFAULT_PORTS = {"ws": 80, "wss": 443, "http": 80, "https": 443}


def _host(name: str) -> str:
    """A host name as the key has it: lower case, no trailing dot, IPv6 compressed; every
    loopback address (``localhost``, ``127.0.0.0/8``, ``::1``) is ``localhost``, because all
    of them reach this machine's server."""
    host = name.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return "localhost"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.is_loopback:
        return "localhost"
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


def server_key(url: str) -> str:
    """The server a URL reaches, as ``scheme://host:port``: the scheme (``ws``/``wss``; the
    page's ``http``/``https`` count as the same), the normalised host and the port, explicit
    or the scheme's default. The path is not part of it (one arena per host and port)."""
    parts = urlsplit(url.strip())
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme.lower(), parts.scheme.lower())
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = _DEFAULT_PORTS.get(scheme, 0)
    return f"{scheme}://{_host(parts.hostname or '')}:{port}"


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
        return f"{server_key(url)} {name.lower()}"

    @staticmethod
    def _old_keys(data: dict[str, str], url: str, name: str) -> list[str]:
        """Entries of the store's first format (``URL/ name``, the URL as typed) that belong
        to the same server and name."""
        server, suffix = server_key(url), f"/ {name.lower()}"
        return [key for key in data
                if key.endswith(suffix) and server_key(key[: -len(suffix)]) == server]

    def get(self, url: str, name: str) -> str | None:
        data = self._load()
        token = data.get(self._key(url, name))
        if token is None:
            old = self._old_keys(data, url, name)
            token = data[old[-1]] if old else None
        return token

    def put(self, url: str, name: str, token: str) -> None:
        data = self._load()
        for key in self._old_keys(data, url, name):
            del data[key]  # migrated: the server's key below replaces them
        data[self._key(url, name)] = token
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
