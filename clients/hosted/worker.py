"""``moo worker``: a bot worker, the process that runs hosted bots for an arena.

It connects like any client, but opens with ``worker_hello`` and a key from the server's
configuration instead of ``hello`` (docs/protocol.md, "Bot workers"), and then claims jobs
while it has free slots: it checks new versions (clients/hosted/compliance.py), plays ladder
pairings (each bot through a connection of its own signed in as the bot, its program in the
sandbox speaking docs/bot-protocol.md: clients/hosted/program.py, clients/botrunner.py), and
computes the exact scores of deterministic programs (clients/hosted/exact.py).

Every job holds a lease that the worker renews while it works; a worker that dies stops
renewing, and the server lets its claims go (docs/ladder.md says what happens to them).
One slot is one job at a time: a check runs one program, a pairing two programs that take
turns (lockstep), so one slot is about one core's worth of hosted bots.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import logging
import os
import random
import signal
import sys
import threading
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from clients.botrunner import play_match
from clients.sdk import Client, ConnectionLost, MatchAnnounced
from clients.sdk.wire import Wire
from moo.errors import UsageError
from moo.variants import rules_from_dict

from .compliance import check_submission
from .cpu_cap import CpuCap, NoController, open_cap
from .exact import exact_result
from .program import hosted_bot
from .sandbox import Limits, SandboxedProgram

__all__ = ["WorkerError", "configure", "main", "run_worker"]

log = logging.getLogger("moo.worker")

#: frames a worker reads: a play job carries two programs of up to 1 MiB each, in base64
MAX_FRAME = 4 << 20
#: seconds to wait for a nudge before asking for work again
IDLE_S = 5.0
#: the longest a report's standard error may be (the message limit is 4096 bytes)
STDERR_CHARS = 1500
#: the longest failure or reason line sent
LINE_CHARS = 1000
#: seconds for one game's whole play (the sandbox bounds every answer; this bounds the rest)
GAME_TIMEOUT_S = 3600.0
#: seconds for the server's answer to one of the worker's requests (a request refused for the
#: rate is answered without ``ref``: it would never be answered otherwise)
REQUEST_TIMEOUT_S = 60.0
#: a request refused with "try again" (a cluster's ladder moving to another node:
#: docs/ladder.md, "On a cluster") is sent again after this many seconds, this many times
AGAIN_S = 1.0
AGAIN_TRIES = 30


class WorkerError(Exception):
    """The server refused the worker (a wrong key, no ladder): no point trying again."""


@dataclass
class _Control:
    """The worker's own connection: requests answered by ``ref``, nudges as an event."""

    wire: Wire
    lease_ms: int = 30_000
    pending: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    nudged: asyncio.Event = field(default_factory=asyncio.Event)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    closed: bool = False

    async def read(self) -> None:
        try:
            while True:
                msg = await self.wire.receive()
                if msg.get("type") == "worker_nudge":
                    self.nudged.set()
                    continue
                fut = self.pending.pop(msg.get("ref", -1), None) if "ref" in msg else None
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        except Exception:  # closed, or a frame it cannot read: the connection is over
            pass
        finally:
            self.closed = True
            self.nudged.set()
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionLost("the server closed the connection"))
            self.pending.clear()

    async def request(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The answer to ``msg``; one refused with "try again" (nothing was done: the
        cluster's lobby leader changed) is sent again, so that the jobs under way go on
        instead of the connection starting over."""
        for _ in range(AGAIN_TRIES - 1):
            try:
                return await self._request_once(msg)
            except _Refused as exc:
                if exc.code != "not_available" or "try again" not in str(exc):
                    raise
                log.info("worker: %s refused (%s); sending it again", msg["type"], exc)
            await asyncio.sleep(AGAIN_S)
        return await self._request_once(msg)

    async def _request_once(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self.closed:
            raise ConnectionLost("the server closed the connection")
        ref = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[ref] = fut
        await self.wire.send({**msg, "id": ref})
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                reply = await fut
        except TimeoutError:
            self.pending.pop(ref, None)
            raise ConnectionLost(f"no answer to {msg['type']} in {REQUEST_TIMEOUT_S:g} s"
                                 ) from None
        if reply.get("type") == "error":
            raise _Refused(str(reply.get("code")), str(reply.get("message")))
        return reply


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


async def run_worker(url: str, key: str, slots: int, *, name: str = "",
                     stop: asyncio.Event | None = None, limits: Limits | None = None,
                     cap: CpuCap | None = None) -> None:
    """Work for the server at ``url`` until ``stop`` is set (or forever), reconnecting after
    a lost connection, every program started in the CPU cap ``cap`` if there is one; raises
    :class:`WorkerError` when the server refuses the worker. ``limits``: the sandbox's for
    checks and ladder games (default: the ladder's, :class:`Limits`)."""
    stop = stop or asyncio.Event()
    limits = limits or Limits()
    backoff = 0.5
    while not stop.is_set():
        try:
            await _session(url, key, slots, name, stop, limits, cap)
            backoff = 0.5
        except WorkerError:
            raise
        except (OSError, ConnectionLost, TimeoutError) as exc:
            log.warning("worker: lost %s (%s); connecting again", url,
                        exc or type(exc).__name__)
        except Exception as exc:  # the server went away mid-handshake, and the like
            log.warning("worker: %s: %s; connecting again", url, exc or type(exc).__name__)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(backoff):
                await stop.wait()
        backoff = min(backoff * 2, 8.0)


async def _session(url: str, key: str, slots: int, name: str, stop: asyncio.Event,
                   limits: Limits, cap: CpuCap | None) -> None:
    wire = await Wire.open(url, max_size=MAX_FRAME)
    control = _Control(wire)
    reader = asyncio.create_task(control.read())
    jobs: set[asyncio.Task[None]] = set()
    try:
        try:
            welcome = await control.request({"type": "worker_hello", "key": key,
                                             "slots": slots, "name": name[:64]})
        except _Refused as exc:
            raise WorkerError(f"the server refused this worker: {exc}") from None
        control.lease_ms = int(welcome.get("lease_ms", 30_000))
        log.info("worker %s: working for %s with %d slots", welcome.get("worker_id"), url,
                 slots)
        while not stop.is_set() and not control.closed:
            jobs = {t for t in jobs if not t.done()}
            job = None
            if len(jobs) < slots:
                control.nudged.clear()
                reply = await control.request({"type": "worker_claim"})
                job = reply.get("job")
            if job is not None:
                jobs.add(asyncio.create_task(_run_job(control, url, job, limits, cap)))
                continue
            waits = [asyncio.ensure_future(control.nudged.wait()),
                     asyncio.ensure_future(stop.wait()), *jobs]
            try:
                await asyncio.wait(waits, timeout=IDLE_S, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits[:2]:
                    w.cancel()
        if control.closed and not stop.is_set():
            raise ConnectionLost("the server closed the connection")
    finally:
        for task in jobs:
            task.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await wire.close()


async def _run_job(control: _Control, url: str, job: dict[str, Any], limits: Limits,
                   cap: CpuCap | None) -> None:
    job_id = str(job["job_id"])
    renew = asyncio.create_task(_renew(control, job_id))
    try:
        kind = job["kind"]
        if kind == "check":
            verdict = await check_submission(base64.b64decode(job["program"]),
                                             rules=rules_from_dict(dict(job["rules"])),
                                             limits=limits, cap=cap)
            await control.request({"type": "worker_done", "job_id": job_id,
                                   "accepted": verdict.accepted,
                                   "reason": verdict.reason[:LINE_CHARS],
                                   "name": (verdict.name or "")[:64]})
        elif kind == "eval":
            await control.request({"type": "worker_done", "job_id": job_id,
                                   **await _evaluate(job, cap)})
        elif kind == "play":
            await _play(control, url, job, limits, cap)
            await control.request({"type": "worker_done", "job_id": job_id})
        else:
            log.error("worker: job %s of unknown kind %r left to its lease", job_id, kind)
    except (_Refused, ConnectionLost) as exc:
        log.warning("worker: job %s: %s", job_id, exc)
    except Exception:
        log.exception("worker: job %s failed; its lease runs out", job_id)
    finally:
        renew.cancel()
        await asyncio.gather(renew, return_exceptions=True)


async def _renew(control: _Control, job_id: str) -> None:
    while True:
        await asyncio.sleep(control.lease_ms / 3000)
        try:
            await control.request({"type": "worker_renew", "job_id": job_id})
        except (_Refused, ConnectionLost):
            return


async def _evaluate(job: dict[str, Any], cap: CpuCap | None) -> dict[str, Any]:
    """The exact scores of a deterministic program (clients/hosted/exact.py), or why there
    are none, in one line."""
    rules = rules_from_dict(dict(job["rules"]))
    result = await exact_result(base64.b64decode(job["program"]), rules, cap=cap)
    if result.scores is None:
        return {"reason": result.reason[:LINE_CHARS] or "no exact score"}
    scores = result.scores
    return {"exact": {"vs_minimum": _fraction(scores.vs_minimum),
                      "vs_strongest": _fraction(scores.vs_strongest),
                      "average": _fraction(scores.average)}}


def _fraction(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


async def _play(control: _Control, url: str, job: dict[str, Any], limits: Limits,
                cap: CpuCap | None) -> None:
    """The hosted sides of one pairing (both, or one against a connected bot, which plays
    its own seats): a connection per bot, the games one after the other."""
    job_id = job["job_id"]
    clients = [Client([url], b["player"], token=b["token"], bot=True, client_name="moo-worker",
                      max_attempts=5) for b in job["bots"]]
    programs = [base64.b64decode(b["program"]) for b in job["bots"]]
    try:
        for client in clients:
            await client.connect()
        for n, match_id in enumerate(job["matches"]):
            # game n: bots[0] sits in seat n (the second game has the seats swapped)
            seats = (n, 1 - n)
            reports = await asyncio.gather(*(
                _play_seat(client, match_id, program, limits, cap)
                for client, program in zip(clients, programs, strict=True)))
            for side, (failure, stderr) in enumerate(reports):
                await control.request({"type": "worker_game", "job_id": job_id,
                                       "match_id": match_id, "seat": seats[side],
                                       "failure": failure[:LINE_CHARS],
                                       "stderr": stderr[-STDERR_CHARS:]})
    finally:
        for client in clients:
            await client.close()


async def _play_seat(client: Client, match_id: str, program: bytes,
                     limits: Limits, cap: CpuCap | None) -> tuple[str, str]:
    """Play ``client``'s seat of ``match_id`` with the program; (failure, stderr tail)."""
    state = client.states.get(match_id)
    if state is None:  # not in welcome.matches: it is over already (or never started)
        return "", ""
    async with asyncio.timeout(GAME_TIMEOUT_S):
        while state is None or (not state.config and not state.finished):
            await client.receive()
            state = client.states.get(match_id)
    if state.finished or state.seat is None:
        return "", ""
    player = hosted_bot(program, limits, cap=cap)
    try:
        announced = MatchAnnounced(raw={}, match_id=match_id, seat=state.seat,
                                   opponent=state.opponent or "", config=state.config)
        outcome = await play_match(client, announced, player, random.Random(),
                                   timeout=GAME_TIMEOUT_S)
        transport = player.transport
        stderr = transport.stderr_tail() if isinstance(transport, SandboxedProgram) else ""
        return outcome.failure or "", stderr
    finally:
        await player.close()


# -- the command ------------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, metavar="URL",
                        help="the arena to work for (ws://HOST:PORT/)")
    parser.add_argument("--key", default=None, metavar="KEY",
                        help="the server's ladder_worker_key (or the MOO_WORKER_KEY "
                             "environment variable; docs/ladder.md)")
    parser.add_argument("--slots", type=int, default=1,
                        help="jobs run at once, about one core each (1-64, default 1)")
    parser.add_argument("--name", default="", help="this worker's name in the server's log")
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="stop when standard input closes (moo serve starts its own "
                             "worker so: it ends with the server, even one killed)")
    parser.add_argument("--move-time", type=float, default=Limits.move_wall, metavar="S",
                        help="seconds a hosted bot may take for one answer, in checks and "
                             f"ladder games (default {Limits.move_wall:g}: the ladder's limit; "
                             "docs/ladder.md, \"Limits\")")
    parser.add_argument("--nice", type=int, default=10,
                        help="run at this niceness (0-19, default 10), so that people's "
                             "matches on the same machine come first")
    parser.add_argument("--cpu-share", type=float, default=None, metavar="F",
                        help="cap the CPU of all its programs together at F of this machine's "
                             "cores (0 < F <= 1; a cgroup, as root; default: no cap; "
                             "docs/ladder.md, \"The CPU cap\")")


def start_cap(share: float | None, *, root: Path = Path("/")) -> CpuCap | None:
    """The worker's CPU cap for ``share`` (None: none asked), said in one log line; where no
    controller can be used, that line says why and there is none (the programs still run at
    the worker's niceness, each held to its own limits)."""
    if share is None:
        return None
    try:
        cap = open_cap(share, root=root)
    except NoController as exc:
        log.warning("worker: no CPU cap for hosted bots (%s); they run at this worker's "
                    "niceness with their own limits only", exc)
        return None
    log.info("worker: hosted bots capped at %.2f cores together (%s)", cap.cores,
             cap.describe())
    return cap


async def _main(args: argparse.Namespace, key: str, cap: CpuCap | None) -> None:
    stop = asyncio.Event()
    # stopped (moo serve stops its own worker so), it ends its jobs, and so its sandboxes,
    # before it removes its cgroup
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if args.exit_with_parent:
        loop = asyncio.get_running_loop()

        def watch() -> None:  # blocks until the parent's end of the pipe closes
            with contextlib.suppress(OSError, ValueError):
                sys.stdin.buffer.read()
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=watch, name="moo-worker-parent", daemon=True).start()
    await run_worker(args.url, key, args.slots, name=args.name, stop=stop,
                     limits=Limits(move_wall=args.move_time), cap=cap)


def main(args: argparse.Namespace) -> int:
    key = args.key or os.environ.get("MOO_WORKER_KEY", "")
    if not key:
        raise UsageError("--key is required (or MOO_WORKER_KEY): the server's "
                         "ladder_worker_key")
    if not 1 <= args.slots <= 64:
        raise UsageError(f"--slots must be 1-64, got {args.slots}")
    if not args.url.startswith(("ws://", "wss://")):
        raise UsageError(f"--url must be ws://HOST:PORT/, got {args.url!r}")
    if not 0 <= args.nice <= 19:
        raise UsageError(f"--nice must be 0-19, got {args.nice}")
    if args.cpu_share is not None and not 0 < args.cpu_share <= 1:
        raise UsageError(f"--cpu-share must be in (0, 1], got {args.cpu_share:g}")
    if not 0 < args.move_time <= 3600:
        raise UsageError(f"--move-time must be over 0 and at most 3600 seconds, got "
                         f"{args.move_time:g}")
    if args.nice:
        os.nice(args.nice)  # the sandboxed programs inherit it
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cap = start_cap(args.cpu_share)
    try:
        asyncio.run(_main(args, key, cap))
    except WorkerError as exc:
        print(f"moo worker: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        if cap is not None:
            try:
                cap.close()
            except OSError as exc:
                log.warning("worker: cannot remove %s: %s", cap.path, exc)
    return 0
