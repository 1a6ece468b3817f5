"""The docs/sdk.md example: play the server's random bot with a first-consistent strategy.

Run ``moo serve`` in one terminal, then ``python examples/sdk_first_consistent.py [URL]``.
(Run it from the repository root, or with moo-arena installed, so ``clients`` is importable.)
"""

import asyncio
import secrets
import sys

from clients.sdk import Client, ServerError


async def main(url: str) -> None:
    name = f"sdk-demo-{secrets.token_hex(2)}"              # a name is owned by its token
    async with Client(url, name, bot=True) as client:
        announced = await client.play_bot("random")        # the reply: a MatchAnnounced
        mid, rules = announced.match_id, announced.rules
        state = client.states[mid]                         # kept up to date by the SDK
        await client.set_secret(mid, "0123")
        left = list(rules.secrets)                         # codes still possible
        while not state.finished:
            if state.owes_guess:                           # our move?
                try:
                    await client.guess(mid, left[0])
                except ServerError as exc:                 # e.g. code "not_your_turn"
                    print("refused:", exc.code, exc.message)
            else:
                await client.receive()                     # wait for the next message
                mine = state.mine()
                if mine and mine[-1].response is not None and mine[-1].guess is not None:
                    left = rules.consistent(left, mine[-1].guess, mine[-1].response)
        result = state.result
        assert result is not None
        print(f"{state.outcome}: {result.reason}, counts {state.counts}, fair: {state.fairness()}")


asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "ws://127.0.0.1:8765/"))
