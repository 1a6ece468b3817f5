"""The client's address behind a reverse proxy (HAProxy): X-Forwarded-For, trusted only from it.

Behind a proxy every connection comes from the proxy's address, so a per-address limit (failed
sign-ins, server/accounts.py) would count all players as one. The proxy names the client in
``X-Forwarded-For`` (deploy/haproxy.cfg removes what the client sent and appends the address
it saw). A client can write that header too, so it is believed only when the TCP peer is one of
the ``trusted_proxies``; then the header's entries are read from the right (the entry the last
proxy appended), skipping entries that are themselves trusted proxies (a chain of them), and
the first other address is the client. Anything unreadable there, or no header, leaves the
TCP peer's address: a forged or broken header never yields an address the proxy did not see.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from functools import lru_cache

__all__ = ["UNIX_PEER", "client_address"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=16)
def _networks(trusted: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(t, strict=False) for t in trusted)


def _is_trusted(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in n for n in networks)


#: the peer "address" of a connection through the server's Unix socket (``--unix``): only the
#: socket's owner (the proxy's user) can connect there, so no other local process can claim a
#: client address by talking to a node directly
UNIX_PEER = "unix"


def client_address(peer: str, forwarded: Sequence[str], trusted: tuple[str, ...]) -> str:
    """The client's address for a connection from ``peer`` carrying the ``X-Forwarded-For``
    header values ``forwarded``, believing the header only from ``trusted`` proxies (an
    address or network, or ``"unix"``: the Unix socket)."""
    networks = _networks(tuple(t for t in trusted if t != UNIX_PEER))
    if peer == UNIX_PEER:
        if UNIX_PEER not in trusted:
            return peer
    elif not networks or not _is_trusted(peer, networks):
        return peer
    entries = [e.strip() for value in forwarded for e in value.split(",")]
    for entry in reversed(entries):
        try:
            ipaddress.ip_address(entry)
        except ValueError:
            return peer  # not an address the proxy wrote: believe only the proxy itself
        if not _is_trusted(entry, networks):
            return entry
    return peer
