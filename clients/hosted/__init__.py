"""Hosted bots: a submitted program run for the arena in a sandbox (docs/ladder.md).

A bot worker is a client of the arena, so this lives with the clients. One module per concern:
:mod:`.sandbox` (the confined process and its limits), :mod:`.program` (a match through
docs/bot-protocol.md, refereed in-process), :mod:`.compliance` (the check a submission must
pass), :mod:`.exact` (the exact scores of a deterministic program), :mod:`.worker` (``moo
worker``: the bot worker that runs them for a server) and :mod:`.cli` (``moo ladder``: check,
submit, mine, pause, resume, withdraw, show, log).
"""
