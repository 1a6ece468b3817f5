"""One online match from the person's side: server events to lines, typed lines to requests.

The biggest part of ``moo play``, kept alone: it is the only part that knows how a match
unfolds (secrets, rounds, clocks, the result and its fairness check).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

from bots.judge.assistant import assist
from clients.sdk import (
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
)
from clients.terminal.result import show_result
from clients.terminal.screen import LineReader, Screen
from clients.terminal.text import (
    ANTISOCIAL,
    YES,
    Entry,
    Tally,
    choices_left,
    choices_text,
    is_digits,
    mmss,
    parse_entry,
    rules_page,
    secret_words,
    show_answer,
)
from clients.wordplay import ambiguous_text
from moo.errors import InvalidCode
from moo.rules import Response
from moo.words import NoDictionary, WordRules


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
            clocks.append(f"{mmss(cfg['clock_total_ms'])} IN TOTAL")
        if cfg.get("clock_guess_ms"):
            clocks.append(f"{cfg['clock_guess_ms'] / 1000:g} S A GUESS")
        if clocks:
            self.screen.say("CLOCK: " + ", ".join(clocks) + ".")
        if isinstance(self.rules, WordRules):
            self.screen.say(f"WORD MOO: {secret_words(self.rules)}, "
                            + ("HITS AND MISSES." if self.rules.scoring == "hits_misses"
                               else "BULLS AND COWS."))
        self.screen.say("TYPE '?RULES' FOR THE RULES, '?QUIT' TO RESIGN.")

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
                    else "NUMBERS" if is_digits(self.rules) else "SYMBOLS")
            self.screen.ask(f"GUESS {n}{self.clock_hint()}: TYPE {self.rules.length} {what}? ")

    def clock_hint(self) -> str:
        cfg = self.announced.config
        parts = []
        if self.clock_left is not None:
            parts.append(f"{mmss(self.clock_now())} LEFT")
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
            if entry.kind == "ambiguous":
                say(ambiguous_text(entry.value))
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
            if self.announced.config.get("assist") and not isinstance(self.rules, WordRules):
                say(f"     ASSISTANT: {assist(self.rules, []).text()}")
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
        if entry.kind == "ambiguous":
            say(ambiguous_text(entry.value))
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
        show_result(self.state, self.opp, self.tally, self.screen.say)
