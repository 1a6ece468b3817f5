"""Which game a match plays: the ``rules`` object of the protocol and the ``--rules`` spec.

One parser for every way rules arrive (a protocol message, a command-line flag, the server's
``variants`` setting), so the server, the CLI and the tests can never accept different things.
A rules value is a :class:`moo.rules.Rules` (MOO: distinct-symbol secrets), a
:class:`moo.mastermind.MastermindRules` (repeats allowed, black and white pegs) or a
:class:`moo.words.WordRules` (an English word, bulls and cows or hits and misses); all are
frozen and compare by value, which is what the quick-pair queue and the offered-variants check
use.

The compact spec (docs/variants.md, "Choosing the rules")::

    GAME[:LENGTH[:ALPHABET[:repeats]]]
    words[:LENGTH[:SCORING]]

``GAME`` is ``moo`` or ``mastermind`` (``classic`` = ``moo:4:digits``); ``ALPHABET`` is the
symbols themselves or a name from :data:`ALPHABETS`; ``repeats`` (MOO only) is the 1971 rule
that lets a guess repeat symbols. Word MOO's third part is its scoring (``bulls_cows``, the
default, or ``hits_misses``): its alphabet is always A-Z, so the slot names what varies.
:func:`rules_spec` writes the canonical spec of a value, which is also the key of its rating
family.
"""

from __future__ import annotations

import argparse
from typing import Any

from moo.errors import BadRules
from moo.mastermind import MastermindRules
from moo.rules import DEFAULT_RULES, Rules
from moo.words import LETTERS, MAX_LENGTH, MIN_LENGTH, SCORINGS, WordRules

__all__ = [
    "ALPHABETS",
    "CLASSIC_SPEC",
    "DEFAULT_VARIANTS",
    "GameRules",
    "against_minimum",
    "is_classic",
    "is_words",
    "parse_rules",
    "parse_rules_spec",
    "rules_arg",
    "rules_from_dict",
    "rules_label",
    "rules_spec",
]

GameRules = Rules | MastermindRules | WordRules

#: Alphabet names the spec and the protocol accept in place of the symbols.
ALPHABETS: dict[str, str] = {
    "digits": "0123456789",
    "hex": "0123456789ABCDEF",
    "letters": "ABCDEFGHIJ",
    #: Mastermind's six peg colours, numbered as in the solver and the APL note
    "colours": "123456",
    "colors": "123456",
}
GAMES = ("moo", "mastermind", "words")
MAX_SYMBOLS = 16
CLASSIC_SPEC = "moo:4:0123456789"
#: What a server offers when its configuration does not say (``variants`` in config/default.toml)
DEFAULT_VARIANTS = (
    CLASSIC_SPEC,
    "moo:3:0123456789",
    "moo:5:0123456789",
    "moo:6:0123456789",
    "moo:4:0123456789ABCDEF",
    "mastermind:4:123456",
    # offered only where the dictionary can be read (server/arena.py drops them otherwise)
    "words:5:bulls_cows",
    "words:5:hits_misses",
)
_KEYS = frozenset({"game", "length", "alphabet", "repeats_in_guess"})
_WORD_KEYS = frozenset({"game", "length", "scoring", "alphabet", "repeats_in_guess"})
#: word MOO's default length when a request or spec leaves it out
WORD_LENGTH = 5


def is_classic(rules: object) -> bool:
    """4 of 10 MOO without the 1971 rule: today's game, today's rating."""
    return rules == DEFAULT_RULES


def against_minimum(config: dict[str, Any] | None) -> bool:
    """Whether a match played under ``config`` (a stored ``MatchConfig`` dict) can be set
    against the minimum strategy: classic 4-of-10 MOO played without the assistant.

    The minimum strategy's distribution is a 4-of-10 figure, and an assisted player's guesses
    are partly the machine's, so any other match would make a person's score against it
    meaningless. A config from before variants (no ``rules``) is classic.
    """
    config = config or {}
    if config.get("assist"):
        return False
    raw = config.get("rules")
    if not raw:
        return True
    try:
        return is_classic(rules_from_dict(dict(raw)))
    except (ValueError, TypeError, KeyError):
        return False


def is_words(rules: object) -> bool:
    """Word MOO: secrets from the dictionary, which the server must be able to read."""
    return isinstance(rules, WordRules)


def _alphabet(value: object) -> str:
    """The alphabet as one canonical string: a name, a string or a list of 1-symbol strings."""
    if isinstance(value, list):
        symbols: list[str] = []
        for item in value:
            if not isinstance(item, str):
                raise BadRules("alphabet symbols must be strings")
            if item == "":
                raise BadRules("alphabet has an empty symbol")
            if len(item) != 1:
                raise BadRules(f"alphabet symbols are single characters, got {item[:8]!r}")
            symbols.append(item)
        text = "".join(symbols)
    elif isinstance(value, str):
        text = ALPHABETS.get(value.lower(), value)
    else:
        raise BadRules("alphabet must be a string of symbols, a list of them, or a name "
                       f"({', '.join(a for a in ALPHABETS if a != 'colors')})")
    if text == "":
        raise BadRules("alphabet is empty")
    text = text.upper()  # one spelling per variant: 'abcdef' and 'ABCDEF' are the same game
    for ch in text:
        if ch.isspace() or not ch.isprintable() or ch in ",:":
            raise BadRules(f"alphabet symbol {ch!r} is not allowed (no spaces, commas or colons)")
    repeated = sorted({ch for ch in text if text.count(ch) > 1})
    if repeated:
        raise BadRules(f"alphabet repeats symbol {', '.join(repr(c) for c in repeated)}")
    if len(text) > MAX_SYMBOLS:
        raise BadRules(f"alphabet has {len(text)} symbols; at most {MAX_SYMBOLS}")
    return text


def parse_rules(data: object) -> GameRules:
    """A protocol ``rules`` object -> a rules value, or :class:`BadRules` saying what is wrong.

    Fields: ``game`` (``"moo"``, default, ``"mastermind"`` or ``"words"``), ``length`` (3-6,
    default 4; words 4-9, default 5), ``alphabet`` (default digits for MOO, colours for
    Mastermind; words: A-Z only), ``repeats_in_guess`` (MOO only, default false; always true in
    the others), ``scoring`` (words only: ``bulls_cows``, default, or ``hits_misses``).
    """
    if not isinstance(data, dict):
        raise BadRules("rules must be an object")
    game = data.get("game", "moo")
    if game not in GAMES:
        raise BadRules(f"game must be 'moo', 'mastermind' or 'words', got {str(game)[:32]!r}")
    if game == "words":
        return _parse_words(data)
    unknown = sorted(str(k) for k in data if k not in _KEYS)
    if unknown:
        extra = " (scoring is word MOO's: game 'words')" if unknown[0] == "scoring" else ""
        raise BadRules(f"unknown rules field {unknown[0][:32]!r} "
                       f"(known: game, length, alphabet, repeats_in_guess){extra}")
    length = data.get("length", 4)
    if type(length) is not int:
        raise BadRules("length must be an integer")
    if not 3 <= length <= 6:
        raise BadRules(f"length must be 3-6, got {length}")
    default = ALPHABETS["digits"] if game == "moo" else ALPHABETS["colours"]
    alphabet = _alphabet(data.get("alphabet", default))
    repeats = data.get("repeats_in_guess", game == "mastermind")
    if type(repeats) is not bool:
        raise BadRules("repeats_in_guess must be true or false")
    if game == "mastermind":
        if not repeats:
            raise BadRules("in mastermind codes always may repeat symbols; "
                           "leave repeats_in_guess out")
        if len(alphabet) < 2:
            raise BadRules("mastermind needs at least 2 symbols")
        if len(alphabet) ** length > 100_000:
            raise BadRules(f"mastermind {length} of {len(alphabet)} has "
                           f"{len(alphabet) ** length} codes; at most 100000")
        if len(alphabet) > 10:
            raise BadRules(f"mastermind alphabets have at most 10 symbols, got {len(alphabet)}")
        return MastermindRules(length=length, alphabet=alphabet)
    if length > len(alphabet):
        raise BadRules(f"{length} positions need at least {length} distinct symbols; "
                       f"the alphabet has {len(alphabet)}")
    return Rules(length=length, alphabet=alphabet, repeats_in_guess=repeats)


def _parse_words(data: dict[Any, Any]) -> WordRules:
    """``{game: "words", length?, scoring?}``; ``alphabet`` and ``repeats_in_guess`` may be
    sent back as the canonical object spells them (A-Z, true) and mean nothing else."""
    unknown = sorted(str(k) for k in data if k not in _WORD_KEYS)
    if unknown:
        raise BadRules(f"unknown rules field {unknown[0][:32]!r} for word MOO "
                       "(known: game, length, scoring, alphabet, repeats_in_guess)")
    length = data.get("length", WORD_LENGTH)
    if type(length) is not int:
        raise BadRules("length must be an integer")
    if not MIN_LENGTH <= length <= MAX_LENGTH:
        raise BadRules(f"word length must be {MIN_LENGTH}-{MAX_LENGTH} letters, got {length}")
    scoring = data.get("scoring", "bulls_cows")
    if not isinstance(scoring, str) or scoring.lower() not in SCORINGS:
        shown = str(scoring)[:32] if isinstance(scoring, str) else type(scoring).__name__
        raise BadRules(f"scoring must be 'bulls_cows' or 'hits_misses', got {shown!r}")
    if "alphabet" in data and (
        not isinstance(data["alphabet"], str) or data["alphabet"].upper() != LETTERS
    ):
        raise BadRules("word MOO's alphabet is always the letters A-Z; leave alphabet out")
    if "repeats_in_guess" in data and data["repeats_in_guess"] is not True:
        raise BadRules("in word MOO letters always may repeat; leave repeats_in_guess out")
    return WordRules(length=length,
                     scoring="hits_misses" if scoring.lower() == "hits_misses" else "bulls_cows")


def parse_rules_spec(text: str) -> GameRules:
    """``mastermind:4:123456``, ``moo:5``, ``moo:4:hex``, ``moo:4:digits:repeats``, ``classic``,
    ``words:5``, ``words:7:hits_misses``."""
    parts = text.strip().split(":")
    if parts == ["classic"]:
        return DEFAULT_RULES
    if not parts[0]:
        raise BadRules(
            "a rules spec is GAME[:LENGTH[:ALPHABET[:repeats]]] or words[:LENGTH[:SCORING]], "
            "e.g. mastermind:4:123456"
        )
    data: dict[str, Any] = {"game": parts[0].lower()}
    if data["game"] == "words":
        if len(parts) > 3:
            raise BadRules(f"too many ':' parts in {text[:40]!r} (words[:LENGTH[:SCORING]])")
        if len(parts) > 1 and parts[1]:
            if not parts[1].isdigit():
                raise BadRules(f"length must be a number, got {parts[1][:16]!r}")
            data["length"] = int(parts[1])
        if len(parts) > 2 and parts[2]:
            data["scoring"] = parts[2]
        return parse_rules(data)
    if len(parts) > 4:
        raise BadRules(f"too many ':' parts in {text[:40]!r} "
                       "(GAME[:LENGTH[:ALPHABET[:repeats]]])")
    if len(parts) > 1 and parts[1]:
        if not parts[1].isdigit():
            raise BadRules(f"length must be a number, got {parts[1][:16]!r}")
        data["length"] = int(parts[1])
    if len(parts) > 2 and parts[2]:
        data["alphabet"] = parts[2]
    if len(parts) > 3:
        if parts[3].lower() != "repeats":
            raise BadRules(f"the fourth part can only be 'repeats', got {parts[3][:16]!r}")
        data["repeats_in_guess"] = True
    return parse_rules(data)


def rules_spec(rules: GameRules) -> str:
    """The canonical compact spec: the variant's name in ratings, exports and the CLI."""
    if isinstance(rules, WordRules):
        return f"words:{rules.length}:{rules.scoring}"
    if isinstance(rules, MastermindRules):
        return f"mastermind:{rules.length}:{rules.alphabet}"
    spec = f"moo:{rules.length}:{rules.alphabet}"
    return spec + ":repeats" if rules.repeats_in_guess else spec


def rules_label(rules: GameRules) -> str:
    """A short human name: ``MOO 5 of 10``, ``MOO 4 of hex``, ``Mastermind 4 of 6``,
    ``Word MOO 5 letters``, ``Word MOO 7 letters (hits and misses)``."""
    if isinstance(rules, WordRules):
        extra = " (hits and misses)" if rules.scoring == "hits_misses" else ""
        return f"Word MOO {rules.length} letters{extra}"
    game = "Mastermind" if isinstance(rules, MastermindRules) else "MOO"
    size = "hex" if rules.alphabet == ALPHABETS["hex"] else str(len(rules.alphabet))
    extra = " (repeats in guesses)" if isinstance(rules, Rules) and rules.repeats_in_guess else ""
    return f"{game} {rules.length} of {size}{extra}"


def rules_from_dict(data: dict[str, Any]) -> GameRules:
    """A stored ``config.rules`` (trusted: it was validated when the match was created)."""
    if data.get("game") == "words":
        return WordRules(
            length=int(data.get("length", WORD_LENGTH)),
            scoring="hits_misses" if data.get("scoring") == "hits_misses" else "bulls_cows",
        )
    if data.get("game") == "mastermind":
        return MastermindRules(length=int(data.get("length", 4)),
                               alphabet=str(data.get("alphabet", "123456")))
    return Rules.from_dict(data)


def rules_arg(text: str) -> GameRules:
    """argparse type of every ``--rules``: the compact spec, one line on a mistake
    (``moo play: argument --rules: length must be 3-6, got 9``)."""
    try:
        return parse_rules_spec(text)
    except BadRules as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
