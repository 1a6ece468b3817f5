"""The word-MOO dictionary: Debian's ``wamerican`` list, filtered once and cached.

The I/O half of word MOO (the rules, :mod:`moo.words`, are pure). Importing this module
installs :func:`words_of_length` as the rules' dictionary (:func:`moo.words.set_dictionary`),
so anything that plays word MOO against the real list (the server, the bots, the terminal)
gets it by importing this module, and the rules never open a file themselves.

The project never ships the list: on first use the system file
(``/usr/share/dict/american-english``) is filtered (words of ASCII letters only, upper-cased,
de-duplicated, sorted) into a cache file (:func:`word_list_path`), rebuilt when the system file
is newer. Each process reads it at most once (:func:`words_of_length` caches per length), so a
server pays for it on its first word match, or in a background thread at start
(server/app.py), never on the classic path.
"""

from __future__ import annotations

import os
import tempfile
from functools import cache
from pathlib import Path

from moo.words import NoDictionary, filter_words, set_dictionary

__all__ = [
    "DEFAULT_SOURCE",
    "available",
    "build_word_list",
    "load_words",
    "word_list_path",
    "words_of_length",
]

#: Where Debian's ``wamerican`` package puts its list.
DEFAULT_SOURCE = Path("/usr/share/dict/american-english")


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


def build_word_list(source: Path = DEFAULT_SOURCE, dest: Path | None = None) -> Path:
    """Filter ``source`` into ``dest`` (atomically: a reader never sees half a file)."""
    dest = dest or word_list_path()
    if not source.is_file():
        raise FileNotFoundError(
            f"no word list at {source}: install Debian's wamerican package "
            "(apt-get install wamerican) or pass a list of words"
        )
    words = filter_words(source.read_text(encoding="utf-8", errors="replace").splitlines())
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".words-")
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write("".join(w + "\n" for w in words))
    os.replace(tmp, dest)
    return dest


@cache
def _load(path: str, mtime: float) -> tuple[str, ...]:
    del mtime  # part of the cache key only: a rebuilt file is read again
    return tuple(Path(path).read_text(encoding="ascii").split())


def load_words(length: int | None = None, source: Path | None = None) -> tuple[str, ...]:
    """The dictionary's words (of ``length`` letters if given), upper case, sorted.

    With ``source`` the file is read and filtered as is (any list of words, one per line);
    without it the cached wamerican list is used, built first if missing or older than the
    system file.
    """
    if source is not None:
        words = tuple(filter_words(source.read_text(encoding="utf-8",
                                                    errors="replace").splitlines()))
    else:
        path = word_list_path()
        if not path.exists() or (
            DEFAULT_SOURCE.exists() and DEFAULT_SOURCE.stat().st_mtime > path.stat().st_mtime
        ):
            try:
                build_word_list(DEFAULT_SOURCE, path)
            except PermissionError:  # no writable cache (a locked-down server): filter in memory
                return load_words(length, source=DEFAULT_SOURCE)
        words = _load(str(path), path.stat().st_mtime)
    if length is None:
        return words
    return tuple(w for w in words if len(w) == length)


@cache
def words_of_length(length: int) -> tuple[str, ...]:
    """The system dictionary's words of ``length`` letters, read once per process.

    Cached for the life of the process (a server must not re-stat the file on every secret):
    the list changes only when the operator upgrades the package, and a restart picks it up.
    """
    try:
        return load_words(length)
    except FileNotFoundError as exc:
        raise NoDictionary(str(exc)) from None


def available() -> str | None:
    """``None`` when the dictionary can be loaded, else why not (one line, for a log).

    Cheap (two ``stat`` calls): the server asks it at start to decide whether to offer word
    variants, and leaves the reading itself for later.
    """
    path = word_list_path()
    if DEFAULT_SOURCE.is_file() or path.is_file():
        return None
    return (f"no word list at {DEFAULT_SOURCE} (install Debian's wamerican package) "
            f"and no cached list at {path}")


set_dictionary(words_of_length)
