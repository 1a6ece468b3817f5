"""Every error the arena raises on purpose, in one hierarchy.

Each class carries a stable ``code`` that the protocol sends to clients (``{"type": "error",
"code": ...}``), so clients can branch on the code while people read the message. Codes never
change meaning once released; new situations get new subclasses.

::

    MooError
    ├── InvalidCode (ValueError)            code="invalid_code"
    │   ├── WrongLength                      code="wrong_length"
    │   ├── RepeatedSymbol                   code="repeated_symbol"
    │   ├── UnknownSymbol                    code="unknown_symbol"
    │   └── moo.words.NotAWord               code="not_a_word"
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
    │   ├── GuessTaken                       code="guess_taken"
    │   ├── GuessAhead                       code="guess_ahead"
    │   ├── MatchFinished                    code="match_finished"
    │   ├── UnknownMatch                     code="unknown_match"
    │   ├── NoSuchMatch                      code="no_such_match"
    │   └── NotFinished                      code="not_finished"
    ├── LobbyError                           code="lobby_error"
    │   ├── NameTaken                        code="name_taken"
    │   ├── InvalidName                      code="invalid_name"
    │   ├── UnknownPlayer                    code="unknown_player"
    │   ├── UnknownRoom                      code="unknown_room"
    │   ├── UnknownTournament                code="unknown_tournament"
    │   ├── UnknownBot                       code="unknown_bot"
    │   ├── NotYourBot                       code="not_your_bot"
    │   ├── UnknownUpload                    code="unknown_upload"
    │   ├── UnknownJob                       code="unknown_job"
    │   ├── UnknownStrategy                  code="unknown_strategy"
    │   ├── BadToken                         code="bad_token"
    │   ├── BadCredentials                   code="bad_credentials"
    │   ├── TooManyAttempts                  code="too_many_attempts"
    │   ├── TooManyNames                     code="too_many_names"
    │   ├── InMatch                          code="in_match"
    │   ├── NoRoom                           code="no_room"
    │   ├── WrongPool                        code="wrong_pool"
    │   ├── BadRules (ValueError)            code="bad_rules"
    │   ├── RulesNotOffered                  code="rules_not_offered"
    │   ├── BotUnsupported                   code="bot_unsupported"
    │   └── AssistRated                      code="assist_rated"
    │   └── NotAvailable                     code="not_available"
    │       └── Moving                           code="not_available"
    │       └── moo.words.NoDictionary       (no word list on this machine)
    ├── RateLimited                          code="rate_limited"
    ├── UsageError                           code="usage" (command line only)
    └── StorageError                         code="storage_unavailable"
"""

from __future__ import annotations

__all__ = [
    "AlreadySet",
    "AssistRated",
    "BadCredentials",
    "BadRules",
    "BadToken",
    "BotUnsupported",
    "DecodeError",
    "GuessAhead",
    "GuessTaken",
    "InMatch",
    "InvalidCode",
    "InvalidName",
    "LobbyError",
    "MatchError",
    "MatchFinished",
    "MessageTooLarge",
    "MooError",
    "Moving",
    "NameTaken",
    "NoRoom",
    "NoSuchMatch",
    "NotAvailable",
    "NotFinished",
    "NotHello",
    "NotYourBot",
    "NotYourSeat",
    "NotYourTurn",
    "ProtocolError",
    "RateLimited",
    "RepeatedSymbol",
    "RequestReused",
    "RulesNotOffered",
    "SchemaError",
    "StorageError",
    "TooManyAttempts",
    "TooManyNames",
    "UnknownBot",
    "UnknownJob",
    "UnknownMatch",
    "UnknownMessage",
    "UnknownPlayer",
    "UnknownRoom",
    "UnknownStrategy",
    "UnknownSymbol",
    "UnknownTournament",
    "UnknownUpload",
    "UsageError",
    "WrongLength",
    "WrongPhase",
    "WrongPool",
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


class GuessTaken(MatchError):
    """A ``guess`` numbered ``n`` where the seat's guess ``n`` was already made with another
    code. Numbers make a retried guess safe (the same number and code again is answered with
    the original event); a different code under a taken number is a client that lost count,
    and playing it would be a guess the player never meant to make twice. ``expected`` is the
    number the next guess takes."""

    code = "guess_taken"

    def __init__(self, message: str, expected: int) -> None:
        super().__init__(message)
        self.expected = expected


class GuessAhead(MatchError):
    """A ``guess`` numbered past the seat's next guess: an earlier one never arrived (or was
    refused), so this one is refused rather than counted under a number it does not have.
    ``expected`` is the number the next guess takes."""

    code = "guess_ahead"

    def __init__(self, message: str, expected: int) -> None:
        super().__init__(message)
        self.expected = expected


class MatchFinished(MatchError):
    code = "match_finished"


class UnknownMatch(MatchError):
    code = "unknown_match"


class NoSuchMatch(MatchError):
    """``match_record`` of a match id the server never stored."""

    code = "no_such_match"


class NotFinished(MatchError):
    """``match_record`` of a match still being played: its secrets are not public yet."""

    code = "not_finished"


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


class UnknownTournament(LobbyError):
    """A tournament request naming a tournament the server does not have."""

    code = "unknown_tournament"


class UnknownBot(LobbyError):
    """A ladder request naming a hosted bot the server does not have (docs/protocol.md,
    "Ladder")."""

    code = "unknown_bot"


class NotYourBot(LobbyError):
    """Changing a hosted bot of another player: a bot belongs to the player who submitted it."""

    code = "not_your_bot"


class UnknownUpload(LobbyError):
    """A program upload that is not open on this connection (never, expired or used up)."""

    code = "unknown_upload"


class UnknownJob(LobbyError):
    """A bot worker's report about a job it does not hold (any more): its lease ran out, and
    the job went back to the queue or was given up, so the late report must change nothing."""

    code = "unknown_job"


class UnknownStrategy(LobbyError):
    code = "unknown_strategy"


class BadToken(LobbyError):
    code = "bad_token"


class BadCredentials(LobbyError):
    """A wrong password, or one for a name without a password, or for an unknown name: one
    code and one message for all, so nobody learns which names have passwords."""

    code = "bad_credentials"


class TooManyAttempts(LobbyError):
    """Too many failed sign-ins for this name or from this address; retry later."""

    code = "too_many_attempts"

    def __init__(self, message: str, retry_after_ms: int) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class TooManyNames(LobbyError):
    """Too many new names registered from this client address lately (each ``hello`` without
    a token or password asks for one); retry later, or ``hello`` with a token you have."""

    code = "too_many_names"

    def __init__(self, message: str, retry_after_ms: int) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class NotAvailable(LobbyError):
    code = "not_available"


class Moving(NotAvailable):
    """An unfinished match that no node runs right now (between its old node and the next):
    try again. A node that gets this for a client of another node sends it to the directory
    again rather than answering."""


class InMatch(LobbyError):
    """A person asked for a second match while one is unfinished (one live match at a time).

    ``match_id`` names the live match, so a client can take the player back to it; the error
    reply carries it.
    """

    code = "in_match"

    def __init__(self, message: str, match_id: str) -> None:
        super().__init__(message)
        self.match_id = match_id


class NoRoom(LobbyError):
    """``room_cancel`` with no open room of yours to close."""

    code = "no_room"


class WrongPool(LobbyError):
    """A queue pool that could never pair this player (a person in ``bots``, the programs'
    pool): refused at once instead of waiting forever."""

    code = "wrong_pool"


class BadRules(LobbyError, ValueError):
    """A ``rules`` object (or a ``--rules`` spec) that describes no playable game: the message
    says which part is wrong. Nothing is created."""

    code = "bad_rules"


class RulesNotOffered(LobbyError):
    """Well-formed rules that this server does not offer (its ``variants`` setting)."""

    code = "rules_not_offered"


class BotUnsupported(LobbyError):
    """``play_bot`` with rules the chosen hosted bot cannot play; the message lists those
    that can."""

    code = "bot_unsupported"


class AssistRated(LobbyError):
    """``assist: true`` in a rated request: the assistant is for practice matches only."""

    code = "assist_rated"


class RequestReused(LobbyError):
    """A ``request_id`` the player already used for a different request: the server answers
    a request id only with what it first did for it, so a new request needs a new id."""

    code = "request_reused"


class RateLimited(MooError):
    code = "rate_limited"


class StorageError(MooError):
    """The store cannot make an action durable, so the action is refused, not acknowledged."""

    code = "storage_unavailable"


class UsageError(MooError):
    """A person's mistake on the command line (a value out of range, options that do not go
    together, a file that is not there): ``moo`` prints it as one line and exits with status 2.
    Never sent over the protocol."""

    code = "usage"
