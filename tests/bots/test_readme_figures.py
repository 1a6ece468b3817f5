"""The README's strategy table says what the shipped bots really give.

Every figure in the table is recomputed here with the code ``moo eval`` runs (exact for the
fixed strategies: one game per secret, then exact win/draw/loss from the two distributions),
so a new tree, a changed tie rule or a typo fails this test instead of misleading a reader.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from bots.evaluate import Evaluation, cached_races, evaluate, match_probabilities, race_wdl

README = Path(__file__).resolve().parents[2] / "README.md"


def strategy_rows() -> dict[str, str]:
    """``{first cell: second cell}`` of the table under "## Strategies"."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Strategies\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0]] = cells[1]
    return rows


@cache
def ev(spec: str) -> Evaluation:
    return evaluate(spec, show_progress=False)


def pct(a: str, b: str) -> str:
    """A's score against B (win + draw/2) as the README prints it: five decimals, in %."""
    win, draw, _ = match_probabilities(ev(a).distribution, ev(b).distribution)
    return f"{100 * float(win + draw / 2):.5f}"


def numbers(text: str) -> list[str]:
    return re.findall(r"\d+(?:\.\d+)?", text)


def test_the_table_has_the_rows_this_test_checks() -> None:
    assert set(strategy_rows()) == {
        "`minimum`",
        "`strongest`",
        "`adaptive`",
        "`larmouth`, `entropy`, `expected`, `parts`, `minimax`",
        "`first`, `random`",
    }


def test_minimum_row_is_the_shipped_tree() -> None:
    row = strategy_rows()["`minimum`"]
    m = ev("minimum")
    head, dist = row.split("distribution", 1)
    assert numbers(head)[:2] == [str(m.total), f"{m.average:.3f}"]
    counts = [m.distribution[k] for k in sorted(m.distribution)]
    assert [int(x) for x in numbers(dist)] == counts
    assert m.total == 26274  # Tanaka's optimal total: the solver's claim, not only the README's


def test_strongest_row_scores() -> None:
    row = strategy_rows()["`strongest`"]
    s = ev("strongest")
    total, vs_tanaka, tanaka_own, vs_ours = numbers(row)
    assert int(total) == s.total
    assert vs_tanaka == pct("strongest", "dist:tanaka-minimum")
    assert tanaka_own == pct("dist:tanaka-strongest", "dist:tanaka-minimum")
    assert vs_ours == pct("strongest", "minimum")
    assert "against our `minimum`" in row.split(vs_ours, 1)[1][:30]


def test_adaptive_row_is_the_exact_race() -> None:
    """The adaptive bot's figures are exact races (minutes each), so they come from the shipped
    race cache, which ``cached_races`` honours only for the very tables the bot ships with
    (fingerprint); tests/bots/test_adaptive*.py check the race enumeration itself."""
    row = strategy_rows()["`adaptive`"]
    vs_strongest, vs_minimum = numbers(row)
    for shown, opponent in ((vs_strongest, "strongest"), (vs_minimum, "minimum")):
        key = f"adaptive|{opponent}"
        assert key in cached_races(), f"no exact race {key} for the shipped tables"
        win, draw, _, _ = race_wdl("adaptive", opponent)
        assert shown == f"{100 * float(win + draw / 2):.5f}"
        assert f"against `{opponent}`" in row.split(shown, 1)[1][:30]


def test_heuristic_totals_in_the_order_named() -> None:
    names_cell = "`larmouth`, `entropy`, `expected`, `parts`, `minimax`"
    names = re.findall(r"`(\w+)`", names_cell)
    totals = [int(x) for x in numbers(strategy_rows()[names_cell])]
    assert totals == [ev(name).total for name in names]


def test_first_total_and_random_average() -> None:
    row = strategy_rows()["`first`, `random`"]
    first_total, random_average = numbers(row)
    assert int(first_total) == ev("first").total
    # random is sampled (one seeded game per secret); the README rounds to two decimals
    assert float(random_average) == pytest.approx(ev("random").average, abs=0.01)
