"""Plain HTTP on the WebSocket port: ``GET /healthz`` and the browser client's files.

``GET /match/<match_id>``, ``GET /player/<name>``, ``GET /tournament/<tournament_id>`` and
``GET /bot/<bot_id>`` serve the client's ``index.html`` too, so a finished match, a player's
page, a tournament or a hosted bot's page is a link that can be shared: the page reads its
path and loads the rest over the WebSocket (docs/protocol.md, "History and players").

websockets hands every request to ``process_request`` before the upgrade; requests that are
not WebSocket upgrades are answered here so one port serves people, programs and probes.
Static files are looked up only among the files that exist under the static root at the time
of the request, after normalising the path, so ``..``, encoded separators, symlinks out of the
root and absolute paths can never reach a file outside it.
"""

from __future__ import annotations

import json
import mimetypes
import os
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from websockets.datastructures import Headers
from websockets.http11 import Request, Response

__all__ = ["HttpFront", "default_static_dir"]

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".wasm": "application/wasm",
    ".txt": "text/plain; charset=utf-8",
}
_MAX_STATIC_BYTES = 8 * 1024 * 1024
#: page routes of the browser client: /<prefix>/<one segment> -> index.html
_PAGE_ROUTES = ("match", "player", "tournament", "bot")


def default_static_dir() -> Path:
    """The repository's ``clients/web/`` (also inside an installed package)."""
    return Path(__file__).resolve().parent.parent / "clients" / "web"


def response(status: HTTPStatus, body: bytes, content_type: str, **extra: str) -> Response:
    headers = Headers()
    headers["Content-Type"] = content_type
    headers["Content-Length"] = str(len(body))
    headers["Cache-Control"] = "no-cache"
    headers["X-Content-Type-Options"] = "nosniff"
    for key, value in extra.items():
        headers[key.replace("_", "-")] = value
    return Response(status.value, status.phrase, headers, body)


def text_response(status: HTTPStatus, text: str) -> Response:
    return response(status, (text + "\n").encode(), "text/plain; charset=utf-8")


def _is_page_route(path: str) -> bool:
    """``/match/<id>``, ``/player/<name>``, ``/tournament/<id>`` or ``/bot/<id>``: exactly one
    non-empty segment after the prefix."""
    parts = path.split("/")
    return len(parts) == 3 and parts[0] == "" and parts[1] in _PAGE_ROUTES and bool(parts[2])


class HttpFront:
    """Answers non-upgrade requests; returns None for WebSocket upgrades on ``/``."""

    def __init__(self, static_dir: str | Path | None, health: Callable[[], dict[str, Any]]):
        self.root = Path(static_dir) if static_dir else default_static_dir()
        self.health = health

    def handle(self, request: Request) -> Response | None:
        upgrade = request.headers.get("Upgrade", "")
        if "websocket" in upgrade.lower():
            return None
        path = urlsplit(request.path).path
        if path == "/healthz":
            body = json.dumps(self.health(), separators=(",", ":")).encode()
            return response(HTTPStatus.OK, body, "application/json")
        if _is_page_route(path):
            return self.static("/index.html")
        return self.static(path)

    def static(self, raw_path: str) -> Response:
        path = unquote(raw_path)
        if "\x00" in path or "\\" in path:
            return text_response(HTTPStatus.BAD_REQUEST, "bad path")
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if any(p == ".." or p.startswith(".") for p in parts):
            return text_response(HTTPStatus.NOT_FOUND, "not found")
        try:
            root = self.root.resolve(strict=True)
        except OSError:
            return text_response(HTTPStatus.NOT_FOUND, "no browser client installed on this server")
        target = root.joinpath(*parts) if parts else root
        if target.is_dir():
            target = target / "index.html"
        try:
            real = target.resolve(strict=True)
        except OSError:
            return text_response(HTTPStatus.NOT_FOUND, "not found")
        if not real.is_relative_to(root) or not real.is_file():
            return text_response(HTTPStatus.NOT_FOUND, "not found")
        try:
            if os.path.getsize(real) > _MAX_STATIC_BYTES:
                return text_response(HTTPStatus.NOT_FOUND, "not found")
            body = real.read_bytes()
        except OSError:
            return text_response(HTTPStatus.NOT_FOUND, "not found")
        kind = _TYPES.get(real.suffix.lower()) or (
            mimetypes.guess_type(real.name)[0] or "application/octet-stream"
        )
        return response(HTTPStatus.OK, body, kind)
