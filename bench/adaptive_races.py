"""Exact races of ``adaptive`` against every shipped bot -> bots/data/races.json + a table.

    .venv/bin/python -m bench.adaptive_races [--vs strongest minimum ...] [--jobs 2]

Each race is ``bots.evaluate.race_result`` (the same enumeration as ``moo eval adaptive --vs
X``). The file is keyed by the fingerprint of the trees and decision tables
(``bots.evaluate.races_fingerprint``), so ``moo report`` uses it only while they are unchanged.
The printed Markdown table (for docs/strategies.md) puts ``strongest``'s exact score against
the same bot beside each figure.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from fractions import Fraction

from bots.evaluate import RACES_FILE, evaluate, match_probabilities, race_result, races_fingerprint
from bots.registry import available


def one(vs: str) -> dict[str, object]:
    started = time.perf_counter()
    out = race_result("adaptive", vs)
    out["wall_seconds"] = round(time.perf_counter() - started, 1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", nargs="+", default=None)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    names = args.vs or available()
    try:
        data = json.loads(RACES_FILE.read_text())
    except (OSError, ValueError):
        data = {}
    fingerprint = races_fingerprint()
    races = data.get("races", {}) if data.get("fingerprint") == fingerprint else {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for vs, result in zip(names, pool.map(one, names), strict=True):
            races[f"adaptive|{vs}"] = {
                "win": result["win_exact"],
                "draw": result["draw_exact"],
                "loss": result["loss_exact"],
                "score": result["score"],
                "method": result["method"],
                "states": result["states"],
                "seconds": result["wall_seconds"],
            }
            print(f"adaptive vs {vs}: score {result['score']:.7f} ({result['score_exact']}), "
                  f"{result['states']} states, {result['wall_seconds']} s", flush=True)
            RACES_FILE.write_text(
                json.dumps({"fingerprint": fingerprint, "races": races}, indent=1,
                           sort_keys=True) + "\n"
            )
    print("\n| opponent | `adaptive` score (exact) | `strongest` score | gain |")
    print("| --- | ---: | ---: | ---: |")
    strongest = evaluate("strongest", show_progress=False).distribution
    for vs in names:
        hit = races.get(f"adaptive|{vs}")
        if hit is None:
            continue
        ours = Fraction(str(hit["win"])) + Fraction(str(hit["draw"])) / 2
        if vs == "adaptive":  # strongest against adaptive: the other side of that race
            them = races.get("adaptive|strongest")
            if them is None:
                continue
            base = 1 - Fraction(str(them["win"])) - Fraction(str(them["draw"])) / 2
        else:
            other = evaluate(vs, show_progress=False, samples=1).distribution
            w, d, _ = match_probabilities(strongest, other)
            base = w + d / 2
        print(f"| `{vs}` | {float(ours):.7f} | {float(base):.7f} | "
              f"{100 * float(ours - base):+.4f} pts |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
