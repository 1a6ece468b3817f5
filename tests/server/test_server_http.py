"""Plain HTTP on the game port: health, the browser client's files, and what must not leak.

Why raw websockets here and not the SDK's socket: these tests look at the HTTP handshake itself
(status codes, headers, refused upgrades), below anything a protocol client does.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.patience import patience
from tests.server_support import running, server_settings


async def http_get(port: int, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """A raw HTTP/1.1 GET, so the path reaches the server exactly as written."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    extra = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}\r\n".encode())
    await writer.drain()
    async with asyncio.timeout(patience(5)):
        data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, hdrs, body


@pytest.fixture
def web(tmp_path: Path) -> Path:
    root = tmp_path / "web"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text("<!doctype html><title>MOO</title>")
    (root / "assets" / "app.js").write_text("console.log('moo')")
    (root / ".hidden").write_text("no")
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    return root


async def test_healthz_reports_json(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path)) as app:
        status, headers, body = await http_get(app.port, "/healthz")
        assert status == 200 and headers["content-type"] == "application/json"
        health = json.loads(body)
        assert health["status"] == "ok" and health["live_matches"] == 0


async def test_static_files_are_served(tmp_path: Path, web: Path) -> None:
    async with running(server_settings(tmp_path, static_dir=str(web))) as app:
        status, headers, body = await http_get(app.port, "/")
        assert status == 200 and body.startswith(b"<!doctype html>")
        assert headers["content-type"].startswith("text/html")
        status, headers, body = await http_get(app.port, "/assets/app.js?v=1")
        assert status == 200 and headers["content-type"].startswith("text/javascript")
        assert (await http_get(app.port, "/index.html"))[0] == 200


@pytest.mark.parametrize(
    "path",
    [
        "/../secret.txt",
        "/assets/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/assets/%2e%2e%2f%2e%2e%2fsecret.txt",
        "/..%5csecret.txt",
        "//etc/passwd",
        "/%00index.html",
        "/.hidden",
        "/link.txt",
        "/nope.html",
    ],
)
async def test_no_path_escapes_the_static_root(tmp_path: Path, web: Path, path: str) -> None:
    async with running(server_settings(tmp_path, static_dir=str(web))) as app:
        status, _, body = await http_get(app.port, path)
        assert status in (400, 404)
        assert b"SECRET" not in body and b"root:" not in body


async def test_missing_client_is_a_clear_404(tmp_path: Path) -> None:
    async with running(server_settings(tmp_path, static_dir=str(tmp_path / "none"))) as app:
        status, _, body = await http_get(app.port, "/")
        assert status == 404 and b"no browser client" in body


async def test_browser_origins_are_checked(tmp_path: Path) -> None:
    settings = server_settings(tmp_path, origins=["https://moo.example"])
    async with running(settings) as app:
        url = f"ws://127.0.0.1:{app.port}/"
        with pytest.raises(InvalidStatus) as refused:
            await connect(url, origin="https://evil.example")  # type: ignore[arg-type]
        assert refused.value.response.status_code == 403
        ok = await connect(url, origin="https://moo.example")  # type: ignore[arg-type]
        await ok.close()
        programs = await connect(url)  # no Origin header at all
        assert programs.subprotocol is None
        await programs.close()
    async with running(server_settings(tmp_path)) as app:
        same = f"http://127.0.0.1:{app.port}"
        ws = await connect(f"ws://127.0.0.1:{app.port}/", origin=same)  # type: ignore[arg-type]
        await ws.close()
        with pytest.raises(InvalidStatus):
            await connect(
                f"ws://127.0.0.1:{app.port}/", origin="http://elsewhere:1"  # type: ignore[arg-type]
            )
