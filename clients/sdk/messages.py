"""Typed server messages: one frozen dataclass per message type and per match event kind.

Clients branch on ``isinstance`` instead of string-matching ``msg["type"]`` so that a typo is a
mypy error rather than a silent miss. Parsing is lenient on purpose: protocol v1 promises only
*additive* changes, so unknown fields are ignored (kept in ``raw``) and unknown message types or
event kinds become :class:`UnknownMessage` / :class:`UnknownEvent` instead of exceptions; an old
client keeps working against a newer server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from moo.variants import GameRules, rules_from_dict

__all__ = [
    "Away",
    "Back",
    "ChallengeReceived",
    "ChallengeSent",
    "Connected",
    "Created",
    "Declined",
    "Disconnected",
    "ErrorReply",
    "Finished",
    "GuessMade",
    "History",
    "HistoryEntry",
    "Leaderboard",
    "LeaderboardRow",
    "LiveMatch",
    "MatchAnnounced",
    "MatchEvent",
    "MatchRecord",
    "MatchRef",
    "MatchesList",
    "Message",
    "PasswordSet",
    "PlayerInfo",
    "Pong",
    "Queued",
    "RematchOffer",
    "RematchSent",
    "Resigned",
    "Resumed",
    "RoomCreated",
    "RoundRevealed",
    "SecretSet",
    "SignedOut",
    "Started",
    "TimedOut",
    "TournamentAck",
    "TournamentInfo",
    "TournamentUpdate",
    "TournamentsList",
    "UnknownEvent",
    "UnknownMessage",
    "Unqueued",
    "Unwatched",
    "VsMinimum",
    "Watching",
    "Welcome",
    "parse",
    "tournament_info",
]


@dataclass(frozen=True)
class Message:
    """Base of everything the client yields; ``ref`` is the ``id`` of the request it answers."""

    raw: dict[str, Any] = field(repr=False, compare=False)
    ref: Any = None


# -- session and lobby ------------------------------------------------------------------------


@dataclass(frozen=True)
class MatchRef:
    """An unfinished match listed by ``welcome``: what a reconnecting client must resume."""

    match_id: str
    seat: int
    seq: int
    phase: str


@dataclass(frozen=True)
class Welcome(Message):
    name: str = ""
    protocol: int = 1
    server: str = ""
    token: str | None = None
    matches: tuple[MatchRef, ...] = ()
    #: the name has a password (it can be signed in to from any device)
    secured: bool = False


@dataclass(frozen=True)
class Pong(Message):
    pass


@dataclass(frozen=True)
class Queued(Message):
    pool: str = "any"
    pacing: str = "lockstep"


@dataclass(frozen=True)
class Unqueued(Message):
    pass


@dataclass(frozen=True)
class ChallengeSent(Message):
    challenge_id: str = ""
    to: str = ""


@dataclass(frozen=True)
class ChallengeReceived(Message):
    challenge_id: str = ""
    sender: str = ""
    pacing: str = "lockstep"


@dataclass(frozen=True)
class Declined(Message):
    challenge_id: str = ""


@dataclass(frozen=True)
class RoomCreated(Message):
    code: str = ""


@dataclass(frozen=True)
class RematchOffer(Message):
    match_id: str = ""


@dataclass(frozen=True)
class RematchSent(Message):
    """Our rematch offer is registered; the ``match`` follows when the opponent asks too.

    Not in docs/protocol.md v1 (the server sends it as the reply to ``rematch``).
    """

    match_id: str = ""


@dataclass(frozen=True)
class Watching(Message):
    """Reply to ``watch`` (not in docs/protocol.md v1): who plays, then the replayed events."""

    match_id: str = ""
    players: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Unwatched(Message):
    """Reply to ``unwatch`` (not in docs/protocol.md v1)."""

    match_id: str = ""


@dataclass(frozen=True)
class MatchAnnounced(Message):
    """``match``: you sit in a new match; its events follow."""

    match_id: str = ""
    seat: int = 0
    opponent: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    #: set when the opponent is a hosted tree bot playing a heuristic (docs/protocol.md)
    bot_note: str = ""

    @property
    def rules(self) -> GameRules:
        return rules_from_dict(dict(self.config.get("rules") or {}))

    @property
    def pacing(self) -> str:
        return str(self.config.get("pacing", "lockstep"))


@dataclass(frozen=True)
class TournamentInfo:
    """A hosted tournament as the server last described it (docs/protocol.md, "Tournaments").

    ``data`` is the whole object (``standings``, ``games``, ... as sent); the common fields
    are attributes."""

    tournament_id: str
    name: str
    status: str
    format: str
    round: int
    players: tuple[str, ...]
    data: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status == "finished"

    @property
    def standings(self) -> list[dict[str, Any]]:
        return list(self.data.get("standings") or [])

    @property
    def games(self) -> list[dict[str, Any]]:
        return list(self.data.get("games") or [])

    @property
    def game_count(self) -> int:
        """How many games were started in all: ``games`` holds only the most recent 200 of a
        long arena (docs/protocol.md), so its length is not the count."""
        count = self.data.get("game_count")
        return count if isinstance(count, int) else len(self.games)


@dataclass(frozen=True)
class TournamentUpdate(Message):
    """``tournament``: the reply to ``tournament_create`` / ``tournament_watch``, and the update
    participants and watchers get after every change."""

    tournament: TournamentInfo | None = None


@dataclass(frozen=True)
class TournamentsList(Message):
    """``tournaments``: summaries of the upcoming, running and recently finished ones."""

    tournaments: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class TournamentAck(Message):
    """``tournament_joined`` / ``tournament_left`` / ``tournament_unwatched``."""

    kind: str = ""
    tournament_id: str = ""


def tournament_info(data: dict[str, Any]) -> TournamentInfo:
    return TournamentInfo(
        tournament_id=str(data.get("tournament_id", "")), name=str(data.get("name", "")),
        status=str(data.get("status", "")), format=str(data.get("format", "")),
        round=int(data.get("round") or 0),
        players=tuple(str(p) for p in data.get("players") or ()), data=data,
    )


@dataclass(frozen=True)
class LiveMatch:
    match_id: str
    players: tuple[str, ...]
    pacing: str
    phase: str
    counts: tuple[int, ...]


@dataclass(frozen=True)
class MatchesList(Message):
    matches: tuple[LiveMatch, ...] = ()


@dataclass(frozen=True)
class VsMinimum:
    """Estimated score (win + half draw) against the minimum strategy, 95 % interval, from
    ``n`` finished matches (docs/export.md explains the method)."""

    score: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class LeaderboardRow:
    name: str
    rating: float | None
    games: int
    wins: int
    draws: int
    losses: int
    avg_guesses: float | None
    avg_time_s: float | None
    provisional: bool = True
    vs_minimum: VsMinimum | None = None


@dataclass(frozen=True)
class PasswordSet(Message):
    """``password_set``: the connection's name now has this password."""


@dataclass(frozen=True)
class SignedOut(Message):
    """``signed_out``: every other token of the name is revoked; ``token`` is this device's."""

    token: str = ""


@dataclass(frozen=True)
class HistoryEntry:
    """One finished match in a player's history, from that player's seat."""

    match_id: str
    players: tuple[str, ...]
    seat: int
    opponent: str
    result: str  # "win" | "loss" | "draw"
    reason: str
    counts: tuple[int, ...]
    config: dict[str, Any]
    rated: bool
    ended_at: int | None


@dataclass(frozen=True)
class History(Message):
    """A page of ``history``; pass ``next`` as ``cursor`` for the following one (None: done)."""

    player: str = ""
    matches: tuple[HistoryEntry, ...] = ()
    next: str | None = None


@dataclass(frozen=True)
class MatchRecord(Message):
    """``match_record``: every event of a finished match as a spectator sees it after the end."""

    match_id: str = ""
    players: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    events: tuple[MatchEvent, ...] = ()


@dataclass(frozen=True)
class PlayerInfo(Message):
    """``player``: rating, record, guess counts and the score against minimum."""

    name: str = ""
    rating: float | None = None
    provisional: bool = True
    mu: float | None = None
    sigma: float | None = None
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    #: guesses -> solved matches
    distribution: dict[int, int] = field(default_factory=dict)
    vs_minimum: VsMinimum | None = None


@dataclass(frozen=True)
class Leaderboard(Message):
    by: str = "rating"
    players: tuple[LeaderboardRow, ...] = ()


@dataclass(frozen=True)
class ErrorReply(Message):
    """``error``: the request (``ref``) changed nothing; ``code`` is stable, ``message`` human."""

    code: str = ""
    message: str = ""
    match_id: str | None = None


@dataclass(frozen=True)
class UnknownMessage(Message):
    """A message type this client version does not know (v1 allows additive types)."""

    type: str = ""


# -- connection life cycle (produced by the client itself, never sent by the server) -----------


@dataclass(frozen=True)
class Disconnected(Message):
    """The connection dropped; ``will_retry`` says whether the client reconnects by itself."""

    code: int | None = None
    reason: str = ""
    will_retry: bool = False


@dataclass(frozen=True)
class Connected(Message):
    """(Re)connected and welcomed; live matches have been asked to ``resume``."""

    welcome: Welcome | None = None
    reconnect: bool = False


# -- match events ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MatchEvent(Message):
    """``{type: event}``: one entry of a match's log as this client may see it."""

    match_id: str = ""
    seq: int = 0
    kind: str = ""
    at: int = 0


@dataclass(frozen=True)
class Created(MatchEvent):
    players: tuple[str, str] = ("", "")
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def rules(self) -> GameRules:
        return rules_from_dict(dict(self.config.get("rules") or {}))


@dataclass(frozen=True)
class SecretSet(MatchEvent):
    seat: int = 0
    #: Present only in the owner's own view.
    secret: str | None = None


@dataclass(frozen=True)
class Started(MatchEvent):
    commitments: tuple[str, ...] = ()


@dataclass(frozen=True)
class GuessMade(MatchEvent):
    """A guess was made. Which fields are filled depends on pacing and viewer (protocol.md)."""

    seat: int = 0
    n: int = 0
    guess: str | None = None
    bulls: int | None = None
    cows: int | None = None


@dataclass(frozen=True)
class RoundRevealed(MatchEvent):
    """Lockstep: both responses of round ``n``; ``results[seat] = (guess|None, bulls, cows)``."""

    n: int = 0
    results: tuple[tuple[str | None, int, int], ...] = ()


@dataclass(frozen=True)
class Away(MatchEvent):
    seat: int = 0


@dataclass(frozen=True)
class Back(MatchEvent):
    seat: int = 0


@dataclass(frozen=True)
class Resumed(MatchEvent):
    pass


@dataclass(frozen=True)
class Resigned(MatchEvent):
    seat: int = 0


@dataclass(frozen=True)
class TimedOut(MatchEvent):
    seat: int = 0
    clock: str = ""


@dataclass(frozen=True)
class Finished(MatchEvent):
    winner: int | None = None
    reason: str = ""
    counts: tuple[int, ...] = ()
    solved: tuple[bool, ...] = ()
    secrets: tuple[str | None, ...] = ()
    salts: tuple[str | None, ...] = ()
    commitments: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class UnknownEvent(MatchEvent):
    """An event kind this client version does not know; it still advances ``seq``."""


# -- parsing --------------------------------------------------------------------------------------


def _opt_int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _opt_float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _vs_minimum(value: Any) -> VsMinimum | None:
    if not isinstance(value, dict):
        return None
    return VsMinimum(
        score=float(value.get("score", 0.0)), low=float(value.get("low", 0.0)),
        high=float(value.get("high", 0.0)), n=int(value.get("n", 0)),
    )


def _history_entry(m: dict[str, Any]) -> HistoryEntry:
    return HistoryEntry(
        match_id=str(m.get("match_id", "")),
        players=tuple(str(p) for p in m.get("players") or ()),
        seat=int(m.get("seat", 0)),
        opponent=str(m.get("opponent", "")),
        result=str(m.get("result", "")),
        reason=str(m.get("reason", "")),
        counts=tuple(int(c) for c in m.get("counts") or ()),
        config=dict(m.get("config") or {}),
        rated=bool(m.get("rated", True)),
        ended_at=_opt_int(m.get("ended_at")),
    )


def _parse_account(kind: Any, msg: dict[str, Any], ref: Any) -> Message | None:
    """The accounts and history replies (docs/protocol.md); None for other types."""
    if kind == "password_set":
        return PasswordSet(raw=msg, ref=ref)
    if kind == "signed_out":
        return SignedOut(raw=msg, ref=ref, token=str(msg.get("token", "")))
    if kind == "history":
        return History(
            raw=msg, ref=ref, player=str(msg.get("player", "")),
            matches=tuple(_history_entry(m) for m in msg.get("matches") or ()
                          if isinstance(m, dict)),
            next=_opt_str(msg.get("next")),
        )
    if kind == "match_record":
        match_id = str(msg.get("match_id", ""))
        return MatchRecord(
            raw=msg, ref=ref, match_id=match_id,
            players=tuple(str(p) for p in msg.get("players") or ()),
            config=dict(msg.get("config") or {}),
            events=tuple(_parse_event({**e, "match_id": match_id}, None)
                         for e in msg.get("events") or () if isinstance(e, dict)),
        )
    if kind == "player":
        return PlayerInfo(
            raw=msg, ref=ref, name=str(msg.get("name", "")),
            rating=_opt_float(msg.get("rating")), provisional=bool(msg.get("provisional", True)),
            mu=_opt_float(msg.get("mu")), sigma=_opt_float(msg.get("sigma")),
            games=int(msg.get("games", 0) or 0), wins=int(msg.get("wins", 0) or 0),
            draws=int(msg.get("draws", 0) or 0), losses=int(msg.get("losses", 0) or 0),
            distribution={int(k): int(v) for k, v in (msg.get("distribution") or {}).items()},
            vs_minimum=_vs_minimum(msg.get("vs_minimum")),
        )
    return None


def _parse_event(msg: dict[str, Any], ref: Any) -> MatchEvent:
    base: dict[str, Any] = {
        "raw": msg,
        "ref": ref,
        "match_id": str(msg.get("match_id", "")),
        "seq": int(msg.get("seq", 0)),
        "kind": str(msg.get("kind", "")),
        "at": int(msg.get("at", 0) or 0),
    }
    kind = base["kind"]
    if kind == "created":
        players = [str(p) for p in msg.get("players") or ("", "")]
        config = dict(msg.get("config") or {})
        return Created(**base, players=(players[0], players[1]), config=config)
    if kind == "secret":
        return SecretSet(**base, seat=int(msg.get("seat", 0)), secret=_opt_str(msg.get("secret")))
    if kind == "started":
        return Started(**base, commitments=tuple(str(c) for c in msg.get("commitments") or ()))
    if kind == "guess":
        return GuessMade(
            **base,
            seat=int(msg.get("seat", 0)),
            n=int(msg.get("n", 0)),
            guess=_opt_str(msg.get("guess")),
            bulls=_opt_int(msg.get("bulls")),
            cows=_opt_int(msg.get("cows")),
        )
    if kind == "round":
        results = tuple(
            (_opt_str(r[0]), int(r[1]), int(r[2])) for r in msg.get("results") or ()
        )
        return RoundRevealed(**base, n=int(msg.get("n", 0)), results=results)
    if kind == "away":
        return Away(**base, seat=int(msg.get("seat", 0)))
    if kind == "back":
        return Back(**base, seat=int(msg.get("seat", 0)))
    if kind == "resumed":
        return Resumed(**base)
    if kind == "resign":
        return Resigned(**base, seat=int(msg.get("seat", 0)))
    if kind == "timeout":
        return TimedOut(**base, seat=int(msg.get("seat", 0)), clock=str(msg.get("clock", "")))
    if kind == "finished":
        return Finished(
            **base,
            winner=_opt_int(msg.get("winner")),
            reason=str(msg.get("reason", "")),
            counts=tuple(int(c) for c in msg.get("counts") or ()),
            solved=tuple(bool(s) for s in msg.get("solved") or ()),
            secrets=tuple(_opt_str(s) for s in msg.get("secrets") or ()),
            salts=tuple(_opt_str(s) for s in msg.get("salts") or ()),
            commitments=tuple(_opt_str(s) for s in msg.get("commitments") or ()),
        )
    return UnknownEvent(**base)


def parse(msg: dict[str, Any]) -> Message:
    """One decoded server map -> its typed message. Never raises on unknown types or fields."""
    kind = msg.get("type")
    ref = msg.get("ref")
    if kind == "event":
        return _parse_event(msg, ref)
    if kind == "welcome":
        return Welcome(
            raw=msg,
            ref=ref,
            name=str(msg.get("name", "")),
            protocol=int(msg.get("protocol", 1)),
            server=str(msg.get("server", "")),
            token=_opt_str(msg.get("token")),
            matches=tuple(
                MatchRef(
                    match_id=str(m.get("match_id", "")),
                    seat=int(m.get("seat", 0)),
                    seq=int(m.get("seq", 0)),
                    phase=str(m.get("phase", "")),
                )
                for m in msg.get("matches") or ()
                if isinstance(m, dict)
            ),
            secured=bool(msg.get("secured", False)),
        )
    if kind == "match":
        return MatchAnnounced(
            raw=msg,
            ref=ref,
            match_id=str(msg.get("match_id", "")),
            seat=int(msg.get("seat", 0)),
            opponent=str(msg.get("opponent", "")),
            config=dict(msg.get("config") or {}),
            bot_note=str(msg.get("bot_note") or ""),
        )
    if kind == "tournament":
        data = msg.get("tournament")
        return TournamentUpdate(raw=msg, ref=ref, tournament=tournament_info(data)
                                if isinstance(data, dict) else None)
    if kind == "tournaments":
        return TournamentsList(raw=msg, ref=ref, tournaments=tuple(
            t for t in msg.get("tournaments") or () if isinstance(t, dict)))
    if kind in ("tournament_joined", "tournament_left", "tournament_unwatched"):
        return TournamentAck(raw=msg, ref=ref, kind=str(kind),
                             tournament_id=str(msg.get("tournament_id", "")))
    if kind == "error":
        return ErrorReply(
            raw=msg,
            ref=ref,
            code=str(msg.get("code", "")),
            message=str(msg.get("message", "")),
            match_id=_opt_str(msg.get("match_id")),
        )
    if kind == "pong":
        return Pong(raw=msg, ref=ref)
    if kind == "queued":
        return Queued(
            raw=msg, ref=ref, pool=str(msg.get("pool", "any")),
            pacing=str(msg.get("pacing", "lockstep")),
        )
    if kind == "unqueued":
        return Unqueued(raw=msg, ref=ref)
    if kind == "challenge_sent":
        return ChallengeSent(
            raw=msg, ref=ref, challenge_id=str(msg.get("challenge_id", "")),
            to=str(msg.get("to", "")),
        )
    if kind == "challenge":
        return ChallengeReceived(
            raw=msg, ref=ref, challenge_id=str(msg.get("challenge_id", "")),
            sender=str(msg.get("from", "")), pacing=str(msg.get("pacing", "lockstep")),
        )
    if kind == "declined":
        return Declined(raw=msg, ref=ref, challenge_id=str(msg.get("challenge_id", "")))
    if kind == "room":
        return RoomCreated(raw=msg, ref=ref, code=str(msg.get("code", "")))
    if kind == "rematch_offer":
        return RematchOffer(raw=msg, ref=ref, match_id=str(msg.get("match_id", "")))
    if kind == "rematch_sent":
        return RematchSent(raw=msg, ref=ref, match_id=str(msg.get("match_id", "")))
    if kind == "watching":
        return Watching(
            raw=msg, ref=ref, match_id=str(msg.get("match_id", "")),
            players=tuple(str(p) for p in msg.get("players") or ()),
            config=dict(msg.get("config") or {}),
        )
    if kind == "unwatched":
        return Unwatched(raw=msg, ref=ref, match_id=str(msg.get("match_id", "")))
    if kind == "matches":
        return MatchesList(
            raw=msg,
            ref=ref,
            matches=tuple(
                LiveMatch(
                    match_id=str(m.get("match_id", "")),
                    players=tuple(str(p) for p in m.get("players") or ()),
                    pacing=str(m.get("pacing", "")),
                    phase=str(m.get("phase", "")),
                    counts=tuple(int(c) for c in m.get("counts") or ()),
                )
                for m in msg.get("matches") or ()
                if isinstance(m, dict)
            ),
        )
    if kind == "leaderboard":
        return Leaderboard(
            raw=msg,
            ref=ref,
            by=str(msg.get("by", "rating")),
            players=tuple(
                LeaderboardRow(
                    name=str(p.get("name", "")),
                    rating=_opt_float(p.get("rating")),
                    games=int(p.get("games", 0) or 0),
                    wins=int(p.get("wins", 0) or 0),
                    draws=int(p.get("draws", 0) or 0),
                    losses=int(p.get("losses", 0) or 0),
                    avg_guesses=_opt_float(p.get("avg_guesses")),
                    avg_time_s=_opt_float(p.get("avg_time_s")),
                    provisional=bool(p.get("provisional", True)),
                    vs_minimum=_vs_minimum(p.get("vs_minimum")),
                )
                for p in msg.get("players") or ()
                if isinstance(p, dict)
            ),
        )
    account = _parse_account(kind, msg, ref)
    if account is not None:
        return account
    return UnknownMessage(raw=msg, ref=ref, type=str(kind))
