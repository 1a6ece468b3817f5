#!/usr/bin/env python3
# Hostile: on its first 'guess' looks for what it must not read: every path the test put in
# PATHS (another bot's program, a SQLite database, the project's checkout), and every command
# line and environment under /proc (the test's own carry a marker). It reports each on
# standard error ("read PATH" or "no PATH") and answers "seen N" (not a guess), N being the
# number of places where it found the MARKER.
import os
import sys

PATHS = ["@PATHS@"]
MARKER = "@MARKER@"


def read(path):
    try:
        if os.path.isdir(path):
            return " ".join(os.listdir(path)).encode()
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError:
        return None


for line in sys.stdin:
    if line.startswith("moo"):
        print("ready spy", flush=True)
    elif line.startswith("guess"):
        seen = 0
        for path in PATHS:
            blob = read(path)
            print(("no " if blob is None else "read ") + path, file=sys.stderr, flush=True)
            seen += blob is not None and MARKER.encode() in blob
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        print("pids " + " ".join(sorted(pids, key=int)), file=sys.stderr, flush=True)
        for pid in pids:
            for what in ("cmdline", "environ"):
                blob = read(f"/proc/{pid}/{what}") or b""
                seen += MARKER.encode() in blob
        print(f"seen {seen}", flush=True)
