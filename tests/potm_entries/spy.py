#!/usr/bin/env python3
# Hostile: looks for the word where the referee might leak it. It collects every N-letter word
# from the command lines and environments of every process it can read (its parent's, its
# parent's parent's ... first: `moo potm --target WORD --words FILE --seed S`), and from the
# files those name (the word list itself), then guesses them in turn. When it runs out it
# prints "nothing" (not a guess), which ends the word: in a sandbox that is at once, since
# there is nothing of the referee to read.
import os
import re
import sys

first = sys.stdin.readline().split()
STATE = "TEMP.spy"
if len(first) == 1:
    n, k = int(first[0]), 0
else:
    n = len(first[0])
    with open(STATE) as f:
        k = int(f.read())
found: list[str] = []


def add(blob):
    for w in re.findall(rb"[A-Za-z]+", blob):
        w = w.decode().upper()
        if len(w) == n and w not in found:
            found.append(w)


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read(1 << 22)
    except OSError:
        return b""


pids, pid = [], os.getppid()
while pid > 1 and pid not in pids:
    pids.append(pid)
    stat = read(f"/proc/{pid}/stat")
    pid = int(stat.rsplit(b")", 1)[1].split()[1]) if stat else 0
pids += [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in pids]
for pid in pids:
    for what in ("cmdline", "environ"):
        blob = read(f"/proc/{pid}/{what}")
        add(blob)
        for arg in blob.split(b"\0"):  # a file named there: the word list?
            if arg.startswith(b"/") and os.path.isfile(arg) and not os.access(arg, os.X_OK) \
                    and not arg.endswith(b".py"):  # a data file, not a program
                add(read(arg))
add(b" ".join(f"{k}={v}".encode() for k, v in os.environ.items()))
with open(STATE, "w") as f:
    f.write(str(k + 1))
print(found[k] if k < len(found) else "nothing")
