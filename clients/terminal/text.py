"""What ``moo play`` prints and how it reads a typed line, with no input or output of its own.

Solo and online play share these words (the rules pages, ``1B2C   ...``, ``3 CHOICES LEFT``,
``GAME 3: TRIES = 6, AVERAGE = 6``) and one reading of a typed line, so both sound like the
1971 teletype program; pure functions here are what the unit tests check directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clients.wordplay import QUIT_WORDS, describe_answer
from moo.errors import InvalidCode
from moo.mastermind import MastermindRules
from moo.rules import DEFAULT_RULES, Response
from moo.variants import GameRules
from moo.words import WordRules

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
    **{word: "quit" for word in sorted(QUIT_WORDS)},
}


def parse_entry(text: str, rules: GameRules = DEFAULT_RULES) -> Entry:
    """Read a line the way people type codes: ``0123``, ``0 1 2 3``, ``0,1,2,3``, ``0.1.2.3``.

    The 1971 teletype took four numbers separated by commas or periods and ``-1`` first to
    quit; both still work. A bad line becomes an ``error`` whose text says what is wrong.

    Commands have one form in every game that can never be a guess: ``?quit``, ``?rules``,
    ``?left``... (``?`` alone: the rules); ``=GUESS`` is always a guess. A bare command word
    (``quit``, ``left``) is a command where it cannot be a guess (digits), and a guess where
    it can (word MOO's ``LEFT``), except the quitting words: a bare ``QUIT`` that is also a
    legal guess is ``ambiguous``, neither sent nor obeyed, because playing it by mistake or
    resigning by mistake are both worse than a question (issue 32: online word MOO took it as
    a guess while digit MOO quit).
    """
    t = text.strip()
    if not t:
        return Entry("empty")
    if t.startswith("?"):
        return _command_entry(t)
    if t.startswith("=") and len(t) > 1:
        return _guess_entry(t[1:].strip(), rules)
    if t == "-1" or (not isinstance(rules, WordRules) and _code_parts(t, rules)[:1] == ["-1"]):
        return Entry("command", "quit")  # the teletype's way
    guess = _guess_entry(t, rules)
    command = COMMANDS.get(t.lower())
    if command is None:
        return guess
    if guess.kind != "guess":
        return Entry("command", command)
    return Entry("ambiguous", t) if command == "quit" else guess


def _command_entry(t: str) -> Entry:
    """``?`` commands: ``?`` alone is the rules page."""
    name = t[1:].strip().lower()
    command = "rules" if not name else COMMANDS.get(name)
    if command is None:
        return Entry("error", f"no command {t!r} (?rules, ?left, ?history, ?clock, ?quit)")
    return Entry("command", command)


def _code_parts(t: str, rules: GameRules) -> list[str]:
    """A code typed with separators (``0 1 2 3``, ``0,1,2,3``, ``0.1.2.3``) cut into its
    symbols; ``[t]`` when it has none."""
    separators = " \t,;" + ("" if "." in rules.alphabet else ".")
    if not any(ch in separators for ch in t):
        return [t]
    return [p for p in re.split("[" + re.escape(separators) + "]+", t) if p]


def _guess_entry(t: str, rules: GameRules) -> Entry:
    """A guess, or the error saying what is wrong with it."""
    if isinstance(rules, WordRules):
        try:
            return Entry("guess", rules.check_guess(t))
        except InvalidCode as exc:
            return Entry("error", str(exc))
    parts = _code_parts(t, rules)
    if parts != [t]:
        unit = rules.symbols_text.split()[0]
        for p in parts:
            if len(p) != 1:
                return Entry(
                    "error",
                    f"each of the {rules.length} {unit} should be one of {rules.symbols_text}"
                    f" ({p!r} is not)",
                )
        t = "".join(parts)
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
  Each secret is a common English word of {rules.length} letters from the answer list (letters
  may repeat; moo words --answers prints it). A guess is any {rules.length} letters A-Z, a word
  or not (EEEEE is a fine probe).
{how}
  {win} wins. Mistyped guesses (not {rules.length} letters A-Z) are explained and NOT counted.
COMMANDS start with ? (any {rules.length} letters, LEFT too, are a guess; a bare QUIT that is
  also a guess is asked about: ?QUIT quits, =QUIT plays it)
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
COMMANDS (with or without the ?, which works in every game: ?quit can never be a guess)
  ?rules or ?  this page          ?left     how many codes are still possible
  ?history     your guesses       ?clock    time left (online, when clocks are on)
  ?quit        leave (at the start of a game; mid-game online it resigns)
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
COMMANDS (with or without the ?, which works in every game: ?quit can never be a guess)
  ?rules or ?  this page          ?left     how many codes are still possible
  ?history     your guesses       ?clock    time left (online, when clocks are on)
  ?quit        leave (at the start of a game; mid-game online it resigns)
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


def is_digits(rules: GameRules) -> bool:
    return rules.alphabet.isdigit()


def show_response(response: Response) -> str:
    return f"{format(str(response), '<6')} {response.teletype}"


def average_text(total: int, games: int) -> str:
    avg = total / games
    return f"{avg:.2f}".rstrip("0").rstrip(".")


def mmss(ms: float) -> str:
    """A clock for people: ``4:05`` (minutes and seconds, never negative)."""
    s = max(0, int(ms // 1000))
    return f"{s // 60}:{s % 60:02d}"


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
