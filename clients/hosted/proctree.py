"""The process tree of a sandboxed program as ``/proc`` shows it, and the user ids it runs as.

:mod:`clients.hosted.sandbox` charges a program for the CPU and memory of its whole tree by
reading these files, and runs each session as root under a user id of its own
(:func:`free_uid`), so that a scan for that id (:func:`live_pids_of_user`) shows whether
anything of it is left.
"""

from __future__ import annotations

import os
import random

__all__ = ["CLOCK_TICKS", "PAGE", "UID_RANGE", "children", "free_uid", "live_pids_of_user",
           "proc_stat", "process_tree"]

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
#: User ids drawn for sessions as root: far above any account's.
UID_RANGE = (2_000_000_000, 2_100_000_000)


def proc_stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first); None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (``/proc/PID/task/TID/children``)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out += [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            continue
    return out


def process_tree(root: int) -> dict[int, list[bytes]]:
    """``root`` and all its descendants (zombies included) with their stat fields."""
    out: dict[int, list[bytes]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        fields = proc_stat(pid)
        if fields is None:
            continue
        out[pid] = fields
        todo += children(pid)
    return out


def live_pids_of_user(uid: int) -> list[int]:
    """Every process (zombies included) whose owner is ``uid``: what a session left behind."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    pids.append(int(name))
            except OSError:
                continue
    return pids


def free_uid() -> int:
    """A user id no account and no process uses (drawn at random, so sessions never meet)."""
    rng = random.SystemRandom()
    while True:
        uid = rng.randrange(*UID_RANGE)
        if not live_pids_of_user(uid):
            return uid
