"""Old import path of :mod:`bots.external` (external programs as bots), kept for code written
against it; new code imports :mod:`bots.external`."""

from bots.external import (
    DEFAULT_MOVE_TIMEOUT,
    MAX_COMMENTS,
    MAX_LINE,
    PROTOCOL_VERSION,
    BotFailure,
    ExternalBot,
    ExternalStrategy,
    create_strategy,
    split_command,
)

__all__ = [
    "DEFAULT_MOVE_TIMEOUT",
    "MAX_COMMENTS",
    "MAX_LINE",
    "PROTOCOL_VERSION",
    "BotFailure",
    "ExternalBot",
    "ExternalStrategy",
    "create_strategy",
    "split_command",
]
