"""The rules parser (moo/variants.py): the protocol object, the compact spec, canonical names,
and the match state machine playing Mastermind and other rules."""

from __future__ import annotations

import pytest

from moo.errors import BadRules
from moo.mastermind import MastermindRules, mastermind_score
from moo.match import Match, MatchConfig
from moo.rules import DEFAULT_RULES, Rules
from moo.variants import (
    DEFAULT_VARIANTS,
    is_classic,
    parse_rules,
    parse_rules_spec,
    rules_from_dict,
    rules_label,
    rules_spec,
)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("classic", DEFAULT_RULES),
        ("moo", DEFAULT_RULES),
        ("moo:4:0123456789", DEFAULT_RULES),
        ("moo:5", Rules(length=5)),
        ("moo:4:hex", Rules(alphabet="0123456789ABCDEF")),
        ("moo:4:0123456789abcdef", Rules(alphabet="0123456789ABCDEF")),
        ("moo:3:letters:repeats", Rules(length=3, alphabet="ABCDEFGHIJ", repeats_in_guess=True)),
        ("mastermind", MastermindRules()),
        ("mastermind:4:colours", MastermindRules()),
        ("MASTERMIND:5:12345678", MastermindRules(length=5, alphabet="12345678")),
    ],
)
def test_spec_parses_to_rules(spec: str, expected: object) -> None:
    rules = parse_rules_spec(spec)
    assert rules == expected
    # the canonical spec reads back to the same rules
    assert parse_rules_spec(rules_spec(rules)) == rules


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("moo:9", "length must be 3-6, got 9"),
        ("moo:4:0123456780", "alphabet repeats symbol '0'"),
        ("moo:5:0123", "5 positions need at least 5 distinct symbols; the alphabet has 4"),
        ("go:4", "game must be 'moo', 'mastermind' or 'words'"),
        ("moo:four", "length must be a number"),
        ("moo:4:digits:twice", "the fourth part can only be 'repeats'"),
        ("mastermind:9", "length must be 3-6, got 9"),
        ("mastermind:4:1234567890A", "mastermind alphabets have at most 10 symbols, got 11"),
        ("moo:4:0123456789ABCDEFG", "alphabet has 17 symbols; at most 16"),
        ("moo:4:01 23", "not allowed"),
        ("", "a rules spec is GAME"),
        ("moo:4:5:6:7", "too many ':' parts"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(BadRules, match=message):
        parse_rules_spec(spec)


def test_protocol_object_forms() -> None:
    assert parse_rules({}) == DEFAULT_RULES
    assert parse_rules({"alphabet": list("abcdef"), "length": 3}) == Rules(3, "ABCDEF")
    assert parse_rules({"game": "mastermind"}) == MastermindRules()
    with pytest.raises(BadRules, match="empty symbol"):
        parse_rules({"alphabet": ["A", ""]})
    with pytest.raises(BadRules, match="single characters"):
        parse_rules({"alphabet": ["AB", "C"]})
    with pytest.raises(BadRules, match="length must be an integer"):
        parse_rules({"length": True})
    with pytest.raises(BadRules, match="leave repeats_in_guess out"):
        parse_rules({"game": "mastermind", "repeats_in_guess": False})
    with pytest.raises(BadRules, match="rules must be an object"):
        parse_rules("moo")


def test_defaults_and_labels() -> None:
    offered = [parse_rules_spec(s) for s in DEFAULT_VARIANTS]
    assert offered[0] == DEFAULT_RULES and is_classic(offered[0])
    assert [rules_label(r) for r in offered] == [
        "MOO 4 of 10", "MOO 3 of 10", "MOO 5 of 10", "MOO 6 of 10", "MOO 4 of hex",
        "Mastermind 4 of 6", "Word MOO 5 letters", "Word MOO 5 letters (hits and misses)",
    ]
    assert not is_classic(Rules(repeats_in_guess=True))
    for rules in offered:
        assert rules_from_dict(rules.to_dict()) == rules


def test_match_plays_mastermind_with_repeats() -> None:
    config = MatchConfig(rules=MastermindRules(), secret_ms=None)
    assert MatchConfig.from_dict(config.to_dict()) == config
    match, _ = Match.create("m1", ("a", "b"), config, 0)
    match.set_secret(0, "1122", "s", 0)
    match.set_secret(1, "3333", "s", 0)  # repeats allowed in Mastermind secrets
    events = match.guess(0, "3133", 1)
    assert (events[0]["bulls"], events[0]["cows"]) == mastermind_score("3333", "3133") == (3, 0)
    events = match.guess(1, "2211", 1)
    assert events[-1]["kind"] == "round" and events[-1]["results"][1] == ["2211", 0, 4]
    match.guess(0, "3333", 2)
    events = match.guess(1, "5555", 2)
    assert events[-1]["kind"] == "finished" and events[-1]["winner"] == 0
    # the log replays to the same state with the same scoring
    replayed = Match.replay(match.events)
    assert replayed.result == match.result
    assert isinstance(replayed.config.rules, MastermindRules)


def test_classic_config_keeps_moo_scoring() -> None:
    from moo.rules import score

    assert MatchConfig().scorer is score
    assert MatchConfig(rules=MastermindRules()).scorer is mastermind_score


def test_server_setting_refuses_bad_specs() -> None:
    from server.settings import ConfigError, Settings

    with pytest.raises(ConfigError, match="variants: 'moo:9': length must be 3-6"):
        Settings(variants=["moo:9"])
    with pytest.raises(ConfigError, match="at least one"):
        Settings(variants=[])
