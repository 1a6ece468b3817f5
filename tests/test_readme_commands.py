"""Every ``moo`` command the README shows, run as the README writes it.

The commands are read from README.md itself (its ``sh`` code blocks and its inline code), so a
command added to the README without a way to run it here fails :func:`test_every_readme_command
_is_known`. How each one runs is in :data:`HOW`:

* ``as written``: in a fresh folder that holds what the README says the reader has (``mybot.py``
  with ten lines, the repository's ``examples/``, a player ``ann`` who played on the server),
  against a server this module starts where the command names ``ws://127.0.0.1:8765/`` or
  ``var/moo.sqlite3`` or connects to that default address (only the address and the database
  path are put in);
* ``help``: a command named in prose (``moo play``) or a synopsis with placeholders
  (``moo serve --host H ...``): its ``--help``;
* ``input``: an interactive command, with what a person would type on standard input;
* ``long``: marked long-running in the README; run with the smaller size the README gives.

Each must exit 0 without a traceback.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli_errors import MOO
from tests.client_support import ROOT, client_env, moo_serve

# runs programs in processes of their own: left out by ./dev test --quick
pytestmark = pytest.mark.e2e

README = ROOT / "README.md"
README_URL = "ws://127.0.0.1:8765/"

MYBOT = '''\
import random
from bots.base import Strategy
from moo.rules import Response, Rules


class MyBot(Strategy):
    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self.rules, self.left = rules, list(rules.secrets)

    def next_guess(self) -> str:
        return self.left[0]

    def observe(self, guess: str, response: Response) -> None:
        self.left = self.rules.consistent(self.left, guess, response)
'''

#: command as the README writes it -> how it runs here (see the module docstring); ``long``
#: and ``input`` carry the arguments or the typed lines
HOW: dict[str, tuple[str, ...]] = {
    "moo --help": ("as written",),
    "moo ladder check examples/bots/first_consistent.sh": ("as written",),
    "moo ladder submit examples/bots/first_consistent.sh --url ws://127.0.0.1:8765/ "
    "--name mybot": ("as written",),
    "moo ladder show --url ws://127.0.0.1:8765/": ("as written",),
    "moo ladder": ("help",),
    "moo worker": ("help",),
    "moo eval strongest --vs minimum --json": ("as written",),
    "moo strategy dump minimum": ("as written",),
    "moo strategy list": ("as written",),
    "moo solve minimum --cell 2B1C": ("as written",),
    "moo solve minimum --jobs 2 --out tree.txt.gz": (
        "long", "solve", "minimum", "--cell", "4B", "--jobs", "2"),
    "moo solve minimum --game mastermind --length 4 --alphabet 123456": ("as written",),
    "moo report ./mybot.py:MyBot --only --out report/": ("as written",),
    "moo eval mypkg.mybot:MyBot --vs minimum --json": ("as written",),
    "moo tournament minimum strongest random --url ws://127.0.0.1:8765/ --rounds 20 "
    "--out r.jsonl": ("as written",),
    "moo tournament minimum strongest entropy --local --rounds 200 --concurrency 8 "
    "--out r.jsonl --resume": (
        "long", "tournament", "minimum", "strongest", "entropy", "--local", "--rounds", "4",
        "--concurrency", "2", "--out", "r2.jsonl", "--resume"),
    "moo play --bot minimum": ("input", "0123", "?QUIT"),
    "moo play --solo": ("input", "QUIT"),
    "moo play --solo --assist": ("input", "QUIT"),
    "moo play --words 5": ("input", "QUIT"),
    "moo words --length 5 --answers": ("as written",),
    "moo words --length 5": ("as written",),
    "moo play --create-room": ("help",),
    "moo play --room CODE": ("help",),
    "moo play --set-password": ("help",),
    "moo play --sign-in": ("help",),
    "moo play --rules words:5 --bot words": ("help",),
    "moo export --db var/moo.sqlite3 --out games.jsonl": ("as written",),
    "moo report --games games.jsonl --player ann": ("as written",),
    "moo bot minimum --vs-bot random --url ws://127.0.0.1:8765/ --games 20": ("as written",),
    "moo bot --cmd ./examples/bots/first_consistent.sh --vs-bot random "
    "--url ws://127.0.0.1:8765/": ("as written",),
    "moo bot words --rules words:5 --vs-bot words": ("as written",),
    "moo bot minimum --url ws://127.0.0.1:8765/ --name mymin --ladder": ("help",),
    "moo serve --mqtt mqtt://127.0.0.1:1883": ("help",),
    "moo watch --mqtt mqtt://127.0.0.1:1883": ("help",),
    "moo potm": ("help",),
    "moo potm examples/potm/letterwise.sh --length 5 --dictionary": ("help",),
    "moo analyse FILE": ("help",),
    "moo analyse MATCH_ID": ("help",),
    "moo play": ("help",),
    "moo bot": ("help",),
    "moo words": ("help",),
    "moo tournament": ("help",),
    "moo tournament --url": ("help",),
    "moo eval": ("help",),
    "moo serve --host H --port P --db PATH [--config FILE] [--mqtt URL]": ("help",),
}


def readme_commands() -> list[str]:
    """Every ``moo ...`` command of README.md: code-block lines and inline code, in order."""
    text = README.read_text(encoding="utf-8")
    found: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        found += [line.split(" #")[0].strip() for line in block.splitlines()
                  if line.startswith("moo ")]
    found += re.findall(r"`(moo (?:[^`]+))`", text)
    return list(dict.fromkeys(" ".join(c.split()) for c in found))


def test_every_readme_command_is_known() -> None:
    commands = readme_commands()
    assert len(commands) > 20  # the extraction sees the README
    assert [c for c in commands if c not in HOW] == []
    assert [c for c in HOW if c not in commands] == []  # nothing stale either


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, Path]]:
    """(the reader's folder, the server's URL, the server's database)."""
    folder = tmp_path_factory.mktemp("reader")
    (folder / "mybot.py").write_text(MYBOT)
    (folder / "mypkg").mkdir()
    (folder / "mypkg" / "__init__.py").write_text("")
    (folder / "mypkg" / "mybot.py").write_text(MYBOT)
    shutil.copytree(ROOT / "examples", folder / "examples")
    server = tmp_path_factory.mktemp("server")
    with moo_serve(server) as url:
        yield folder, url, server / "serve.sqlite3"


def _run(folder: Path, args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MOO, *args], cwd=folder, env=client_env(folder), input=stdin,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("command", list(HOW))
def test_the_readme_command_runs(place: tuple[Path, str, Path], command: str) -> None:
    folder, url, db = place
    how = HOW[command]
    words = command.split()[1:]
    stdin = ""
    if how[0] == "help":
        words = [w for w in words[:1] if not w.startswith("-")] + ["--help"]
    elif how[0] == "long":
        words = list(how[1:])
    elif how[0] == "input":
        stdin = "\n".join(how[1:]) + "\n"
    words = [url if w == README_URL else str(db) if w == "var/moo.sqlite3" else w
             for w in words]
    if words[0] in ("play", "bot") and "--url" not in words and how[0] != "help" \
            and not {"--solo", "--words"} & set(words):
        words += ["--url", url]  # the README's server is the default ws://127.0.0.1:8765/
    if command.startswith("moo report --games"):  # the README's ann has played on the server
        assert _run(folder, ["bot", "random", "--name", "ann", "--vs-bot", "minimum", "--url",
                             url]).returncode == 0
        _run(folder, ["export", "--db", str(db), "--out", "games.jsonl"])
    done = _run(folder, words, stdin)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == 0, (words, done.stdout[-2000:], done.stderr[-2000:])
