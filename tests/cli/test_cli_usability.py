"""The command-line defects people ran into (issue 32), each checked as they met it.

Every case here failed on the code before the fix: a line per retry, a capped game count, a
token refused for the same server under another name, websockets' own words for an address
that is not an arena, a summary line after a lone failure, the first record of an export
analysed in silence, a silent three-minute race, untrue POTM messages, ``QUIT`` taken as a
guess.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.typing import Subprotocol

from bots import evaluate, playout
from clients.potm.cli import standings_text
from clients.potm.rounds import Tournament, WordResult, play_rounds
from clients.sdk import NotAnArena, TournamentInfo
from clients.sdk.tokens import TokenStore, server_key
from clients.sdk.wire import Wire
from clients.terminal.text import Entry, parse_entry
from clients.tournament import cli as tournament_cli
from clients.tournament import hosted, remote
from moo.errors import MooError
from moo.mastermind import MastermindRules
from moo.match import Match, MatchConfig
from moo.protocol import SUBPROTOCOLS
from moo.rules import Rules
from moo.variants import GameRules
from moo.words import WordRules
from server.export import match_record, records
from tests.cli.test_cli_errors import moo, one_line
from tests.client_support import client_env, moo_command, moo_serve
from tests.clients.test_words_cli import Terminal
from tests.patience import patience

# -- an address that answers, but is not an arena (defect 4) --------------------------------------


@contextlib.contextmanager
def http_server(handler: type[BaseHTTPRequestHandler], folder: Path) -> Iterator[str]:
    """An ordinary HTTP server on a free port (python -m http.server, or one that says 404)."""

    class Here(handler):  # type: ignore[misc, valid-type]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the test reads the client's words, not the server's log."""

    httpd = HTTPServer(("127.0.0.1", 0), Here)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"ws://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


class NotFound(SimpleHTTPRequestHandler):
    """Answers every request in HTTP/1.1 with 404, as a web server on a wrong path does."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_error(404)


URL_COMMANDS = [["bot", "minimum"], ["play", "--bot", "minimum"],
                ["tournament", "minimum", "first", "--rounds", "1"],
                ["tournament", "show", "t5e0c41a9b7d2"],
                ["tournament", "create", "--name", "x", "--format", "round-robin", "--rounds",
                 "1"],
                ["analyse", "m0123456789ab"]]


@pytest.mark.parametrize("command", URL_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_an_http_server_that_is_not_an_arena_is_named_as_such(tmp_path: Path,
                                                              command: list[str]) -> None:
    with http_server(SimpleHTTPRequestHandler, tmp_path) as url:
        done = moo(tmp_path, *command, "--url", url)
    name = " ".join(command[:2]) if command[1] in ("show", "create") else command[0]
    line = one_line(done, name)
    assert done.returncode == 1
    assert line == (f"moo {name}: {url} is not a MOO arena: it answered 'HTTP/1.0 200 OK', "
                    "an HTTP server but not a WebSocket one"), line


async def test_a_404_and_a_websocket_server_of_another_protocol_are_not_arenas(
        tmp_path: Path) -> None:
    with http_server(NotFound, tmp_path) as url, pytest.raises(NotAnArena) as caught:
        await Wire.open(url)
    assert str(caught.value) == (f"{url} is not a MOO arena: it answered HTTP 404 Not Found "
                                 "to the WebSocket handshake")

    async def echo(ws: ServerConnection) -> None:
        async for frame in ws:
            await ws.send(frame)

    async with serve(echo, "127.0.0.1", 0) as server:  # selects no subprotocol
        port = next(iter(server.sockets)).getsockname()[1]
        with pytest.raises(NotAnArena) as caught:
            await Wire.open(f"ws://127.0.0.1:{port}/")
    assert str(caught.value).endswith("a WebSocket server that does not speak moo.v1.json")
    assert isinstance(caught.value, MooError)  # so `moo` prints it as one line


# -- moo tournament --url: a server that is down, or fails every match (defect 1) ----------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_tournament_against_a_server_that_is_down_is_one_line_at_once(tmp_path: Path) -> None:
    url = f"ws://127.0.0.1:{free_port()}/"
    done = moo(tmp_path, "tournament", "minimum", "first", "random", "entropy", "--rounds", "20",
               "--url", url)
    line = one_line(done, "tournament")
    assert done.returncode == 1
    assert line.startswith(f"moo tournament: cannot connect to {url}: "), line
    assert "[Errno" not in line and done.stdout == ""


def tournament_args(url: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    tournament_cli.configure(parser)
    return parser.parse_args(["minimum", "first", "random", "--rounds", "3", "--url", url,
                              "--no-progress"])


async def test_failed_match_attempts_are_one_line_then_the_failure(
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An arena's handshake, then the connection closes at every hello: every match of the
    plan fails every attempt. Told: the first failure (with what is done about it), then the
    one error that ends the tournament; not a line per attempt of every match."""
    monkeypatch.setattr(remote, "ATTEMPTS", 3)
    hellos = 0

    async def hangs_up(ws: ServerConnection) -> None:
        nonlocal hellos
        async for _ in ws:
            hellos += 1
            await ws.close()

    async with serve(hangs_up, "127.0.0.1", 0,
                     subprotocols=[Subprotocol(s) for s in SUBPROTOCOLS]) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        with pytest.raises(remote.RemoteError) as caught:
            await tournament_cli._main(tournament_args(f"ws://127.0.0.1:{port}/"))
    assert hellos >= 3  # a match was tried three times (others ran alongside)
    assert "failed 3 times" in str(caught.value)
    # a warning reaches a person's stderr through logging's last resort (``moo`` configures
    # no logging): that was the line per attempt
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("moo tournament: match ") and "retrying it, and any other that " \
        "fails, up to 3 times" in err[0], err


def test_retries_that_succeeded_are_counted_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    from clients.tournament.runner import Job, Progress

    retries = tournament_cli._Retries(Progress(4, enabled=False))
    jobs = [Job(key, 1, 0, 0, (0, 1), ("minimum", "first"), ("minimum", "first"), None)
            for key in ("a", "b")]
    for job in (jobs[0], jobs[1], jobs[0]):
        retries(job, 1, ConnectionRefusedError(111, "Connect call failed"))
    retries.summary()
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "moo tournament: match a failed (Connect call failed); retrying it, and any other "
        "that fails, up to 10 times (the count comes at the end)",
        "moo tournament: 3 failed attempts of 2 matches retried, all played in the end (last "
        "failure: Connect call failed)",
    ]


# -- moo tournament show: the true number of games (defect 2) -------------------------------------


def test_show_prints_every_game_of_a_long_arena(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The server lists only the 200 most recent games; ``game_count`` is the true number."""
    games = [{"match_id": f"m{i:012x}", "round": 1, "players": ["a", "b"], "result": "1-0"}
             for i in range(200)]
    info = TournamentInfo("t5e0c41a9b7d2", "long", "finished", "arena", 0, ("a", "b"),
                          data={"name": "long", "format": "arena", "games": games,
                                "game_count": 550, "standings": [], "tiebreak": "performance"})

    async def shown(args: argparse.Namespace) -> TournamentInfo:
        return info

    monkeypatch.setattr(hosted, "_show", shown)
    hosted.main_show(argparse.Namespace(json=False, tournament_id=info.tournament_id, url=None))
    head = capsys.readouterr().out.splitlines()[0]
    assert head == "long (t5e0c41a9b7d2): arena, finished, round 0, 2 players, 550 games"


# -- moo bot: a failure with nothing played is one line (defect 5) --------------------------------


@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_bot_that_cannot_connect_says_so_once_and_nothing_else(tmp_path: Path,
                                                               concurrency: str) -> None:
    url = f"ws://127.0.0.1:{free_port()}/"
    done = moo(tmp_path, "bot", "minimum", "--url", url, "--games", "3", "--concurrency",
               concurrency)
    line = one_line(done, "bot")
    assert done.returncode == 1
    assert line.startswith(f"moo bot: cannot connect to {url}: "), line
    assert done.stdout == ""  # was "0 matches: 0 W / 0 D / 0 L"


# -- saved tokens belong to the server, however its URL is spelt (defect 3) -----------------------


def test_the_same_server_under_another_spelling_keeps_the_name(tmp_path: Path) -> None:
    with moo_serve(tmp_path) as url:
        port = url.rsplit(":", 1)[1].strip("/")
        runs = [moo(tmp_path, "bot", "minimum", "--url", spelt, "--name", "ann", "--vs-bot",
                    "random", "--json")
                for spelt in (f"ws://127.0.0.1:{port}/", f"ws://localhost:{port}",
                              f"ws://LocalHost:{port}/")]
    for done in runs:
        assert done.returncode == 0, done.stderr  # was: name_taken for the second spelling
        assert json.loads(done.stdout.splitlines()[-1])["matches"] == 1


@pytest.mark.parametrize(
    ("a", "b"),
    [("ws://127.0.0.1:8765/", "ws://localhost:8765"), ("ws://[::1]:8765/", "ws://127.0.0.2:8765/"),
     ("wss://Arena.Example/moo", "wss://arena.example.:443/"),
     ("ws://arena.example/", "ws://arena.example:80/x")],
)
def test_spellings_of_one_server_have_one_key(a: str, b: str) -> None:
    assert server_key(a) == server_key(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [("ws://127.0.0.1:8765/", "ws://127.0.0.1:8766/"), ("ws://arena.example/", "wss://arena.example/"),
     ("ws://arena.example:8765/", "ws://other.example:8765/"),
     ("ws://10.0.0.1:8765/", "ws://localhost:8765/")],
)
def test_other_servers_have_other_keys(a: str, b: str) -> None:
    assert server_key(a) != server_key(b)


def test_tokens_saved_under_the_old_url_keys_are_found_and_migrated(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"ws://127.0.0.1:8765/ ann": "tok-ann",
                                "ws://127.0.0.1:8765/ bob": "tok-bob",
                                "ws://elsewhere.example:8765/ ann": "tok-far"}))
    store = TokenStore(path)
    assert store.get("ws://localhost:8765/", "Ann") == "tok-ann"
    assert store.get("ws://127.0.0.1:8765", "bob") == "tok-bob"
    assert store.get("ws://localhost:8766/", "ann") is None
    store.put("ws://localhost:8765", "ann", "tok-ann-2")
    saved = json.loads(path.read_text())
    assert saved == {"ws://localhost:8765 ann": "tok-ann-2", "ws://127.0.0.1:8765/ bob": "tok-bob",
                     "ws://elsewhere.example:8765/ ann": "tok-far"}
    assert store.get("ws://127.0.0.1:8765/", "ann") == "tok-ann-2"
    assert path.stat().st_mode & 0o777 == 0o600


# -- moo potm: true words for a tie and for a directory (defect 8) --------------------------------


def _tied_tournament(playoffs: int) -> Tournament:
    words = iter(f"W{k:04}" for k in range(100))
    return play_rounds(["a", "b", "c"], lambda i, w: WordResult("abc"[i], w, 4 if i < 2 else 7),
                       lambda: [next(words) for _ in range(3)], 5, max_playoffs=playoffs)


@pytest.mark.parametrize(
    ("playoffs", "said"),
    [(0, "winner: none (2 entries tied after the final; --playoffs 0 plays no playoff)"),
     (1, "winner: none (2 entries still tied after 1 playoff, the most --playoffs allows)"),
     (3, "winner: none (2 entries still tied after 3 playoffs, the most --playoffs allows)")],
)
def test_potm_says_how_many_playoffs_left_the_tie(playoffs: int, said: str) -> None:
    t = _tied_tournament(playoffs)
    assert len(t.rounds) == playoffs + 1 and t.winner is None
    assert standings_text(t)[-1] == said


def test_potm_names_a_directory_as_one(tmp_path: Path) -> None:
    (tmp_path / "entries").mkdir()
    line = one_line(moo(tmp_path, "potm", "entries", "--length", "5", "--dictionary"), "potm")
    assert line == "moo potm: entry entries is a directory, not a program"
    line = one_line(moo(tmp_path, "potm", "nope.sh", "--length", "5", "--dictionary"), "potm")
    assert line == "moo potm: no such entry: nope.sh"


# -- moo analyse: every record of an export file, or the one chosen (defect 6) --------------------


def _export_record(match_id: str, secrets: tuple[str, str],
                   guesses: tuple[list[str], list[str]]) -> dict[str, object]:
    m, _ = Match.create(match_id, ("ann", "bob"), MatchConfig(), 0)
    m.set_secret(0, secrets[0], "s0", 1)
    m.set_secret(1, secrets[1], "s1", 1)
    for n in range(max(len(guesses[0]), len(guesses[1]))):
        for seat in (0, 1):
            if n < len(guesses[seat]) and not m.finished:
                m.guess(seat, guesses[seat][n], 2 + n)
    return match_record(match_id, {"players": ["ann", "bob"], "bots": [None, None]}, m.events)


@pytest.fixture
def export_file(tmp_path: Path) -> Path:
    """Three matches as `moo export` writes them: two played, one that never started."""
    first = _export_record("m000000000001", ("5381", "0724"),
                           (["0123", "4567", "0724"], ["1234", "5678", "3581"]))
    second = _export_record("m000000000002", ("1234", "5678"),
                            (["0123", "5678"], ["4567", "1234"]))
    m, events = Match.create("m000000000003", ("ann", "bob"), MatchConfig(), 0)
    events += m.resign(0, 1)
    never = match_record("m000000000003", {"players": ["ann", "bob"]}, events)
    path = tmp_path / "games.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (first, second, never)))
    return path


def test_analyse_reads_every_record_of_an_export_and_says_so(tmp_path: Path,
                                                             export_file: Path) -> None:
    done = moo(tmp_path, "analyse", str(export_file))
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    heads = [line for line in out if line.startswith("record ")]
    assert heads == ["record 1 of 3: match m000000000001 (ann vs bob)",
                     "record 2 of 3: match m000000000002 (ann vs bob)",
                     "record 3 of 3: match m000000000003: not analysed: the exported match "
                     "has no secrets (it never started)"]
    assert out[-1] == "3 records: 2 analysed, 1 not analysed"
    assert sum(line.startswith("ann (secret 5678)") for line in out) == 1  # record 2's table

    js = moo(tmp_path, "analyse", str(export_file), "--json")
    lines = [json.loads(line) for line in js.stdout.splitlines()]
    assert [(r["record"], r["match_id"], "players" in r) for r in lines] == [
        (1, "m000000000001", True), (2, "m000000000002", True), (3, "m000000000003", False)]
    assert lines[1]["players"][0]["secret"] == "5678"


def test_analyse_one_chosen_record(tmp_path: Path, export_file: Path) -> None:
    done = moo(tmp_path, "analyse", str(export_file), "--record", "2", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)  # one record: one JSON document, as for a single match
    assert [p["secret"] for p in out["players"]] == ["5678", "1234"]
    line = one_line(moo(tmp_path, "analyse", str(export_file), "--record", "4"), "analyse")
    assert line == f"moo analyse: --record 4: {export_file} holds 3 records"


def test_record_is_refused_with_a_match_id(tmp_path: Path) -> None:
    line = one_line(moo(tmp_path, "analyse", "m0123456789ab", "--record", "2"), "analyse")
    assert line == "moo analyse: --record N picks a record of a file; a MATCH_ID is one match"


# -- moo eval: an enumerated race shows its progress (defect 7) -----------------------------------


def test_an_enumerated_race_draws_a_progress_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar of ``moo eval`` when a side adapts (minutes against strongest), drawn here at
    once and whatever the stream, over the pairs of secrets of a small game."""
    shown = io.StringIO()

    def bar(total: int, label: str) -> playout.Progress:
        return playout.Progress(total, label, stream=shown, delay=0.0, only_tty=False)

    monkeypatch.setattr(evaluate, "Progress", bar)
    small = Rules(length=3, alphabet="012345")  # 120 secrets
    result = evaluate.race_result("entropy", "minimax", small)
    assert result["games"] == 120 * 120
    frames = shown.getvalue().split("\r")
    assert frames[-1] == f"racing entropy vs minimax [{'#' * 30}] 14400/14400\n", frames
    # before the race, each fixed side's tree is made by playing every secret: barred too
    for side in ("entropy", "minimax"):
        assert f"evaluating {side} [{'#' * 30}] 120/120\n" in frames, frames


# -- moo play: one way to quit in every game, never taken as a guess (defect 9) ------------------


@pytest.mark.parametrize(
    ("rules", "typed", "kind", "value"),
    [(Rules(), "?quit", "command", "quit"), (Rules(), "QUIT", "command", "quit"),
     (Rules(), "=0123", "guess", "0123"), (Rules(), "?LEFT", "command", "left"),
     (MastermindRules(), "?quit", "command", "quit"), (MastermindRules(), "q", "command", "quit"),
     (WordRules(4), "?quit", "command", "quit"), (WordRules(4), "QUIT", "ambiguous", "QUIT"),
     (WordRules(4), "Exit", "ambiguous", "Exit"), (WordRules(4), "=quit", "guess", "QUIT"),
     (WordRules(5), "quit", "command", "quit"),  # not 5 letters: cannot be a guess
     (WordRules(4), "left", "guess", "LEFT"),  # a harmless word stays a guess
     (Rules(alphabet="eqtuixbrsy"), "quit", "ambiguous", "quit"),  # letters as symbols
     (Rules(alphabet="eqtuixbrsy"), "?quit", "command", "quit")],
)
def test_quitting_has_one_form_in_every_game(rules: GameRules, typed: str, kind: str,
                                            value: str) -> None:
    assert parse_entry(typed, rules) == Entry(kind, value)


def test_online_word_moo_asks_about_a_bare_quit_and_quits_on_the_question_mark(
        tmp_path: Path) -> None:
    """A 4-letter word match: QUIT typed bare is not played (it was, as a guess) and does not
    resign; ?QUIT resigns as in every game."""
    with moo_serve(tmp_path, env={"MOO_VARIANTS": "moo:4:0123456789,words:4:bulls_cows"}) as url:
        term = Terminal(moo_command("play", "--bot", "words", "--rules", "words:4", "--url",
                                    url, "--name", "quinn"), client_env(tmp_path))
        try:
            term.expect(r"TYPE '\?RULES' FOR THE RULES, '\?QUIT' TO RESIGN\.")
            term.expect(r"CHOOSE YOUR SECRET: A 4-LETTER ENGLISH WORD")
            term.type("tree")
            term.expect(r"YOUR SECRET IS TREE\.")
            term.expect(r"GUESS 1: TYPE 4 LETTERS\? ")
            term.type("quit")
            term.expect(r"QUIT IS A GUESS HERE AS WELL AS A COMMAND: TYPE \?QUIT TO QUIT, OR "
                        r"=QUIT TO PLAY IT AS A GUESS \(NOTHING WAS SENT\)\.")
            term.type("?quit")
            term.expect(r"IT IS ANTISOCIAL")
            term.expect(r"RESIGN THIS MATCH \(YES OR NO\)\? ")
            term.type("yes")
            term.expect(r"YOU RESIGNED\.")
            term.expect(r"PLAY AGAIN \(YES OR NO\)\? ")
            term.type("no")
            assert term.proc.wait(timeout=patience(60)) == 0
        finally:
            if term.proc.poll() is None:
                term.proc.kill()
                term.proc.wait()
    assert "ROUND 1: QUIT" not in term.out
    (record,) = records(str(tmp_path / "serve.sqlite3"))
    seat = record["players"].index("quinn")
    assert record["guesses"][seat] == []  # QUIT was never sent
    assert record["result"]["reason"] == "resign"
