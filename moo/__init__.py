"""The pure game core of MOO Arena: rules, match state machine, protocol schema, errors.

Nothing in this package does I/O; the server, the bots and the clients all import it.
"""

__version__ = "0.1.0"
