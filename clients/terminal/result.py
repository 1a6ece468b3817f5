"""The end of an online match as the person sees it: the verdict and why, both secrets, the
fairness check of the commitments, and the game's line in the running tally.

Apart from :mod:`clients.terminal.match` because it only reads the final state the SDK folded
together; it sends nothing and waits for nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from clients.sdk import MatchState
from clients.terminal.text import Tally


def show_result(state: MatchState, opp: str, tally: Tally, say: Callable[[str], None]) -> None:
    """Print the finished match's result (nothing if it has none or we have no seat)."""
    st = state
    res = st.result
    if res is None or st.seat is None:
        return
    me, other = st.seat, 1 - st.seat
    counts = st.counts
    banner = {"win": "*** YOU WIN! ***", "loss": "*** YOU LOSE. ***",
              "draw": "*** A DRAW. ***"}[st.outcome or "draw"]
    def tried(seat: int) -> str:
        solved = "SOLVED" if st.solved(seat) else "NOT SOLVED"
        return f"{counts[seat]} GUESS{'' if counts[seat] == 1 else 'ES'}, {solved}"

    why = {
        "solved": f"YOU: {tried(me)}; {opp}: {tried(other)}.",
        "resign": "BY RESIGNATION.",
        "timeout": "ON TIME.",
        "disconnect": "A PLAYER DID NOT COME BACK IN TIME.",
        "guess_cap": "NOBODY SOLVED IT WITHIN THE GUESS LIMIT.",
    }.get(res.reason, res.reason.upper())
    say(f"\n{banner} {why}")
    if len(res.secrets) == 2:
        yours, theirs = (res.secrets[i] or "NOT SET" for i in (me, other))
        say(f"SECRETS: YOURS {yours}, {opp}'S {theirs}.")
    fair = st.fairness()
    if fair is None:
        say("FAIRNESS CHECK: NOTHING TO CHECK (THE GAME NEVER STARTED).")
    elif all(fair):
        say("FAIRNESS CHECK: BOTH SECRETS MATCH THE COMMITMENTS PUBLISHED BEFORE THE FIRST"
            " GUESS. OK.")
    else:
        bad = [("YOUR" if i == me else f"{opp}'S") for i in (0, 1) if not fair[i]]
        say(f"FAIRNESS CHECK FAILED: {' AND '.join(bad)} SECRET DOES NOT MATCH ITS"
            " COMMITMENT!")
    if st.solved(me):
        say(tally.add(counts[me]))
    else:
        # As in 1971, the average is over games you finished by finding the secret.
        say("YOU DID NOT FIND THE SECRET: THIS GAME DOES NOT COUNT TOWARD YOUR AVERAGE.")
