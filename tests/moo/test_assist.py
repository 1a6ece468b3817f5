"""The practice assistant (bots/judge/assistant.py): its count against a brute force, the
protocol's ``assist`` opt-in (never rated), and ``moo play --solo --assist``. That its
suggestions lose nothing is tests/bots/test_judge.py."""

from __future__ import annotations

import argparse
import dataclasses
import random
from pathlib import Path
from typing import cast

import pytest

from bots.judge.assistant import assist
from clients.terminal import play_solo
from moo.mastermind import MastermindRules
from moo.match import MatchConfig
from moo.rules import DEFAULT_RULES
from moo.variants import GameRules
from server.lobby import Lobby
from tests.server_support import ENCODINGS, Client, running, server_settings


def _possible(rules: GameRules, turns: list[tuple[str, int, int]]) -> list[str]:
    return [c for c in rules.secrets
            if all(tuple(rules.score(c, g)) == (b, w) for g, b, w in turns)]


@pytest.mark.parametrize("rules", [DEFAULT_RULES, MastermindRules()])
def test_assistant_counts_and_suggests_a_possible_code(rules: GameRules) -> None:
    rng = random.Random(5)
    secret = rng.choice(rules.secrets)
    turns: list[tuple[str, int, int]] = []
    for _ in range(4):
        said = assist(rules, turns)  # type: ignore[arg-type]
        left = _possible(rules, turns)
        assert said.left == len(left) and said.first == (not turns)
        assert said.suggestion is not None
        if said.suggestion == secret:
            break
        b, w = rules.score(secret, said.suggestion)
        turns.append((said.suggestion, b, w))


def test_assisted_config_is_never_rated() -> None:
    with pytest.raises(ValueError, match="rated must be false"):
        MatchConfig(assist=True)
    config = MatchConfig(assist=True, rated=False)
    assert MatchConfig.from_dict(config.to_dict()).assist is True


def test_solo_assist_prints_the_assistant(tmp_path: Path) -> None:
    rules = DEFAULT_RULES
    secret = random.Random(8).choice(rules.secrets)
    guess = "0123" if secret != "0123" else "4567"
    typed = iter([guess])
    said: list[str] = []
    play_solo(argparse.Namespace(seed=8, helper=False, assist=True, rules=None),
              lambda _p: next(typed, None), said.append)
    b, c = rules.score(secret, guess)
    expected = assist(rules, [(guess, b, c)])
    assert f"     ASSISTANT: {assist(rules, []).text()}" in said  # before the first guess
    assert f"     ASSISTANT: {expected.text()}" in said
    assert expected.left == len(_possible(rules, [(guess, b, c)]))


@pytest.mark.parametrize("enc", ENCODINGS)
async def test_assist_opt_in_through_the_protocol(tmp_path: Path, enc: str) -> None:
    settings = dataclasses.replace(server_settings(tmp_path), pacing="free")
    async with running(settings) as app:
        a = await Client.hello(app.port, "ann", enc)
        b = await Client.hello(app.port, "bob", enc)
        for msg in ({"type": "play_bot", "strategy": "random", "assist": True},
                    {"type": "queue", "assist": True, "rated": True},
                    {"type": "room_create", "assist": True}):
            err = await a.request(msg)
            assert err["code"] == "assist_rated", err
        lobby = cast(Lobby, app.lobby)
        assert not app.arena.live and not lobby.queue and not lobby.rooms
        q = await a.request({"type": "queue", "rated": False, "assist": True})
        assert q["assist"] is True
        plain = await b.request({"type": "queue", "rated": False})
        assert "assist" not in plain
        assert len(cast(Lobby, app.lobby).queue) == 2  # assisted and unassisted practice never pair
        await b.request({"type": "queue", "rated": False, "assist": True})
        m = await a.of_type("match")
        assert m["config"]["assist"] is True and m["config"]["rated"] is False
