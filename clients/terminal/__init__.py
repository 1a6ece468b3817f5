"""``moo play``: MOO for a person at a terminal, online or solo like the 1971 BASIC program.

Plain, line-oriented output on purpose: it works on any terminal, over ssh, in a pty under
test, and in a screen reader, and it keeps the feel of the teletype original (``TYPE 4
NUMBERS?``, ``BB,CC``, ``GAME 3: TRIES = 6, AVERAGE = 6``). Mistyped guesses are explained with
the rules' own messages and never counted, which the 1971 program also did.

Online play goes through the SDK (:mod:`clients.sdk`). Standard input is read by one thread that
feeds an asyncio queue, so the screen can show the opponent's moves while we wait for a line.

One module per concern: :mod:`.text` (what is printed, how a typed line is read), :mod:`.solo`
(offline play), :mod:`.screen` (standard input and the screen online), :mod:`.match` (one
online match), :mod:`.signin` (passwords), :mod:`.online` (the session around the matches) and
:mod:`.cli` (the command's options). This package re-exports what ``moo`` and the tests use.
"""

from clients.terminal.cli import configure, main
from clients.terminal.online import play_online
from clients.terminal.solo import play_solo
from clients.terminal.text import Entry, choices_text, parse_entry, rules_page, show_response

__all__ = [
    "Entry",
    "choices_text",
    "configure",
    "main",
    "parse_entry",
    "play_online",
    "play_solo",
    "rules_page",
    "show_response",
]
