#!/usr/bin/env python3
# Hostile: the CPU is burnt in a grandchild in a session of its own (double fork + setsid),
# which the entry never waits for; once it has burnt 0.5 s (its own count) the entry prints
# its guess and exits, leaving the grandchild burning. Earlier referees charged about 0 s.
import os
import time

r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork():
        os._exit(0)
    t = time.process_time()
    while time.process_time() - t < 0.5:
        pass
    os.write(w, b"x")
    while True:
        pass
os.read(r, 1)
print("SKUNK")
