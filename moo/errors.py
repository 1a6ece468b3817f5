"""Every error the arena raises on purpose, in one hierarchy.

Each class carries a stable ``code`` that the protocol sends to clients (``{"type": "error",
"code": ...}``), so clients can branch on the code while people read the message. Codes never
change meaning once released; new situations get new subclasses.

::

    MooError
    ├── InvalidCode (ValueError)            code="invalid_code"
    │   ├── WrongLength                      code="wrong_length"
    │   ├── RepeatedSymbol                   code="repeated_symbol"
    │   └── UnknownSymbol                    code="unknown_symbol"
    ├── ProtocolError                        code="bad_message"
    │   ├── DecodeError                      code="undecodable"
    │   ├── MessageTooLarge                  code="too_large"
    │   ├── UnknownMessage                   code="unknown_type"
    │   ├── NotHello                         code="not_hello"
    │   └── SchemaError                      code="bad_field"
    ├── MatchError                           code="match_error"
    │   ├── WrongPhase                       code="wrong_phase"
    │   ├── NotYourSeat                      code="not_your_seat"
    │   ├── NotYourTurn                      code="not_your_turn"
    │   ├── AlreadySet                       code="already_set"
    │   ├── MatchFinished                    code="match_finished"
    │   └── UnknownMatch                     code="unknown_match"
    ├── LobbyError                           code="lobby_error"
    │   ├── NameTaken                        code="name_taken"
    │   ├── InvalidName                      code="invalid_name"
    │   ├── UnknownPlayer                    code="unknown_player"
    │   ├── UnknownRoom                      code="unknown_room"
    │   ├── UnknownStrategy                  code="unknown_strategy"
    │   ├── BadToken                         code="bad_token"
    │   └── NotAvailable                     code="not_available"
    ├── RateLimited                          code="rate_limited"
    └── StorageError                         code="storage_unavailable"
"""

from __future__ import annotations

__all__ = [
    "AlreadySet",
    "BadToken",
    "DecodeError",
    "InvalidCode",
    "InvalidName",
    "LobbyError",
    "MatchError",
    "MatchFinished",
    "MessageTooLarge",
    "MooError",
    "NameTaken",
    "NotAvailable",
    "NotHello",
    "NotYourSeat",
    "NotYourTurn",
    "ProtocolError",
    "RateLimited",
    "RepeatedSymbol",
    "SchemaError",
    "StorageError",
    "UnknownMatch",
    "UnknownMessage",
    "UnknownPlayer",
    "UnknownRoom",
    "UnknownStrategy",
    "UnknownSymbol",
    "WrongLength",
    "WrongPhase",
]


class MooError(Exception):
    """Base of every deliberate error; ``code`` is the stable protocol error code."""

    code = "error"

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code


class InvalidCode(MooError, ValueError):
    """A secret or guess that breaks the rules; it is never counted."""

    code = "invalid_code"


class WrongLength(InvalidCode):
    code = "wrong_length"


class RepeatedSymbol(InvalidCode):
    code = "repeated_symbol"


class UnknownSymbol(InvalidCode):
    code = "unknown_symbol"


class ProtocolError(MooError):
    """A message that is not a well-formed protocol message."""

    code = "bad_message"


class DecodeError(ProtocolError):
    code = "undecodable"


class MessageTooLarge(ProtocolError):
    code = "too_large"


class UnknownMessage(ProtocolError):
    code = "unknown_type"


class SchemaError(ProtocolError):
    code = "bad_field"


class NotHello(ProtocolError):
    """Anything but ``hello`` as a connection's first message."""

    code = "not_hello"


class MatchError(MooError):
    """A well-formed action that the match cannot accept now."""

    code = "match_error"


class WrongPhase(MatchError):
    code = "wrong_phase"


class NotYourSeat(MatchError):
    code = "not_your_seat"


class NotYourTurn(MatchError):
    code = "not_your_turn"


class AlreadySet(MatchError):
    code = "already_set"


class MatchFinished(MatchError):
    code = "match_finished"


class UnknownMatch(MatchError):
    code = "unknown_match"


class LobbyError(MooError):
    code = "lobby_error"


class NameTaken(LobbyError):
    code = "name_taken"


class InvalidName(LobbyError):
    code = "invalid_name"


class UnknownPlayer(LobbyError):
    code = "unknown_player"


class UnknownRoom(LobbyError):
    code = "unknown_room"


class UnknownStrategy(LobbyError):
    code = "unknown_strategy"


class BadToken(LobbyError):
    code = "bad_token"


class NotAvailable(LobbyError):
    code = "not_available"


class RateLimited(MooError):
    code = "rate_limited"


class StorageError(MooError):
    """The store cannot make an action durable, so the action is refused, not acknowledged."""

    code = "storage_unavailable"
