"""What a server's start pays for: the suite starts hundreds of servers and every `moo serve`
starts one, so a heavy import that the server needs only now and then is loaded when it is
needed (numpy: the ladder's rating fit, server/ladder_schedule.py)."""

from __future__ import annotations

import subprocess
import sys


def test_starting_a_server_does_not_import_numpy() -> None:
    out = subprocess.run(
        [sys.executable, "-c",
         "import sys, server.app, server.cli; print(sorted(m for m in sys.modules"
         " if m.split('.')[0] in ('numpy', 'matplotlib')))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert out == "[]"


def test_the_ladder_fit_still_rates_when_called() -> None:
    from server.ladder_schedule import bradley_terry

    ratings = bradley_terry([("a", "b", 1.0), ("a", "b", 1.0), ("b", "a", 0.0)])
    assert ratings["a"].rating > ratings["b"].rating
