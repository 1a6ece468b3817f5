"""The word-MOO dictionary: Debian's ``wamerican`` list, filtered once and cached.

The I/O half of word MOO (the rules, :mod:`moo.words`, are pure and have the list injected).
Nothing happens at import: a program that plays word MOO against the real list (the server, the
terminal, the local tournament runner) calls :func:`install` once at start, which gives
:func:`words_of_length` to the rules (:func:`moo.words.set_dictionary`); reading the list is
left for the first word match (or a server's background thread).

Which file (:func:`dictionary_file`): the first of :func:`sources` that exists:
``$MOO_WORDS_SOURCE`` if set, Debian's ``/usr/share/dict/american-english`` (``apt-get install
wamerican``), and ``$XDG_DATA_HOME/moo-arena/american-english`` (``~/.local/share/...``), where
``./dev`` unpacks the same Debian package when it cannot install it (not root). Only the
**lower-case entries** are words of the game (the list capitalises proper names and most
abbreviations: ``Flynn``, ``AC``), letters A-Z only, upper-cased, de-duplicated, sorted; the
project never ships the list.
The filtered list is cached (:func:`word_list_path`, rebuilt when the source is newer or
another file) and each process reads it at most once (:func:`words_of_length`).

The **answers**, the words secrets are drawn from (common words that hurt nobody: the rule is
:mod:`bots.answers`), are derived from the same file and cached beside it
(:func:`answers_path`), read at most once per process and length (:func:`answers_of_length`);
:func:`install` gives both to the rules.
"""

from __future__ import annotations

import os
import tempfile
import threading
from functools import cache
from pathlib import Path

from moo.words import NoDictionary, dictionary_words, filter_words, set_dictionary

__all__ = [
    "DEFAULT_SOURCE",
    "answers_of_length",
    "answers_path",
    "available",
    "build_word_list",
    "dictionary_file",
    "install",
    "load_answers",
    "load_words",
    "sources",
    "user_source",
    "word_list_path",
    "words_of_length",
]

#: Where Debian's ``wamerican`` package puts its list.
DEFAULT_SOURCE = Path("/usr/share/dict/american-english")
#: First line of the cache file: a file without it (an older format) is rebuilt.
_HEADER = "# moo-arena word list 2: the lower-case entries of "


def user_source() -> Path:
    """Where ``./dev`` unpacks Debian's wamerican for a user who cannot install it:
    ``$XDG_DATA_HOME/moo-arena/american-english`` (default ``~/.local/share/...``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "moo-arena" / "american-english"


def sources() -> list[Path]:
    """The files tried for the dictionary, in order."""
    env = os.environ.get("MOO_WORDS_SOURCE")
    return [*([Path(env)] if env else []), DEFAULT_SOURCE, user_source()]


def dictionary_file() -> Path | None:
    """The dictionary file in use: the first of :func:`sources` that exists, else None."""
    return next((p for p in sources() if p.is_file()), None)


def word_list_path() -> Path:
    """The cache file of the filtered list.

    ``$MOO_WORDS_CACHE`` if set, else ``$XDG_CACHE_HOME/moo-arena/words.txt`` (default
    ``~/.cache/moo-arena/words.txt``).
    """
    env = os.environ.get("MOO_WORDS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "moo-arena" / "words.txt"


def _missing(where: Path | None = None) -> str:
    return (f"no word list at {where or DEFAULT_SOURCE} (install Debian's wamerican package: "
            f"apt-get install wamerican, or ./dev setup unpacks it into {user_source()})")


def build_word_list(source: Path = DEFAULT_SOURCE, dest: Path | None = None) -> Path:
    """Filter the dictionary file ``source`` into ``dest`` (its lower-case entries;
    atomically: a reader never sees half a file)."""
    dest = dest or word_list_path()
    if not source.is_file():
        raise FileNotFoundError(_missing(source))
    words = dictionary_words(source.read_text(encoding="utf-8", errors="replace").splitlines())
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".words-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(_HEADER + str(source) + "\n" + "".join(w + "\n" for w in words))
    os.replace(tmp, dest)
    return dest


def _fresh(cache_file: Path, src: Path) -> bool:
    """The cache holds ``src``'s current list (this format, that file, not older)."""
    try:
        with cache_file.open(encoding="utf-8") as f:
            first = f.readline().rstrip("\n")
        return first == _HEADER + str(src) and (
            cache_file.stat().st_mtime >= src.stat().st_mtime)
    except OSError:
        return False


@cache
def _load(path: str, mtime: float) -> tuple[str, ...]:
    del mtime  # part of the cache key only: a rebuilt file is read again
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return tuple(w for w in lines if w and not w.startswith("#"))


def load_words(length: int | None = None, source: Path | None = None) -> tuple[str, ...]:
    """The dictionary's words (of ``length`` letters if given), upper case, sorted.

    With ``source`` the file is read and filtered as a plain list of words (one per line,
    any case: every entry of letters counts); without it the dictionary (:func:`source`, its
    lower-case entries) is used through its cache, built first if missing or stale.
    """
    if source is not None:
        words = tuple(filter_words(source.read_text(encoding="utf-8",
                                                    errors="replace").splitlines()))
    else:
        src = dictionary_file()
        if src is None:
            raise FileNotFoundError(_missing())
        path = word_list_path()
        if not _fresh(path, src):
            try:
                build_word_list(src, path)
            except PermissionError:  # no writable cache (a locked-down server): filter in memory
                words = tuple(dictionary_words(
                    src.read_text(encoding="utf-8", errors="replace").splitlines()))
                return words if length is None else tuple(w for w in words if len(w) == length)
        words = _load(str(path), path.stat().st_mtime)
    if length is None:
        return words
    return tuple(w for w in words if len(w) == length)


@cache
def words_of_length(length: int) -> tuple[str, ...]:
    """The dictionary's words of ``length`` letters, read once per process.

    Cached for the life of the process (a server must not re-stat the file on every secret):
    the list changes only when the operator upgrades the package, and a restart picks it up.
    A missing list is not cached (an exception is not a result), so one installed later is
    read by the next call.
    """
    try:
        return load_words(length)
    except FileNotFoundError as exc:
        raise NoDictionary(str(exc)) from None


def available() -> str | None:
    """``None`` when the dictionary can be loaded, else why not (one line, for a log).

    Cheap (a few ``stat`` calls): the server asks it at start, and again when a word variant
    it could not offer is asked for, so a list installed later is noticed without a restart.
    """
    if dictionary_file() is not None:
        return None
    return _missing()


def answers_path() -> Path:
    """The cache of the answer lists: ``$MOO_ANSWERS_CACHE`` if set, else ``answers.txt``
    beside the dictionary's cache (:func:`word_list_path`; ``~/.cache/moo-arena/answers.txt``)."""
    env = os.environ.get("MOO_ANSWERS_CACHE")
    return Path(env) if env else word_list_path().with_name("answers.txt")


#: held while the answers are derived or read: a server's first word match, arriving while
#: its background thread derives them (seconds), waits for that rather than derive them twice
_DERIVING = threading.Lock()


@cache
def _all_answers(source: str, mtime: float) -> tuple[str, ...]:
    # imported here: the POTM referee (clients/potm) reads only the dictionary, and runs as an
    # unprivileged user with the system's python3 and no more of the project than it needs
    from bots.answers import build_answers, cached_answers

    del mtime  # part of the cache key only: a newer dictionary is derived again
    path, dest = Path(source), answers_path()
    with _DERIVING:
        found = cached_answers(dest, path)
        return build_answers(path, dest) if found is None else found


def load_answers(length: int | None = None) -> tuple[str, ...]:
    """The answers (:mod:`bots.answers`; of ``length`` letters if given), upper case, sorted.

    Derived from the dictionary file in use (:func:`dictionary_file`) through their cache
    (:func:`answers_path`), derived again if missing or stale; raises
    :class:`FileNotFoundError` with the one-line reason when there is no dictionary.
    """
    src = dictionary_file()
    if src is None:
        raise FileNotFoundError(_missing())
    words = _all_answers(str(src), src.stat().st_mtime)
    return words if length is None else tuple(w for w in words if len(w) == length)


@cache
def answers_of_length(length: int) -> tuple[str, ...]:
    """The answers of ``length`` letters, read once per process, as :func:`words_of_length`:
    the same tuple every time (the rules build its set once). A missing dictionary is
    :class:`moo.words.NoDictionary`, and is not cached."""
    try:
        return load_answers(length)
    except FileNotFoundError as exc:
        raise NoDictionary(str(exc)) from None


def install() -> None:
    """Give the dictionary (guesses) and the answers (secrets) to word MOO's rules
    (:func:`moo.words.set_dictionary`).

    Called once at start by the programs that draw or check word secrets against the real
    lists (the server, the terminal, the bot runner, the local tournament runner); it reads
    nothing yet.
    """
    set_dictionary(words_of_length, answers=answers_of_length)
