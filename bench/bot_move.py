"""Time per move: the table bot (a dict lookup) against a heuristic bot (a partition search).

Both are measured in the same run on the same games, so the ratio is meaningful even on a busy
machine. Only strategy calls are timed (``new_match``, ``next_guess``, ``observe``): the games'
responses are precomputed. CPU time of the process (``time.process_time``) is measured rather
than wall time, because the shared machine's load would otherwise dominate. The heuristic is
timed cold (memo cleared: one search per new tree node, the cost of a first match in a fresh
process) and warm (decisions memoised). Until the
solver's trees land in bots/data, the table bot plays a placeholder tree dumped from the
heuristic itself into a temporary directory, which has the same shape and lookup cost.

    python -m bench.bot_move [--bot entropy] [--write]   # --write updates docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import gzip
import platform
import random
import re
import tempfile
import time
from pathlib import Path

from bots import heuristic, playout
from bots.base import Strategy
from bots.playout import play_all
from bots.registry import create
from bots.tree import DATA_DIR, TreeStrategy, format_dump_line
from moo.rules import DEFAULT_RULES, Response, score

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
Script = list[tuple[str, Response]]


def scripts(games: list[tuple[str, tuple[str, ...]]]) -> list[Script]:
    return [[(g, score(secret, g)) for g in guesses] for secret, guesses in games]


def time_moves(strategy: Strategy, plays: list[Script], repeat: int = 1) -> tuple[float, int]:
    """Seconds per move (best of ``repeat``) replaying the scripted games."""
    rng = random.Random(0)
    moves = sum(len(s) for s in plays)
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for script in plays:
            strategy.new_match(DEFAULT_RULES, rng)
            for guess, response in script[:-1]:
                strategy.next_guess()
                strategy.observe(guess, response)
            strategy.next_guess()
        best = min(best, time.process_time() - start)
    return best / moves, moves


def run(bot: str) -> dict[str, float | str | int]:
    heuristic._MEMO.clear()
    playout._GAMES.clear()
    cold_bot = create(bot, relabel=False)
    start = time.process_time()
    games = play_all(cold_bot, DEFAULT_RULES)  # cold: includes the searches (and the table)
    cold_total = time.process_time() - start
    plays = scripts(games)
    moves = sum(len(s) for s in plays)
    # the biggest search of the tree: 1440 candidates left after 0123 -> 1C
    assert isinstance(cold_bot, heuristic.Heuristic)
    table_ = cold_bot.table
    cand = table_.filter(table_.all_secrets(), table_.guess_index["0123"],
                         table_.response_id(Response(0, 1)))
    start = time.process_time()
    cold_bot.choose(table_, cand)
    biggest = time.process_time() - start
    warm, _ = time_moves(cold_bot, plays, repeat=3)
    real = DATA_DIR / "minimum.txt.gz"
    with tempfile.TemporaryDirectory() as tmp:
        if real.exists():
            tree_path, source = real, "bots/data/minimum.txt.gz"
            tree_plays = scripts(play_all(TreeStrategy(real), DEFAULT_RULES))
        else:
            tree_path = Path(tmp) / f"{bot}.txt.gz"
            with gzip.open(tree_path, "wt") as fh:
                fh.write("".join(format_dump_line(s, g) + "\n" for s, g in games))
            source, tree_plays = f"placeholder tree dumped from {bot}", plays
        start = time.process_time()
        table_bot = TreeStrategy(tree_path)
        load = time.process_time() - start
        table, _ = time_moves(table_bot, tree_plays, repeat=3)
        relabelled, _ = time_moves(create(f"file:{tree_path}"), tree_plays, repeat=1)
    return {
        "bot": bot,
        "tree": source,
        "moves": moves,
        "cold": cold_total / moves,
        "cold_total": cold_total,
        "warm": warm,
        "table": table,
        "relabelled": relabelled,
        "load": load,
        "biggest": biggest,
    }


def markdown(r: dict[str, float | str | int]) -> str:
    def us(x: float | str | int) -> str:
        return f"{float(x) * 1e6:,.1f} µs"

    table = float(r["table"])

    def ratio(key: str, digits: int = 0) -> str:
        return f"{float(r[key]) / table:,.{digits}f}x"

    bot = r["bot"]
    return f"""## Bots

`python -m bench.bot_move` — CPU time per move (strategy calls only, responses precomputed)
over all 5040 secrets ({r['moves']} moves), measured in one run on {platform.machine()} /
Python {platform.python_version()}. The machine's 2 cores were shared with other jobs (load
~8), hence CPU rather than wall time; the ratios come from the same run.

| strategy | per move | vs table bot |
| --- | --- | --- |
| table bot (`TreeStrategy`: dict lookup; {r['tree']}) | {us(table)} | 1x |
| table bot, relabelled (as served) | {us(r['relabelled'])} | {ratio('relabelled', 1)} |
| `{bot}` warm (decisions memoised; numpy candidate filter) | {us(r['warm'])} | {ratio('warm')} |
| `{bot}` cold (fresh process: table + one search per node) | {us(r['cold'])} | {ratio('cold')} |

Cold, the whole 5040-secret tree of `{r['bot']}` takes {float(r['cold_total']):.2f} s (the
response table is built in it); its biggest single search (1440 candidates after 0123 → 1C,
all 5040 guesses) takes {float(r['biggest']) * 1e3:.0f} ms. Loading and validating a 5040-line
tree file takes {float(r['load']) * 1e3:.0f} ms, once per process.
"""


def write_section(text: str) -> None:
    doc = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    pattern = re.compile(r"^## Bots\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(doc):
        doc = pattern.sub(lambda _: text + "\n", doc).rstrip("\n") + "\n"
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bot", default="entropy")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    text = markdown(run(args.bot))
    print(text)
    if args.write:
        write_section(text)


if __name__ == "__main__":
    main()
