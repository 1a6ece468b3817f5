"""The history checker: every client's streams and the database, read after the run.

What each connection received (bench/harness/player.py) is held against the match logs in the
database (the ``events`` table: the truth of what happened) and the nemesis's timeline. The
promises checked are docs/protocol.md's, as a client sees them:

``gaps``
    a client (player or spectator, over all its connections) that did not apply every event
    of its match's log, 1 to ``finished``; its seqs applied in order by the dedup rule, so an
    event that came out of order is a gap too.
``repeats``
    a seq received twice on one connection (the server sends each event of a followed match
    once per connection; a new connection's replay is not a repeat).
``disorder``
    a connection on which a seq came after a higher one.
``lost``
    an acknowledged guess (its ``guess`` event came back with the request's ``ref``) missing
    from the log.
``finished``
    matches whose log does not hold exactly one ``finished``, as its last event.
``doubled``
    a guess in a match's log twice for one seat: applied twice. No player's plan repeats a
    guess, and each guess is sent with its number ``n`` (docs/protocol.md, "Retrying
    safely"), so a retry after a lost answer is answered with the first event.
``stalls``
    an event that a connection following the match, open from before the event until 5 s
    after it, had not received within those 5 s: silence on an open connection. Not counted:
    a connection to a node that the nemesis had paused (SIGSTOP) during those 5 s, and an
    event of a match whose owner was paused or cut from the database within 5 s after logging
    it (before it could pass it on; cut in the middle of the commit, the owner cannot learn
    that the event is in the log and drops the match): nothing comes from that owner until
    its lease passes (the takeover) or it runs again, and the gap check holds both to what
    comes after.
``unanswered``
    a request that got no reply within a minute on a connection that stayed open (every
    request is answered, docs/protocol.md).
``forfeits``
    matches that ended ``disconnect``, ``timeout`` or ``resign``: none of these clients ever
    gives up, so each would be caused by a fault.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.harness.player import Follower

STALL_S = 5.0
FORFEITS = frozenset({"disconnect", "timeout", "resign"})


@dataclass
class Fault:
    """One fault of the nemesis: what, to which node (or none), from ``start`` to ``end``
    (time.time())."""

    kind: str
    node: str
    start: float
    end: float = 0.0
    owned: int = 0  # live matches the node owned when it struck (kill, term, stop)
    recovered_s: float | None = None  # kill: until each of them accepted a move again
    slowest: str = ""  # kill: the match that took longest to accept a move again
    #: kill, term, stop, cut-db: the live matches it owned (stop, cut-db: also any it owned
    #: once struck, read from the database then)
    matches: list[str] = field(default_factory=list)
    reset: int = 0  # drop-broker, drop-db: the connections reset
    #: kill: what each player of the slowest match did after the signal (seconds after it)
    breakdown: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verdict:
    matches: int = 0
    followers: int = 0
    connections: int = 0
    events: int = 0
    acknowledged: int = 0
    lost: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    repeats: list[str] = field(default_factory=list)
    #: for each connection with a repeat, what it was sent and when (not counted)
    repeat_stories: list[str] = field(default_factory=list)
    disorder: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    stalls: list[str] = field(default_factory=list)
    forfeits: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    client_errors: list[str] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)
    refusals: dict[str, int] = field(default_factory=dict)
    closes: dict[str, int] = field(default_factory=dict)

    def ok(self) -> bool:
        return not (self.lost or self.gaps or self.repeats or self.disorder or self.finished
                    or self.doubled or self.stalls or self.forfeits or self.unanswered
                    or self.client_errors) and self.matches > 0

    def counts(self) -> dict[str, Any]:
        return {
            "matches": self.matches, "followers": self.followers,
            "connections": self.connections, "events": self.events,
            "acknowledged": self.acknowledged, "lost": len(self.lost), "gaps": len(self.gaps),
            "repeats": len(self.repeats), "disorder": len(self.disorder),
            "finished_wrong": len(self.finished), "doubled": len(self.doubled),
            "stalls": len(self.stalls),
            "forfeits": len(self.forfeits), "unanswered": len(self.unanswered),
            "client_errors": len(self.client_errors),
            "reasons": self.reasons, "refusals": self.refusals, "closes": self.closes,
            "ok": self.ok(),
        }

    def samples(self, k: int = 10) -> dict[str, list[str]]:
        return {name: values[:k] for name in ("lost", "gaps", "repeats", "repeat_stories",
                                              "disorder", "finished", "stalls", "forfeits",
                                              "unanswered", "client_errors")
                if (values := getattr(self, name))}


def check(followers: list[Follower], logs: dict[str, list[dict[str, Any]]],
          faults: list[Fault], stall_s: float = STALL_S) -> Verdict:
    """Hold ``followers`` (every client of every match) against ``logs`` (match id -> its
    events in seq order, from the database) and the nemesis's ``faults``; ``stall_s`` is the
    longest silence allowed (a test on a loaded machine may allow more)."""
    v = Verdict()
    v.matches = len({f.match_id for f in followers if f.match_id})
    refusals: Counter[str] = Counter()
    closes: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for mid, log in logs.items():
        ends = [e for e in log if e["kind"] == "finished"]
        if len(ends) != 1 or log[-1]["kind"] != "finished":
            v.finished.append(f"{mid}: {len(ends)} finished events, last {log[-1]['kind']!r}"
                              if log else f"{mid}: no events")
        for e in ends:
            reasons[str(e.get("reason"))] += 1
            if e.get("reason") in FORFEITS:
                v.forfeits.append(f"{mid}: {e.get('reason')} {e.get('winner', '')}")
        v.events += len(log)
        played: set[tuple[Any, Any]] = set()
        for e in log:
            if e["kind"] == "guess":
                key = (e.get("seat"), e.get("guess"))
                if key in played:
                    v.doubled.append(f"{mid}: seat {key[0]} guessed {key[1]} twice (seq "
                                     f"{e['seq']})")
                played.add(key)
    logged = {(mid, int(e["seat"]), int(e["n"]), str(e["guess"]))
              for mid, log in logs.items() for e in log if e["kind"] == "guess" and "n" in e}
    paused = [(f.node, f.start, f.end) for f in faults if f.kind == "stop"]
    owner_paused: dict[str, list[tuple[float, float]]] = {}
    for fault in faults:
        # an owner stopped, or cut from the database (a commit in flight then has an outcome
        # it cannot learn: it drops the match, which comes back on another node by replay
        # once its lease has passed)
        if fault.kind in ("stop", "cut-db"):
            for mid in fault.matches:
                owner_paused.setdefault(mid, []).append((fault.start, fault.end))
    # when each follower first got each event: a stall names what the match's other
    # followers saw of the same event (late for all: the commit; late for one: its delivery)
    first: dict[tuple[str, int], list[tuple[str, float]]] = {}
    for f in followers:
        for c in f.conns:
            for r in c.events:
                first.setdefault((f.match_id, r.seq), []).append(
                    (f"{'spectator' if f.seat is None else f'seat {f.seat}'} on {c.node}", r.t))
    for f in followers:
        v.followers += 1
        refusals.update(f.refusals)
        v.client_errors += [f"{f.name}: {e}" for e in f.errors]
        v.unanswered += [f"{f.name} {f.match_id}: {u}" for u in f.unanswered]
        if not f.match_id:
            continue
        log = logs.get(f.match_id, [])
        who = f"{f.name} ({'spectator' if f.seat is None else f'seat {f.seat}'}) {f.match_id}"
        for seat, n, guess in f.acked:
            v.acknowledged += 1
            if (f.match_id, seat, n, guess) not in logged:
                v.lost.append(f"{who}: guess {n} {guess}")
        want = [int(e["seq"]) for e in log]
        if f.applied != want:
            missing = sorted(set(want) - set(f.applied))
            v.gaps.append(f"{who}: applied {len(f.applied)} of {len(want)}, missing "
                          f"{missing[:8]}{'...' if len(missing) > 8 else ''}")
        at = {int(e["seq"]): float(e["at"]) / 1000 for e in log}
        for c in f.conns:
            v.connections += 1
            closes[str(c.code) if c.closed is not None else "open"] += 1
            seen: set[int] = set()
            explained = False
            top = 0
            got: dict[int, float] = {}
            for r in c.events:
                if r.seq in seen:
                    v.repeats.append(f"{who} on {c.node}: seq {r.seq} again; the connection "
                                     f"got {[x.seq for x in c.events]}")
                    if not explained:
                        explained = True
                        v.repeat_stories.append(_story(who, c))
                elif r.seq < top:
                    v.disorder.append(f"{who} on {c.node}: seq {r.seq} after {top}")
                seen.add(r.seq)
                top = max(top, r.seq)
                got.setdefault(r.seq, r.t)
            if c.following_since is None:
                continue
            for seq, t in at.items():
                if t < c.following_since:
                    continue  # before this connection followed: its replay's business
                due = t + stall_s
                if c.closed is not None and c.closed <= due:
                    continue  # closed in time: the client reconnects and is sent it again
                if any(node == c.node and start <= due and (end == 0 or end >= t)
                       for node, start, end in paused):
                    continue
                if any(start - stall_s <= t and (end == 0 or t <= end)
                       for start, end in owner_paused.get(f.match_id, ())):
                    continue  # logged by an owner stopped before it could pass it on
                if got.get(seq, float("inf")) > due:
                    late = got.get(seq)
                    others = ", ".join(f"{name} {r - t:.1f} s"
                                       for name, r in sorted(first.get((f.match_id, seq), [])))
                    v.stalls.append(
                        f"{who} on {c.node}: seq {seq} of {t:.1f} "
                        + (f"after {late - t:.1f} s" if late is not None else "never came")
                        + f" (each connection: {others})")
    v.refusals = dict(refusals)
    v.closes = dict(closes)
    v.reasons = dict(reasons)
    return v


def _story(who: str, c: Any) -> str:
    """A connection's life, to find a repeat's cause: when it opened, was welcomed, began to
    follow and closed, each event by seq with its arrival, and every other message it got
    (type, match, ref), all in seconds since it opened."""
    def rel(t: float | None) -> str:
        return "-" if t is None else f"{t - c.opened:.3f}"

    got = sorted([(r.t, f"{r.seq}") for r in c.events]
                 + [(t, f"<{kind} {mid or ''} ref={ref}>") for t, kind, mid, ref in c.notes])
    return (f"{who} on {c.node}: opened at {c.opened:.3f}, welcomed {rel(c.welcomed)}, "
            f"following {rel(c.following_since)}, closed {rel(c.closed)} ({c.code}); got "
            + " ".join(f"{rel(t)}:{what}" for t, what in got))


def parse_log(rows: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """``SELECT match_id, seq, body FROM events ORDER BY match_id, seq`` rows, as logs."""
    logs: dict[str, list[dict[str, Any]]] = {}
    for mid, seq, body in rows:
        e = json.loads(body) if isinstance(body, str | bytes) else dict(body)
        e["seq"] = int(seq)
        logs.setdefault(mid, []).append(e)
    return logs
