"""Bots in any language: an external program driven over stdin/stdout (docs/bot-protocol.md).

The program runs as one persistent process (as a UCI chess engine does) rather than once per
guess (as the 1999 POTM referee did): a bot can then keep its tables between guesses and
matches, and we pay for process start-up once. The price is that a broken program could hang
or spam us, so every read has a deadline (default 10 s a move, POTM's limit), every reply is
checked against the match's rules, and any failure kills the process and raises
:class:`BotFailure`. The caller turns that into a resignation; the next ``new_match`` starts a
fresh process, so one bad match never takes the runner down.

Two faces, one implementation:

* :class:`ExternalBot`: ``async`` methods, for the ``moo bot`` runner and anything on asyncio.
* :class:`ExternalStrategy`: the synchronous :class:`bots.base.Strategy` contract, so a
  tournament (or ``bots.evaluate``) can use ``cmd:./prog`` like any built-in strategy. It runs
  an :class:`ExternalBot` on a private event-loop thread, which works whether or not the caller
  itself is inside an event loop.

It lives with the bots (not with the clients) because it is a strategy like the others:
:func:`bots.registry.create` builds it for ``cmd:`` specs, and imports point clients -> server ->
bots -> moo only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import shlex
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, NoReturn, Protocol, TypeVar

from bots.base import Strategy
from moo.errors import InvalidCode, MooError
from moo.rules import DEFAULT_RULES, Response, Rules
from moo.variants import GameRules

__all__ = [
    "PROTOCOL_VERSION",
    "BotFailure",
    "ExternalBot",
    "ExternalStrategy",
    "ProcessTransport",
    "Transport",
    "split_command",
]

log = logging.getLogger("moo.external")

PROTOCOL_VERSION = 1
DEFAULT_MOVE_TIMEOUT = 10.0
#: Longest line we accept from a bot; anything longer is garbage, not a guess.
MAX_LINE = 1024
#: Comment lines a bot may print (logged, never answers) before it must answer.
MAX_COMMENTS = 100

T = TypeVar("T")


class BotFailure(MooError, RuntimeError):
    """The program crashed, timed out or said something that is not a legal answer."""

    code = "bot_failure"

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        #: ``crash``, ``timeout`` or ``garbage``: stable, for reports.
        self.reason = reason
        self.detail = detail


def split_command(cmd: str | Sequence[str]) -> list[str]:
    """``"cmd:./bot --fast"`` / ``"./bot --fast"`` / ``["./bot", "--fast"]`` -> argv."""
    if isinstance(cmd, str):
        text = cmd[4:] if cmd.startswith("cmd:") else cmd
        argv = shlex.split(text)
    else:
        argv = list(cmd)
    if not argv:
        raise ValueError("empty bot command")
    return argv


class Transport(Protocol):
    """How :class:`ExternalBot` reaches its program: the protocol logic stays in one place.

    :class:`ProcessTransport` runs the program as a plain child process (``moo bot --cmd``);
    ``clients.hosted`` runs it in a sandbox with limits. A transport raises
    :class:`BotFailure` for what only it can see (a limit broken); everything about lines,
    answers and deadlines is decided by :class:`ExternalBot`.
    """

    @property
    def running(self) -> bool: ...

    async def open(self) -> None:
        """Start the program (raise ``BotFailure("crash", why)`` if it cannot start)."""

    async def send(self, line: bytes, timeout: float) -> bool:
        """Write one line; False if the program does not read it within ``timeout``.

        Raise ``BotFailure("crash", ...)`` if the program has exited."""

    async def read_line(self, timeout: float) -> bytes | None:
        """The next line (at most ``MAX_LINE + 1`` bytes of it), ``b""`` at the end of its
        output, None if nothing came within ``timeout``."""

    async def exit_status(self) -> str:
        """How the program ended, for a person: ``code 1``, ``signal 9 (SIGKILL)``."""

    def explain(self, reason: str, detail: str) -> tuple[str, str]:
        """The real reason of a failure seen as ``reason``/``detail`` (e.g. a crash that was
        a memory limit); the default transport returns them unchanged."""

    async def close(self) -> None:
        """Say ``quit``, give the program a moment to exit, then kill what is left."""

    async def kill(self) -> None:
        """Kill the program at once (and everything it started, where the transport can)."""


class ProcessTransport:
    """The program as a plain child process, unconfined: ``moo bot --cmd`` and tournaments."""

    def __init__(self, argv: Sequence[str], *, cwd: str | None = None,
                 stderr: int | None = None) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.stderr = stderr
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def open(self) -> None:
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=self.stderr,
                cwd=self.cwd,
                limit=MAX_LINE * 4,
            )
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise BotFailure("crash", f"cannot start {self.argv[0]!r}: {why}") from None

    async def send(self, line: bytes, timeout: float) -> bool:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise BotFailure("crash", "the program is not running")
        word = line.split()[0].decode() if line.split() else "its input"
        if proc.returncode is not None:
            # already seen to exit (which a loaded machine may report before the write's
            # broken pipe): the same failure as the broken pipe
            raise BotFailure("crash", f"the program exited before reading {word!r}")
        try:
            proc.stdin.write(line)
            await asyncio.wait_for(proc.stdin.drain(), timeout)
        except (BrokenPipeError, ConnectionResetError):
            raise BotFailure("crash", f"the program exited before reading {word!r}") from None
        except TimeoutError:
            return False
        return True

    async def read_line(self, timeout: float) -> bytes | None:
        proc = self._proc
        if proc is None or proc.stdout is None:
            raise BotFailure("crash", "the program is not running")
        try:
            return await asyncio.wait_for(proc.stdout.readline(), timeout)
        except TimeoutError:
            return None
        except (ValueError, asyncio.LimitOverrunError):
            return b"x" * (MAX_LINE + 1)  # over-long: garbage, whatever it said

    async def exit_status(self) -> str:
        proc = self._proc
        code = None if proc is None else await _returncode(proc)
        return f"code {code}"

    def explain(self, reason: str, detail: str) -> tuple[str, str]:
        return reason, detail

    async def close(self) -> None:
        proc = self._proc
        self._proc = None
        if proc is None:
            return
        try:
            if proc.returncode is None:
                with contextlib.suppress(Exception):
                    assert proc.stdin is not None
                    proc.stdin.write(b"quit\n")
                    await proc.stdin.drain()
                    proc.stdin.close()  # end of input too: some programs stop on that alone
                try:
                    await asyncio.wait_for(proc.wait(), 1.0)
                except TimeoutError:
                    await self._kill(proc)
        finally:
            _close_input(proc)

    async def kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            await self._kill(proc)

    @staticmethod
    async def _kill(proc: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        try:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 5.0)
        finally:
            _close_input(proc)


def _close_input(proc: asyncio.subprocess.Process) -> None:
    """Close our end of the program's input while the loop runs (also when the wait for it
    was cancelled): left open, the garbage collector closes it later through a loop that may
    be gone ("Event loop is closed")."""
    if proc.stdin is not None:
        proc.stdin.close()


class ExternalBot:
    """One external bot program (async API). See docs/bot-protocol.md for the line protocol.

    The process is started lazily by :meth:`new_match` (or :meth:`start`) and restarted after a
    failure. ``move_timeout`` bounds each answer (a guess, or the ``ready`` handshake).
    ``transport`` replaces the plain child process (e.g. by a sandboxed one); ``cwd`` and
    ``stderr`` are then the transport's business.
    """

    def __init__(
        self,
        cmd: str | Sequence[str],
        *,
        move_timeout: float = DEFAULT_MOVE_TIMEOUT,
        cwd: str | None = None,
        stderr: int | None = None,
        transport: Transport | None = None,
    ) -> None:
        self.argv = split_command(cmd)
        self.move_timeout = move_timeout
        #: Where the bot's stderr goes (None: inherit ours, so authors see their debug output).
        self.transport: Transport = transport or ProcessTransport(self.argv, cwd=cwd,
                                                                  stderr=stderr)
        #: Name the program announced in ``ready NAME`` (falls back to the command).
        self.name = self.argv[0].rsplit("/", 1)[-1]
        self.starts = 0
        self.failures = 0
        self._rules: Rules = DEFAULT_RULES

    @property
    def running(self) -> bool:
        return self.transport.running

    # -- process life cycle ---------------------------------------------------------------------
    async def start(self) -> None:
        """Spawn the program and do the ``moo 1`` / ``ready`` handshake."""
        if self.running:
            return
        try:
            await self.transport.open()
        except BotFailure as exc:
            await self._fail(exc.reason, exc.detail)
        self.starts += 1
        # A program that exits at once may still have said why on stdout: read that first.
        try:
            if not await self.transport.send(f"moo {PROTOCOL_VERSION}\n".encode("ascii"),
                                             self.move_timeout):
                await self._fail("timeout", "the program does not read its input")
        except BotFailure as exc:
            if exc.reason != "crash":
                await self._fail(exc.reason, exc.detail)
        words = (await self._answer("the ready handshake")).split()
        if not words or words[0] != "ready":
            await self._fail("garbage", f"expected 'ready', got {' '.join(words)[:60]!r}")
        if len(words) > 1:
            self.name = words[1][:24]

    async def close(self) -> None:
        """Say ``quit`` and give the program a moment to exit, then kill it."""
        await self.transport.close()

    async def _fail(self, reason: str, detail: str) -> NoReturn:
        """Kill the program and raise: a misbehaving bot never gets a second chance mid-match."""
        self.failures += 1
        reason, detail = self.transport.explain(reason, detail)
        await self.transport.kill()
        raise BotFailure(reason, detail)

    async def _send(self, line: str) -> None:
        try:
            sent = await self.transport.send(line.encode("ascii") + b"\n", self.move_timeout)
        except BotFailure as exc:
            await self._fail(exc.reason, exc.detail)
        if not sent:
            await self._fail("timeout", "the program does not read its input")

    async def _answer(self, what: str) -> str:
        """Read the next non-comment line within the move time limit."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.move_timeout
        for _ in range(MAX_COMMENTS):
            try:
                raw = await self.transport.read_line(max(0.0, deadline - loop.time()))
            except BotFailure as exc:
                await self._fail(exc.reason, exc.detail)
            if raw is None:
                await self._fail("timeout", f"no answer to {what} within {self.move_timeout:g} s")
            if not raw:
                status = await self.transport.exit_status()
                await self._fail("crash", f"the program exited ({status}) before {what}")
            if len(raw) > MAX_LINE:
                await self._fail("garbage", f"an over-long line in answer to {what}")
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            if line.startswith("#"):
                log.info("%s: %s", self.name, line[1:].strip())
                continue
            return line
        await self._fail("garbage", f"too many comment lines before {what}")

    # -- the game ------------------------------------------------------------------------------
    async def new_match(self, rules: GameRules, rng: random.Random | None = None) -> None:
        """Start a match (starting or restarting the program if needed).

        The line protocol describes MOO rules only (length, alphabet, repeats): Mastermind's
        scoring cannot be announced to a program, so it is refused rather than misplayed."""
        if not isinstance(rules, Rules):
            raise ValueError("external bot programs play MOO rules only (docs/bot-protocol.md)")
        self._rules = rules
        await self.start()
        extra = " repeats" if rules.repeats_in_guess else ""
        await self._send(f"new {rules.length} {rules.alphabet}{extra}")

    async def next_guess(self) -> str:
        await self._send("guess")
        line = await self._answer("'guess'")
        try:
            return self._rules.check_guess(line.replace(" ", ""))
        except InvalidCode as exc:
            await self._fail("garbage", f"{line[:40]!r} is not a legal guess ({exc})")

    async def observe(self, guess: str, response: Response) -> None:
        await self._send(f"result {guess} {response.bulls} {response.cows}")

    async def observe_opponent(
        self, count: int, response: Response | None, guess: str | None = None
    ) -> None:
        # The line protocol (docs/bot-protocol.md) reports the opponent's count and response
        # only; the guess is accepted for the runner's sake and not sent.
        tail = "" if response is None else f" {response.bulls} {response.cows}"
        await self._send(f"opponent {count}{tail}")

    async def end(self, outcome: str) -> None:
        """Tell the program how the match ended (``win``, ``loss``, ``draw``); best effort."""
        if self.running:
            with contextlib.suppress(BotFailure):
                await self._send(f"end {outcome}")


async def _returncode(proc: asyncio.subprocess.Process) -> int | None:
    with contextlib.suppress(TimeoutError):
        return await asyncio.wait_for(proc.wait(), 1.0)
    return proc.returncode


class ExternalStrategy(Strategy):
    """An external program as a synchronous :class:`~bots.base.Strategy`.

    ``ExternalStrategy("cmd:./examples/bots/first.sh")`` (the ``cmd:`` prefix is optional).
    Methods raise :class:`BotFailure` when the program misbehaves; the caller scores that as a
    loss, and the next :meth:`new_match` restarts the program. Call :meth:`close` when done
    (or use it as a context manager).
    """

    name = "cmd"
    summary = "an external program speaking docs/bot-protocol.md"
    share_openings = False  # its state lives in another process

    def __init__(self, cmd: str | Sequence[str], *, move_timeout: float = DEFAULT_MOVE_TIMEOUT,
                 cwd: str | None = None) -> None:
        self.bot = ExternalBot(cmd, move_timeout=move_timeout, cwd=cwd)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"external-{self.bot.name}", daemon=True
        )
        self._thread.start()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        # The bot enforces its own deadlines; this outer bound only guards against a bug here.
        return future.result(timeout=self.bot.move_timeout * 3 + 10)

    def new_match(self, rules: Rules, rng: random.Random) -> None:
        self._call(self.bot.new_match(rules, rng))

    def next_guess(self) -> str:
        return self._call(self.bot.next_guess())

    def observe(self, guess: str, response: Response) -> None:
        self._call(self.bot.observe(guess, Response(*response)))

    def observe_opponent(self, count: int, response: Response | None) -> None:
        self._call(self.bot.observe_opponent(count, response))

    def end(self, outcome: str) -> None:
        self._call(self.bot.end(outcome))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._call(self.bot.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5.0)
        self._loop.close()

    def __enter__(self) -> ExternalStrategy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if not self._loop.is_closed() and not self._loop.is_running():
                self._loop.close()
