"""What word MOO costs a server: the dictionary check at start, the list's read, a secret check.

* ``available()``: the only thing a server does at start for word variants (two ``stat``).
* ``offered_variants``: the server's variant list with and without the word specs (ratio).
* building the filtered cache from ``/usr/share/dict/american-english`` (first use ever), and
  reading the cached list for one length (first word match of a process; done in a thread at
  start, server/app.py); both in fresh caches, best of ``--repeat``; the same for the answer
  lists (``bots/answers.py``: deriving them checks ~20,000 words against better-profanity,
  wordfilter and badwords-py).
* ``check_secret``: a word secret (a set lookup after the format check) beside a classic one.
* importing ``bots.dictionary`` (what every server process now imports), in a fresh
  interpreter after ``moo.words``, best of ``--repeat``.
* a whole server start (``App.start``: store, hooks, listening socket), with the default
  variants (word MOO included) and without the word specs, alternated, at least 9 of each:
  the ratio of the medians is what word MOO adds to a start.

Figures are CPU-light and short; the machine is shared, so each is the best of several runs
and the ratios come from the same run.

    python -m bench.word_dictionary [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bots import dictionary
from moo.rules import DEFAULT_RULES
from moo.variants import DEFAULT_VARIANTS
from moo.words import WordRules
from server.app import App
from server.arena import offered_variants
from server.settings import Settings


def per_call(fn: Callable[[], object], calls: int, repeat: int) -> float:
    """Best mean seconds per call over ``repeat`` runs of ``calls`` calls."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def once(fn: Callable[[], object], repeat: int, before: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(repeat):
        before()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def first_use(cache: Path, variable: str, memos: tuple[Any, ...], load: Callable[[], object],
              repeat: int) -> tuple[float, float]:
    """Best of ``repeat`` for ``load`` with no cache file (it is built) and with the file
    (it is read); ``variable`` points the program at ``cache``, ``memos`` are the in-process
    caches (``functools.cache``) cleared before every try."""
    os.environ[variable] = str(cache)

    def forget() -> None:
        for memo in memos:
            memo.cache_clear()

    def cold() -> None:
        cache.unlink(missing_ok=True)
        forget()

    return once(load, repeat, cold), once(load, repeat, forget)


async def start_stop(settings: Settings) -> float:
    t0 = time.perf_counter()
    app = App(settings)
    await app.start()
    started = time.perf_counter() - t0
    await app.stop()
    return started


def server_starts(repeat: int) -> tuple[list[float], list[float]]:
    """Start times with and without the word variants; which goes first alternates, so
    neither always pays for the other's warm-up."""
    with_words: list[float] = []
    without: list[float] = []
    classic_only = [v for v in DEFAULT_VARIANTS if not v.startswith("words")]
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(start_stop(Settings(host="127.0.0.1", port=0, db=str(Path(tmp) / "w.db"),
                                        static_dir=str(Path(tmp) / "web"))))  # warm-up
        for i in range(repeat):
            base = Settings(host="127.0.0.1", port=0, db=str(Path(tmp) / f"s{i}.sqlite3"),
                            static_dir=str(Path(tmp) / "web"))
            plain = dataclasses.replace(base, db=str(Path(tmp) / f"p{i}.sqlite3"),
                                        variants=classic_only)
            runs = [(with_words, base), (without, plain)]
            for times, settings in (runs if i % 2 else runs[::-1]):
                times.append(asyncio.run(start_stop(settings)))
    return with_words, without


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    r = args.repeat
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    print(f"available(): {per_call(dictionary.available, 2000, r) * 1e6:.1f} µs")
    classic_only = [v for v in DEFAULT_VARIANTS if not v.startswith("words")]
    without = per_call(lambda: offered_variants(classic_only), 500, r)
    with_words = per_call(lambda: offered_variants(list(DEFAULT_VARIANTS)), 500, r)
    print(f"offered_variants: {without * 1e6:.1f} µs without words, {with_words * 1e6:.1f} µs "
          f"with (ratio {with_words / without:.2f})")
    with tempfile.TemporaryDirectory() as tmp:
        build, read = first_use(Path(tmp) / "words.txt", "MOO_WORDS_CACHE",
                                (dictionary._load, dictionary.words_of_length),
                                lambda: dictionary.words_of_length(5), r)
        print(f"first use ever (filter wamerican into the cache, 5 letters): {build * 1e3:.0f} ms")
        print(f"first word match of a process (read the cache, 5 letters): {read * 1e3:.0f} ms")
        derive, cached = first_use(Path(tmp) / "answers.txt", "MOO_ANSWERS_CACHE",
                                   (dictionary._all_answers, dictionary.answers_of_length),
                                   lambda: dictionary.answers_of_length(5), r)
        print(f"first use ever (derive the answers into their cache, 5 letters): {derive:.2f} s")
        print(f"first word match of a process (read the answers' cache): {cached * 1e3:.0f} ms")
        dictionary.install()  # as every program that checks word secrets does at start
        rules = WordRules(5)
        rules.check_secret("SKUNK")  # the membership set, built once per list
        word = per_call(lambda: rules.check_secret("skunk"), 20000, r)
        classic = per_call(lambda: DEFAULT_RULES.check_secret("0123"), 20000, r)
        print(f"check_secret: word {word * 1e6:.2f} µs, classic {classic * 1e6:.2f} µs "
              f"(ratio {word / classic:.2f})")
    code = ("import time, moo.words; t = time.perf_counter(); import bots.dictionary; "
            "print(time.perf_counter() - t)")
    imports = [float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, check=True).stdout) for _ in range(r)]
    print(f"import bots.dictionary: {min(imports) * 1e3:.2f} ms")
    starts_words, starts_plain = server_starts(max(r, 9))
    w, p = statistics.median(starts_words), statistics.median(starts_plain)
    print(f"server start, median of {len(starts_words)}: {w * 1e3:.1f} ms with word variants, "
          f"{p * 1e3:.1f} ms without (ratio {w / p:.2f}); best {min(starts_words) * 1e3:.1f} / "
          f"{min(starts_plain) * 1e3:.1f} ms")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
