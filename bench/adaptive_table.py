"""Build the adaptive bot's decision tables (``bots/data/adaptive-<tree>.txt.gz``).

    .venv/bin/python -m bench.adaptive_table                      # both, into bots/data/
    .venv/bin/python -m bench.adaptive_table --against strongest  # one per process (2 cores)

The table of a model holds every decision the bot takes from the race program (module
:mod:`bots.adaptive`) while racing that tree. The walk is the race seen from the bot:

* while the opponent is not yet recognised, the bot itself is driven through every path of
  the opponent's tree (it decides which model it uses, exactly as in play);
* once the bot's choice of model can no longer change (against ``strongest`` from the start:
  it is always preferred; against ``minimum``: once ``strongest`` no longer fits its guesses),
  its decisions depend on the opponent only through the signature of its node, so the walk
  goes on over (own history, signature) pairs, far fewer than the tree's nodes.

Decisions are recorded as the bot makes them with no table present, so the bot plays exactly
the same with the tables (a lookup instead of a plan); ``moo eval adaptive --vs TREE``
re-derives the score by plain race enumeration, an independent check of this walk.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from bots import adaptive
from bots.adaptive import (
    OPTIONS,
    PLAN_FROM,
    START_DEPTH,
    Adaptive,
    OwnKey,
    Part,
    opponent_tree,
    write_table,
)
from bots.tree import DATA_DIR

sys.setrecursionlimit(10_000)


class Walk:
    """The decisions the bot reaches against one true tree."""

    def __init__(self, true_name: str) -> None:
        self.true_name = true_name
        self.true = opponent_tree(true_name)
        self.table = self.true.table
        self.by_guess = np.ascontiguousarray(self.table.rows(self.table.all_secrets()).T)
        self.seen_sig: set[tuple[OwnKey, int]] = set()
        self.states = 0

    def split(self, g: int, s: Part) -> list[tuple[int, Part]]:
        row = self.by_guess[g]
        groups: dict[int, list[int]] = defaultdict(list)
        for code in s:
            r = int(row[code])
            if r != self.table.solved_id:
                groups[r].append(code)
        return [(r, tuple(v)) for r, v in sorted(groups.items())]

    def by_node(self, bot: Adaptive, s: Part, v: tuple[int, ...]) -> None:
        """The bot itself, the opponent at its true node ``v`` (same depth as the bot)."""
        self.states += 1
        if self.settled(bot):
            w = self.true.sig[v]
            self.by_sig(bot.own, s, w)
            return
        g = bot._choose()
        if self.true.solves[v] == len(self.true.codes[v]):
            return
        opp_guess = self.table.guesses[self.true.guess[v]]
        for r, part in self.split(g, s):
            for _, kid in self.true.children[v]:
                nxt = bot.fork()
                nxt.observe(self.table.guesses[g], self.table.responses[r])
                nxt.observe_opponent_move(len(kid), opp_guess, self.table.responses[kid[-1]])
                self.by_node(nxt, part, kid)

    def settled(self, bot: Adaptive) -> bool:
        """From here on the bot models the true tree by signature, whatever it sees."""
        if not bot.plans():
            return False
        if self.true_name == "strongest":
            return True  # preferred whenever the path is one of its nodes, which it is
        return bot.models == (self.true_name,)

    def by_sig(self, hist: OwnKey, s: Part, w: int) -> None:
        if (hist, w) in self.seen_sig:
            return
        self.seen_sig.add((hist, w))
        self.states += 1
        m, b, kids = self.true.info[w]
        planner = Adaptive._planners.get(self.true_name) or _planner(self.true_name)
        g = planner.value(s, w)[1]
        record = Adaptive.recording
        assert record is not None
        record.setdefault(self.true_name, {}).setdefault(hist, {})[w] = g
        if b == m or len(s) == 1:
            return
        for r, part in self.split(g, s):
            for _, w2 in kids:
                self.by_sig((*hist, (g, r)), part, w2)


#: model -> a pickled program memo to start from (``--memo-in``; the sets' values do not
#: depend on where they were computed, so this only saves time)
_MEMO_IN: dict[str, Path | None] = {}


def _planner(name: str) -> adaptive.Planner:
    got = adaptive.Planner(opponent_tree(name), opponent_tree("strongest"), OPTIONS)
    memo_in = _MEMO_IN.get(name)
    if memo_in is not None:
        with open(memo_in, "rb") as fh:
            got.memo.update(pickle.load(fh))
        print(f"  {name}: {len(got.memo)} program sets read from {memo_in}", flush=True)
    Adaptive._planners[name] = got
    return got


def policy_value(
    planner: adaptive.Planner,
    start_depth: int = START_DEPTH,
    plan_from: int = PLAN_FROM,
    base_name: str = "strongest",
) -> float:
    """The program's own value of the policy against its model: the base tree until the bot
    plans (guess ``start_depth`` + 1, or from the second guess once at most ``plan_from``
    codes are left), then V(S, v) (float; ``moo eval`` gives the exact figure).

    Comparing option sets with it is cheap, since it needs no table and no race."""
    base, model = opponent_tree(base_name), planner.model

    def joint(u: tuple[int, ...], v: tuple[int, ...]) -> float:
        codes = base.codes[u]
        if len(u) >= start_depth or (len(u) >= 1 and len(codes) <= plan_from):
            return planner.value(codes, model.sig[v])[0]
        m1, b1 = len(codes), base.solves[u]
        m2, b2 = len(model.codes[v]), model.solves[v]
        a, b = b1 / m1, b2 / m2
        val = a * (1 - b) + a * b / 2
        for c1, k1 in base.children[u]:
            for c2, k2 in model.children[v]:
                val += c1 / m1 * c2 / m2 * joint(k1, k2)
        return val

    return joint((), ())


def _progress(started: float) -> None:
    """Every two minutes: the program states so far (a build takes minutes to an hour)."""
    while True:
        time.sleep(120)
        sizes = {name: len(p.memo) for name, p in Adaptive._planners.items()}
        print(f"  {time.perf_counter() - started:.0f} s: program sets {sizes}", flush=True)


def run(true_name: str) -> dict[OwnKey, dict[int, int]]:
    threading.Thread(target=_progress, args=(time.perf_counter(),), daemon=True).start()
    walk = Walk(true_name)
    bot = Adaptive()
    root = tuple(range(len(walk.table.secrets)))
    walk.by_node(bot, root, ())
    assert Adaptive.recording is not None
    planner = Adaptive._planners.get(true_name)
    if planner is not None and true_name == "strongest":
        print(f"program value against strongest: {policy_value(planner):.9f}", flush=True)
    print(
        f"vs {true_name}: {walk.states} walk states, "
        f"{len(planner.memo) if planner else 0} program states",
        flush=True,
    )
    return Adaptive.recording.get(true_name, {})


def describe(o: adaptive.Options) -> str:
    """The policy in words, for the table's header line (as the widths apply, not as set)."""
    info, cand = o.widths(o.wide_from - 1)
    small = "every candidate" if cand >= o.wide_from - 1 else f"{cand} candidates"
    wide_info, wide_cand = o.widths(o.wide_from)
    text = (
        f"start depth {START_DEPTH}, plan from {PLAN_FROM} codes, options the tree's guess + "
        f"below {o.wide_from} codes {small}+{info} others, from {o.wide_from} codes "
        f"{wide_cand}+{wide_info}"
    )
    if o.all_from:
        text += f", from {o.all_from} codes every candidate+{o.all_info}"
    return text


def _write(out_dir: Path, name: str, decisions: dict[OwnKey, dict[int, int]]) -> None:
    out = out_dir / f"adaptive-{name}.txt.gz"
    header = f"adaptive decisions against a {name} model: {describe(OPTIONS)}"
    write_table(out, decisions, header)
    count = sum(len(v) for v in decisions.values())
    print(f"{name}: {len(decisions)} histories, {count} decisions -> {out}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--against", action="append", choices=adaptive.MODELS)
    parser.add_argument(
        "--tables-from", type=Path, default=None,
        help="take the other models' decisions from their tables in this directory (a "
        "minimum build then need not re-plan the strongest-model moves met before it "
        "recognises minimum; the strongest table must be the one built with these options)",
    )
    parser.add_argument("--memo-in", type=Path, default=None, help="pickled program memo")
    parser.add_argument("--memo-out", type=Path, default=None, help="pickle the memo here")
    args = parser.parse_args()
    for name in adaptive.MODELS:
        adaptive._TABLES[name] = None  # plan everything afresh, ignore shipped tables
        other = args.tables_from is not None and name not in (args.against or adaptive.MODELS)
        if other:
            adaptive._TABLES[name] = adaptive.read_table(
                args.tables_from / f"adaptive-{name}.txt.gz"
            )
    if args.memo_in is not None:
        for name in args.against or adaptive.MODELS:
            _MEMO_IN[name] = args.memo_in
    Adaptive.recording = {}
    for name in args.against or adaptive.MODELS:
        started = time.perf_counter()
        decisions = run(name)
        # Only the model's own decisions: the strongest-model ones met on the way to
        # recognising minimum are also met against strongest (same paths, same histories).
        _write(args.out_dir, name, decisions)
        if args.memo_out is not None and name in Adaptive._planners:
            with open(args.memo_out, "wb") as fh:
                pickle.dump(Adaptive._planners[name].memo, fh, protocol=pickle.HIGHEST_PROTOCOL)
        print(f"  {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
