"""Server settings: one dataclass whose field defaults are the embedded defaults.

The server must start with no file at all (``./dev serve``), so the defaults live in code;
``config/default.toml`` repeats them for people to read and a test keeps the two in step.
Later sources override earlier ones: defaults < ``--config FILE`` < ``MOO_*`` environment
variables < command-line flags. TOML sections only group keys for readers; every key name is
unique across sections, so the environment and the CLI can use the bare key.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import tomllib
import types
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

from moo.errors import BadRules
from moo.variants import DEFAULT_VARIANTS, parse_rules_spec

__all__ = ["SECTIONS", "ConfigError", "Settings", "check_db", "load_settings"]


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key and the source."""


@dataclass(frozen=True)
class Settings:
    """Everything an operator can tune. Durations are in the unit their name says."""

    # [server]
    host: str = "127.0.0.1"
    port: int = 8765
    static_dir: str = ""  # "" = the repository's clients/web/ when present
    origins: list[str] = field(default_factory=list)
    log_level: str = "INFO"
    log_format: str = "text"  # or "json" (server/logs.py)
    #: addresses (or networks) of reverse proxies (HAProxy) whose X-Forwarded-For is believed:
    #: a connection from one of them counts as from the client the header names
    trusted_proxies: list[str] = field(default_factory=list)
    #: also listen on this Unix socket (a reverse proxy on the same host; only the socket's
    #: owner may connect: ``--trusted-proxy unix`` then believes its X-Forwarded-For)
    unix: str = ""
    # [limits]
    max_message_bytes: int = 4096
    max_connections: int = 5000
    rate_per_s: float = 20.0
    rate_burst: int = 40
    handshake_timeout_s: float = 10.0
    idle_timeout_s: float = 300.0
    ping_interval_s: float = 20.0
    send_queue_max: int = 256
    # [storage]
    db: str = "var/moo.sqlite3"  # a SQLite file, or postgresql://HOST[:PORT]/DBNAME
    commit_window_ms: float = 0.0
    sqlite_synchronous: str = "FULL"
    # [match]
    pacing: str = "lockstep"
    guess_cap: int = 64
    clock_total_ms: int = 0  # 0 = no clock
    clock_guess_ms: int = 0  # 0 = no per-guess limit
    secret_ms: int = 120000  # 0 = no deadline for choosing a secret
    grace_ms: int = 60000
    show_guesses: bool = True
    #: the rules this server offers, as compact specs (docs/variants.md); the first is the
    #: default for requests without ``rules``
    variants: list[str] = field(default_factory=lambda: list(DEFAULT_VARIANTS))
    # [bots]
    bot_strategies: list[str] = field(default_factory=list)  # [] = every registered one
    bot_delay_ms: int = 250
    # [accounts] -- see docs/protocol.md, "Accounts"
    argon2_time_cost: int = 3
    argon2_memory_kib: int = 65536
    argon2_parallelism: int = 4
    signin_failures_per_name: int = 5
    signin_failures_per_address: int = 20
    signin_window_s: float = 900.0
    #: new names (``hello`` without a token or password) per client address per window,
    #: draining continuously; docs/protocol.md, "Session"
    new_names_per_address: int = 100
    new_names_window_s: float = 3600.0
    # [ladder] -- see docs/ladder.md, "Bot workers"
    #: the key bot workers (``moo worker --key``) present; "" = a single node's own worker gets
    #: a key generated at each start, and no other worker can join
    ladder_worker_key: str = ""
    #: ``moo serve`` on a single node starts one bot worker of its own (a child process)
    ladder_worker: bool = True
    #: the share of this machine's cores hosted bots may use: the own worker's slots are
    #: max(1, floor(share x cores)); each runs at nice 10
    ladder_cpu_share: float = 0.5
    #: how long a worker's claim on a job holds without being renewed
    ladder_lease_ms: int = 30000
    #: the own worker's time per answer of a hosted bot, in checks and ladder games (moo
    #: worker --move-time; other workers choose their own)
    ladder_move_time_ms: int = 10000
    # [mqtt] -- see docs/mqtt.md
    mqtt_url: str = ""  # "" = no MQTT event stream; mqtt://HOST:PORT[?encoding=msgpack]
    # [cluster] -- see docs/cluster.md
    cluster_url: str = ""  # "" = a single node; mqtt://HOST:PORT = the cluster's bus
    node: str = ""  # this node's name in the cluster ("" = the host name)
    lease_ms: int = 10000  # a dead node's matches are taken over within this time

    def __post_init__(self) -> None:
        problems = []
        if not 0 <= self.port <= 65535:
            problems.append(f"port must be 0-65535, got {self.port}")
        if self.max_message_bytes < 256:
            problems.append("max_message_bytes must be at least 256")
        if self.rate_per_s <= 0 or self.rate_burst < 1:
            problems.append("rate_per_s must be > 0 and rate_burst >= 1")
        if self.send_queue_max < 8:
            problems.append("send_queue_max must be at least 8")
        if self.pacing not in ("lockstep", "free"):
            problems.append(f"pacing must be 'lockstep' or 'free', got {self.pacing!r}")
        if self.sqlite_synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            problems.append("sqlite_synchronous must be OFF, NORMAL, FULL or EXTRA")
        if self.cluster_url:
            if not self.cluster_url.startswith("mqtt://"):
                problems.append(f"cluster_url must be mqtt://HOST:PORT, got {self.cluster_url!r}")
            if not self.db.startswith(("postgresql://", "postgres://")):
                problems.append("a cluster node needs db = postgresql://HOST[:PORT]/DBNAME")
            if self.node and not _NODE_RE.match(self.node):
                problems.append(f"node must be 1-40 of A-Z a-z 0-9 _ . -, got {self.node!r}")
        if self.log_format not in ("text", "json"):
            problems.append(f"log_format must be 'text' or 'json', got {self.log_format!r}")
        for proxy in self.trusted_proxies:
            if proxy == "unix":  # connections through the Unix socket (``unix``)
                continue
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                problems.append(
                    f"trusted_proxies: {proxy!r} is not an IP address or network (CIDR),"
                    " nor 'unix'"
                )
        if self.unix and not Path(self.unix).parent.is_dir():
            problems.append(f"unix: no directory for the socket {self.unix!r}")
        if not 0 < self.ladder_cpu_share <= 1:
            problems.append(f"ladder_cpu_share must be in (0, 1], got {self.ladder_cpu_share}")
        if self.ladder_lease_ms < 1000:
            problems.append("ladder_lease_ms must be at least 1000")
        if not 100 <= self.ladder_move_time_ms <= 3_600_000:
            problems.append("ladder_move_time_ms must be 100-3600000")
        if len(self.ladder_worker_key) > 128:
            problems.append("ladder_worker_key must be at most 128 characters")
        if self.lease_ms < 1000:
            problems.append("lease_ms must be at least 1000")
        db_problem = check_db(self.db)
        if db_problem:
            problems.append(db_problem)
        if self.commit_window_ms < 0 or self.grace_ms < 0 or self.bot_delay_ms < 0:
            problems.append("durations must not be negative")
        if self.argon2_time_cost < 1 or self.argon2_parallelism < 1 or (
            self.argon2_memory_kib < 8 * self.argon2_parallelism
        ):
            problems.append(
                "argon2: time_cost >= 1, parallelism >= 1, memory_kib >= 8 x parallelism"
            )
        if (
            self.signin_failures_per_name < 1
            or self.signin_failures_per_address < 1
            or self.signin_window_s <= 0
        ):
            problems.append("sign-in limits must be >= 1 and signin_window_s > 0")
        if self.new_names_per_address < 1 or self.new_names_window_s <= 0:
            problems.append("new_names_per_address must be >= 1 and new_names_window_s > 0")
        if not self.variants:
            problems.append("variants must list at least one rules spec")
        for spec in self.variants:
            try:
                parse_rules_spec(spec)
            except BadRules as exc:
                problems.append(f"variants: {spec!r}: {exc}")
        if problems:
            raise ConfigError("; ".join(problems))


_NODE_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,40}$")


def check_db(db: str) -> str | None:
    """Why ``db`` is neither a SQLite file path nor ``postgresql://HOST[:PORT]/DBNAME``."""
    if not db:
        return "db must be a SQLite file path or postgresql://HOST[:PORT]/DBNAME, got ''"
    if "://" not in db:
        return None
    scheme = db.partition("://")[0]
    if scheme not in ("postgresql", "postgres"):
        return (
            f"db must be a SQLite file path or postgresql://HOST[:PORT]/DBNAME,"
            f" got a {scheme}:// URL"
        )
    parts = urlsplit(db)
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return f"db {describe(db)}: the port must be a number"
    if not parts.path.strip("/"):
        return f"db {describe(db)} names no database: use postgresql://HOST[:PORT]/DBNAME"
    return None


def describe(db: str) -> str:
    """``db`` without any password, for messages."""
    parts = urlsplit(db)
    if parts.password is None:
        return db
    return db.replace(f":{parts.password}@", ":***@", 1)


#: TOML section -> keys, in the order config/default.toml lists them.
SECTIONS: dict[str, tuple[str, ...]] = {
    "server": (
        "host", "port", "static_dir", "origins", "log_level", "log_format", "trusted_proxies",
        "unix",
    ),
    "limits": (
        "max_message_bytes", "max_connections", "rate_per_s", "rate_burst",
        "handshake_timeout_s", "idle_timeout_s", "ping_interval_s", "send_queue_max",
    ),
    "storage": ("db", "commit_window_ms", "sqlite_synchronous"),
    "match": (
        "pacing", "guess_cap", "clock_total_ms", "clock_guess_ms", "secret_ms", "grace_ms",
        "show_guesses", "variants",
    ),
    "bots": ("bot_strategies", "bot_delay_ms"),
    "accounts": (
        "argon2_time_cost", "argon2_memory_kib", "argon2_parallelism",
        "signin_failures_per_name", "signin_failures_per_address", "signin_window_s",
        "new_names_per_address", "new_names_window_s",
    ),
    "ladder": ("ladder_worker_key", "ladder_worker", "ladder_cpu_share", "ladder_lease_ms",
               "ladder_move_time_ms"),
    "mqtt": ("mqtt_url",),
    "cluster": ("cluster_url", "node", "lease_ms"),
}


def _types() -> dict[str, Any]:
    return get_type_hints(Settings)


def _coerce(key: str, value: Any, source: str) -> Any:
    """Check (TOML) or parse (env/CLI text) one value against the field's type."""
    kind = _types()[key]
    text = isinstance(value, str)
    try:
        if get_origin(kind) is list or kind is list:
            if text:
                return [v.strip() for v in value.split(",") if v.strip()]
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return list(value)
            raise TypeError
        if kind is bool:
            if isinstance(value, bool):
                return value
            if text and value.lower() in ("1", "true", "yes", "on"):
                return True
            if text and value.lower() in ("0", "false", "no", "off"):
                return False
            raise TypeError
        if kind is int:
            if isinstance(value, bool):
                raise TypeError
            if isinstance(value, int):
                return value
            if text:
                return int(value)
            raise TypeError
        if kind is float:
            if isinstance(value, bool):
                raise TypeError
            if isinstance(value, int | float):
                return float(value)
            if text:
                return float(value)
            raise TypeError
        if kind is str:
            if text:
                return value
            raise TypeError
    except (TypeError, ValueError):
        pass
    name = getattr(kind, "__name__", str(kind))
    if isinstance(kind, types.GenericAlias):
        name = f"list of {get_args(kind)[0].__name__}"
    raise ConfigError(f"{source}: {key} must be {name}, got {value!r}")


def _from_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc
    out: dict[str, Any] = {}
    for section, body in data.items():
        if section not in SECTIONS or not isinstance(body, dict):
            raise ConfigError(f"{path}: unknown section [{section}]")
        for key, value in body.items():
            if key not in SECTIONS[section]:
                raise ConfigError(f"{path}: unknown key {key!r} in [{section}]")
            out[key] = _coerce(key, value, str(path))
    return out


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = {f.name for f in fields(Settings)}
    for var, value in env.items():
        if not var.startswith("MOO_"):
            continue
        key = var[4:].lower()
        if key in names:
            out[key] = _coerce(key, value, f"environment {var}")
    return out


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults, then the file, then ``MOO_*`` variables, then ``overrides`` (CLI flags)."""
    values: dict[str, Any] = {}
    if config_file:
        values.update(_from_toml(Path(config_file)))
    values.update(_from_env(os.environ if env is None else env))
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = _coerce(key, value, "command line")
    try:
        return dataclasses.replace(Settings(), **values)
    except TypeError as exc:  # pragma: no cover - keys are checked above
        raise ConfigError(str(exc)) from exc
