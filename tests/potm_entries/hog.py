#!/usr/bin/env python3
# Hostile: asks for memory without end, a gigabyte at a time, each one written to. Stopped by
# the address-space limit at its first request, so it prints nothing and costs almost no CPU;
# without that limit the writing would run into the CPU limit instead, and the test tells
# the two apart. (An awk that doubles a string, its earlier form, spent 0.2-0.3 s of CPU
# copying before the limit stopped it: a busy run now and then crossed the 0.3 s CPU limit.)
chunks = []
while True:
    chunks.append(b"x" * (1 << 30))
