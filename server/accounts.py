"""Accounts: a name secured with a password, usable from any device.

Anonymous play stays as it was: the first ``hello`` for a free name registers it and returns a
token, the device's key to the name. An owner may then ``set_password``; from then on any
device can ``hello`` with the name and the password and gets its own fresh token. Tokens are
per device (only their SHA-256 is stored); ``sign_out_all`` revokes every one of them at once.

Why these choices:

* Argon2id (``argon2-cffi``) at RFC 9106's second recommended cost by default, configurable
  (``[accounts]`` in config/default.toml) so tests can use a tiny cost. Hashing runs on worker
  threads (the C code releases the GIL), at most two at a time, so a burst of sign-ins can
  neither stall the event loop nor take more than 2 x 64 MiB of memory.
* One answer for every failure (``bad_credentials``): wrong password, a name without a
  password, a name nobody owns. An unknown or unsecured name is still checked against a dummy
  hash, so the reply takes as long as a real check and the timing does not tell either.
* Failed attempts are limited per name (guessing one person's password from many addresses)
  and per address (trying many names from one place; an IPv6 address counts as its /64),
  each a budget of N failures per window that drains continuously. The check happens
  *before* any hashing, so a locked-out attacker costs the server nothing. A success does not
  reset the count: a correct guess after many wrong ones is still bounded by the budget.
* New names are budgeted per address the same way (``new_names_per_address`` per
  ``new_names_window_s``): a name costs the server a row for ever, and without a budget one
  address registered 600 names in 1.7 s. Every ``hello`` that asks for a new name spends one,
  whether the name turns out free or owned (probing owned names is not free either); the
  check and the spending happen under one lock, so a burst of concurrent hellos cannot all
  pass the check before any of them is counted.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import secrets
import time
from collections.abc import Callable
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from moo.errors import BadCredentials, NotAvailable, SchemaError, TooManyAttempts, TooManyNames
from server.settings import Settings
from server.storage import Account, Store

__all__ = [
    "CLOSE_SIGNED_OUT",
    "MAX_PASSWORD",
    "MAX_TOKENS_PER_NAME",
    "MIN_PASSWORD",
    "Accounts",
    "FailureBudget",
    "SharedFailureBudget",
    "address_key",
    "hash_token",
    "new_token",
]

#: Close code of the other connections of a name whose owner signed out everywhere.
CLOSE_SIGNED_OUT = 4003
MIN_PASSWORD = 8
MAX_PASSWORD = 128
#: Devices signed in to one name at once; signing in on one more forgets the oldest token.
MAX_TOKENS_PER_NAME = 20
#: Argon2 hashes computed at the same time (memory: each takes ``argon2_memory_kib``).
_CONCURRENT_HASHES = 2


def hash_token(token: str) -> str:
    """Only this digest is stored, so a leaked database does not leak anyone's seat."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(24)


def address_key(address: str) -> str:
    """The per-address limit's key: an IPv4 address, or an IPv6 address's /64 network.

    One IPv6 user (a home, a cloud instance) normally holds a whole /64, so counting single
    addresses would let them try 2^64 times as often.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class FailureBudget:
    """At most ``limit`` failures per ``window_s`` per key, draining continuously.

    A key's level rises by one per failure and falls by ``limit / window_s`` per second; a new
    attempt is allowed while one more failure would fit. Memory is bounded: drained keys are
    forgotten when the table grows past ``max_keys``.
    """

    def __init__(
        self,
        limit: int,
        window_s: float,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
    ) -> None:
        self.limit = limit
        self.rate = limit / window_s
        self.clock = clock
        self.max_keys = max_keys
        self._levels: dict[str, tuple[float, float]] = {}

    def _level(self, key: str, now: float) -> float:
        level, stamp = self._levels.get(key, (0.0, now))
        return max(0.0, level - (now - stamp) * self.rate)

    def retry_after_s(self, key: str) -> float:
        """0 when an attempt is allowed now, else the seconds until one is."""
        excess = self._level(key, self.clock()) + 1.0 - self.limit
        return excess / self.rate if excess > 1e-9 else 0.0

    async def wait_s(self, key: str) -> float:
        """:meth:`retry_after_s`, with the shared budget's (awaitable) signature."""
        return self.retry_after_s(key)

    async def record(self, key: str) -> None:
        """:meth:`fail`, with the shared budget's (awaitable) signature."""
        self.fail(key)

    def fail(self, key: str) -> None:
        now = self.clock()
        self._levels[key] = (self._level(key, now) + 1.0, now)
        if len(self._levels) > self.max_keys:
            self._levels = {
                k: v for k, v in self._levels.items() if self._level(k, now) > 0.0
            }


class SharedFailureBudget:
    """:class:`FailureBudget` kept in PostgreSQL (``signin_failures``), so that a cluster's
    nodes count one budget per name and per address, not one per node.

    The same rule (a level rising by one per failure, draining ``limit / window_s`` per
    second), computed in the database from each node's wall clock: the limits tolerate the
    few milliseconds nodes' clocks differ by. ``prefix`` keeps the name and address budgets
    apart in the one table.
    """

    def __init__(
        self,
        store: Any,
        prefix: str,
        limit: int,
        window_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.limit = limit
        self.window_s = window_s
        self.rate = limit / window_s
        self.clock = clock

    async def wait_s(self, key: str) -> float:
        level = await self.store.failure_level(
            self.prefix + key, self.rate, int(self.clock() * 1000)
        )
        excess = float(level) + 1.0 - self.limit
        return excess / self.rate if excess > 1e-9 else 0.0

    async def record(self, key: str) -> None:
        await self.store.add_failure(
            self.prefix + key, self.rate, int(self.clock() * 1000), int(self.window_s * 2000)
        )


class Accounts:
    """Passwords, device tokens and the sign-in limits of one server."""

    def __init__(
        self, settings: Settings, store: Store, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.hasher = PasswordHasher(
            time_cost=settings.argon2_time_cost,
            memory_cost=settings.argon2_memory_kib,
            parallelism=settings.argon2_parallelism,
        )
        self.by_name: FailureBudget | SharedFailureBudget
        self.by_address: FailureBudget | SharedFailureBudget
        self.new_names: FailureBudget | SharedFailureBudget
        if hasattr(store, "add_failure"):  # PostgreSQL: one budget for every node
            self.new_names = SharedFailureBudget(
                store, "new:", settings.new_names_per_address, settings.new_names_window_s
            )
            self.by_name = SharedFailureBudget(
                store, "name:", settings.signin_failures_per_name, settings.signin_window_s
            )
            self.by_address = SharedFailureBudget(
                store, "addr:", settings.signin_failures_per_address, settings.signin_window_s
            )
        else:
            self.by_name = FailureBudget(
                settings.signin_failures_per_name, settings.signin_window_s, clock
            )
            self.by_address = FailureBudget(
                settings.signin_failures_per_address, settings.signin_window_s, clock
            )
            self.new_names = FailureBudget(
                settings.new_names_per_address, settings.new_names_window_s, clock
            )
        self._slots: asyncio.Semaphore | None = None
        self._naming: asyncio.Lock | None = None
        self._dummy: str | None = None

    # -- hashing, off the event loop ----------------------------------------------------------
    def _semaphore(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(_CONCURRENT_HASHES)
        return self._slots

    async def _hash(self, password: str) -> str:
        async with self._semaphore():
            return await asyncio.to_thread(self.hasher.hash, password)

    async def _verify(self, password_hash: str, password: str) -> bool:
        async with self._semaphore():
            try:
                return await asyncio.to_thread(self.hasher.verify, password_hash, password)
            except (VerificationError, InvalidHashError):
                return False

    async def _dummy_hash(self) -> str:
        if self._dummy is None:
            self._dummy = await self._hash(new_token())
        return self._dummy

    # -- the limits ---------------------------------------------------------------------------
    async def _check_limits(self, name: str, address: str) -> None:
        wait = max(await self.by_name.wait_s(name.casefold()),
                   await self.by_address.wait_s(address_key(address)))
        if wait > 0:
            raise TooManyAttempts(
                "too many failed sign-ins for this name or from this address; try again later",
                retry_after_ms=max(1, int(wait * 1000 + 0.999)),
            )

    async def _failed(self, name: str, address: str) -> None:
        await self.by_name.record(name.casefold())
        await self.by_address.record(address_key(address))

    async def _check_password(self, account: Account | None, password: str) -> bool:
        if account is not None and account.password_hash is not None:
            ok = await self._verify(account.password_hash, password)
            if ok and self.hasher.check_needs_rehash(account.password_hash):
                # the operator raised the cost: upgrade the stored hash while we know the password
                await self.store.set_password_hash(account.name, await self._hash(password))
            return ok
        await self._verify(await self._dummy_hash(), password)  # same time as a real check
        return False

    async def spend_new_name(self, address: str) -> None:
        """Spend one of ``address``'s new names, or refuse with ``too_many_names`` (spending
        nothing) when its budget is used up. Called before the name is registered."""
        if self._naming is None:
            self._naming = asyncio.Lock()
        key = address_key(address)
        async with self._naming:
            wait = await self.new_names.wait_s(key)
            if wait > 0:
                raise TooManyNames(
                    "too many new names from this address; try again later (a name you "
                    "already have comes back with its token)",
                    retry_after_ms=max(1, int(wait * 1000 + 0.999)),
                )
            await self.new_names.record(key)

    # -- requests -------------------------------------------------------------------------------
    async def sign_in(self, name: str, password: str, address: str) -> tuple[Account, str]:
        """``hello`` with a password: the account and a fresh token for this device."""
        await self._check_limits(name, address)
        account = await self.store.account(name)
        if not await self._check_password(account, password) or account is None:
            await self._failed(name, address)
            raise BadCredentials("wrong name or password")
        token = new_token()
        await self.store.add_token(account.name, hash_token(token), MAX_TOKENS_PER_NAME)
        return account, token

    async def set_password(
        self, name: str, password: str, old_password: str | None, address: str
    ) -> None:
        """Set or change the password of the connection's own name."""
        if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
            raise SchemaError(
                f"field 'password' must be {MIN_PASSWORD}-{MAX_PASSWORD} characters"
            )
        account = await self.store.account(name)
        if account is None:
            raise NotAvailable(f"{name!r} is not a registered name")
        if account.password_hash is not None:
            await self._check_limits(name, address)
            if old_password is None or not await self._verify(
                account.password_hash, old_password
            ):
                await self._failed(name, address)
                raise BadCredentials("old_password is missing or wrong")
        await self.store.set_password_hash(account.name, await self._hash(password))

    async def sign_out_all(self, name: str) -> str:
        """Revoke every token of ``name``; returns the one new token (for the caller)."""
        token = new_token()
        await self.store.rotate_tokens(name, hash_token(token))
        return token
