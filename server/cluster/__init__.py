"""Running one arena on several server nodes: leases (``leases.py``); see docs/cluster.md."""
