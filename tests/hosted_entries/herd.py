#!/usr/bin/env python3
# Hostile: answers its first 'guess' by starting children that each fill (and touch) 48 MiB,
# under the per-process memory limit, but together over the limit for all its processes.
import os
import signal
import sys

for line in sys.stdin:
    if line.startswith("moo"):
        print("ready herd", flush=True)
    elif line.startswith("guess"):
        for _ in range(6):
            if os.fork() == 0:
                block = bytearray(48 << 20)
                for i in range(0, len(block), 4096):
                    block[i] = 1
                signal.pause()
        signal.pause()
