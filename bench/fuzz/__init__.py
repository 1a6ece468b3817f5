"""Fuzz the whole inbound path: frame -> decode -> validate -> dispatch -> match state machine.

Two modes share one frame generator:

* ``inproc`` (default): the real :func:`server.session.run_session` runs against in-memory
  WebSocket stand-ins, over a real :class:`server.app.App` with its SQLite store, so every
  frame goes through exactly the code a socket frame goes through, minus the kernel. Fast
  enough for 10**6 frames.
* ``sockets``: the same frames over real loopback WebSockets to a server in this process.

Every frame is checked for the server's promises:

* no crash: the session keeps running (a closed session is a failure unless the frame was
  meant to close it) and nothing is logged at ERROR level;
* every refusal is answered with an ``error`` whose code is a *specific* code of
  ``moo/errors.py`` (not a base-class code), echoing the frame's ``id`` as ``ref`` when sane;
* a refused frame changes nothing: the arena's and lobby's state (seq, phase, seats, queue,
  challenges, rooms, who is online, and the full per-viewer summaries of the matches the frame
  could touch) is identical before and after;
* a frame that is not refused is answered too (a reply, or its event once durable).

One module per concern: :mod:`.frames` (the generator), :mod:`.checks` (the promises and the
figures), :mod:`.memory` (in-memory WebSockets), :mod:`.inproc` and :mod:`.sockets` (the two
drivers) and :mod:`.__main__` (the command line).

Why raw frames and not the SDK: most fuzzed frames are ones no client library would send
(broken encodings, wrong types, unknown fields), so they are built and sent byte for byte.

    python -m bench.fuzz --frames 1000000 --seed 1            # the long run
    python -m bench.fuzz --mode sockets --frames 20000        # over real sockets
"""

from bench.fuzz.checks import SPECIFIC_CODES, Stats, Violation
from bench.fuzz.frames import FrameGen, World
from bench.fuzz.inproc import InProcessFuzzer, fuzz_inproc
from bench.fuzz.memory import MemoryWebSocket, Session
from bench.fuzz.sockets import fuzz_sockets

__all__ = [
    "SPECIFIC_CODES",
    "FrameGen",
    "InProcessFuzzer",
    "MemoryWebSocket",
    "Session",
    "Stats",
    "Violation",
    "World",
    "fuzz_inproc",
    "fuzz_sockets",
]
