"""``GET /metrics``: the node's figures in Prometheus text format (prometheus-client).

Nothing here touches the request path: every figure is read when Prometheus scrapes, from
counters the server keeps anyway (connections, live matches, the store's commit counters, the
lease counters) and from the bounded windows of recent latencies the server already records
(``arena.ack_latency``, the PostgreSQL store's commit times). Those windows are exported as
*gauge histograms* (the distribution of the most recent samples, up to 5000), not as cumulative
histograms: a cumulative one would need an observation per acknowledgement on the hot path,
which the single-node benchmark must not pay for. Acknowledged guesses are counted by an arena
listener (one call per commit, as the ratings listener).

Each :class:`~server.app.App` has its own registry, so several servers in one process (the
tests) do not collide.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from moo.match import Event, Match

if TYPE_CHECKING:
    from server.arena import Arena
    from server.cluster.bus import Bus
    from server.cluster.leases import Leases
    from server.connection import Connection
    from server.storage import Store

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: bucket bounds in seconds for acknowledgement and commit latency
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Node(Protocol):
    """What the metrics read from a running server (``server.app.App`` has it all); an
    interface rather than the class, so ``app`` -> ``metrics`` stays a one-way import."""

    node: str
    leases: Leases | None
    bus: Bus | None
    connections: set[Connection]
    arena: Arena
    store: Store


class Metrics(Collector):
    def __init__(self, app: Node) -> None:
        self.app = app
        self.acknowledged_guesses = 0
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        app.arena.listeners.append(self._count)

    def _count(self, match: Match, events: list[Event]) -> None:
        for event in events:
            if event["kind"] == "guess":
                self.acknowledged_guesses += 1

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))

    def collect(self) -> Iterator[Metric]:
        app = self.app
        node = app.node if app.leases is not None else ""
        labels = ["node"]

        def gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, text, labels=labels)
            g.add_metric([node], value)
            return g

        def counter(name: str, text: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, text, labels=labels)
            c.add_metric([node], value)
            return c

        yield gauge("moo_connections", "open WebSocket connections", len(app.connections))
        yield gauge("moo_live_matches", "matches live on this node", len(app.arena.live))
        yield gauge(
            "moo_owned_matches",
            "matches this node owns (holds the lease of); = live matches on a single node",
            len(app.arena.live),
        )
        yield gauge("moo_db_up", "1 while the database answers", float(app.store.available))
        yield counter(
            "moo_acknowledged_guesses", "guesses committed and acknowledged",
            self.acknowledged_guesses,
        )
        store: Any = app.store
        yield counter("moo_storage_commits", "storage transactions committed", store.commits)
        yield counter("moo_storage_committed_ops", "operations in those commits", store.ops)
        leases = app.leases
        yield counter(
            "moo_lease_takeovers", "matches taken over from dead or paused nodes",
            leases.takeovers if leases is not None else 0,
        )
        yield counter(
            "moo_lease_losses", "matches let go of because another node owns them now",
            leases.lost if leases is not None else 0,
        )
        yield counter(
            "moo_fenced_appends", "appends refused because the lease had passed",
            getattr(store, "fenced", 0),
        )
        yield _histogram(
            "moo_ack_latency_seconds",
            "frame in to acknowledgement queued, most recent acknowledgements",
            app.arena.ack_latency, node,
        )
        bus = app.bus
        yield gauge("moo_bus_up", "1 while connected to the cluster's MQTT broker",
                    float(bus is not None and bus.state == "ok"))
        yield counter("moo_bus_forwarded", "requests forwarded to a match's owner",
                      bus.forwarded if bus is not None else 0)
        yield counter("moo_bus_served", "requests served for clients on other nodes",
                      bus.served if bus is not None else 0)
        yield counter("moo_bus_relayed", "messages relayed to clients on other nodes",
                      bus.relayed if bus is not None else 0)
        yield _histogram(
            "moo_bus_forward_seconds",
            "forwarded request to its acknowledgement back on this node, most recent ones",
            bus.forward_latency if bus is not None else (), node,
        )
        yield _histogram(
            "moo_storage_commit_seconds",
            "storage commit time, most recent commits (PostgreSQL store)",
            getattr(store, "commit_seconds", ()), node,
        )


def _histogram(name: str, text: str, samples: Iterable[float], node: str) -> Metric:
    values: Sequence[float] = sorted(samples)
    buckets = []
    i = 0
    for bound in _BUCKETS:
        while i < len(values) and values[i] <= bound:
            i += 1
        buckets.append((repr(bound), float(i)))
    buckets.append(("+Inf", float(len(values))))
    h = GaugeHistogramMetricFamily(name, text, labels=["node"])
    h.add_metric([node], buckets, gsum_value=float(sum(values)))
    return h
