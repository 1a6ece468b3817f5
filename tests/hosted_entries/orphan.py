#!/usr/bin/env python3
# Hostile: plays legal guesses, but first leaves a daemon (double fork, new session, deaf to
# SIGHUP and SIGTERM) that would outlive its match if the sandbox let it.
import os
import signal
import sys

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.closerange(0, 3)
        while True:
            signal.pause()
    os._exit(0)
os.wait()
codes = iter(f"{a}{b}{c}{d}" for a in "0123456789" for b in "0123456789"
             for c in "0123456789" for d in "0123456789" if len({a, b, c, d}) == 4)
for line in sys.stdin:
    if line.startswith("moo"):
        print("ready orphan", flush=True)
    elif line.startswith("guess"):
        print(next(codes), flush=True)
    elif line.startswith("quit"):
        break
