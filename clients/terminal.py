"""``moo play``: MOO for a person at a terminal, online or solo like the 1971 BASIC program.

Plain, line-oriented output on purpose: it works on any terminal, over ssh, in a pty under
test, and in a screen reader, and it keeps the feel of the teletype original (``TYPE 4
NUMBERS?``, ``BB,CC``, ``GAME 3: TRIES = 6, AVERAGE = 6``). Mistyped guesses are explained with
the rules' own messages and never counted, which the 1971 program also did.

Online play goes through the SDK (:mod:`clients.sdk`). Standard input is read by one thread that
feeds an asyncio queue, so the screen can show the opponent's moves while we wait for a line.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import random
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import bots.dictionary  # noqa: F401  (installs word MOO's dictionary: secret checks, LEFT)
from clients.sdk import (
    DEFAULT_URL,
    Away,
    Back,
    Client,
    Connected,
    ConnectionLost,
    Disconnected,
    ErrorReply,
    Finished,
    GuessMade,
    MatchAnnounced,
    MatchEvent,
    MatchState,
    Message,
    Resigned,
    Resumed,
    RoundRevealed,
    SecretSet,
    ServerError,
    Started,
    TimedOut,
    Welcome,
)
from clients.sdk.cli_args import add_url_option, urls_of
from clients.sdk.tokens import TokenStore
from clients.wordplay import describe_answer, play_words
from moo.assist import assist
from moo.errors import InvalidCode
from moo.mastermind import MastermindRules
from moo.rules import DEFAULT_RULES, Response
from moo.variants import GameRules, rules_arg
from moo.words import NoDictionary, WordRules

__all__ = ["Entry", "configure", "main", "parse_entry", "rules_page"]

ANTISOCIAL = "IT IS ANTISOCIAL TO TRY TO QUIT IN THE MIDDLE\nOF A GAME OF MOO."
YES = ("y", "yes", "j", "ja", "oui", "si")


# -- input: what did the person type? ------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One typed line: a legal ``guess``, a ``command``, or an ``error`` to explain."""

    kind: str  # guess / command / error / empty
    value: str = ""


COMMANDS = {
    "?": "rules", "help": "rules", "rules": "rules", "h": "rules",
    "left": "left", "choices": "left",
    "history": "history", "hist": "history",
    "clock": "clock", "clocks": "clock", "time": "clock",
    "quit": "quit", "q": "quit", "exit": "quit", "resign": "quit", "bye": "quit",
}


def parse_entry(text: str, rules: GameRules = DEFAULT_RULES) -> Entry:
    """Read a line the way people type codes: ``0123``, ``0 1 2 3``, ``0,1,2,3``, ``0.1.2.3``.

    The 1971 teletype took four numbers separated by commas or periods and ``-1`` first to
    quit; both still work. A bad line becomes an ``error`` whose text says what is wrong.
    """
    t = text.strip()
    if not t:
        return Entry("empty")
    if isinstance(rules, WordRules):
        return _word_entry(t, rules)
    command = COMMANDS.get(t.lower())
    if command is not None:
        return Entry("command", command)
    separators = " \t,;" + ("" if "." in rules.alphabet else ".")
    if any(ch in separators for ch in t):
        parts = [p for p in re.split("[" + re.escape(separators) + "]+", t) if p]
        if parts and parts[0] == "-1":
            return Entry("command", "quit")
        unit = rules.symbols_text.split()[0]
        for p in parts:
            if len(p) != 1:
                return Entry(
                    "error",
                    f"each of the {rules.length} {unit} should be one of {rules.symbols_text}"
                    f" ({p!r} is not)",
                )
        t = "".join(parts)
    if t == "-1":
        return Entry("command", "quit")
    try:
        return Entry("guess", rules.check_guess(t))
    except InvalidCode as exc:
        return Entry("error", str(exc))


def _word_entry(t: str, rules: WordRules) -> Entry:
    """Word MOO: any N letters are a guess (LEFT and QUIT are words), so commands start with ?
    as in ``moo play --words`` (clients/wordplay.py)."""
    if t.startswith("?"):
        name = t[1:].strip().lower()
        command = "rules" if not name else COMMANDS.get(name)
        if command is None:
            return Entry("error", f"no command {t!r} (?rules, ?left, ?history, ?clock, ?quit)")
        return Entry("command", command)
    try:
        return Entry("guess", rules.check_guess(t))
    except InvalidCode as exc:
        return Entry("error", str(exc))


def _word_page(rules: WordRules) -> str:
    if rules.scoring == "hits_misses":
        how = """    HIT:  one of your letters is in the word, in the same place.
    MISS: one of your letters is not in the word at all (the May 1999 POTM)."""
        win = f"{rules.length} hits"
    else:
        how = """    BULL: one of your letters is in the word, in the same place.
    COW:  one of your letters is in the word, in another place (each letter counted at
          most as often as it is in both words)."""
        win = f"{rules.length} bulls"
    return f"""
THE RULES OF WORD MOO
  Each secret is an English word of {rules.length} letters from the dictionary (letters may
  repeat). A guess is any {rules.length} letters A-Z, a word or not (EEEEE is a fine probe).
{how}
  {win} wins. Mistyped guesses (not {rules.length} letters A-Z) are explained and NOT counted.
COMMANDS start with ? (any {rules.length} letters, LEFT or QUIT too, are a guess)
  ?rules or ?  this page          ?left     how many words are still possible
  ?history     the guesses so far ?clock    your clock
  ?quit        resign
"""


def show_answer(rules: GameRules, response: Response) -> str:
    """``1B2C   ...`` for codes; ``2 BULLS, 1 COW`` or ``2 HITS, 3 MISSES`` for words."""
    if isinstance(rules, WordRules):
        return describe_answer(rules, response)
    return show_response(response)


def rules_page(rules: GameRules = DEFAULT_RULES) -> str:
    if isinstance(rules, MastermindRules):
        return _mastermind_page(rules)
    if isinstance(rules, WordRules):
        return _word_page(rules)
    unit = rules.symbols_text.split()[0]
    r = Response(1, 2)
    example = (
        f"  Example: secret 5268, guess 5026: the 5 is a bull, the 2 and the 6 are cows:\n"
        f"  {r} (the 1971 teletype printed {r.teletype}).\n"
        if rules.length == 4 and rules.alphabet == "0123456789" else ""
    )
    return f"""
THE RULES OF MOO
  A secret of {rules.length} different {rules.symbols_text} is chosen. Find it: after each
  guess you are told how many BULLS and COWS it scored.
    BULL (B): one of your {unit} is in the secret, in the same place.
    COW  (C): one of your {unit} is in the secret, in another place.
{example}  {rules.length} bulls ({rules.solved}) wins.
  Type a guess as {_spellings(rules.secrets[1])}.
  Mistyped guesses are explained and NOT counted.
  Online, both players race to crack each other's secret: in lockstep pacing each round both
  guess and the responses are shown together; whoever needs fewer guesses wins.
COMMANDS
  rules or ?   this page          left      how many codes are still possible
  history      your guesses       clock     time left (online, when clocks are on)
  quit         leave (at the start of a game; mid-game online it resigns)
"""


def _mastermind_page(rules: MastermindRules) -> str:
    return f"""
THE RULES OF MASTERMIND
  A secret of {rules.length} {rules.symbols_text} is chosen; a colour may occur more than once.
  Find it: after each guess you are told how many BLACK and WHITE pegs it scored.
    BLACK (B): a peg of the right colour in the right place.
    WHITE (C): a right colour in the wrong place (each colour counts at most as often as it
               is in both codes). Example: secret 1122, guess 1111: 2 black, 0 white.
  Responses are printed as bulls and cows: B = black, C = white. {rules.length}B wins.
  Type a guess as {_spellings(rules.secrets[min(7, len(rules.secrets) - 1)])}.
  Mistyped guesses are explained and NOT counted.
COMMANDS
  rules or ?   this page          left      how many codes are still possible
  history      your guesses       clock     time left (online, when clocks are on)
  quit         leave (at the start of a game; mid-game online it resigns)
"""


def secret_words(rules: GameRules) -> str:
    """``4 DIFFERENT DIGITS`` / ``4 COLOURS 1-6 (REPEATS ALLOWED)`` / ``A 5-LETTER ENGLISH
    WORD`` for prompts."""
    if isinstance(rules, WordRules):
        return f"A {rules.length}-LETTER ENGLISH WORD"
    if isinstance(rules, MastermindRules):
        return f"{rules.length} {rules.symbols_text.upper()} (REPEATS ALLOWED)"
    unit = rules.symbols_text.split()[0].upper()
    if rules.alphabet == "0123456789":
        return f"{rules.length} DIFFERENT {unit}"
    return f"{rules.length} DIFFERENT {rules.symbols_text.upper()}"


def _spellings(code: str) -> str:
    return f"{code} or {' '.join(code)} or {','.join(code)}"


def choices_left(rules: GameRules, turns: list[tuple[str, Response]]) -> list[str]:
    left: list[str] = list(rules.secrets)
    for guess, response in turns:
        left = rules.consistent(left, guess, response)
    return left


def choices_text(left: list[str]) -> str:
    """As in the J essay's Appleyard player: "no choices left", "one choice left; ..."."""
    if not left:
        return "NO CHOICES LEFT (the responses contradict each other)"
    if len(left) == 1:
        return f"ONE CHOICE LEFT; IT MUST BE {left[0]}"
    return f"{len(left)} CHOICES LEFT"


def _is_digits(rules: GameRules) -> bool:
    return rules.alphabet.isdigit()


def show_response(response: Response) -> str:
    return f"{format(str(response), '<6')} {response.teletype}"


def average_text(total: int, games: int) -> str:
    avg = total / games
    return f"{avg:.2f}".rstrip("0").rstrip(".")


class Tally:
    """The running score of this invocation, as the BASIC program kept G and A."""

    def __init__(self) -> None:
        self.games = 0
        self.tries = 0

    def add(self, tries: int) -> str:
        self.games += 1
        self.tries += tries
        return (f"GAME {self.games}: TRIES = {tries}, "
                f"AVERAGE = {average_text(self.tries, self.games)}")


# -- solo: the computer picks the secret ----------------------------------------------------------


def play_solo(args: argparse.Namespace, read: Callable[[str], str | None],
              say: Callable[[str], None]) -> int:
    rules: GameRules = getattr(args, "rules", None) or DEFAULT_RULES
    if isinstance(rules, WordRules):  # the offline word game, as moo play --words N
        args.words, args.scoring = rules.length, rules.scoring
        return play_words(args, read, say)
    rng = random.Random(args.seed)
    tally = Tally()
    title = "MASTERMIND" if isinstance(rules, MastermindRules) else "MOO"
    say(f"{title}\nI WILL THINK OF {secret_words(rules)}. TRY TO GUESS THEM.")
    say("TYPE 'RULES' FOR THE RULES, 'LEFT' FOR THE CHOICES LEFT, 'QUIT' TO STOP.")
    while True:
        secret = rng.choice(rules.secrets)
        turns: list[tuple[str, Response]] = []
        while True:
            line = read(f"\nTYPE {rules.length} SYMBOLS? " if not _is_digits(rules)
                        else f"\nTYPE {rules.length} NUMBERS? ")
            if line is None:  # end of input: nothing more can be typed
                if turns:
                    say(f"\nTHE NUMBER WAS {secret}.")
                return _goodbye(say, tally)
            entry = parse_entry(line, rules)
            if entry.kind == "empty":
                continue
            if entry.kind == "error":
                say(f"  {entry.value}: not counted, try again.")
                continue
            if entry.kind == "command":
                if entry.value == "quit":
                    if not turns:
                        return _goodbye(say, tally)
                    say("\n" + ANTISOCIAL)
                    answer = read("DO YOU REALLY WANT TO GIVE UP THIS GAME (YES OR NO)? ")
                    if answer is not None and answer.strip().lower() in YES:
                        say(f"THE NUMBER WAS {secret}. THIS GAME DOES NOT COUNT.")
                        break
                    say("PLEASE CONTINUE.")
                elif entry.value == "rules":
                    say(rules_page(rules))
                elif entry.value == "left":
                    say(choices_text(choices_left(rules, turns)))
                elif entry.value == "history":
                    say(_history_solo(turns))
                else:
                    say("THERE IS NO CLOCK IN SOLO PLAY: TAKE YOUR TIME.")
                continue
            response = rules.score(secret, entry.value)
            turns.append((entry.value, response))
            say(f"  -> {show_response(response)}")
            if getattr(args, "assist", False) and response != rules.solved:
                said = assist(rules, [(g, r.bulls, r.cows) for g, r in turns])
                say(f"     ASSISTANT: {said.text()}")
            elif args.helper and response != rules.solved:
                say(f"     {choices_text(choices_left(rules, turns))}")
            if response == rules.solved:
                say("\n" + tally.add(len(turns)))
                break


def _history_solo(turns: list[tuple[str, Response]]) -> str:
    if not turns:
        return "NO GUESSES YET."
    return "\n".join(f"  {i:>2}. {g}  {show_response(r)}" for i, (g, r) in enumerate(turns, 1))


def _goodbye(say: Callable[[str], None], tally: Tally) -> int:
    if tally.games:
        say(f"\n{tally.games} GAME{'S' if tally.games != 1 else ''} PLAYED, AVERAGE "
            f"{average_text(tally.tries, tally.games)} TRIES. GOODBYE.")
    else:
        say("GOODBYE.")
    return 0


# -- online --------------------------------------------------------------------------------------


class LineReader:
    """Standard input as an asyncio queue, read by one daemon thread for the whole run.

    A thread per ``input()`` call cannot be cancelled and would swallow the next line; one
    long-lived reader hands every line to whoever asks next. ``None`` means end of input.
    """

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def pump() -> None:
            while True:
                line = sys.stdin.readline()
                loop.call_soon_threadsafe(self.queue.put_nowait, line if line else None)
                if not line:
                    return

        threading.Thread(target=pump, name="stdin", daemon=True).start()

    async def get(self) -> str | None:
        msg = await self.queue.get()
        if msg is None:
            self.queue.put_nowait(None)  # stays at end of input
        return msg


class Screen:
    """Prints lines, remembering whether a prompt is showing so an event can break it cleanly."""

    def __init__(self) -> None:
        self.prompt: str | None = None

    def say(self, text: str) -> None:
        if self.prompt is not None:
            sys.stdout.write("\n")
            self.prompt = None
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def ask(self, prompt: str) -> None:
        if self.prompt == prompt:
            return
        if self.prompt is not None:
            sys.stdout.write("\n")
        sys.stdout.write(prompt)
        sys.stdout.flush()
        self.prompt = prompt

    def answered(self) -> None:
        self.prompt = None


def _mmss(ms: float) -> str:
    s = max(0, int(ms // 1000))
    return f"{s // 60}:{s % 60:02d}"


class OnlineMatch:
    """One match from the person's side: events to lines, lines to requests."""

    def __init__(self, client: Client, announced: MatchAnnounced, lines: LineReader,
                 screen: Screen, args: argparse.Namespace, tally: Tally) -> None:
        self.client = client
        self.announced = announced
        self.mid = announced.match_id
        self.state: MatchState = client.states[self.mid]
        self.rules = announced.rules
        self.lines = lines
        self.screen = screen
        self.args = args
        self.tally = tally
        self.opp = announced.opponent
        self.confirming = False
        self.clock_left: float | None = announced.config.get("clock_total_ms")
        self.turn_started: float | None = None
        self.rng = random.Random()
        #: Set when the UI has *shown* ``finished``. The state may be further ahead: the SDK
        #: folds events in as they arrive, before we print them.
        self.done = False

    # -- the loop --------------------------------------------------------------------------------
    async def run(self) -> str:
        """Play until ``finished``; returns the outcome (win/loss/draw) or ``aborted``."""
        self.intro()
        line_task: asyncio.Task[str | None] | None = None
        msg_task: asyncio.Task[Message] | None = None
        try:
            while not self.done:
                if not self.client.pending_messages():
                    # Show what already happened before asking for the next move: the state
                    # runs ahead of the screen, so a prompt now could precede the round's news.
                    self.prompt()
                if line_task is None:
                    line_task = asyncio.ensure_future(self.lines.get())
                if msg_task is None:
                    msg_task = asyncio.ensure_future(self.client.receive())
                done, _ = await asyncio.wait({line_task, msg_task},
                                             return_when=asyncio.FIRST_COMPLETED)
                if msg_task in done:
                    task, msg_task = msg_task, None
                    try:
                        self.on_message(task.result())
                    except ConnectionLost:
                        self.screen.say("THE CONNECTION IS GONE AND COULD NOT BE RESTORED.")
                        return "aborted"
                if line_task in done:
                    task2, line_task = line_task, None
                    self.screen.answered()
                    line = task2.result()
                    if line is None:
                        await self.end_of_input()
                        if not self.done:
                            return "aborted"
                    else:
                        await self.on_line(line)
        finally:
            for t in (line_task, msg_task):
                if t is not None:
                    t.cancel()
        self.result()
        return self.state.outcome or "aborted"

    def intro(self) -> None:
        cfg = self.announced.config
        pacing = self.announced.pacing
        how = ("LOCKSTEP: EACH ROUND YOU BOTH GUESS, THEN BOTH RESPONSES ARE SHOWN."
               if pacing == "lockstep" else
               "FREE PACING: GUESS AT YOUR OWN SPEED; FEWER GUESSES WINS.")
        self.screen.say(f"\nMATCH {self.mid}: YOU ({self.client.name}) VS {self.opp}.\n{how}")
        if self.announced.bot_note:
            self.screen.say(f"NOTE: {self.announced.bot_note.upper()}.")
        clocks = []
        if cfg.get("clock_total_ms"):
            clocks.append(f"{_mmss(cfg['clock_total_ms'])} IN TOTAL")
        if cfg.get("clock_guess_ms"):
            clocks.append(f"{cfg['clock_guess_ms'] / 1000:g} S A GUESS")
        if clocks:
            self.screen.say("CLOCK: " + ", ".join(clocks) + ".")
        if isinstance(self.rules, WordRules):
            self.screen.say(f"WORD MOO: {secret_words(self.rules)}, "
                            + ("HITS AND MISSES." if self.rules.scoring == "hits_misses"
                               else "BULLS AND COWS."))
            self.screen.say("TYPE '?RULES' FOR THE RULES, '?QUIT' TO RESIGN.")
        else:
            self.screen.say("TYPE 'RULES' FOR THE RULES, 'QUIT' TO RESIGN.")

    def prompt(self) -> None:
        st = self.state
        if st.finished:
            return  # nothing more to type; the remaining events are on their way to the screen
        if self.confirming:
            self.screen.ask("RESIGN THIS MATCH (YES OR NO)? ")
        elif st.needs_secret:
            self.screen.ask(f"CHOOSE YOUR SECRET: {secret_words(self.rules)}"
                            " (RETURN FOR A RANDOM ONE)? ")
        elif st.owes_guess:
            if self.turn_started is None:
                self.turn_started = time.monotonic()
            n = len(st.mine()) + 1
            what = ("LETTERS" if isinstance(self.rules, WordRules)
                    else "NUMBERS" if _is_digits(self.rules) else "SYMBOLS")
            self.screen.ask(f"GUESS {n}{self.clock_hint()}: TYPE {self.rules.length} {what}? ")

    def clock_hint(self) -> str:
        cfg = self.announced.config
        parts = []
        if self.clock_left is not None:
            parts.append(f"{_mmss(self.clock_now())} LEFT")
        if cfg.get("clock_guess_ms"):
            parts.append(f"{cfg['clock_guess_ms'] / 1000:g} S A GUESS")
        return f" [{', '.join(parts)}]" if parts else ""

    def clock_now(self) -> float:
        """Our total clock, estimated locally (the server's is authoritative)."""
        if self.clock_left is None:
            return 0.0
        running = (time.monotonic() - self.turn_started) * 1000 if self.turn_started else 0.0
        return self.clock_left - running

    # -- typed lines -----------------------------------------------------------------------------
    async def on_line(self, line: str) -> None:
        st, say = self.state, self.screen.say
        if self.confirming:
            self.confirming = False
            if line.strip().lower() in YES:
                await self.resign()
            else:
                say("PLEASE CONTINUE.")
            return
        if st.needs_secret:
            text = line.strip()
            entry = parse_entry(text, self.rules)
            if entry.kind == "command":
                await self.command(entry.value)
                return
            try:
                if not text:
                    entry = Entry("guess", self.rng.choice(self.rules.secrets))
                if entry.kind == "error":
                    raise InvalidCode(entry.value)
                secret = self.rules.check_secret(entry.value)
            except InvalidCode as exc:
                say(f"  {exc}: try again.")
                return
            except NoDictionary:  # no word list on this machine: the server checks the word
                if not text:
                    say("  NO DICTIONARY HERE TO PICK A WORD FROM: TYPE ONE.")
                    return
                secret = entry.value
            try:
                await self.client.set_secret(self.mid, secret)
            except ServerError as exc:
                say(f"  {exc.message}.")
                return
            say(f"YOUR SECRET IS {secret}. DON'T TELL {self.opp}!")
            if not st.finished and st.phase == "secrets":
                say(f"WAITING FOR {self.opp} TO CHOOSE A SECRET...")
            return
        entry = parse_entry(line, self.rules)
        if entry.kind == "empty":
            return
        if entry.kind == "command":
            await self.command(entry.value)
            return
        if entry.kind == "error":
            say(f"  {entry.value}: not counted, try again.")
            return
        if st.phase != "playing":
            say("THE GAME HAS NOT STARTED YET.")
            return
        if not st.owes_guess:
            say(f"WAIT FOR {self.opp} TO GUESS ROUND {len(st.mine())}.")
            return
        try:
            await self.client.guess(self.mid, entry.value)
        except ServerError as exc:
            say(f"  {exc.message}: not counted.")
            return
        except ConnectionLost:
            say("THE CONNECTION DROPPED; IF THAT GUESS WAS LOST, TYPE IT AGAIN WHEN ASKED.")
            return
        if self.clock_left is not None and self.turn_started is not None:
            self.clock_left -= (time.monotonic() - self.turn_started) * 1000
        self.turn_started = None

    async def command(self, name: str) -> None:
        say = self.screen.say
        if name == "rules":
            say(rules_page(self.rules))
        elif name == "left":
            try:
                say(choices_text(self.left()))
            except NoDictionary:
                say("NO DICTIONARY ON THIS MACHINE (apt-get install wamerican).")
        elif name == "history":
            say(self.history())
        elif name == "clock":
            if self.clock_left is None and not self.announced.config.get("clock_guess_ms"):
                say("NO CLOCKS IN THIS MATCH: TAKE YOUR TIME.")
            else:
                say("YOUR CLOCK:" + (self.clock_hint() or " -"))
        elif name == "quit":
            say("\n" + ANTISOCIAL)
            self.confirming = True

    async def resign(self) -> None:
        try:
            await self.client.resign(self.mid)
        except (ServerError, ConnectionLost) as exc:
            self.screen.say(f"COULD NOT RESIGN: {exc}")

    async def end_of_input(self) -> None:
        """Nobody can type any more: resign rather than leave the opponent waiting."""
        if not self.state.finished:
            self.screen.say("END OF INPUT: RESIGNING.")
            await self.resign()
            async with asyncio.timeout(10):
                while not self.done:
                    try:
                        self.on_message(await self.client.receive())
                    except ConnectionLost:
                        return

    # -- server messages -------------------------------------------------------------------------
    def on_message(self, msg: Message) -> None:
        say = self.screen.say
        me = self.state.seat
        if isinstance(msg, Disconnected):
            say("CONNECTION LOST. " + ("RECONNECTING..." if msg.will_retry else ""))
            return
        if isinstance(msg, Connected) and msg.reconnect:
            say("RECONNECTED; CATCHING UP.")
            return
        if isinstance(msg, ErrorReply) and msg.ref is None:
            say(f"SERVER: {msg.message}")
            return
        if not isinstance(msg, MatchEvent) or msg.match_id != self.mid:
            return
        if isinstance(msg, Finished):
            self.done = True
        if isinstance(msg, SecretSet) and msg.seat != me:
            say(f"{self.opp} HAS CHOSEN A SECRET.")
        elif isinstance(msg, Started):
            shown = ", ".join(c[:12] + "..." for c in msg.commitments)
            say(f"BOTH SECRETS ARE SET. THE SERVER COMMITTED TO THEM: {shown}\nTHE RACE IS ON!")
        elif isinstance(msg, GuessMade):
            self.on_guess(msg)
        elif isinstance(msg, RoundRevealed):
            if me is None or len(msg.results) < 2:
                return
            g, b, c = msg.results[me]
            og, ob, oc = msg.results[1 - me]
            say(f"  ROUND {msg.n}: {g} -> {show_answer(self.rules, Response(b, c))}")
            say(f"  {self.opp}: {og or '****'} -> {show_answer(self.rules, Response(ob, oc))}")
            self.after_own_response(Response(b, c))
        elif isinstance(msg, Away) and msg.seat != me:
            grace = self.announced.config.get("grace_ms")
            tail = f" THEY HAVE {int(grace) // 1000} S TO COME BACK." if grace else ""
            say(f"{self.opp} HAS DROPPED OUT.{tail}")
        elif isinstance(msg, Back) and msg.seat != me:
            say(f"{self.opp} IS BACK.")
        elif isinstance(msg, Resumed):
            say("THE SERVER RESTARTED; THE CLOCKS WERE STOPPED WHILE IT WAS DOWN.")
        elif isinstance(msg, Resigned):
            say("YOU RESIGNED." if msg.seat == me else f"{self.opp} RESIGNED.")
        elif isinstance(msg, TimedOut):
            who = "YOUR" if msg.seat == me else f"{self.opp}'S"
            say(f"{who} {msg.clock.upper()} CLOCK RAN OUT.")

    def on_guess(self, msg: GuessMade) -> None:
        say = self.screen.say
        mine = msg.seat == self.state.seat
        if msg.bulls is not None and msg.cows is not None:  # free pacing: shown at once
            response = Response(msg.bulls, msg.cows)
            if mine:
                say(f"  -> {show_answer(self.rules, response)}")
                self.after_own_response(response)
            else:
                say(f"  {self.opp}: GUESS {msg.n} {msg.guess or '****'} -> "
                    f"{show_answer(self.rules, response)}")
        elif mine:
            theirs = len(self.state.theirs())
            if theirs < msg.n:
                say(f"WAITING FOR {self.opp}...")
        elif len(self.state.mine()) < msg.n:
            say(f"{self.opp} HAS MADE GUESS {msg.n}.")

    def after_own_response(self, response: Response) -> None:
        if (self.announced.config.get("assist") and response != self.rules.solved
                and not isinstance(self.rules, WordRules)):
            turns = [(t.guess, t.response.bulls, t.response.cows) for t in self.state.mine()
                     if t.guess is not None and t.response is not None]
            self.screen.say(f"     ASSISTANT: {assist(self.rules, turns).text()}")
        elif self.args.helper and response != self.rules.solved:
            try:
                self.screen.say(f"     {choices_text(self.left())}")
            except NoDictionary:
                pass
        elif response == self.rules.solved and not self.state.finished:
            self.screen.say(f"YOU SOLVED IT! WAITING TO SEE HOW {self.opp} DOES...")

    def left(self) -> list[str]:
        turns = [(t.guess, t.response) for t in self.state.mine()
                 if t.guess is not None and t.response is not None]
        return choices_left(self.rules, turns)

    def history(self) -> str:
        mine, theirs = self.state.mine(), self.state.theirs()
        if not mine and not theirs:
            return "NO GUESSES YET."
        rows = [f"   #  YOU              {self.opp}"]
        for i in range(max(len(mine), len(theirs))):
            cells = []
            for turns in (mine, theirs):
                if i < len(turns):
                    t = turns[i]
                    r = show_answer(self.rules, t.response) if t.response else "?"
                    cells.append(f"{t.guess or '****'} {r}")
                else:
                    cells.append("")
            rows.append(f"  {i + 1:>2}  {cells[0]:<16} {cells[1]}")
        return "\n".join(rows)

    def result(self) -> None:
        st, say = self.state, self.screen.say
        res = st.result
        if res is None or st.seat is None:
            return
        me, other = st.seat, 1 - st.seat
        counts = st.counts
        banner = {"win": "*** YOU WIN! ***", "loss": "*** YOU LOSE. ***",
                  "draw": "*** A DRAW. ***"}[st.outcome or "draw"]
        def tried(seat: int) -> str:
            solved = "SOLVED" if st.solved(seat) else "NOT SOLVED"
            return f"{counts[seat]} GUESS{'' if counts[seat] == 1 else 'ES'}, {solved}"

        why = {
            "solved": f"YOU: {tried(me)}; {self.opp}: {tried(other)}.",
            "resign": "BY RESIGNATION.",
            "timeout": "ON TIME.",
            "disconnect": "A PLAYER DID NOT COME BACK IN TIME.",
            "guess_cap": "NOBODY SOLVED IT WITHIN THE GUESS LIMIT.",
        }.get(res.reason, res.reason.upper())
        say(f"\n{banner} {why}")
        if len(res.secrets) == 2:
            yours, theirs = (res.secrets[i] or "NOT SET" for i in (me, other))
            say(f"SECRETS: YOURS {yours}, {self.opp}'S {theirs}.")
        fair = st.fairness()
        if fair is None:
            say("FAIRNESS CHECK: NOTHING TO CHECK (THE GAME NEVER STARTED).")
        elif all(fair):
            say("FAIRNESS CHECK: BOTH SECRETS MATCH THE COMMITMENTS PUBLISHED BEFORE THE FIRST"
                " GUESS. OK.")
        else:
            bad = [("YOUR" if i == me else f"{self.opp}'S") for i in (0, 1) if not fair[i]]
            say(f"FAIRNESS CHECK FAILED: {' AND '.join(bad)} SECRET DOES NOT MATCH ITS"
                " COMMITMENT!")
        if st.solved(me):
            say(self.tally.add(counts[me]))
        else:
            # As in 1971, the average is over games you finished by finding the secret.
            say("YOU DID NOT FIND THE SECRET: THIS GAME DOES NOT COUNT TOWARD YOUR AVERAGE.")


async def _find_match(client: Client, args: argparse.Namespace, screen: Screen,
                      previous: str | None, lines: LineReader) -> MatchAnnounced | None:
    """Get into a match the way the options say; None if the person gave up waiting."""
    rules = args.rules
    # the assistant is for practice only: an assisted request is always unrated
    rated, helped = (False, True) if args.assist else (None, None)
    if args.bot:
        return await client.play_bot(args.bot, pacing=args.pacing, rules=rules, rated=rated,
                                     assist=helped)
    if previous is not None and (args.room or args.create_room):
        await client.rematch(previous)
        screen.say("REMATCH OFFERED; WAITING FOR YOUR OPPONENT (TYPE QUIT TO STOP)...")
    elif args.room:
        return await client.join_room(args.room)
    elif args.create_room:
        room = await client.create_room(pacing=args.pacing, rules=rules, rated=rated,
                                     assist=helped)
        screen.say(f"ROOM CODE: {room.code}\nGIVE IT TO YOUR OPPONENT: moo play --room "
                   f"{room.code}\nWAITING FOR THEM (TYPE QUIT TO STOP)...")
    else:
        queued = await client.queue(pool="any", pacing=args.pacing, rules=rules, rated=rated,
                                     assist=helped)
        screen.say(f"WAITING FOR AN OPPONENT ({queued.pacing}; TYPE QUIT TO STOP)...")
    match_task = asyncio.ensure_future(client.wait_match())
    while True:
        line_task = asyncio.ensure_future(lines.get())
        done, _ = await asyncio.wait({match_task, line_task},
                                     return_when=asyncio.FIRST_COMPLETED)
        if match_task in done:
            line_task.cancel()
            return match_task.result()
        line = line_task.result()
        if line is None or COMMANDS.get(line.strip().lower()) == "quit":
            match_task.cancel()
            if not args.room and not args.create_room:  # waiting in the queue: leave it
                try:
                    await client.unqueue()
                except (ServerError, ConnectionLost):
                    pass
            return None
        if COMMANDS.get(line.strip().lower()) == "rules":
            screen.say(rules_page(rules or DEFAULT_RULES))


def read_password(args: argparse.Namespace) -> str | None:
    """The password for signing in: ``--password-file``'s first line, or typed at a hidden
    prompt with ``--sign-in``; None when neither was asked for. Raises ValueError (one line
    for the person) when the file cannot be used."""
    if getattr(args, "password_file", None):
        try:
            with open(args.password_file, encoding="utf-8") as fh:
                password = fh.readline().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            raise ValueError(f"cannot read --password-file {args.password_file}: {why}") from None
        if not password:
            raise ValueError(f"--password-file {args.password_file}: the first line is empty")
        return password
    if getattr(args, "sign_in", False):
        import getpass

        return getpass.getpass("PASSWORD: ")
    return None


async def _set_password(client: Client, welcome: Welcome, screen: Screen) -> int:
    """``moo play --set-password``: secure (or change) this name's password, then exit."""
    import getpass

    async def ask(prompt: str) -> str:  # off the loop: the connection keeps answering pings
        return await asyncio.to_thread(getpass.getpass, prompt)

    old = await ask("CURRENT PASSWORD: ") if welcome.secured else None
    new = await ask("NEW PASSWORD (8-128 CHARACTERS): ")
    if await ask("AGAIN: ") != new:
        screen.say("THE TWO PASSWORDS DIFFER. NOTHING CHANGED.")
        return 1
    try:
        await client.set_password(new, old)
    except ServerError as exc:
        screen.say(f"THE SERVER SAID NO: {exc.message}")
        return 1
    screen.say(f"PASSWORD SET. SIGN IN AS {client.name} ANYWHERE WITH --sign-in.")
    return 0


async def play_online(args: argparse.Namespace) -> int:
    screen = Screen()
    tokens = TokenStore()
    name = args.name or _default_name()
    try:
        password = read_password(args)
    except ValueError as exc:
        print(f"moo play: {exc}", file=sys.stderr)
        return 2
    # A person is waiting: retry often (every 2 s at most) for about a minute, the server's
    # default grace window, rather than backing off to long silences.
    urls = urls_of(args, DEFAULT_URL)
    # Tokens are kept under the first URL: the nodes of one cluster share their players.
    # A password given now is checked now: a token saved earlier would sign in without it and
    # a wrong password would go unnoticed.
    saved = None if password is not None else tokens.get(urls[0], name)
    client = Client(urls, name, token=saved, password=password,
                    encoding=args.encoding, client_name="moo-play", backoff_max=2.0,
                    max_attempts=35)
    try:
        welcome = await client.connect()
    except ServerError as exc:
        screen.say(f"THE SERVER SAID NO: {exc.message}")
        if exc.code == "too_many_attempts":
            wait = int(exc.reply.raw.get("retry_after_ms", 0) or 0)
            screen.say(f"TRY AGAIN IN {max(1, (wait + 999) // 1000)} S.")
        elif exc.code in ("name_taken", "bad_token") and password is None:
            screen.say("IF THE NAME IS YOURS, SIGN IN WITH --sign-in (OR --password-file);"
                       " OTHERWISE CHOOSE ANOTHER WITH --name.")
        return 1
    except (OSError, TimeoutError) as exc:
        print(f"moo play: cannot reach {', '.join(urls)}: {exc or type(exc).__name__}",
              file=sys.stderr)
        return 1
    if client.token:
        tokens.put(urls[0], client.name, client.token)
    if getattr(args, "set_password", False):
        try:
            return await _set_password(client, welcome, screen)
        finally:
            await client.close()
    # only now: its thread reads standard input, and the hidden password prompts must not race it
    lines = LineReader()
    screen.say(f"MOO ARENA ({welcome.server}). HELLO, {client.name}.")
    tally = Tally()
    previous: str | None = None
    # Matches this name left unfinished (the program was closed or crashed): finish them
    # first; the SDK has already asked to resume them, and the replay brings the screen up to
    # date before the next prompt.
    unfinished = [m.match_id for m in welcome.matches if m.phase != "finished"]
    try:
        while True:
            announced: MatchAnnounced | None
            try:
                if unfinished:
                    screen.say(f"YOU HAVE AN UNFINISHED MATCH ({unfinished.pop(0)}): "
                               "BACK TO IT.")
                    announced = await client.wait_match(timeout=client.request_timeout)
                else:
                    announced = await _find_match(client, args, screen, previous, lines)
            except ServerError as exc:
                screen.say(f"THE SERVER SAID NO: {exc.message}")
                return 1
            except TimeoutError:
                screen.say("THE SERVER DID NOT SEND THAT MATCH BACK.")
                continue
            if announced is None:
                break
            game = OnlineMatch(client, announced, lines, screen, args, tally)
            outcome = await game.run()
            previous = announced.match_id
            if outcome == "aborted":
                break
            screen.ask("\nPLAY AGAIN (YES OR NO)? ")
            answer = await lines.get()
            screen.answered()
            if answer is None or answer.strip().lower() not in YES:
                break
    except ConnectionLost:
        screen.say("THE CONNECTION TO THE SERVER IS GONE.")
        return 1
    finally:
        await client.close()
    if tally.games:
        screen.say(f"{tally.games} GAME{'S' if tally.games != 1 else ''} PLAYED, AVERAGE "
                   f"{average_text(tally.tries, tally.games)} TRIES.")
    screen.say("GOODBYE.")
    return 0


def _default_name() -> str:
    try:
        user = getpass.getuser()
    except Exception:
        user = "player"
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "", user)[:24]
    return cleaned or "player"


# -- the command ---------------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    add_url_option(parser, f"server (default {DEFAULT_URL})")
    parser.add_argument("--name", default=None, help="your player name (default: your login)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--solo", action="store_true",
                       help="offline: the computer picks the secret, as in the 1971 program")
    where.add_argument("--bot", default=None, metavar="STRATEGY",
                       help="play a bot hosted by the server (e.g. random)")
    where.add_argument("--room", default=None, metavar="CODE", help="join a friend's room")
    where.add_argument("--create-room", action="store_true",
                       help="create a room and print its code for a friend")
    where.add_argument("--words", type=int, default=None, metavar="N",
                       help="offline word MOO: guess an English word of N letters (4-9)")
    parser.add_argument("--scoring", choices=("bulls_cows", "hits_misses"), default="bulls_cows",
                        help="--words: UNIX bulls and cows (default) or the 1999 POTM's hits "
                        "and misses")
    parser.add_argument("--helper", action="store_true",
                        help="after each response, show how many codes are still possible")
    parser.add_argument("--pacing", choices=("lockstep", "free"), default=None)
    parser.add_argument("--assist", action="store_true",
                        help="a practice (unrated) match with the assistant: after each of your "
                        "responses, how many codes are still possible and a suggested guess; "
                        "with --solo, the same offline")
    parser.add_argument("--rules", type=rules_arg, default=None, metavar="SPEC",
                        help="the game: GAME[:LENGTH[:ALPHABET[:repeats]]], e.g. moo:5, "
                        "moo:4:hex, mastermind:4:123456, or word MOO words[:LENGTH[:SCORING]], "
                        "e.g. words:5, words:7:hits_misses (docs/variants.md); online: the "
                        "server must offer it; default: the server's default, solo: classic")
    parser.add_argument("--encoding", choices=("json", "msgpack"), default="json")
    parser.add_argument("--sign-in", action="store_true",
                        help="sign in to your name with its password (asked without echo), "
                        "e.g. on a new device")
    parser.add_argument("--password-file", default=None, metavar="FILE",
                        help="like --sign-in, reading the password from FILE's first line")
    parser.add_argument("--set-password", action="store_true",
                        help="secure your name with a password (or change it), then exit")
    parser.add_argument("--seed", type=int, default=None,
                        help="solo: seed the computer's choices (replay the same games)")


def main(args: argparse.Namespace) -> int:
    if args.solo or args.words is not None:
        def read(prompt: str) -> str | None:
            try:
                return input(prompt)
            except EOFError:
                print()
                return None

        def say(text: str) -> None:
            print(text, flush=True)

        if args.words is not None:
            from clients.wordplay import play_words

            return play_words(args, read, say)
        return play_solo(args, read, say)
    return asyncio.run(play_online(args))
