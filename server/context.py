"""What a client session needs from the running server, as an interface.

``server/app.py`` builds the server and hands each new connection to
:func:`server.session.run_session`; the session in turn needs the store, the arena, the lobby,
the accounts, the history and the settings. Typing the session against :class:`ServerContext`
instead of the ``App`` class keeps the imports one-way (``app`` -> ``session`` -> ``context``):
the session module does not know the class that wires it, and a test can run a session against
any object with these attributes.
"""

from __future__ import annotations

from typing import Protocol

from server.accounts import Accounts
from server.arena import Arena
from server.connection import Connection
from server.history import History
from server.ladder import LadderService
from server.matches import LobbyService, MatchService
from server.publisher import Hooks
from server.settings import Settings
from server.storage import Store
from server.tournaments import TournamentService

__all__ = ["ServerContext"]


class ServerContext(Protocol):
    """The parts of a running server that a session reads (``server.app.App`` has them all)."""

    settings: Settings
    store: Store
    #: this node's live matches and its offered variants
    arena: Arena
    #: the seam for every match operation (server/matches.py): the arena, or a cluster router
    matches: MatchService
    lobby: LobbyService
    #: every open connection (the heartbeat and a graceful stop walk it)
    connections: set[Connection]
    #: casefolded names of hosted bots, which nobody may take with ``hello``
    reserved_names: set[str]
    #: ratings (the ``leaderboard`` request) and the optional MQTT publisher
    hooks: Hooks
    #: passwords, tokens per device and sign-in limits (``hello``, ``set_password``, ...)
    accounts: Accounts
    #: the ``history``, ``match_record`` and ``player`` requests, leaderboard extras
    history: History
    #: hosted tournaments (server/tournaments.py): the ``tournament_*`` requests
    tournaments: TournamentService
    #: hosted bots and the ladder (server/ladder.py): ``ladder_*`` and the workers' messages
    ladder: LadderService
