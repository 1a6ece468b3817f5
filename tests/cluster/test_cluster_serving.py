"""Follows of a client of another node, in isolation (issue 33): at the owner
(server/cluster/serving.py) the follows of one client for one match are served one at a time,
each marker tagged with its own follow's generation; at the client's node
(server/cluster/answers.py) an untagged ``match`` for a match the connection was sent to its
end is not taken for a new match.

The fault harness's one-round form found a player's connection sent its whole match a second
time: re-attachments piled up at the owner during a cut from the broker, and one was served
beside another. Its marker then went out untagged, and the client's node, whose subscription
had ended with the match, took it for a new match's ``match`` message: a subscription from
seq 0, a gap at the next event, a replay from seq 1 (docs/cluster.md "Status").
"""

from __future__ import annotations

import asyncio
from typing import Any

from server.cluster.forwarding import Forwarding
from server.cluster.serving import Serving
from server.cluster.wire import Act, Deliver, Detach, Dropped, Follow, Followed, Message


class ReadingArena:
    """An arena whose follows each wait for the test to finish their read of the log."""

    def __init__(self) -> None:
        self.live: dict[str, Any] = {}
        self.reads: list[asyncio.Event] = []
        self.reading = 0
        self.most = 0  # the most follows in progress at once

    def is_live(self, match_id: str) -> bool:
        return True

    def moved_away(self, match_id: str) -> bool:
        return False

    async def follow(self, conn: Any, match_id: str, viewer: Any, cursor: int, *,
                     announce: bool, ref: Any = None) -> None:
        self.reading += 1
        self.most = max(self.most, self.reading)
        read = asyncio.Event()
        self.reads.append(read)
        await read.wait()
        self.reading -= 1
        conn.send({"type": "match", "match_id": match_id, "seat": 1, "ref": ref})


async def _settle() -> None:
    for _ in range(20):  # every task runs as far as it can
        await asyncio.sleep(0)


async def test_the_follows_of_one_client_and_match_are_served_one_at_a_time() -> None:
    arena = ReadingArena()
    out: list[Message] = []
    serving = Serving("c", arena, lambda node, item: out.append(item))  # type: ignore[arg-type]

    def follow(gen: int) -> None:
        serving.handle("a", Follow("r.1", "bob", "m1", 1, 19, True, None, gen))

    follow(1)
    follow(2)  # waits for the first
    await _settle()
    assert len(arena.reads) == 1
    arena.reads[0].set()  # the first ends; the second starts
    await _settle()
    follow(3)  # arrives while the second is served: waits for it
    await _settle()
    assert arena.most == 1 and len(arena.reads) == 2
    for i in (1, 2):
        arena.reads[i].set()
        await _settle()
    assert arena.most == 1
    markers = [i.msg for i in out if isinstance(i, Deliver)]
    assert [m.get("_gen") for m in markers] == [1, 2, 3]  # each its own follow's
    assert [i.gen for i in out if isinstance(i, Followed)] == [1, 2, 3]
    stand_in = serving.standins[("a", "r.1")]
    assert stand_in.following == {} and stand_in.locks == {}  # nothing left behind


class EndedConn:
    """A connection of the client's node that was sent match m1 to its end."""

    player = "bob"
    closing = False

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.matches: list[str] = []
        self.spectating: list[str] = []

    def send(self, msg: dict[str, Any]) -> None:
        self.sent.append(msg)

    def has_seen_end(self, match_id: str) -> bool:
        return match_id == "m1"


def test_a_late_untagged_match_message_for_a_match_seen_to_its_end_is_dropped() -> None:
    out: list[tuple[str, Message]] = []
    fw = Forwarding("a", "run", lambda: 1, lambda node, item: out.append((node, item)),
                    lambda match_id, then: then(("c", 1)), lambda: True)
    bob = EndedConn()
    cid = fw.cid(bob)  # type: ignore[arg-type]
    marker = {"type": "match", "match_id": "m1", "seat": 1, "opponent": "ann"}
    fw.received("c", 1, Deliver(cid, marker))
    fw.received("c", 1, Deliver(cid, {"type": "event", "match_id": "m1", "seq": 20,
                                      "kind": "guess", "seat": 1}))
    # no new subscription from seq 0 (whose gap would replay the whole match), nothing sent
    assert bob.sent == [] and fw.following(bob, "m1") is None and out == []  # type: ignore[arg-type]
    # a match it has not seen is a new match, as before: followed from its start
    fw.received("c", 1, Deliver(cid, {**marker, "match_id": "m2"}))
    assert bob.sent[-1]["match_id"] == "m2" and fw.following(bob, "m2") is not None  # type: ignore[arg-type]


class CommittingArena:
    """An arena that takes moves and never finishes committing them (their events are in no
    replay yet), and answers follows at once."""

    def __init__(self) -> None:
        self.live: dict[str, Any] = {}
        self.moves: list[dict[str, Any]] = []

    def is_live(self, match_id: str) -> bool:
        return True

    def act(self, conn: Any, msg: dict[str, Any]) -> None:
        self.moves.append(msg)

    def detach(self, conn: Any) -> None:
        pass

    async def follow(self, conn: Any, match_id: str, viewer: Any, cursor: int, *,
                     announce: bool, ref: Any = None) -> None:
        conn.send({"type": "match", "match_id": match_id, "seat": 0, "ref": ref})


async def test_moves_received_from_a_node_that_only_looked_dead_are_still_seen() -> None:
    """ann's node a lost its lease for a moment: this node took her match over, received her
    guess (its commit still in flight), then dropped her stand-in as a's lease ran out. When a
    re-attaches her, the follow's answer still lists that guess as received, so a does not
    send it again as never applied. Before, the new stand-in listed nothing, a resent the
    guess, and it was played twice (tests/cluster/test_cluster_moving.py, ``fenced``, once
    in ~100 runs on a busy machine)."""
    arena = CommittingArena()
    out: list[tuple[str, Message]] = []
    serving = Serving("b", arena, lambda node, item: out.append((node, item)))  # type: ignore[arg-type]
    guess = {"type": "guess", "match_id": "m1", "guess": "6789", "id": 8}
    serving.handle("a", Act("r.1", "ann", guess))
    assert arena.moves == [guess]
    serving.origin_gone("a")
    assert ("a", Dropped("r.1")) in out and ("a", "r.1") not in serving.standins

    serving.handle("a", Follow("r.1", "ann", "m1", 0, 6, False, None, 3))  # a re-attaches her
    await _settle()
    assert [i.seen for _, i in out if isinstance(i, Followed) and i.gen == 3] == [[8]]
    assert arena.moves == [guess]  # nothing played again here either


async def test_a_client_gone_from_its_node_or_another_player_inherits_no_moves() -> None:
    """What a dropped stand-in received is kept only for the same client of the same node:
    once that client is gone (its node's detach), or the id names another player, a new
    stand-in starts with nothing received."""
    out: list[tuple[str, Message]] = []
    serving = Serving("b", CommittingArena(), lambda node, item: out.append((node, item)))  # type: ignore[arg-type]

    async def seen(player: str, gen: int) -> list[Any]:
        serving.handle("a", Follow("r.1", player, "m1", 0, 6, False, None, gen))
        await _settle()
        return next(i.seen for _, i in out if isinstance(i, Followed) and i.gen == gen)

    serving.handle("a", Act("r.1", "ann", {"type": "guess", "match_id": "m1", "id": 8}))
    serving.origin_gone("a")
    assert await seen("cat", 1) == []  # another player: not hers
    serving.handle("a", Act("r.1", "ann", {"type": "guess", "match_id": "m1", "id": 9}))
    serving.origin_gone("a")
    serving.handle("a", Detach("r.1", False))
    assert await seen("ann", 2) == []
