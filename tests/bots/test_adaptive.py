"""The adaptive bot: its race program, recognising the opponent, and its shipped tables.

Full-game figures (minutes of CPU) are in docs/strategies.md; these tests check invariants
that would break if the program or the bot were wrong, on states small enough to be quick.
"""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from bots.adaptive import (
    Adaptive,
    OpponentTree,
    Options,
    Planner,
    consistent_relabelling,
    decision_table,
    opponent_tree,
    read_table,
    write_table,
)
from bots.registry import create
from bots.relabel import relabelled
from bots.tree import DATA_DIR, Strongest
from moo.rules import DEFAULT_RULES, score


@pytest.fixture(scope="module")
def strongest() -> OpponentTree:
    return opponent_tree("strongest")


def remaining(tree: OpponentTree, key: tuple[int, ...]) -> Counter[int]:
    """Guesses still needed (this one included) by each code of a node: its distribution."""
    out: Counter[int] = Counter()
    stack = [(key, 1)]
    while stack:
        k, d = stack.pop()
        out[d] += tree.solves[k]
        stack.extend((kid, d + 1) for _, kid in tree.children[k])
    return out


def race_of(ours: Counter[int], theirs: Counter[int]) -> Fraction:
    n, m = sum(ours.values()), sum(theirs.values())
    total = Fraction(0)
    for k, a in ours.items():
        for j, b in theirs.items():
            total += Fraction(a * b, n * m) * (1 if k < j else Fraction(1, 2) if k == j else 0)
    return total


def test_signatures_are_finishing_time_classes(strongest: OpponentTree) -> None:
    by_sig: dict[int, Counter[int]] = {}
    for key in strongest.codes:
        dist = remaining(strongest, key)
        assert sum(dist.values()) == len(strongest.codes[key])
        assert by_sig.setdefault(strongest.sig[key], dist) == dist
    assert len(strongest.info) < len(strongest.codes) // 10  # 250 classes for 5181 nodes


def test_the_program_never_does_worse_than_the_tree_it_starts_from(
    strongest: OpponentTree,
) -> None:
    """V(S, v) >= the race value of just playing on with strongest's subtree (an option)."""
    planner = Planner(strongest, strongest)
    keys = sorted(k for k in strongest.codes if len(k) == 4 and 3 <= len(strongest.codes[k]) <= 12)
    opp = sorted({strongest.sig[k]: k for k in strongest.codes if len(k) == 4}.values())
    rng = random.Random(7)
    strictly_better = 0
    for own in rng.sample(keys, 40):
        s = tuple(sorted(strongest.codes[own]))
        for v in rng.sample(opp, 8):
            value, guess = planner.value(s, strongest.sig[v])
            fixed = race_of(remaining(strongest, own), remaining(strongest, v))
            assert value >= float(fixed) - 1e-12
            assert 0 <= guess < len(DEFAULT_RULES.guesses)
            strictly_better += value > float(fixed) + 1e-9
    assert strictly_better > 0  # and it does find better moves somewhere


def reference_value(planner: Planner, s: tuple[int, ...], w: int) -> float:
    """V(S, w) by the plain scalar recursion over the planner's own options (no vectors)."""
    model = planner.model
    m, b, kids = model.info[w]
    n = len(s)
    now = 1.0 - b / m / 2.0
    if n == 1:
        return now
    table = planner.table
    arr = np.array(s, dtype=np.int16)
    guesses = (
        [int(table.secret_as_guess[s[0]])] if n == 2
        else planner.option_guesses(arr, arr.tobytes()).tolist()
    )
    best = -1.0
    for g in guesses:
        parts: dict[int, list[int]] = {}
        hit = False
        for code in s:
            r = int(planner.by_secret[code, g])
            if r == table.solved_id:
                hit = True
            else:
                parts.setdefault(r, []).append(code)
        val = now / n if hit else 0.0
        for part in parts.values():
            acc = sum(c * reference_value(planner, tuple(part), w2) for c, w2 in kids)
            val += len(part) / n * acc / m
        best = max(best, val)
    return best


def test_the_vector_program_equals_the_scalar_recursion(strongest: OpponentTree) -> None:
    """V(S, ·) for all signatures at once (one matrix product per set) is the same number as
    the recursion written out per (set, signature), on sets of up to a dozen codes."""
    planner = Planner(strongest, strongest, Options(k_info=2, k_cand=2, wide_from=6,
                                                    wide_info=4, wide_cand=99))
    keys = sorted(k for k in strongest.codes if 3 <= len(strongest.codes[k]) <= 12)
    sigs = sorted(set(strongest.sig.values()))
    rng = random.Random(3)
    for own in rng.sample(keys, 6):
        s = tuple(sorted(strongest.codes[own]))
        values, guesses = planner.solve(np.array(s, dtype=np.int16))
        for w in rng.sample(sigs, 5):
            assert values[w] == pytest.approx(reference_value(planner, s, w), abs=1e-12)
            assert planner.value(s, w) == (float(values[w]), int(guesses[w]))


def test_wider_options_never_lower_the_value(strongest: OpponentTree) -> None:
    """Every option of the narrow program is among the wide one's, so V can only rise."""
    narrow = Planner(strongest, strongest, Options(2, 2, 99, 2, 2))
    wide = Planner(strongest, strongest, Options(2, 2, 5, 10, 99))
    keys = sorted(k for k in strongest.codes if len(k) == 2 and 30 <= len(strongest.codes[k]) <= 60)
    rises = 0
    for own in random.Random(5).sample(keys, 4):
        s = np.array(sorted(strongest.codes[own]), dtype=np.int16)
        lo, hi = narrow.solve(s)[0], wide.solve(s)[0]
        assert (hi >= lo - 1e-12).all()
        rises += int((hi > lo + 1e-9).any())
    assert rises > 0


def test_option_tiers_by_set_size() -> None:
    """Narrow below wide_from, wide from there, every candidate from all_from (if set)."""
    o = Options(k_info=2, k_cand=2, wide_from=20, wide_info=6, wide_cand=6, all_from=100)
    assert o.widths(19) == (2, 2)
    assert o.widths(20) == (6, 6)
    assert o.widths(150) == (20, 150)
    assert Options(2, 2, 20, 6, 6).widths(5000) == (6, 6)


def test_the_shipped_policy_weighs_every_candidate_of_a_small_set(strongest: OpponentTree) -> None:
    """Which code to try is the choice that pays in a race (docs/strategies.md), so below
    wide_from codes the shipped options keep every candidate, not only the best splitters."""
    planner = Planner(strongest, strongest)
    narrow = Planner(strongest, strongest, Options(2, 2, 20, 6, 6))
    small = sorted(k for k in strongest.codes if 8 <= len(strongest.codes[k]) < 20)
    for key in random.Random(7).sample(small, 5):
        s = np.array(sorted(strongest.codes[key]), dtype=np.int16)
        got = set(planner.option_guesses(s, s.tobytes()).tolist())
        cands = {int(planner.as_guess[int(c)]) for c in s}
        assert cands <= got
        assert not cands <= set(narrow.option_guesses(s, s.tobytes()).tolist())


def test_closed_forms_at_the_end(strongest: OpponentTree) -> None:
    planner = Planner(strongest, strongest)
    one = next(k for k in strongest.codes if len(strongest.codes[k]) == 1)
    two = next(k for k in strongest.codes if len(strongest.codes[k]) == 2 and len(k) == 3)
    w1, w2 = strongest.sig[one], strongest.sig[two]
    s1 = (17,)
    assert planner.value(s1, w1) == (0.5, DEFAULT_RULES.guesses.index(DEFAULT_RULES.secrets[17]))
    # two codes left against an opponent certain to finish now: hit now (1/2) and draw
    assert planner.value((3, 900), w1)[0] == pytest.approx(0.25)
    # against two codes left whose guess is one of them: 1/2 now, else next round
    b = strongest.solves[two]
    assert planner.value(s1, w2)[0] == pytest.approx(1 - b / 2 / 2)


def test_recognising_the_opponent_through_any_relabelling() -> None:
    perms: list[tuple[int, ...]] = [(0, 1, 2, 3), (1, 0, 3, 2)]
    assert consistent_relabelling(["0123", "0456"], ["1234", "5678"], perms) is False
    assert consistent_relabelling(["0123", "0456"], ["1032", "4065"], perms) is True
    separated = 0
    for seed, secret in enumerate(DEFAULT_RULES.secrets[::97]):
        for name in ("strongest", "minimum"):
            opponent = create(name)
            opponent.new_match(DEFAULT_RULES, random.Random(seed))
            bot = Adaptive()
            bot.new_match(DEFAULT_RULES, random.Random(0))
            for n in range(1, 9):
                guess = opponent.next_guess()
                response = score(secret, guess)
                if response == DEFAULT_RULES.solved:
                    break
                opponent.observe(guess, response)
                bot.observe_opponent_move(n, guess, response)
            assert name in bot.models
            separated += bot.models == (name,)
    assert separated > 10


def test_hidden_guesses_keep_both_models_and_the_responses_still_place_the_opponent() -> None:
    bot = Adaptive()
    bot.new_match(DEFAULT_RULES, random.Random(0))
    tree = opponent_tree("strongest")
    first = DEFAULT_RULES.guesses[tree.guess[()]]
    bot.observe_opponent_move(1, None, score("4567", first))
    assert bot.models == ("strongest", "minimum")
    bot.observe(DEFAULT_RULES.guesses[tree.guess[()]], score("0132", first))
    model = bot._model()
    assert model is not None and model[0] == "strongest"


def test_alone_it_plays_the_strongest_tree() -> None:
    """No opponent to watch: no model, so the fallback (strongest while on its tree)."""
    ours = Adaptive()
    tree = Strongest()
    for secret in DEFAULT_RULES.secrets[::251]:
        for strategy in (ours, tree):
            strategy.new_match(DEFAULT_RULES, random.Random(1))
        while True:
            guess = ours.next_guess()
            assert guess == tree.next_guess()
            response = score(secret, guess)
            if response == DEFAULT_RULES.solved:
                break
            ours.observe(guess, response)
            tree.observe(guess, response)


def test_tables_round_trip(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "t.txt.gz"
    decisions = {(): {1: 5, 2: 5, 3: 7}, ((0, 3), (9, 1)): {4: 8}}
    write_table(path, decisions, "test")
    table = read_table(path)
    assert table.header == "test"
    for hist, per in decisions.items():
        for w, g in per.items():
            assert table.lookup(hist, w) == g
    assert table.lookup(((1, 1),), 1) is None


@pytest.mark.skipif(
    not (DATA_DIR / "adaptive-strongest.txt.gz").exists(), reason="tables not built"
)
def test_the_shipped_table_answers_every_state_of_a_match_against_strongest() -> None:
    table = decision_table("strongest")
    assert table is not None and "start depth" in table.header
    bot = relabelled(Adaptive())
    opponent = create("strongest")
    planned = Counter[str]()
    for seed in range(40):
        rng = random.Random(seed)
        secret_ours, secret_theirs = rng.sample(DEFAULT_RULES.secrets, 2)
        bot.new_match(DEFAULT_RULES, rng)
        opponent.new_match(DEFAULT_RULES, rng)
        for n in range(1, 12):
            inner = bot.inner
            assert isinstance(inner, Adaptive)
            model = inner._model()
            if model is not None and inner.plans():
                got = table.lookup(inner.own, model[1])
                planned["table" if got is not None else "live"] += 1
                if got is None:
                    assert inner.choices_left <= 6  # only small states are planned live
            ga, gb = bot.next_guess(), opponent.next_guess()
            ra, rb = score(secret_theirs, ga), score(secret_ours, gb)
            if DEFAULT_RULES.solved in (ra, rb):
                break
            bot.observe(ga, ra)
            opponent.observe(gb, rb)
            bot.observe_opponent_move(n, gb, rb)
    assert planned["table"] > 0
