#!/usr/bin/env python3
# Hostile: on its first 'guess' tries to reach the network: every HOST:PORT the test put in
# TARGETS (a listener of the test on loopback and on the host's address, PostgreSQL's 5432),
# over TCP and UDP. It reports each attempt on standard error and answers with a line that is
# not a guess ("net closed" if no TCP connection was made, "net OPEN" otherwise; a datagram
# sent may reach nobody, so the test's own UDP listener says whether one arrived).
import socket
import sys

TARGETS = ["@TARGETS@"]


def tcp(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return "OPEN"
    except OSError as exc:
        return f"closed ({exc.__class__.__name__})"


def udp(host, port):
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"hello", (host, port))
            return "sent"
    except OSError as exc:
        return f"closed ({exc.__class__.__name__})"


for line in sys.stdin:
    if line.startswith("moo"):
        print("ready netprobe", flush=True)
    elif line.startswith("guess"):
        opened = False
        for target in TARGETS:
            host, port = target.rsplit(":", 1)
            t, u = tcp(host, int(port)), udp(host, int(port))
            opened = opened or t == "OPEN"
            print(f"probe {target} tcp {t} udp {u}", file=sys.stderr, flush=True)
        print("net OPEN" if opened else "net closed", flush=True)
