"""The fault harness: a cluster of its own, clients written from docs/protocol.md, a nemesis
and a history checker (docs/cluster.md, "The fault harness"; ``python -m bench.harness``)."""
