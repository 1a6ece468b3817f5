"""Provably fair secrets: a salted SHA-256 commitment published before play, opened at the end.

Once both secrets are set the server publishes ``commit(secret, salt)`` for each; the final event
reveals secrets and salts, so any client can check that nobody changed a secret mid-match.
The salt makes the commitment unguessable: without it the 5040 possible secrets could be hashed
and matched in microseconds.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets as _secrets

SALT_BYTES = 16


def new_salt() -> str:
    """A fresh random salt as hex; kept out of the pure state machine, which is handed one."""
    return _secrets.token_hex(SALT_BYTES)


def commit(secret: str, salt: str) -> str:
    """Hex SHA-256 of ``salt + secret`` (UTF-8), the exact formula clients re-compute."""
    return hashlib.sha256((salt + secret).encode("utf-8")).hexdigest()


def verify(commitment: str, secret: str, salt: str) -> bool:
    return hmac.compare_digest(commitment, commit(secret, salt))
