"""``moo serve``: run the match server until SIGINT/SIGTERM.

Flags override ``MOO_*`` variables, which override ``--config FILE``, which overrides the
embedded defaults (see config/default.toml). Log lines go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sqlite3
import sys
from pathlib import Path

from moo.errors import MooError
from moo.mqtt import parse_mqtt_url
from server.ratings import ratings_path
from server.schema import SchemaError
from server.settings import ConfigError, Settings, load_settings

__all__ = ["ServeError", "check_db", "check_settings", "configure", "main", "tune_gc"]

DEFAULT_DB = Settings().db

#: flag -> (settings key, type, help)
_FLAGS: dict[str, tuple[str, type, str]] = {
    "--host": ("host", str, "interface to listen on (default 127.0.0.1)"),
    "--port": ("port", int, "TCP port for WebSocket and HTTP (default 8765; 0 = any free)"),
    "--db": (
        "db", str,
        "SQLite database path (default var/moo.sqlite3) or postgresql://HOST[:PORT]/DBNAME",
    ),
    "--static-dir": ("static_dir", str, "browser client files (default clients/web/)"),
    "--origins": ("origins", str, "comma-separated allowed browser origins"),
    "--trusted-proxy": (
        "trusted_proxies", str,
        "comma-separated proxy addresses/networks (or 'unix': the --unix socket) whose"
        " X-Forwarded-For names the client",
    ),
    "--unix": (
        "unix", str,
        "also listen on this Unix socket (mode 0600), for a reverse proxy on this host",
    ),
    "--log-level": ("log_level", str, "DEBUG, INFO, WARNING or ERROR"),
    "--log-format": ("log_format", str, "text (default) or json: one JSON object per line"),
    "--pacing": ("pacing", str, "default pacing of new matches: lockstep or free"),
    "--grace-ms": ("grace_ms", int, "reconnect grace window in ms"),
    "--bot-delay-ms": ("bot_delay_ms", int, "pause before a hosted bot moves"),
    "--rate-per-s": ("rate_per_s", float, "allowed messages per second per connection"),
    "--rate-burst": ("rate_burst", int, "allowed burst of messages per connection"),
    "--max-connections": ("max_connections", int, "connections accepted at once"),
    "--new-names-per-address": (
        "new_names_per_address", int,
        "new names one client address may register per new_names_window_s (default 100)",
    ),
    "--sqlite-synchronous": ("sqlite_synchronous", str, "FULL (default), NORMAL, ..."),
    "--commit-window-ms": ("commit_window_ms", float, "group-commit window in ms"),
    "--mqtt": ("mqtt_url", str, "publish the event stream to mqtt://HOST:PORT (docs/mqtt.md)"),
    "--cluster": ("cluster_url", str, "run as a cluster node; the bus is mqtt://HOST:PORT"),
    "--node": ("node", str, "this node's name in the cluster (default: the host name)"),
    "--lease-ms": ("lease_ms", int, "takeover time of a dead node's matches (default 10000)"),
}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="TOML file (see config/default.toml)")
    for flag, (key, kind, text) in _FLAGS.items():
        parser.add_argument(flag, dest=key, type=kind if kind is not str else str, help=text)
    parser.add_argument("--no-ladder-worker", dest="ladder_worker", action="store_const",
                        const=False, default=None,
                        help="start no bot worker of this server's own (docs/ladder.md)")


class ServeError(Exception):
    """Why the server cannot run with these settings: one line for the person who started it."""


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: first bytes of every SQLite 3 database file (https://sqlite.org/fileformat.html)
_SQLITE_HEADER = b"SQLite format 3\x00"


def main(args: argparse.Namespace) -> int:
    overrides = {key: getattr(args, key, None) for key, _, _ in _FLAGS.values()}
    overrides["ladder_worker"] = getattr(args, "ladder_worker", None)
    try:
        settings = load_settings(args.config, overrides=overrides)
        check_settings(settings)
    except (ConfigError, ServeError) as exc:
        print(f"moo serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if settings.log_format == "json":
        from server.logs import JsonFormatter

        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter(settings.node if settings.cluster_url else ""))
    logging.getLogger("websockets").setLevel(logging.WARNING)
    raise_fd_limit(settings.max_connections)
    footprint = Footprint(settings.db)
    try:
        asyncio.run(_serve(settings))
    except (OSError, ServeError, MooError, SchemaError, sqlite3.Error) as exc:
        # Nothing served, so nothing of ours is worth keeping: a failed start must not leave
        # ./var/ and an empty database behind (the next attempt may choose another --db).
        footprint.remove_new()
        print(f"moo serve: {_reason(exc, settings)}", file=sys.stderr)
        return 1
    return 0


def check_settings(settings: Settings) -> None:
    """Refuse, before anything is created, what would fail later or fail someone else.

    Settings come from flags, ``MOO_*`` variables or a file, so the messages name the setting
    by what it is rather than by one of its spellings.
    """
    if settings.log_level.upper() not in _LOG_LEVELS:
        raise ServeError(
            f"log level {settings.log_level!r} is not one of {', '.join(_LOG_LEVELS)}"
        )
    if settings.mqtt_url:
        try:
            parse_mqtt_url(settings.mqtt_url)
        except ValueError as exc:
            raise ServeError(f"--mqtt: {exc} (e.g. mqtt://127.0.0.1:1883)") from None
    check_db(settings.db, create_parent=settings.db == DEFAULT_DB)


def check_db(db: str, *, create_parent: bool = False) -> None:
    """The database (and the ratings file beside it) must be usable SQLite files, or absent
    in an existing folder the server may write in (SQLite puts its journal beside the file).

    Only the default path may have its folder created: a typo in ``--db`` must not silently
    grow a directory tree somewhere. URLs (``postgresql://``) and ``:memory:`` are not files.
    """
    if not db or db == ":memory:" or "://" in db:
        return
    paths = [Path(db)]
    ratings = ratings_path(db)
    if ratings is not None:
        paths.append(Path(ratings))
    for path in paths:
        _check_db_file(path, db)
    parent = Path(db).parent
    if not parent.exists():
        if create_parent:
            return
        missing = parent
        while not missing.parent.exists():
            missing = missing.parent
        raise ServeError(
            f"database {db}: directory {parent} does not exist ({missing} is missing); "
            "create it first or choose another --db"
        )
    if not parent.is_dir():
        raise ServeError(f"database {db}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ServeError(
            f"database {db}: cannot write in directory {parent} "
            "(SQLite keeps its journal beside the database)"
        )


def _check_db_file(path: Path, db: str) -> None:
    if path.is_dir():
        raise ServeError(f"database {path} is a directory, not a database file")
    if not path.exists():
        if path.is_symlink():
            raise ServeError(f"database {path} is a dangling symbolic link")
        return
    if not path.is_file():
        raise ServeError(f"database {path} is not a regular file")
    if not os.access(path, os.R_OK):
        raise ServeError(f"cannot read database {path} (permission denied)")
    if not os.access(path, os.W_OK):
        raise ServeError(
            f"database {path} is read-only; the server writes every move to it"
        )
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise ServeError(f"cannot read database {path}: {exc.strerror or exc}") from None
    if head and head != _SQLITE_HEADER:
        what = f"database {path}" if str(path) == db else (
            f"ratings file {path} (beside database {db})"
        )
        raise ServeError(f"{what} is not an SQLite database file")


class Footprint:
    """What a start may create (folders, database and journal files): remembered before, so
    that a failed start removes exactly what it made and nothing that was there already."""

    SUFFIXES = ("", "-wal", "-shm", "-journal")

    def __init__(self, db: str) -> None:
        self.files: list[Path] = []
        self.dirs: list[Path] = []
        if not db or db == ":memory:" or "://" in db:
            return
        bases = [Path(db)]
        ratings = ratings_path(db)
        if ratings is not None:
            bases.append(Path(ratings))
        self.files = [
            Path(f"{base}{suffix}") for base in bases for suffix in self.SUFFIXES
            if not Path(f"{base}{suffix}").exists()
        ]
        folder = Path(db).parent
        while not folder.exists():
            self.dirs.append(folder)  # deepest first
            folder = folder.parent

    def remove_new(self) -> None:
        for path in self.files:
            with contextlib.suppress(OSError):
                path.unlink()
        for folder in self.dirs:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if empty: never anything someone else put there


def _reason(exc: BaseException, settings: Settings) -> str:
    if isinstance(exc, ServeError):
        return str(exc)
    if isinstance(exc, sqlite3.Error | MooError | SchemaError):
        return f"cannot use database {settings.db}: {exc}"
    text = str(exc.strerror if isinstance(exc, OSError) and exc.strerror else exc)
    where = f" ({exc.filename})" if isinstance(exc, OSError) and exc.filename else ""
    return f"cannot serve: {text}{where}"


async def _serve(settings: Settings) -> None:
    from server.app import App

    await _check_port(settings.host, settings.port)
    app = App(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await app.start()
    except BaseException:
        await app.stop()
        raise
    tune_gc()
    worker = await start_worker(settings, app.port, app.worker_key)
    try:
        await stop.wait()
    finally:
        if worker is not None:
            await stop_worker(worker)
        await app.stop()


def worker_slots(share: float, cores: int | None = None) -> int:
    """The own bot worker's slots: the share of the machine's cores hosted bots may use."""
    return max(1, int(share * (cores or os.cpu_count() or 1)))


async def start_worker(settings: Settings, port: int,
                       key: str) -> asyncio.subprocess.Process | None:
    """A single node's own bot worker (``ladder_worker``): ``moo worker`` as a child process at
    nice 10, its programs capped at ``ladder_cpu_share`` of the cores (``--cpu-share``), its key
    in its environment (not on a command line others can read), so a fresh ``moo serve`` runs
    the ladder with no extra step (docs/ladder.md, "Bot workers")."""
    if not settings.ladder_worker or settings.cluster_url:
        return None
    host = settings.host if settings.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    slots = worker_slots(settings.ladder_cpu_share)
    env = {**os.environ, "MOO_WORKER_KEY": key}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", "worker", "--url", f"ws://{host}:{port}/",
        "--slots", str(slots), "--name", "own", "--nice", "10", "--exit-with-parent",
        "--cpu-share", repr(settings.ladder_cpu_share),
        "--move-time", f"{settings.ladder_move_time_ms / 1000:g}",
        env=env, cwd=str(Path(__file__).resolve().parents[1]),
        # its standard input is this pipe: when this process ends, however (even killed),
        # the pipe closes and the worker stops
        stdin=asyncio.subprocess.PIPE,
    )
    logging.getLogger("moo.server").info(
        "bot worker started (pid %d, %d slots, nice 10)", proc.pid, slots)
    return proc


async def stop_worker(proc: asyncio.subprocess.Process) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            async with asyncio.timeout(5):
                await proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


async def _check_port(host: str, port: int) -> None:
    """Bind the port once (as the server will, address reuse on) before anything is opened.

    The server opens its database before it listens (restored matches must be in memory
    before the first client), so without this a taken port would be found only after the
    database had been created.
    """
    if port == 0:
        return
    loop = asyncio.get_running_loop()
    try:
        probe = await loop.create_server(asyncio.Protocol, host, port, reuse_address=True)
    except OSError as exc:
        why = str(exc.strerror or exc).rsplit(": ", 1)[-1]
        raise ServeError(f"cannot listen on {host}:{port}: {why}") from None
    probe.close()
    await probe.wait_closed()


#: descriptors beyond one per connection: the database, the WAL, log and listening sockets
FD_SPARE = 256


def raise_fd_limit(connections: int) -> int:
    """Raise this process's soft limit on open files towards ``connections`` + spare, as far
    as the hard limit allows, and return the soft limit now in force.

    Every connection holds a descriptor; the usual soft limit (1024) would refuse accepts
    long before ``max_connections`` (5000 by default). Raising the soft limit up to the hard
    one needs no privilege; above the hard limit only the operator can help (``ulimit -n``,
    ``LimitNOFILE=`` in a systemd unit, docs/server.md).
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = connections + FD_SPARE
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if new > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
    if soft != resource.RLIM_INFINITY and soft < want:
        logging.getLogger("moo.serve").warning(
            "open-file limit %d is below max_connections %d + %d: raise it (ulimit -n)",
            soft, connections, FD_SPARE,
        )
    return soft


def tune_gc() -> None:
    """Keep the cycle collector's full passes off the request path.

    A server with thousands of connections holds a million long-lived objects (websockets'
    protocol state, matches, players). CPython's default thresholds scan all of them in a
    full collection every few hundred thousand allocations: pauses of hundreds of milliseconds
    during which no acknowledgement leaves, which was the whole of the benchmark's old p99.
    What was allocated before serving (modules, strategy tables, restored matches) is frozen
    out of the collector for good; young generations are collected 30x less often but still
    cheaply; a full pass still happens, only rarely. Everything on the hot path is reclaimed by
    reference counting alone (no cycles), so nothing accumulates in between.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)
