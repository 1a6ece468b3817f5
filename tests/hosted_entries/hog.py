#!/usr/bin/env python3
# Hostile: answers its first 'guess' by allocating 4 GiB.
import sys

for line in sys.stdin:
    if line.startswith("moo"):
        print("ready hog", flush=True)
    elif line.startswith("guess"):
        hog = bytearray(4 << 30)
        print("0123", len(hog), flush=True)
