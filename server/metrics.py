"""``GET /metrics``: the node's figures in Prometheus text format (prometheus-client).

Counters and gauges are read when Prometheus scrapes, from what the server keeps anyway
(connections, live matches, the store's commit counters, the lease and bus counters).
Latencies are real cumulative histograms (``_bucket``, ``_sum``, ``_count`` since start):
each acknowledgement adds one observation to a :class:`Histogram` here, which costs a bisect
and two additions on the hot path (prometheus-client's own ``Histogram.observe`` takes a lock
per call, which the single-node benchmark would pay for), and is exported through
prometheus-client's ``HistogramMetricFamily``. Acknowledged guesses are counted by an arena
listener (one call per commit, as the ratings listener).

Each :class:`~server.app.App` has its own registry, so several servers in one process (the
tests) do not collide.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from moo.match import Event, Match

if TYPE_CHECKING:
    from server.arena import Arena
    from server.cluster.router import Router
    from server.connection import Connection
    from server.storage import Store

__all__ = ["CONTENT_TYPE", "Histogram", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: bucket bounds in seconds for acknowledgement and commit latency
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Histogram:
    """A cumulative latency histogram: counts per bucket, the sum and the count since start."""

    __slots__ = ("counts", "n", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(_BUCKETS) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(_BUCKETS, seconds)] += 1
        self.total += seconds
        self.n += 1

    def family(self, name: str, text: str, node: str) -> Metric:
        buckets = []
        running = 0
        for bound, count in zip(_BUCKETS, self.counts, strict=False):
            running += count
            buckets.append((repr(bound), float(running)))
        buckets.append(("+Inf", float(self.n)))
        h = HistogramMetricFamily(name, text, labels=["node"])
        h.add_metric([node], buckets, sum_value=self.total)
        return h


class Node(Protocol):
    """What the metrics read from a running server (``server.app.App`` has it all); an
    interface rather than the class, so ``app`` -> ``metrics`` stays a one-way import."""

    node: str
    router: Router | None
    connections: set[Connection]
    arena: Arena
    store: Store


class Metrics(Collector):
    def __init__(self, app: Node) -> None:
        self.app = app
        self.acknowledged_guesses = 0
        self.ack = Histogram()
        self.forward = Histogram()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        app.arena.listeners.append(self._count)
        app.arena.ack_hooks.append(self.ack.observe)
        if app.router is not None:
            app.router.forwarding.latency_hooks.append(self.forward.observe)

    def _count(self, match: Match, events: list[Event]) -> None:
        for event in events:
            if event["kind"] == "guess":
                self.acknowledged_guesses += 1

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))

    def collect(self) -> Iterator[Metric]:
        app = self.app
        router = app.router
        leases = router.leases if router is not None else None
        node = app.node if router is not None else ""
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
        yield self.ack.family(
            "moo_ack_latency_seconds", "frame in to acknowledgement queued", node
        )
        yield gauge("moo_bus_up", "1 while connected to the cluster's MQTT broker",
                    float(router is not None and router.state == "ok"))
        fwd = router.forwarding if router is not None else None
        yield counter("moo_bus_forwarded", "requests forwarded to a match's owner",
                      fwd.forwarded if fwd is not None else 0)
        yield counter("moo_bus_served", "requests served for clients on other nodes",
                      router.serving.served if router is not None else 0)
        yield counter("moo_bus_published", "envelopes published to the broker",
                      router.transport.published if router is not None else 0)
        yield counter("moo_bus_losses", "losses of messages noticed (gaps, dropped sessions)",
                      router.transport.losses if router is not None else 0)
        yield counter("moo_bus_reattached", "subscriptions re-attached from their cursors",
                      fwd.reattached if fwd is not None else 0)
        yield self.forward.family(
            "moo_bus_forward_seconds",
            "forwarded move to its acknowledgement back on this node", node,
        )
