"""The baseline for the server benchmarks: a bare ``websockets`` echo server.

It does the least any WebSocket server must do per message (read a frame, write it back), with
the same library, settings and codec-agnostic frames as the match server, so the ratio of the
two in one run measures what the arena itself costs.

    python -m bench.echo_server --port 0     # prints "listening on ws://127.0.0.1:PORT/"
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from server.cli import tune_gc


async def _echo(ws: ServerConnection) -> None:
    try:
        async for frame in ws:
            await ws.send(frame)
    except ConnectionClosed:
        pass


async def _main(host: str, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with serve(
        _echo, host, port, compression=None, max_size=4096, max_queue=4,
        subprotocols=["moo.v1.json", "moo.v1.msgpack"],  # type: ignore[list-item]
    ) as server:
        tune_gc()  # the match server's process settings, so the comparison is like for like
        bound = server.sockets[0].getsockname()[1]
        print(f"listening on ws://{host}:{bound}/", file=sys.stderr, flush=True)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(_main(args.host, args.port))


if __name__ == "__main__":
    main()
