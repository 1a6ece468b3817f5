"""A message flood from its own process, so the flooder's busy loop is not the measurer's.

``python -m bench.flood URL CONNECTIONS`` keeps CONNECTIONS connections flooding pings as fast
as the socket takes them, reconnecting whenever the server closes one, until its standard input
closes. It prints ``started`` once the first flooder is in, ``closed CODE`` each time the
server closes one, and at the end one JSON line: the close codes it saw and the messages it
sent.

Why raw sockets and not the SDK: a flooder breaks the protocol's manners on purpose (no pacing,
no waiting for replies), which the SDK's client-side rate limit exists to prevent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections import Counter

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed


async def flood(url: str, connections: int) -> dict[str, object]:
    closes: Counter[int] = Counter()
    sent = 0
    stop = asyncio.Event()
    started = False

    async def watch_stdin() -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)
        stop.set()

    async def one(i: int) -> None:
        nonlocal sent, started
        n = 0
        while not stop.is_set():
            n += 1
            try:
                # max_queue=None: read (and ignore) every reply, as a real flooder does,
                # so the server's close frame reaches us; tests/server/test_hostile.py covers a
                # client that never reads separately.
                ws = await connect(
                    url, subprotocols=["moo.v1.json"], max_queue=None  # type: ignore[list-item]
                )
            except OSError:
                await asyncio.sleep(0.05)
                continue
            try:
                await ws.send(json.dumps({"type": "hello", "name": f"flood{i}x{n}"}))
                if not started:  # tell the caller the flood is on (it waits for this line)
                    started = True
                    print("started", flush=True)
                while not stop.is_set():
                    await ws.send('{"type":"ping"}')
                    sent += 1
                    if sent % 64 == 0:
                        await asyncio.sleep(0)  # let the other flooders (and stdin) run
            except ConnectionClosed:  # the server closed us: that is what we count
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(ws.wait_closed(), 5)
                code = ws.close_code if ws.close_code is not None else 1006
                closes[code] += 1
                print(f"closed {code}", flush=True)
            await ws.close()

    watcher = asyncio.create_task(watch_stdin())
    await asyncio.gather(*(one(i) for i in range(connections)))
    watcher.cancel()
    return {"closes": {str(k): v for k, v in closes.items()}, "sent": sent}


def main() -> int:
    url, connections = sys.argv[1], int(sys.argv[2])
    print(json.dumps(asyncio.run(flood(url, connections))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
