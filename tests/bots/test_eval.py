"""moo eval: exact outcome probabilities, and the command line in text and JSON."""

from __future__ import annotations

import io
import json
from fractions import Fraction
from pathlib import Path

import pytest

import bots.tree as tree_mod
from bots.evaluate import evaluate, match_probabilities
from bots.playout import Progress
from cli.main import main as moo

MINIMUM = dict(enumerate([1, 7, 63, 697, 2424, 1774, 74], start=1))
STRONGEST = dict(enumerate([1, 4, 47, 688, 2531, 1628, 141], start=1))


def test_tanaka_strongest_beats_minimum_by_0_5020823() -> None:
    win, draw, loss = match_probabilities(STRONGEST, MINIMUM)
    assert win + draw + loss == 1
    assert round(float(win + draw / 2), 7) == 0.5020823
    # Table 5: with 4 guesses the minimum strategy wins 4272, draws 697, loses 71 of 5040
    w4, d4, l4 = match_probabilities({4: 1}, MINIMUM)
    assert [w4 * 5040, d4 * 5040, l4 * 5040] == [Fraction(4272), Fraction(697), Fraction(71)]
    back = match_probabilities(MINIMUM, STRONGEST)
    assert back == (loss, draw, win)


@pytest.mark.parametrize("dist", [MINIMUM, STRONGEST, {3: 2, 5: 7, 9: 1}])
def test_a_strategy_against_itself_scores_exactly_one_half(dist: dict[int, int]) -> None:
    win, draw, loss = match_probabilities(dist, dist)
    assert win == loss and win + draw / 2 == Fraction(1, 2)


def test_the_evaluated_distribution_against_itself_is_one_half() -> None:
    ev = evaluate("minimax", show_progress=False)
    assert ev.total == 27139 and ev.games == 5040 and ev.method.startswith("exact")
    win, draw, _ = match_probabilities(ev.distribution, ev.distribution)
    assert win + draw / 2 == Fraction(1, 2)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = moo(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_eval_json_vs_another_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "eval", "expected", "--vs", "minimax", "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["name"] == "expected" and data["vs"] == "minimax"
    assert data["total"] == 26551 and data["vs_total"] == 27139
    assert sum(data["distribution"].values()) == 5040 and data["worst"] == 7
    assert data["win"] + data["draw"] + data["loss"] == pytest.approx(1, abs=1e-12)
    assert data["score"] == pytest.approx(data["win"] + data["draw"] / 2)
    assert data["score"] > 0.5  # fewer guesses on average and a better tail
    rc, out, _ = run(capsys, "eval", "minimax", "--vs", "expected", "--json")
    assert json.loads(out)["score"] == pytest.approx(1 - data["score"], abs=1e-12)


def test_eval_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "eval", "first", "--vs", "first")
    assert rc == 0
    assert "first: total 28024 over 5040 games, average 5.5603, worst 9" in out
    assert "exact" in out and "score 0.5000000" in out


def test_eval_accepts_module_paths_and_dump_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    dump = tmp_path / "mine.txt"
    assert moo(["strategy", "dump", "parts", "-o", str(dump)]) == 0
    capsys.readouterr()
    rc, out, _ = run(
        capsys, "eval", f"file:{dump}", "--vs", "bots.parts:MostParts", "--json"
    )
    data = json.loads(out)
    assert rc == 0 and data["total"] == data["vs_total"] == 26751 and data["score"] == 0.5
    assert "dump file" in data["method"]


def test_random_strategies_are_sampled_and_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "eval", "random", "--vs", "none", "--json", "--seed", "3")
    data = json.loads(out)
    assert rc == 0 and "sampled" in data["method"] and "seed 3" in data["method"]
    assert data["games"] == 5040 and 5.4 < data["average"] < 5.8
    assert "win" not in data


def test_default_opponent_is_minimum_with_a_clear_error_when_missing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tree_mod, "DATA_DIR", tmp_path)
    rc, out, err = run(capsys, "eval", "entropy")
    assert rc == 2 and out == ""
    assert "minimum.txt.gz" in err and "--vs" in err


def test_unknown_strategy_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, "eval", "nosuchbot", "--vs", "none")
    assert rc == 2 and "unknown strategy 'nosuchbot'" in err


def test_progress_bar_is_silent_for_quick_jobs_then_draws() -> None:
    now = [0.0]
    stream = io.StringIO()
    quiet = Progress(100, "eval", stream=stream, delay=0.0, clock=lambda: now[0])
    quiet(50)  # StringIO is not a terminal: no carriage-return spam in logs
    bar = Progress(100, "eval", stream=stream, delay=2.0, clock=lambda: now[0], only_tty=False)
    bar(10)
    now[0] = 1.9
    bar(50)
    assert stream.getvalue() == ""
    now[0] = 2.5
    bar(60)
    assert "60/100" in stream.getvalue()
    bar.finish()
    assert stream.getvalue().endswith("100/100\n")


def test_eval_against_a_published_distribution(capsys) -> None:
    """The exact score against Tanaka's minimum distribution, without its tree."""
    import json as _json

    from cli.main import main as cli

    assert cli(["eval", "dist:tanaka-strongest", "--vs", "dist:tanaka-minimum", "--json"]) == 0
    out = _json.loads(capsys.readouterr().out)
    assert out["total"] == 26312 and out["vs_total"] == 26274
    assert f"{out['score']:.7f}" == "0.5020823"
    assert cli(["eval", "dist:1,2", "--vs", "dist:x,y"]) == 2
