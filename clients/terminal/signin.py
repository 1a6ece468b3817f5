"""Signing in to a name with its password, and setting that password (``moo play --sign-in``,
``--password-file``, ``--set-password``).

Apart from the rest because it is the only part that handles a secret of the person's own:
the password is read once, without echo, and never shown or stored.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass

from clients.sdk import Client, ServerError, Welcome
from clients.terminal.screen import Screen


def read_password(args: argparse.Namespace) -> str | None:
    """The password for signing in: ``--password-file``'s first line, or typed at a hidden
    prompt with ``--sign-in``; None when neither was asked for. Raises ValueError (one line
    for the person) when the file cannot be used."""
    if getattr(args, "password_file", None):
        try:
            with open(args.password_file, encoding="utf-8") as fh:
                password = fh.readline().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            raise ValueError(f"cannot read --password-file {args.password_file}: {why}") from None
        if not password:
            raise ValueError(f"--password-file {args.password_file}: the first line is empty")
        return password
    if getattr(args, "sign_in", False):
        return getpass.getpass("PASSWORD: ")
    return None


async def set_password(client: Client, welcome: Welcome, screen: Screen) -> int:
    """``moo play --set-password``: secure (or change) this name's password, then exit."""

    async def ask(prompt: str) -> str:  # off the loop: the connection keeps answering pings
        return await asyncio.to_thread(getpass.getpass, prompt)

    old = await ask("CURRENT PASSWORD: ") if welcome.secured else None
    new = await ask("NEW PASSWORD (8-128 CHARACTERS): ")
    if await ask("AGAIN: ") != new:
        screen.say("THE TWO PASSWORDS DIFFER. NOTHING CHANGED.")
        return 1
    try:
        await client.set_password(new, old)
    except ServerError as exc:
        screen.say(f"THE SERVER SAID NO: {exc.message}")
        return 1
    screen.say(f"PASSWORD SET. SIGN IN AS {client.name} ANYWHERE WITH --sign-in.")
    return 0
