"""Server addresses as people type them: one check and one hint for every command.

It sits in the core (no I/O, nothing but the standard library) so that a command which needs
no connection at all -- ``moo analyse FILE`` -- can accept ``--url`` without importing the
WebSocket client.
"""

from __future__ import annotations

import argparse

__all__ = ["ws_url"]


def ws_url(text: str) -> str:
    """argparse type of one ``--url``: a ``ws://`` or ``wss://`` URL with a host.

    The usual slips (``localhost:8765``, the page's ``http://`` address) get the URL that was
    probably meant, instead of a traceback from deep inside the WebSocket library.
    """
    from urllib.parse import urlsplit  # only when a --url is given: not on every start

    parts = urlsplit(text)
    if parts.scheme in ("ws", "wss") and parts.hostname:
        try:
            parts.port  # noqa: B018 -- raises on a port that is not a number in range
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad port in {text!r}") from None
        return text
    if parts.scheme in ("http", "https") and parts.hostname:
        hint = f"ws{'s' if parts.scheme == 'https' else ''}://{parts.netloc}{parts.path or '/'}"
    elif "://" not in text and text.strip():
        hint = f"ws://{text.strip().rstrip('/')}/"
    else:
        hint = "ws://127.0.0.1:8765/"
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a WebSocket URL; a server's address is ws://HOST:PORT/ "
        f"(did you mean {hint}?)"
    )
