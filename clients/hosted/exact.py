"""Exact scores of a submitted program: its whole guess tree, scored as ``moo eval`` scores.

A program whose guesses depend only on the responses to its own guesses is a decision tree,
and one game per secret is all of it: its guess-count distribution over the 5040 secrets is
exact, and so are its win, draw and loss chances against another fixed tree (each player's
secret being independent and uniform). The arena's evaluator does exactly that for built-in
strategies (:mod:`bots.evaluate`); this does it for a program in the sandbox, and the numbers
come from the same code (:func:`bots.evaluate.evaluate` for ``minimum`` and ``strongest``,
:func:`bots.evaluate.match_probabilities` for the scores), so a program that plays like a
built-in strategy gets exactly that strategy's figures.

How (docs/ladder.md, "Exact scores"):

* **One sandbox session** plays the 5040 games one after the other, each opened with ``new``
  as docs/bot-protocol.md allows (a program is kept for many matches), so the program starts
  once, not 5040 times, and may keep tables between games. Each game is played to the end:
  ``guess``, ``result``, then ``opponent N`` with the count only (as in lockstep the opponent
  makes as many guesses, and no response is shown: the program learns nothing of an opponent),
  and ``end draw`` when it has found the secret (there is no opponent to beat or lose to).
* **Determinism is checked twice.** Within the session, two games that share the responses
  so far must make the same next guess (the tree is built as a dict from the responses so far
  to the guess, as :class:`bots.tree.DecisionTree` is). Then a **fresh session** replays a
  seeded sample of secrets in another order as real matches against ``minimum`` (with its
  responses shown in ``opponent`` lines, the race rule ending the match): every guess must be
  the tree's. A program that draws random numbers, remembers earlier games or adapts to its
  opponent's progress has no single tree, and gets no exact score (None, with the reason).
* Only **classic MOO** (4 of the 10 digits) has the ``minimum`` and ``strongest`` trees to be
  scored against, so other rules get no exact score.

The session runs with :data:`EXACT_LIMITS`: a ladder match's limits, except the CPU and output
budgets, which cover 5040 games instead of one; :data:`WALL` bounds the whole computation.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction

from bots.evaluate import evaluate, match_probabilities
from bots.external import BotFailure, ExternalBot
from bots.playout import MAX_GUESSES
from bots.registry import create
from moo.rules import DEFAULT_RULES, Response, Rules, format_response
from moo.variants import GameRules

from .compliance import check_file
from .cpu_cap import CpuCap
from .program import hosted_bot
from .sandbox import Limits

__all__ = ["EXACT_LIMITS", "SAMPLE", "WALL", "ExactResult", "ExactScores", "exact_result",
           "exact_scores", "exact_scores_async"]

#: The sandbox's limits for the tree: those of a ladder match, but 5040 games' worth of CPU
#: (whole process tree, start-up included) and of output.
EXACT_LIMITS = Limits(match_cpu=600.0, match_output=16 << 20)
#: Wall-clock seconds the whole computation (both sessions) may take.
WALL = 1800.0
#: Secrets replayed in the fresh session that checks the tree.
SAMPLE = 48
#: The fixed opponents the exact scores are against (shipped trees, classic rules).
OPPONENTS = ("minimum", "strongest")

TreeKey = tuple[Response, ...]


@dataclass(frozen=True)
class ExactScores:
    """A deterministic program's exact figures over every secret of classic MOO.

    ``vs_minimum`` / ``vs_strongest``: its expected score (win + draw/2) in a match against
    that tree, both secrets uniform; ``average``: guesses per game; ``total_guesses``: over
    ``secrets`` games (one per secret).
    """

    vs_minimum: Fraction
    vs_strongest: Fraction
    average: Fraction
    total_guesses: int
    secrets: int


@dataclass
class ExactResult:
    """The scores, or why there are none (a line for the bot's author)."""

    scores: ExactScores | None
    reason: str = ""
    #: guesses needed -> number of secrets (empty without a complete tree)
    distribution: dict[int, int] = field(default_factory=dict)
    #: the name the program announced
    name: str | None = None


class _NoTree(Exception):
    """The program has no exact score; the message says why."""


def _shown(moves: dict[TreeKey, str], key: TreeKey) -> str:
    """The game so far as a person reads it: ``after 0123 1C, 1045 1B2C`` (Tanaka's
    notation), or ``at the start``."""
    if not key:
        return "at the start"
    steps = [f"{moves[key[:i]]} {format_response(r)}" for i, r in enumerate(key)]
    return "after " + ", ".join(steps)


async def _tree(bot: ExternalBot, rules: Rules) -> tuple[dict[TreeKey, str], dict[str, int]]:
    """Play every secret in one session; (responses so far -> guess, guesses per secret)."""
    moves: dict[TreeKey, str] = {}
    counts: dict[str, int] = {}
    for secret in rules.secrets:
        await bot.new_match(rules)
        key: TreeKey = ()
        while True:
            try:
                guess = await bot.next_guess()
            except BotFailure as exc:
                raise _NoTree(f"game against secret {secret}: {exc}") from None
            known = moves.setdefault(key, guess)
            if known != guess:
                raise _NoTree(f"not deterministic: {_shown(moves, key)} it guessed {known} in "
                              f"one game and {guess} in another")
            response = rules.score(secret, guess)
            await bot.observe(guess, response)
            await bot.observe_opponent(len(key) + 1, None)
            key = (*key, response)
            if response == rules.solved:
                break
            if len(key) >= MAX_GUESSES:
                raise _NoTree(f"it did not find the secret {secret} in {MAX_GUESSES} guesses")
        await bot.end("draw")
        counts[secret] = len(key)
    return moves, counts


async def _replay(bot: ExternalBot, rules: Rules, moves: dict[TreeKey, str], sample: int,
                  seed: int) -> None:
    """Real matches against ``minimum`` (responses shown) for a seeded sample of secrets, in
    a seeded order, in a fresh session: every guess must be the tree's."""
    rng = random.Random(f"exact:{seed}")
    secrets = rng.sample(rules.secrets, min(sample, len(rules.secrets)))
    for secret in secrets:
        opponent = create("minimum", relabel=False)
        theirs = rng.choice(rules.secrets)
        await bot.new_match(rules)
        opponent.new_match(rules, rng)
        key: TreeKey = ()
        their_count = 0
        outcome = ""
        while not outcome:
            try:
                guess = await bot.next_guess()
            except BotFailure as exc:
                raise _NoTree(f"replaying secret {secret} in a fresh session: {exc}") from None
            expected = moves.get(key)
            if guess != expected:
                raise _NoTree(
                    f"not deterministic: replaying secret {secret} in a fresh session (against "
                    f"minimum, its responses shown), {_shown(moves, key)} it guessed {guess}, "
                    f"where the tree has {expected}")
            their_guess = opponent.next_guess()
            their_count += 1
            response = rules.score(secret, guess)
            their_response = rules.score(theirs, their_guess)
            await bot.observe(guess, response)
            opponent.observe(their_guess, their_response)
            await bot.observe_opponent(their_count, their_response)
            key = (*key, response)
            mine_solved = response == rules.solved
            theirs_solved = their_response == rules.solved
            if mine_solved or theirs_solved or len(key) >= MAX_GUESSES:
                outcome = ("draw" if mine_solved == theirs_solved
                           else "win" if mine_solved else "loss")
        await bot.end(outcome)


def _scores(counts: dict[str, int]) -> tuple[ExactScores, dict[int, int]]:
    distribution = dict(sorted(Counter(counts.values()).items()))
    against = []
    for name in OPPONENTS:
        other = evaluate(name, DEFAULT_RULES, show_progress=False)
        win, draw, _ = match_probabilities(distribution, other.distribution)
        against.append(win + draw / 2)
    total = sum(k * n for k, n in distribution.items())
    games = len(counts)
    return ExactScores(against[0], against[1], Fraction(total, games), total, games), distribution


async def exact_result(program: bytes, rules: GameRules = DEFAULT_RULES, *,
                       limits: Limits = EXACT_LIMITS, sample: int = SAMPLE, seed: int = 0,
                       wall: float = WALL, cap: CpuCap | None = None) -> ExactResult:
    """The exact scores of ``program`` (a file's bytes), or the reason there are none; its
    sandboxes start in the worker's CPU cap ``cap``, if any.

    Never raises for anything the program does; :class:`clients.hosted.sandbox.SandboxError`
    when this machine cannot confine programs at all.
    """
    if rules != DEFAULT_RULES:
        return ExactResult(None, "exact scores are for classic MOO only (4 of the 10 digits): "
                           "the minimum and strongest trees exist for it alone")
    why = check_file(program)
    if why is not None:
        return ExactResult(None, why)
    name: str | None = None
    bot = hosted_bot(program, limits, cap)
    try:
        async with asyncio.timeout(wall):
            try:
                moves, counts = await _tree(bot, rules)
                name = bot.name
            finally:
                await bot.close()
            check = hosted_bot(program, limits, cap)
            try:
                await _replay(check, rules, moves, sample, seed)
            finally:
                await check.close()
    except _NoTree as exc:
        return ExactResult(None, str(exc), name=name)
    except BotFailure as exc:  # a failure on a line that needs no answer (result, new, ...)
        return ExactResult(None, f"the program failed: {exc}", name=name)
    except TimeoutError:
        return ExactResult(None, f"the tree took more than {wall:g} s to play", name=name)
    scores, distribution = _scores(counts)
    return ExactResult(scores, "", distribution, name)


async def exact_scores_async(program: bytes, rules: GameRules = DEFAULT_RULES, *,
                             limits: Limits = EXACT_LIMITS) -> ExactScores | None:
    """:func:`exact_scores` for code on an event loop."""
    return (await exact_result(program, rules, limits=limits)).scores


def exact_scores(program: bytes, rules: GameRules = DEFAULT_RULES, *,
                 limits: Limits = EXACT_LIMITS) -> ExactScores | None:
    """The exact scores of a deterministic ``program``; None when it has none (another
    variant than classic MOO, a program that is not deterministic, or one that fails): call
    :func:`exact_result` for the reason.

    Synchronous: it runs its own event loop, so from asyncio code call it in a thread
    (``asyncio.to_thread``) or await :func:`exact_scores_async`. It takes a while (5040 games
    in the sandbox: seconds for a table bot, a minute or more for one that computes).
    """
    return asyncio.run(exact_scores_async(program, rules, limits=limits))
