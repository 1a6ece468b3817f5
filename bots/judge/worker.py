"""The review as a child process: ``python -m bots.judge.worker`` (the server's analysis worker).

One match record (docs/analysis.md) per input line, one JSON line out per record:
``{"players": [...]}`` as ``moo analyse --json`` prints them, or ``{"error": "why"}``. The
process keeps its judge between lines, so only its first record pays for starting Python and
the imports. It ends at the end of its input. The server's side is
:class:`server.review_worker.ReviewWorker`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from bots.judge.review import parse_record, review_players
from moo.errors import MooError


def serve() -> int:
    for line in sys.stdin:
        try:
            rules, players = parse_record(json.loads(line))
            answer: dict[str, Any] = {"players": review_players(rules, players)}
        except (ValueError, TypeError, MooError) as exc:
            answer = {"error": str(exc)}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve())
