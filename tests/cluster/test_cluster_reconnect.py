"""A node's MQTT session (server/cluster/transport.py) reaching a broker that is down through
something that accepts the connection and then drops it (a TCP proxy or load balancer in
front of the broker, the fault harness's relay): the attempt fails at once, so the node tries
again after its backoff (at most 0.5 s) and is back on the bus as soon as the broker is
(issue 33).

The fault harness's one-round form found nodes back on the bus 5.3 s after a broker restart
while the others took 0.1 s, and their clients' matches silent for that long: the MQTT client
ignored a connection dropped before the broker's CONNACK and waited out its whole timeout.
"""

from __future__ import annotations

import asyncio

import aiomqtt
import pytest

from bench.harness.services import TcpCut, free_port
from server.cluster.transport import BusClient
from tests.patience import patience


async def test_a_connection_dropped_before_the_brokers_answer_fails_at_once() -> None:
    relay = TcpCut(free_port())  # accepts, then resets: nobody listens behind it
    await relay.up()
    try:
        # the client's own timeout far beyond the test's net: it is not what ends the attempt
        client = BusClient("127.0.0.1", relay.port, timeout=3600, keepalive=10)
        async with asyncio.timeout(patience(30)):  # (before: waited out the client's timeout)
            with pytest.raises(aiomqtt.MqttError, match="before the broker answered"):
                async with client:
                    pass
    finally:
        await relay.down()
