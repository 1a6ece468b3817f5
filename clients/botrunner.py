"""``moo bot``: connect a strategy (or an external program) to a server and play N matches.

Many bots share one event loop: ``--concurrency K`` opens K connections (``NAME-1`` ..
``NAME-K``), each playing its matches one after another until N have been started in total.
Strategies are synchronous and fast (they never do I/O), so calling them on the loop is fine;
external programs are driven through :class:`bots.external.ExternalBot`, whose every answer
is bounded by the move time limit, so a stuck program costs its own match and nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import random
import secrets
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from bots import dictionary
from bots.external import DEFAULT_MOVE_TIMEOUT, BotFailure, ExternalBot
from bots.registry import available, create
from bots.variants import VARIANT_BOTS, bot_note, check_bot, create_for, prepare
from clients.botmatch import MatchOutcome, Player, StrategyPlayer, play_match
from clients.sdk import (
    DEFAULT_URL,
    Client,
    ConnectionLost,
    MatchAnnounced,
    ServerError,
)
from clients.sdk.cli_args import add_url_option, urls_of
from clients.sdk.tokens import TokenStore
from moo.errors import BotUnsupported, UnknownStrategy
from moo.mastermind import MastermindRules
from moo.variants import is_classic, rules_arg, rules_from_dict, rules_spec
from moo.words import WordRules

__all__ = ["MatchOutcome", "Player", "StrategyPlayer", "configure", "main", "play_match"]

# -- the command ------------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("strategy", nargs="?", default=None,
                        help=f"a registered strategy ({', '.join(available())}) or "
                             "package.module:Class; omit with --cmd")
    parser.add_argument("--cmd", default=None,
                        help="run an external program instead (docs/bot-protocol.md)")
    add_url_option(parser, f"server (default {DEFAULT_URL})")
    parser.add_argument("--games", "-n", type=int, default=None,
                        help="matches to play in total (default 1; with --ladder: until "
                             "interrupted)")
    parser.add_argument("--concurrency", "-k", type=int, default=1,
                        help="connections playing at once (names NAME-1..K)")
    parser.add_argument("--name", default=None, help="player name (default: STRATEGY-xxxx)")
    parser.add_argument("--pool", choices=("bots", "any"), default="any",
                        help="quick-pair queue pool (default any)")
    parser.add_argument("--pacing", choices=("lockstep", "free"), default=None)
    parser.add_argument("--rules", type=rules_arg, default=None, metavar="SPEC",
                        help="the game to queue for or play the server's bot at: "
                        "GAME[:LENGTH[:ALPHABET[:repeats]]] (docs/variants.md); classic MOO: "
                        "any strategy; Mastermind: minimum, strongest, random; other MOO "
                        "variants: random, the heuristics, minimum and strongest (the exact "
                        "tree where it can be solved, else entropy: a note says so), or an "
                        "external program; word MOO (words[:LENGTH[:SCORING]]): words")
    parser.add_argument("--room", default=None, help="join this room code instead of queueing")
    parser.add_argument("--vs-bot", default=None, metavar="NAME",
                        help="play the server-hosted strategy NAME instead of queueing")
    parser.add_argument("--encoding", choices=("json", "msgpack"), default="json")
    parser.add_argument("--move-timeout", type=float, default=DEFAULT_MOVE_TIMEOUT,
                        help="seconds an external program may think per guess (default 10)")
    parser.add_argument("--seed", type=int, default=None, help="seed the bots' randomness")
    parser.add_argument("--wait", type=float, default=600.0, metavar="SECONDS",
                        help="give up when no opponent came in this long (default 600)")
    parser.add_argument("--tournament", default=None, metavar="ID",
                        help="join this hosted tournament and play every game it pairs this "
                             "bot in; exit when it is finished (docs/tournaments.md)")
    parser.add_argument("--ladder", action="store_true",
                        help="join the ladder of --rules (default: the server's) as a "
                             "connected bot and play every game it pairs this bot in, until "
                             "interrupted or --games are played (docs/ladder.md)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per line on stdout; no progress on stderr")


def _make_player(args: argparse.Namespace) -> Player:
    rules = args.rules
    if args.cmd or args.strategy.startswith("cmd:"):
        if isinstance(rules, MastermindRules):
            raise ValueError("external bot programs play MOO rules only (docs/bot-protocol.md);"
                             " for Mastermind use minimum, strongest or random")
        if isinstance(rules, WordRules):
            raise ValueError("external bot programs play MOO rules only (docs/bot-protocol.md);"
                             " for word MOO use words")
        return ExternalBot(args.cmd or args.strategy, move_timeout=args.move_timeout)
    spec = args.strategy
    if rules is None or is_classic(rules):
        return StrategyPlayer(create(spec))
    check_bot(spec, rules, [*available(), *VARIANT_BOTS])
    note = bot_note(spec, rules)
    if note and not getattr(args, "_noted", False):  # once, not once per connection
        args._noted = True
        print(f"moo bot: note: {note}", file=sys.stderr)
    prepare(spec, rules)  # a tree solved on first use: before the first match, not during it
    return StrategyPlayer(create_for(spec, rules))


class _Run:
    """Shared by the K connections: the arguments, the results, the errors, and what the
    person watching sees on stderr (what each connection is doing, progress over the games).
    """

    def __init__(self, args: argparse.Namespace, stderr: TextIO | None = None) -> None:
        self.args = args
        self.outcomes: list[MatchOutcome] = []
        self.errors: list[str] = []
        self.stderr = stderr or sys.stderr
        #: rewrite one progress line in place on a terminal; plain lines for logs and pipes
        self.tty = self.stderr.isatty()
        self._progress_shown = False

    def report(self, outcome: MatchOutcome) -> None:
        self.outcomes.append(outcome)
        self._clear()
        if self.args.json:
            print(json.dumps({"type": "match", **asdict(outcome)}), flush=True)
        else:
            print(outcome.line(), flush=True)
        if not outcome.resumed:
            self.progress()

    def notice(self, text: str) -> None:
        """What a connection is doing (queued, waiting, joined): stderr, never with --json."""
        if self.args.json:
            return
        self._clear()
        print(text, file=self.stderr, flush=True)
        self._redraw()

    def error(self, text: str, *, once: bool = False) -> None:
        """Say ``text`` on stderr; ``once``: unless it was said already (a failure shared by
        every connection, such as a server that is not there)."""
        if once and text in self.errors:
            return
        self.errors.append(text)
        self._clear()
        print(text, file=self.stderr, flush=True)
        self._redraw()

    def progress_text(self) -> str:
        played = [o for o in self.outcomes if not o.resumed]
        n, total = len(played), self.args.games
        if getattr(self.args, "tournament", None) or getattr(self.args, "ladder", False):
            tally = summary(played)  # no fixed number of games: a tally
            kind = "tournament" if getattr(self.args, "tournament", None) else "ladder"
            return (f"{n} {kind} matches: {tally['wins']} W / {tally['draws']} D / "
                    f"{tally['losses']} L")
        width = 20
        filled = width * n // total if total else width
        tally = summary(played)
        text = (
            f"[{'#' * filled}{'.' * (width - filled)}] {n}/{total} matches: "
            f"{tally['wins']} W / {tally['draws']} D / {tally['losses']} L"
        )
        if tally["aborted"]:
            text += f", {tally['aborted']} aborted"
        return text

    def progress(self) -> None:
        if self.args.json:
            return
        if self.tty:
            self.stderr.write("\r\033[K" + self.progress_text())
            self.stderr.flush()
            self._progress_shown = True
        else:
            print(self.progress_text(), file=self.stderr, flush=True)

    def finish(self) -> None:
        """End the in-place progress line so the summary starts on a line of its own."""
        if self._progress_shown:
            self.stderr.write("\n")
            self.stderr.flush()
            self._progress_shown = False

    def _clear(self) -> None:
        if self._progress_shown:
            self.stderr.write("\r\033[K")
            self.stderr.flush()

    def _redraw(self) -> None:
        if self._progress_shown:
            self.stderr.write(self.progress_text())
            self.stderr.flush()


class NoOpponent(Exception):
    """Nobody was paired with us within ``--wait`` seconds."""


async def _wait_for_opponent(
    run: _Run, client: Client, name: str, where: str, *, limit: float, every: float = 30.0,
    queued: bool = True,
) -> MatchAnnounced:
    """``wait_match``, with a notice every ``every`` s, so a silent queue is never a mystery."""
    waited = 0.0
    while True:
        step = min(every, limit - waited)
        try:
            return await client.wait_match(timeout=step)
        except TimeoutError:
            waited += step
            if waited >= limit:
                hint = (f"; start another bot, or add {_VS_BOT_HINT} to play the server's bot"
                        if queued else "")
                raise NoOpponent(
                    f"{name}: no opponent came {where} in {waited:g} s{hint}"
                ) from None
            run.notice(f"{name}: still waiting for an opponent {where} ({waited:g} s)")


_VS_BOT_HINT = "--vs-bot minimum"


async def _connect(run: _Run, name: str, tokens: TokenStore) -> Client | None:
    """A bot's session under ``name`` with its saved token (None, reported, if no server
    answers). Tokens are kept under the first URL: the nodes of one cluster share their
    players."""
    urls = urls_of(run.args, DEFAULT_URL)
    client = Client(urls, name, token=tokens.get(urls[0], name), bot=True,
                    encoding=run.args.encoding, client_name="moo-bot")
    try:
        await client.connect()
    except ServerError as exc:  # this name refused (taken, bad token): each name its own line
        run.error(f"{name}: cannot connect to {', '.join(urls)}: {exc}")
        return None
    except (OSError, TimeoutError) as exc:
        # The same for every connection of --concurrency K: said once, not K times.
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else (
            str(exc) or type(exc).__name__)
        run.error(f"moo bot: cannot connect to {', '.join(urls)}: {reason}", once=True)
        return None
    if client.token:
        tokens.put(urls[0], client.name, client.token)
    return client


async def _connection(
    run: _Run, name: str, games: int, seed: int | None, tokens: TokenStore
) -> None:
    args = run.args
    player = _make_player(args)
    rng = random.Random(seed)
    client = await _connect(run, name, tokens)
    if client is None:
        return
    previous: str | None = None
    reported: set[str] = set()  # matches played here, so an adopted one is not played twice
    try:
        # Finish what this name left unfinished (a crashed run, same token) before new games;
        # they are reported but do not count toward --games.
        await _finish_unfinished(run, client, player, rng)
        game = -1
        while game + 1 < games:
            game += 1
            try:
                if args.vs_bot:
                    announced = await client.play_bot(args.vs_bot, pacing=args.pacing,
                                                      rules=args.rules)
                    if game == 0:
                        run.notice(f"{name}: playing the server's bot {args.vs_bot}")
                elif args.room:
                    if previous is None:
                        announced = await client.join_room(args.room)
                        run.notice(f"{name}: joined room {args.room}")
                    else:
                        # Same room, next game: offer a rematch and wait for the opponent.
                        await client.rematch(previous)
                        announced = await _wait_for_opponent(
                            run, client, name, "to accept a rematch in room " + args.room,
                            limit=min(args.wait, 120), queued=False,
                        )
                else:
                    queued = await client.queue(pool=args.pool, pacing=args.pacing,
                                                rules=args.rules)
                    where = f"in pool {queued.pool!r} ({queued.pacing})"
                    if game == 0:
                        run.notice(
                            f"{name}: queued {where}, waiting for an opponent; "
                            f"to play the server's bot instead, add {_VS_BOT_HINT}"
                        )
                    announced = await _wait_for_opponent(run, client, name, where,
                                                         limit=args.wait)
            except NoOpponent as exc:
                run.error(str(exc))
                break
            except ConnectionLost as exc:
                # The server went away mid-request (a node died): once reconnected, a match
                # the request did create is resumed by the SDK; play it, then go on.
                if not await client.wait_online(timeout=120):
                    run.error(f"{name}: {exc or type(exc).__name__}")
                    break
                adopted = await _play_adopted(run, client, player, rng, reported)
                if adopted is not None:
                    previous = adopted
                else:
                    game -= 1  # nothing was made: this game is still to play
                continue
            except (ServerError, TimeoutError) as exc:
                run.error(f"{name}: {exc or type(exc).__name__}")
                break
            reported.add(announced.match_id)
            outcome = await play_match(client, announced, player, rng)
            previous = outcome.match_id
            run.report(outcome)
            if outcome.outcome == "aborted":
                break
    finally:
        await player.close()
        await client.close()


async def _play_adopted(run: _Run, client: Client, player: Player, rng: random.Random,
                        reported: set[str]) -> str | None:
    """Play the seated, unfinished matches the client knows of but nobody here plays yet.

    After a lobby request lost to a dropped connection, the server may have made the match
    anyway; the SDK resumed it on reconnect (``welcome.matches``), so it is in
    :attr:`Client.states`. Returns the id of the last one played, if any.
    """
    last: str | None = None
    for match_id, state in list(client.states.items()):
        if match_id in reported or state.seat is None or state.finished:
            continue
        reported.add(match_id)
        try:
            async with asyncio.timeout(client.request_timeout):
                while not state.config and not state.finished:
                    await client.receive()
        except (TimeoutError, ConnectionLost):
            continue
        if state.finished:
            continue
        announced = MatchAnnounced(raw={}, match_id=match_id, seat=state.seat,
                                   opponent=state.opponent, config=state.config)
        outcome = await play_match(client, announced, player, rng)
        run.report(outcome)
        last = match_id
    return last


async def _finish_unfinished(run: _Run, client: Client, player: Player,
                             rng: random.Random) -> None:
    welcome = client.welcome
    for ref in welcome.matches if welcome else ():
        if ref.phase == "finished":
            continue
        state = client.states[ref.match_id]
        try:
            # The SDK has sent ``resume``; wait until the replay has told us the rules.
            async with asyncio.timeout(client.request_timeout):
                while not state.config and not state.finished:
                    await client.receive()
        except (TimeoutError, ConnectionLost):
            continue
        if state.finished:
            continue
        announced = MatchAnnounced(raw={}, match_id=ref.match_id, seat=ref.seat,
                                   opponent=state.opponent, config=state.config)
        outcome = await play_match(client, announced, player, rng)
        run.report(dataclasses.replace(outcome, resumed=True))


class _Pump:
    """One reader for a connection that plays several matches at once: every message read
    advances :attr:`version` and wakes everyone waiting; each waiter (:meth:`waiter`, one per
    match) returns as soon as anything was read since its last return, so no change can slip
    between a match looking at its state and waiting again."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.changed = asyncio.Condition()
        self.version = 0
        self.lost = False

    async def run(self) -> None:
        try:
            while True:
                await self.client.receive()
                async with self.changed:
                    self.version += 1
                    self.changed.notify_all()
        except ConnectionLost:
            async with self.changed:
                self.lost = True
                self.changed.notify_all()

    def waiter(self) -> Callable[[], Awaitable[None]]:
        seen = self.version

        async def wait() -> None:
            nonlocal seen
            async with self.changed:
                await self.changed.wait_for(lambda: self.lost or self.version != seen)
                seen = self.version
            if self.lost:
                raise ConnectionLost("the client is closed")

        return wait


@dataclass
class _Paired:
    """What a bot joins to play every game the server then pairs it in: a hosted tournament
    (``--tournament``) or the ladder (``--ladder``)."""

    #: joins; the line that says so (raises ServerError and the like when refused)
    join: Callable[[Client], Awaitable[str]]
    #: after a reconnect: ask for the state again, or join again
    again: Callable[[Client], Awaitable[object]]
    #: whether a match (by its ``config``) is one of these games
    ours: Callable[[dict[str, Any]], bool]
    #: the line when it is over (None: not over)
    over: Callable[[Client], str | None]
    #: what the refusal of ``join`` is about ("tournament t...")
    what: str
    #: said once when it is over; the games it must still play (paired already)
    leave: Callable[[Client], Awaitable[list[str]]] | None = None


def _tournament(tournament_id: str) -> _Paired:
    async def join(client: Client) -> str:
        await client.join_tournament(tournament_id)
        info = await client.watch_tournament(tournament_id)
        return f"joined tournament {info.name!r} ({tournament_id}, {info.status})"

    def over(client: Client) -> str | None:
        current = client.tournaments.get(tournament_id)
        finished = current is not None and current.finished
        return f"tournament {tournament_id} finished" if finished else None

    return _Paired(join, lambda client: client.watch_tournament(tournament_id),
                   lambda config: config.get("tournament_id") == tournament_id, over,
                   f"tournament {tournament_id}")


def _ladder(run: _Run) -> _Paired:
    """``--ladder``: a connected bot on the ladder (docs/ladder.md, "Connected bots") until
    interrupted, or until it has played ``--games`` ladder games when that is given."""
    rules = run.args.rules

    async def join(client: Client) -> str:
        bot = await client.join_ladder(rules)
        return (f"joined the ladder {rules_spec(rules_from_dict(bot['rules']))} as a "
                f"connected bot ({bot['bot_id']}); playing its games until interrupted")

    async def again(client: Client) -> None:
        # away for longer than the grace it is offline: it joins again (still on the ladder
        # within the grace: answered as a join)
        await client.join_ladder(rules)

    def over(client: Client) -> str | None:
        limit = run.args.ladder_games
        played = sum(not o.resumed for o in run.outcomes)
        return None if limit is None or played < limit else f"{played} ladder games played"

    async def leave(client: Client) -> list[str]:
        return list((await client.leave_ladder())["games"])

    return _Paired(join, again, lambda config: bool(config.get("ladder")), over, "the ladder",
                   leave)


async def _paired_connection(run: _Run, name: str, paired: _Paired,
                             tokens: TokenStore) -> None:
    """Join, then play every game the server pairs this bot in, as many at once as it
    starts, until it is over (docs/tournaments.md; docs/ladder.md, "Connected bots")."""
    args = run.args
    client = await _connect(run, name, tokens)
    if client is None:
        return
    pump = _Pump(client)
    reader = asyncio.create_task(pump.run())
    playing: dict[str, asyncio.Task[MatchOutcome]] = {}
    reported: set[str] = set()
    rng = random.Random(args.seed)
    wait = pump.waiter()
    loop = asyncio.get_running_loop()
    owed: set[str] = set()  # ladder games paired before it left, to play still
    left = 0.0
    try:
        try:
            run.notice(f"{name}: {await paired.join(client)}")
        except (ServerError, ConnectionLost, TimeoutError) as exc:
            run.error(f"{name}: cannot join {paired.what}: {exc or type(exc).__name__}")
            return
        reconnects = client.reconnects
        while True:
            for match_id, state in list(client.states.items()):
                if match_id in playing or state.seat is None or state.finished:
                    continue
                if not paired.ours(state.config):
                    continue
                announced = MatchAnnounced(raw={}, match_id=match_id, seat=state.seat,
                                           opponent=state.opponent or "", config=state.config)
                playing[match_id] = asyncio.create_task(play_match(
                    client, announced, _make_player(args),
                    random.Random(rng.getrandbits(64)), timeout=24 * 3600,
                    wait=pump.waiter()))
            for match_id, task in list(playing.items()):
                if task.done() and match_id not in reported:
                    reported.add(match_id)
                    run.report(task.result())
            done = paired.over(client)
            if done is not None and paired.leave is not None:
                leave, paired.leave = paired.leave, None  # no more games paired from now on
                with contextlib.suppress(ServerError, ConnectionLost, TimeoutError):
                    owed = set(await leave(client))
                left = loop.time()
                continue  # the games paired before it left are played out too
            # (one of them not started within --wait: its pairing was void, or no worker)
            owed = {m for m in owed if m not in client.states or not client.states[m].finished}
            if done is not None and all(t.done() for t in playing.values()) and (
                    not owed or loop.time() - left > args.wait):
                run.notice(f"{name}: {done}")
                break
            if client.reconnects != reconnects:  # a new connection: ask for the state again
                reconnects = client.reconnects
                with contextlib.suppress(ServerError, ConnectionLost, TimeoutError):
                    await paired.again(client)
            # a message read, or a game's task done (it may end after the last message,
            # e.g. a program told 'end'); a game owed may never start: not past --wait
            waiter = asyncio.ensure_future(wait())
            timeout = max(0.0, left + args.wait - loop.time()) if owed and done else None
            ended, _ = await asyncio.wait(
                [waiter, *(t for t in playing.values() if not t.done())], timeout=timeout,
                return_when=asyncio.FIRST_COMPLETED)
            if waiter not in ended:
                waiter.cancel()
                await asyncio.gather(waiter, return_exceptions=True)
            elif isinstance(waiter.exception(), ConnectionLost):
                run.error(f"{name}: the connection is closed")
                return
    finally:
        for task in playing.values():
            task.cancel()
        reader.cancel()
        await asyncio.gather(reader, *playing.values(), return_exceptions=True)
        await client.close()


async def run_bots(args: argparse.Namespace) -> _Run:
    run = _Run(args)
    base = args.name or f"{(args.strategy or 'cmd').split(':')[-1].split('/')[-1][:12]}" \
                        f"-{secrets.token_hex(2)}"
    if args.tournament or args.ladder:
        paired = _tournament(args.tournament) if args.tournament else _ladder(run)
        await _paired_connection(run, base, paired, TokenStore())
        return run
    k = max(1, min(args.concurrency, args.games))
    names = [base] if k == 1 else [f"{base}-{i}" for i in range(1, k + 1)]
    # Fixed shares rather than a shared counter: when our own connections are paired with
    # each other in the queue, equal shares make them run out of work together instead of
    # leaving one waiting in the queue for a partner that has already stopped.
    shares = [args.games // k + (i < args.games % k) for i in range(k)]
    tokens = TokenStore()
    await asyncio.gather(*(
        _connection(run, name, share, None if args.seed is None else args.seed + i, tokens)
        for i, (name, share) in enumerate(zip(names, shares))
    ))
    return run


def summary(outcomes: list[MatchOutcome]) -> dict[str, object]:
    wins = sum(o.outcome == "win" for o in outcomes)
    draws = sum(o.outcome == "draw" for o in outcomes)
    losses = sum(o.outcome == "loss" for o in outcomes)
    solved = [o.guesses for o in outcomes if o.solved]
    return {
        "matches": len(outcomes),
        "wins": wins,
        "draws": draws,
        "losses": losses,
        "aborted": len(outcomes) - wins - draws - losses,
        "avg_guesses": round(sum(solved) / len(solved), 3) if solved else None,
        "bot_failures": sum(o.failure is not None for o in outcomes),
        "unfair": sum(o.fair is False for o in outcomes),
    }


def main(args: argparse.Namespace) -> int:
    dictionary.install()  # word MOO: a word bot's secret is checked against the real list
    if not args.cmd and not args.strategy:
        print("moo bot: name a STRATEGY or give --cmd PROGRAM", file=sys.stderr)
        return 2
    args.ladder_games = args.games if args.ladder else None
    if args.games is None:
        args.games = 1
    if args.games < 1 or args.concurrency < 1:
        print("moo bot: --games and --concurrency must be at least 1", file=sys.stderr)
        return 2
    if args.room and args.concurrency > 1:
        print("moo bot: a room seats one opponent: --room needs --concurrency 1", file=sys.stderr)
        return 2
    if args.room and args.vs_bot:
        print("moo bot: choose --room or --vs-bot, not both", file=sys.stderr)
        return 2
    if args.wait <= 0:
        print("moo bot: --wait must be positive", file=sys.stderr)
        return 2
    if args.move_timeout <= 0:
        print("moo bot: --move-timeout must be positive", file=sys.stderr)
        return 2
    try:
        player = _make_player(args)
    except (UnknownStrategy, BotUnsupported, ValueError) as exc:
        print(f"moo bot: {exc}", file=sys.stderr)
        return 2
    if isinstance(player, ExternalBot):
        # Start the program once before joining anything: a missing or broken program is the
        # person's mistake, to be told at once, not a forfeited match on the server.
        problem = asyncio.run(_probe(player))
        if problem:
            print(f"moo bot: {problem}", file=sys.stderr)
            return 2
    if args.tournament and (args.room or args.vs_bot or args.concurrency > 1):
        print("moo bot: --tournament plays the tournament's games only: no --room, --vs-bot "
              "or --concurrency", file=sys.stderr)
        return 2
    if args.ladder and (args.tournament or args.room or args.vs_bot or args.concurrency > 1):
        print("moo bot: --ladder plays the ladder's games only: no --tournament, --room, "
              "--vs-bot or --concurrency", file=sys.stderr)
        return 2
    run = asyncio.run(run_bots(args))
    run.finish()
    if args.tournament or args.ladder:
        failed_games = any(o.failure is not None for o in run.outcomes)
        return 0 if not run.errors and not failed_games else 1
    total = summary(run.outcomes)
    if args.json:
        print(json.dumps({"type": "summary", **total}), flush=True)
    elif run.errors and not run.outcomes:
        pass  # nothing was played: the error line is the whole story, no "0 matches" after it
    else:
        avg = total["avg_guesses"]
        print(
            f"{total['matches']} matches: {total['wins']} W / {total['draws']} D / "
            f"{total['losses']} L"
            + (f", {total['aborted']} aborted" if total["aborted"] else "")
            + (f", average {avg} guesses when solved" if avg is not None else "")
            + (f", {total['bot_failures']} bot failures" if total["bot_failures"] else ""),
            flush=True,
        )
    played = sum(not o.resumed for o in run.outcomes)
    failed = any(o.failure is not None for o in run.outcomes)
    return 0 if played == args.games and not run.errors and not failed else 1


async def _probe(bot: ExternalBot) -> str | None:
    """Start the program and do the handshake; the reason it failed, or None."""
    try:
        await bot.start()
    except BotFailure as exc:
        return f"the bot program {' '.join(bot.argv)!r} does not work: {exc}"
    finally:
        await bot.close()
    return None
