"""The cluster's parts in isolation: the wire, the transport's order and loss detection, the
client-side subscriptions (cursors, re-attachment, acknowledgements) and the owner side.

The end-to-end behaviour (real nodes, broker, PostgreSQL) is in the other tests of
tests/cluster/; these pin the rules whose failure would only show there as a rare lost,
repeated or reordered event.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import msgpack
import pytest

from moo.rules import DEFAULT_RULES
from server.cluster.answers import RESEND_MAX
from server.cluster.directory import MOVING, Placement
from server.cluster.forwarding import Forwarding
from server.cluster.pairings import Creates, PairingWatch
from server.cluster.transport import Transport
from server.cluster.wire import (
    VERSION,
    Act,
    Adopted,
    Close,
    Create,
    Deliver,
    Detach,
    Dropped,
    Envelope,
    Follow,
    Followed,
    Gone,
    LobbyCall,
    LobbyState,
    Message,
    NotHere,
    Tick,
    Unwatch,
    WireError,
    decode,
    encode,
    item_list,
)
from server.lobby import Waiting

# -- the wire ---------------------------------------------------------------------------------

SAMPLES: list[Message] = [
    Act("r.1", "ann", {"type": "guess", "match_id": "m1", "guess": "0123", "id": 4}),
    Follow("r.1", "ann", "m1", 0, 3, True, 7, 2),
    Follow("r.1", "ann", "m1", "spectator", 0, False, None, 1),
    Unwatch("r.1", "m1"),
    Detach("r.1", True),
    Deliver("r.1", {"type": "event", "match_id": "m1", "seq": 4, "kind": "away", "seat": 1}),
    Close("r.1", 1012, "resume"),
    Followed("r.1", "m1", 2, 9, [4, 5], None),
    NotHere("r.1", "m1", item_list(Unwatch("r.1", "m1"))),
    Dropped("r.1"),
    LobbyCall("r.1", "ann", "queue", {"type": "queue", "pool": "any"}, "m9"),
    LobbyState("r.1", {"challenges": [], "rooms": [], "queue": None, "wishes": ["m1"]}),
    Create(["ann", "bob"], [["a", "r.1", "ann"], None], "free", [None, "random"], [3, None],
           True, None, False),
    # a seating request sent again to a new leader, and the match of a request_id
    LobbyCall("r.1", "ann", "room_join",
              {"type": "room_join", "code": "ABCDEF", "request_id": "j1"}, None, True),
    Create(["ann", "bob"], [["a", "r.1", "ann"], ["b", "r.2", "bob"]], None, [None, None],
           [None, 5], True, None, False, None,
           ["m0123456789ab", [{"player": "bob", "request_id": "j1", "body": "f" * 32}]]),
    # a queue pairing's request sent again by the leader, to epoch 4 of its node
    Create(["ann", "bob"], [["b", "r.2", "bob"], ["a", "r.1", "ann"]], "free", [None, None],
           [None, None], True, None, False, None, ["m0123456789ac", []], 4),
    Adopted("b", 3, ["m1", "m2"]),
    Tick({"a": 5}),
    Gone("b", "r", 2),
]


def test_every_message_survives_the_wire() -> None:
    payload = encode(Envelope("a", "run1", 4, 17, SAMPLES))
    envelope, errors = decode(payload)
    assert errors == []
    assert (envelope.node, envelope.run, envelope.epoch, envelope.n) == ("a", "run1", 4, 17)
    assert envelope.items == SAMPLES


def test_another_version_or_garbage_is_refused_never_crashes() -> None:
    good = msgpack.unpackb(encode(Envelope("a", "r", 1, 1, [Dropped("c")])))
    with pytest.raises(WireError, match="wire version"):
        decode(msgpack.packb([VERSION + 1, *good[1:]]))
    for bad in (b"\xc1", msgpack.packb({"x": 1}), msgpack.packb([VERSION, "a"]),
                msgpack.packb([VERSION, 1, "r", 1, 1, []])):
        with pytest.raises(WireError):
            decode(bad)
    # one bad item costs only itself
    envelope, errors = decode(msgpack.packb([VERSION, "a", "r", 1, 1,
                                             [[99, 1], [Dropped.TAG], [Dropped.TAG, "c"]]]))
    assert envelope.items == [Dropped("c")] and len(errors) == 2


# -- the transport ------------------------------------------------------------------------------


class FakeInfo:
    def __init__(self) -> None:
        self.acked = False
        self.failed = False

    def is_published(self) -> bool:
        if self.failed:  # as paho for a publish that failed (e.g. no connection)
            raise RuntimeError("Message publish failed")
        return self.acked


class FakeClient:
    """Records what the transport hands to the MQTT client, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Envelope, FakeInfo]] = []
        self.written = 0

    def publish_now(self, topic: str, payload: bytes) -> FakeInfo:
        info = FakeInfo()
        self.sent.append((topic, decode(payload)[0], info))
        return info

    def write_now(self) -> None:
        self.written = len(self.sent)


class Recorder:
    def __init__(self) -> None:
        self.items: list[tuple[str, int, Message]] = []
        self.losses: list[str | None] = []
        self.deaths: list[tuple[str, int | None]] = []
        self.backs: list[str] = []

    def received(self, sender: str, epoch: int, items: list[Message]) -> None:
        self.items.extend((sender, epoch, i) for i in items)

    def lost(self, sender: str | None) -> None:
        self.losses.append(sender)

    def connected(self) -> None:
        pass

    def heard(self, sender: str, epoch: int) -> None:
        pass

    def back(self, sender: str) -> None:
        self.backs.append(sender)

    def gone(self, node: str, run: str, epoch: int | None) -> None:
        self.deaths.append((node, epoch))


def _transport(node: str = "a") -> tuple[Transport, Recorder, FakeClient]:
    rec = Recorder()
    t = Transport("mqtt://127.0.0.1:1", node, rec, lambda: 3)
    client = FakeClient()
    t._client = client  # type: ignore[assignment]
    return t, rec, client


async def test_one_turns_items_go_out_as_one_envelope_per_node_in_order() -> None:
    t, _, client = _transport()
    for i in range(3):
        t.send("b", Unwatch(f"c{i}", "m"))
    t.send("c", Dropped("x"))
    t.broadcast(Adopted("a", 3, ["m"]))
    assert client.sent == []  # nothing before the end of the turn
    await asyncio.sleep(0)
    topics = [topic for topic, _, _ in client.sent]
    assert topics == ["moo-cluster/v1/node/b", "moo-cluster/v1/node/c", "moo-cluster/v1/all"]
    first = client.sent[0][1]
    assert [i.conn for i in first.items] == ["c0", "c1", "c2"]  # type: ignore[attr-defined]
    assert (first.node, first.epoch, first.n) == ("a", 3, 1)
    assert client.written == 3  # written in the same turn, after the last of them
    t.send("b", Dropped("y"))
    await asyncio.sleep(0)
    assert client.sent[3][1].n == 2  # numbered per destination


async def test_what_the_broker_did_not_acknowledge_is_kept_in_order() -> None:
    t, _, client = _transport()
    for i in range(4):
        t.send("b", Dropped(str(i)))
        await asyncio.sleep(0)
    client.sent[0][2].acked = True
    client.sent[1][2].acked = True
    t.send("b", Dropped("4"))
    await asyncio.sleep(0)
    kept = [decode(p)[0].items[0].conn for _, _, p, _ in t._unacked]  # type: ignore[attr-defined]
    assert kept == ["2", "3", "4"]  # acknowledged ones at the head are forgotten
    client.sent[2][2].failed = True
    t._client = None  # no session: kept to be published in the next one
    t.send("b", Dropped("5"))
    await asyncio.sleep(0)
    kept = [decode(p)[0].items[0].conn for _, _, p, _ in t._unacked]  # type: ignore[attr-defined]
    assert kept == ["2", "3", "4", "5"]


def test_repeats_are_dropped_and_gaps_reported_per_sending_process() -> None:
    t, rec, _ = _transport("b")

    def env(run: str, n: int, conn: str) -> bytes:
        return encode(Envelope("a", run, 1, n, [Dropped(conn)]))

    for n in (1, 2, 2, 3):  # 2 published again after a reconnect: handled once
        t._handle("moo-cluster/v1/node/b", env("x", n, str(n)))
    assert [i.conn for _, _, i in rec.items] == ["1", "2", "3"]  # type: ignore[attr-defined]
    assert rec.losses == []
    t._handle("moo-cluster/v1/node/b", env("x", 5, "5"))  # 4 was lost
    assert rec.losses == ["a"]
    t._handle("moo-cluster/v1/node/b", env("y", 9, "9"))  # a new process of a: no history
    assert rec.losses == ["a"]
    # a tick says 7 were sent by run y: the last ones were lost, nothing else would tell
    t._handle("moo-cluster/v1/all", encode(Envelope("a", "y", 1, 1, [Tick({"b": 11})])))
    assert rec.losses == ["a", "a"]
    t._handle("moo-cluster/v1/all", encode(Envelope("a", "y", 1, 2, [Tick({"b": 11})])))
    assert rec.losses == ["a", "a"]  # reported once per count
    # each tick also says that a is back on the bus (what b sent it meanwhile is lost)
    assert rec.backs == ["a", "a"]


def test_a_bad_message_is_logged_and_refused(caplog: pytest.LogCaptureFixture) -> None:
    t, rec, _ = _transport("b")
    with caplog.at_level(logging.ERROR, logger="moo.cluster"):
        t._handle("moo-cluster/v1/node/b", msgpack.packb([VERSION + 1, "a", "r", 1, 1, []]))
    assert rec.items == [] and "wire version" in caplog.text


def test_a_will_reports_the_dead_node_and_its_epoch() -> None:
    t, rec, _ = _transport("b")
    t._handle("moo-cluster/v1/gone/a", encode(Envelope("a", "r", 4, 0, [Gone("a", "r", 4)])))
    assert rec.deaths == [("a", 4)]


# -- the client side: subscriptions ---------------------------------------------------------------


class FakeConn:
    def __init__(self, player: str = "ann") -> None:
        self.player = player
        self.sent: list[dict[str, Any]] = []
        self.closed: tuple[int, str] | None = None
        self.closing = False
        self.matches: list[str] = []
        self.spectating: list[str] = []

        self.ended: set[str] = set()

    def send(self, msg: dict[str, Any]) -> None:
        self.sent.append(msg)

    def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)
        self.closing = True

    def saw_end(self, match_id: str) -> None:
        self.ended.add(match_id)

    def has_seen_end(self, match_id: str) -> bool:
        return match_id in self.ended

    async def welcome_done(self) -> None:
        return None


class Net:
    """Forwarding with a recorded outbox and a directory that answers at once."""

    def __init__(self, placement: Placement = ("b", 1)) -> None:
        self.out: list[tuple[str, Message]] = []
        self.placement = placement
        #: whether the bus is up, as the forwarding asks it
        self.up = True
        self.fw = Forwarding("a", "run", lambda: 1, self.send, self.locate, lambda: self.up)

    def send(self, node: str, item: Message) -> None:
        self.out.append((node, item))

    def locate(self, match_id: str, then: Callable[[Placement], None]) -> None:
        then(self.placement)

    def follows(self) -> list[Follow]:
        return [i for _, i in self.out if isinstance(i, Follow)]

    def deliver(self, cid: str, msg: dict[str, Any], sender: str = "b", epoch: int = 1) -> None:
        self.fw.received(sender, epoch, Deliver(cid, msg))


def _event(seq: int, kind: str = "away", **more: Any) -> dict[str, Any]:
    return {"type": "event", "match_id": "m1", "seq": seq, "kind": kind, **more}


def _marker(gen: int) -> dict[str, Any]:
    return {"type": "match", "match_id": "m1", "seat": 0, "opponent": "bob", "_gen": gen}


def _attached(net: Net, conn: FakeConn, cursor: int = 0) -> str:
    """A subscription of ``conn`` to m1 at owner b, with its follow answered."""
    net.fw.follow(conn, "m1", 0, cursor, announce=False)  # type: ignore[arg-type]
    cid = net.fw.cid(conn)  # type: ignore[arg-type]
    gen = net.follows()[-1].gen
    net.deliver(cid, _marker(gen))
    net.fw.received("b", 1, Followed(cid, "m1", gen, cursor))
    return cid


def test_events_are_delivered_once_in_order_and_gaps_reattach_from_the_cursor() -> None:
    net, ann = Net(), FakeConn()
    cid = _attached(net, ann, cursor=3)
    assert ann.sent == []  # a quiet re-attachment: its marker is not for the client
    for seq in (4, 5, 5, 3, 6):  # repeats (a replay overlapping) are dropped
        net.deliver(cid, _event(seq))
    assert [m["seq"] for m in ann.sent] == [4, 5, 6]
    net.deliver(cid, _event(9))  # 7 and 8 were lost on the way
    assert [m["seq"] for m in ann.sent] == [4, 5, 6]  # never out of order
    follow = net.follows()[-1]
    assert follow.cursor == 6 and follow.announce is False
    net.deliver(cid, _event(10))  # still joining: dropped, the replay covers it
    net.deliver(cid, _marker(follow.gen))
    for seq in (7, 8, 9, 10):
        net.deliver(cid, _event(seq))
    assert [m["seq"] for m in ann.sent] == [4, 5, 6, 7, 8, 9, 10]


def test_a_former_owner_is_not_heard_and_a_takeover_reattaches() -> None:
    net, ann = Net(), FakeConn()
    cid = _attached(net, ann)
    net.deliver(cid, _event(1, "created"))
    net.fw.moved("m1", ("c", 1))  # c took the match over (its Adopted)
    follow = net.follows()[-1]
    assert net.out[-1][0] == "c" and follow.cursor == 1
    net.deliver(cid, _event(2), sender="b")  # the old owner, late: ignored
    net.deliver(cid, _marker(follow.gen), sender="c")
    net.deliver(cid, _event(2, "resumed"), sender="c")
    assert [(m["seq"], m["kind"]) for m in ann.sent] == [(1, "created"), (2, "resumed")]


def test_an_owner_that_takes_its_match_back_is_followed_again() -> None:
    """An adoption is a new run of the match, from its log: whatever served a subscription
    at that owner before went when the match left it, so an adoption by the very owner the
    subscription is attached to re-attaches it all the same; any other word that the match
    runs where it is followed already changes nothing."""
    net, carl = Net(), FakeConn()
    cid = _attached(net, carl, cursor=4)
    before = len(net.follows())
    net.fw.moved("m1", ("b", 1))
    assert len(net.follows()) == before
    net.fw.moved("m1", ("b", 1), adopted=True)
    follow = net.follows()[-1]
    assert len(net.follows()) == before + 1 and net.out[-1][0] == "b"
    assert (follow.conn, follow.cursor, follow.announce) == (cid, 4, False)


def test_what_waits_on_an_owner_that_comes_back_is_sent_again_at_once() -> None:
    net, ann, bob = Net(), FakeConn(), FakeConn()
    cid = _attached(net, ann, cursor=5)
    _attached(net, bob, cursor=2)
    net.fw.act(ann, {"type": "guess", "match_id": "m1", "guess": "0123", "id": 8})  # type: ignore[arg-type]
    before = len(net.follows())
    net.fw.retry_pending("c")  # another node: nothing of b's is touched
    assert len(net.follows()) == before
    net.fw.retry_pending("b")  # b was cut from the broker: the move may be lost there
    again = net.follows()[before:]
    # ann's, from her cursor; bob waits for nothing and is not followed again
    assert [(node, f.conn, f.cursor) for node, f in net.out[-1:] if isinstance(f, Follow)] == [
        ("b", cid, 5)]
    assert [f.conn for f in again] == [cid]


def test_a_replayed_acknowledgement_gets_its_ref_back() -> None:
    net, ann = Net(), FakeConn()
    cid = _attached(net, ann, cursor=5)
    net.fw.act(ann, {"type": "guess", "match_id": "m1", "guess": "0123", "id": 8})  # type: ignore[arg-type]
    assert isinstance(net.out[-1][1], Act)
    net.fw.lost("b")  # the owner's messages may be lost: re-attach from the cursor
    follow = net.follows()[-1]
    net.deliver(cid, _marker(follow.gen))
    # the log has the guess (it was committed) but a replay carries no ref: it gets 8 back
    net.deliver(cid, _event(6, "guess", seat=1, guess="0123"))  # the opponent's: no ref
    net.deliver(cid, _event(7, "guess", seat=0, guess="0123"))
    assert "ref" not in ann.sent[0] and ann.sent[1]["ref"] == 8
    net.fw.received("b", 1, Followed(cid, "m1", follow.gen, 7, [8]))
    assert len(ann.sent) == 2  # nothing refused


def _acts(net: Net, node: str) -> list[dict[str, Any]]:
    return [i.msg for n, i in net.out if n == node and isinstance(i, Act)]


def test_a_move_the_new_owner_never_saw_is_sent_to_it_again() -> None:
    """The owner that took the match over replayed its whole log and never got the move:
    it was not applied, so it goes to that owner at once (no "try again" and the client's
    wait), and its event there is the answer, with the move's ref."""
    net, ann = Net(), FakeConn()
    cid = _attached(net, ann, cursor=5)
    guess = {"type": "guess", "match_id": "m1", "guess": "0123", "id": 8}
    net.fw.act(ann, guess)  # type: ignore[arg-type]
    net.fw.owner_gone("b", 1)  # b died with it
    net.fw.moved("m1", ("c", 1))
    follow = net.follows()[-1]
    net.deliver(cid, _marker(follow.gen), sender="c")
    net.deliver(cid, _event(6, "resumed"), sender="c")
    net.fw.received("c", 1, Followed(cid, "m1", follow.gen, 6, []))
    assert _acts(net, "c") == [guess]  # sent again, to the new owner
    assert all(m["type"] != "error" for m in ann.sent)
    net.deliver(cid, _event(7, "guess", seat=0, guess="0123", ref=8), sender="c")
    assert ann.sent[-1]["ref"] == 8 and ann.sent[-1]["seq"] == 7
    assert not net.fw.following(ann, "m1").acts  # type: ignore[arg-type, union-attr]


def test_a_move_the_new_owner_never_saw_is_refused_as_try_again() -> None:
    """Sent again RESEND_MAX times and still not received: the client is told "try again"."""
    net, ann = Net(), FakeConn()
    cid = _attached(net, ann, cursor=5)
    net.fw.act(ann, {"type": "guess", "match_id": "m1", "guess": "0123", "id": 8})  # type: ignore[arg-type]
    net.fw.owner_gone("b", 1)  # b died with it
    net.fw.moved("m1", ("c", 1))
    for _ in range(RESEND_MAX + 1):
        follow = net.follows()[-1]
        net.deliver(cid, _marker(follow.gen), sender="c")
        net.fw.received("c", 1, Followed(cid, "m1", follow.gen, 6, []))
        net.fw.lost("c")  # (its messages lost again)
    assert len(_acts(net, "c")) == RESEND_MAX
    refusal = ann.sent[-1]
    assert refusal["type"] == "error" and refusal["code"] == "not_available"
    assert refusal["ref"] == 8 and "try again" in refusal["message"]
    # the dead owner's answer, had it come: not a second one
    net.deliver(cid, {**refusal, "code": "storage_unavailable"}, sender="b")
    assert len(_answers(ann, 8)) == 1


def test_a_handed_over_move_refused_where_it_was_is_withdrawn_only_while_the_bus_is_down(
) -> None:
    """ann's guess 8 was in flight on this node when the match left it: her seat follows the
    match at b with the guess pending, for b's answer to settle. The commit here is then
    refused by the fence, so the guess was applied nowhere. With the bus up, b's answer
    settles it (b plays it); with the bus down nothing reaches b, so it is withdrawn and this
    node refuses it -- unless it went to b already, whose answer then counts."""
    net, ann = Net(), FakeConn()
    guess = {"type": "guess", "match_id": "m1", "guess": "0123", "id": 8}
    net.fw.follow(ann, "m1", 0, 5, announce=False, pending=[guess])  # type: ignore[arg-type]
    cid = net.fw.cid(ann)  # type: ignore[arg-type]
    assert not net.fw.recall(ann, "m1", 8)  # the bus is up: it stays for b
    net.up = False
    assert not net.fw.recall(ann, "m1", 9)  # not a move of hers
    assert not net.fw.recall(ann, "m2", 8)  # not a match she follows
    assert net.fw.recall(ann, "m1", 8)
    assert not net.fw.recall(ann, "m1", 8)  # once
    # b's answer to the follow, when the bus is back, finds nothing to send it again
    net.up = True
    follow = net.follows()[-1]
    net.deliver(cid, _marker(follow.gen))
    net.fw.received("b", 1, Followed(cid, "m1", follow.gen, 5, []))
    assert _acts(net, "b") == [] and ann.sent == []

    # passed on to b already (b's answer showed it did not have it): b's answer counts
    net2, bob = Net(), FakeConn()
    net2.fw.follow(bob, "m1", 1, 5, announce=False, pending=[guess])  # type: ignore[arg-type]
    cid2 = net2.fw.cid(bob)  # type: ignore[arg-type]
    follow = net2.follows()[-1]
    net2.deliver(cid2, _marker(follow.gen))
    net2.fw.received("b", 1, Followed(cid2, "m1", follow.gen, 5, []))
    assert _acts(net2, "b") == [guess]
    net2.up = False
    assert not net2.fw.recall(bob, "m1", 8)
    assert [a.ref for a in net2.fw.following(bob, "m1").acts] == [8]  # type: ignore[arg-type, union-attr]


def _answers(conn: FakeConn, ref: Any) -> list[dict[str, Any]]:
    return [m for m in conn.sent if m.get("ref") == ref]


def _moved_from_paused_owner(net: Net, ann: FakeConn) -> str:
    """ann's guess 8 went to b, which was paused past its lease; c took the match over and,
    never having had the guess, got it again from ann's node."""
    cid = _attached(net, ann, cursor=5)
    net.fw.act(ann, {"type": "guess", "match_id": "m1", "guess": "0123", "id": 8})  # type: ignore[arg-type]
    net.fw.moved("m1", ("c", 1))
    follow = net.follows()[-1]
    net.deliver(cid, _marker(follow.gen), sender="c")
    net.deliver(cid, _event(6, "resumed"), sender="c")
    net.fw.received("c", 1, Followed(cid, "m1", follow.gen, 6, []))
    assert len(_acts(net, "c")) == 1
    return cid


def test_a_late_refusal_from_a_former_owner_is_not_a_second_answer() -> None:
    """Issue 31, "one request, two answers": the paused owner wakes, reads the guess it was
    sent before it lost the match and refuses it (its commit is fenced) after the new owner
    answered it. The client gets one answer: the new owner's."""
    net, ann = Net(), FakeConn()
    cid = _moved_from_paused_owner(net, ann)
    net.deliver(cid, _event(7, "guess", seat=0, guess="0123", ref=8), sender="c")
    late = {"type": "error", "code": "storage_unavailable", "message": "try again",
            "ref": 8, "match_id": "m1"}
    net.deliver(cid, late, sender="b")
    assert [m["type"] for m in _answers(ann, 8)] == ["event"]


def test_a_former_owners_refusal_before_the_answer_is_not_passed_on() -> None:
    """The same refusal arriving first: the move is with the new owner now, whose answer is
    the one that counts."""
    net, ann = Net(), FakeConn()
    cid = _moved_from_paused_owner(net, ann)
    late = {"type": "error", "code": "storage_unavailable", "message": "try again",
            "ref": 8, "match_id": "m1"}
    net.deliver(cid, late, sender="b")
    assert _answers(ann, 8) == []
    net.deliver(cid, _event(7, "guess", seat=0, guess="0123", ref=8), sender="c")
    assert [m["type"] for m in _answers(ann, 8)] == ["event"]


def test_a_moves_ref_is_on_one_event_only() -> None:
    """A move acknowledged by its event replayed from the log: a later event carrying the
    same ref is delivered without it (one answer per request)."""
    net, ann = Net(), FakeConn()
    cid = _attached(net, ann, cursor=5)
    net.fw.act(ann, {"type": "guess", "match_id": "m1", "guess": "0123", "id": 8})  # type: ignore[arg-type]
    net.fw.lost(None)
    follow = net.follows()[-1]
    net.deliver(cid, _marker(follow.gen))
    net.deliver(cid, _event(6, "guess", seat=0, guess="0123"))  # replayed: gets ref 8
    net.deliver(cid, _event(7, "guess", seat=0, guess="0123", ref=8))
    assert [m["seq"] for m in _answers(ann, 8)] == [6]
    assert [m["seq"] for m in ann.sent if m["type"] == "event"] == [6, 7]


def test_a_move_the_owner_has_is_waited_for() -> None:
    net, ann = Net(), FakeConn()
    cid = _attached(net, ann, cursor=5)
    net.fw.act(ann, {"type": "guess", "match_id": "m1", "guess": "0123", "id": 8})  # type: ignore[arg-type]
    net.fw.lost(None)
    follow = net.follows()[-1]
    net.deliver(cid, _marker(follow.gen))
    net.fw.received("b", 1, Followed(cid, "m1", follow.gen, 5, [8]))  # received, committing
    assert ann.sent == []
    net.deliver(cid, _event(6, "guess", seat=0, guess="0123", ref=8))
    assert ann.sent[-1]["ref"] == 8


def test_a_move_the_owner_has_but_answers_slowly_is_not_reattached_at_every_check() -> None:
    """A move unanswered for long makes its subscription re-attach, and the owner says it has
    the move (its commit is slow). The next checks wait twice as long each time before asking
    again; before, every periodic check re-attached, each replay over the slow link
    overtaking the last, and the seats heard their events seconds late."""
    net, ann = Net(), FakeConn()
    cid = _attached(net, ann, cursor=5)
    net.fw.act(ann, {"type": "guess", "match_id": "m1", "guess": "0123", "id": 8})  # type: ignore[arg-type]
    sub = net.fw.following(ann, "m1")  # type: ignore[arg-type]
    assert sub is not None

    def answer_follow() -> None:
        follow = net.follows()[-1]
        net.deliver(cid, _marker(follow.gen))
        net.fw.received("b", 1, Followed(cid, "m1", follow.gen, 5, [8]))  # has it

    def age(seconds: float) -> None:
        sub.acts[0].asked -= seconds

    before = len(net.follows())
    age(2.5)  # unanswered past the patience: re-attaches
    net.fw.check({"m1": ("b", 1)})
    assert len(net.follows()) == before + 1
    answer_follow()
    age(2.5)  # the next check, a little later: past the first patience, not the doubled one
    net.fw.check({"m1": ("b", 1)})
    assert len(net.follows()) == before + 1
    age(2.0)  # past twice the patience: asks again
    net.fw.check({"m1": ("b", 1)})
    assert len(net.follows()) == before + 2
    answer_follow()
    net.deliver(cid, _event(6, "guess", seat=0, guess="0123", ref=8))
    assert ann.sent[-1]["ref"] == 8 and sub.acts == type(sub.acts)()


def test_the_clients_own_resume_is_answered_even_if_overtaken() -> None:
    net, ann = Net(), FakeConn()
    net.fw.follow(ann, "m1", None, 0, announce=True, ref=3)  # type: ignore[arg-type]
    cid = net.fw.cid(ann)  # type: ignore[arg-type]
    first = net.follows()[-1]
    net.fw.lost("b")  # a second follow before the first was answered
    second = net.follows()[-1]
    net.deliver(cid, {**_marker(first.gen), "ref": 3})
    for seq in (1, 2):  # the first follow's replay: dropped, the second one's covers it
        net.deliver(cid, _event(seq))
    net.deliver(cid, _marker(second.gen))
    for seq in (1, 2):
        net.deliver(cid, _event(seq))
    assert [m.get("ref") for m in ann.sent if m["type"] == "match"] == [3]
    assert all("_gen" not in m for m in ann.sent)
    assert [m["seq"] for m in ann.sent if m["type"] == "event"] == [1, 2]


def test_a_dropped_stand_in_makes_the_client_reattach() -> None:
    net, ann = Net(), FakeConn()
    cid = _attached(net, ann, cursor=2)
    before = len(net.follows())
    net.fw.received("b", 1, Dropped(cid))
    assert len(net.follows()) == before + 1 and net.follows()[-1].cursor == 2


def test_nobody_to_follow_for_long_closes_the_client_to_resume() -> None:
    net, ann = Net(placement=MOVING), FakeConn()
    net.fw.follow(ann, "m1", 0, 4, announce=False)  # type: ignore[arg-type]
    sub = net.fw.following(ann, "m1")  # type: ignore[arg-type]
    assert sub is not None and sub.owner is None
    sub.orphaned -= 3600  # (as if an hour had passed)
    net.fw.check({})
    assert ann.closed is not None and ann.closed[0] == 1012


def test_the_clients_resume_is_answered_by_the_new_owner_after_a_takeover() -> None:
    net, ann = Net(), FakeConn()
    net.fw.follow(ann, "m1", None, 0, announce=True, ref=3)  # type: ignore[arg-type]
    cid = net.fw.cid(ann)  # type: ignore[arg-type]
    net.fw.owner_gone("b", 1)  # b died before it answered
    net.fw.moved("m1", ("c", 1))
    follow = net.follows()[-1]
    assert net.out[-1][0] == "c" and follow.announce and follow.ref == 3
    net.deliver(cid, {**_marker(follow.gen), "ref": 3}, sender="c")
    assert [m.get("ref") for m in ann.sent if m["type"] == "match"] == [3]
    net.fw.lost("c")  # answered: a later re-attachment is quiet again
    assert net.follows()[-1].announce is False


class SlowNet(Net):
    """:class:`Net` whose directory answers only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[Callable[[Placement], None]] = []

    def locate(self, match_id: str, then: Callable[[Placement], None]) -> None:
        self.pending.append(then)

    def answer(self) -> None:
        for then in self.pending:
            then(self.placement)
        self.pending.clear()


def test_a_watch_overtaken_by_its_own_reattachment_is_answered_once() -> None:
    """The fault harness saw a ``watch`` answered by two ``watching`` replies 1-40 ms apart
    (issue 31), once before any fault. The cause: a watch waiting for the directory (its
    owner not known yet) is carried on by a re-attachment (the periodic check learns the
    owner first) that reaches the owner before the watch's own follow, which the directory's
    answer sends after it; the owner answers both, and both markers carried the client's ref.
    The request is answered once: by whichever marker comes first."""
    net, ann = SlowNet(), FakeConn()
    net.fw.follow(ann, "m1", "spectator", 0, announce=True, ref=7)  # type: ignore[arg-type]
    cid = net.fw.cid(ann)  # type: ignore[arg-type]
    assert net.follows() == []  # waiting for the directory
    net.fw.check({"m1": ("b", 1)})  # the periodic check knows the owner first
    net.answer()  # then the directory answers: the watch's own follow goes out after
    carried, own = net.follows()
    assert carried.ref == own.ref == 7 and carried.gen > own.gen
    for follow in (carried, own):  # the owner answers them in the order they came
        net.deliver(cid, {"type": "watching", "match_id": "m1", "players": ["a", "b"],
                          "ref": 7, "_gen": follow.gen})
    assert [m.get("ref") for m in ann.sent if m["type"] == "watching"] == [7]
    # answered: a later re-attachment is quiet
    net.fw.lost("b")
    assert net.follows()[-1].announce is False


def test_a_move_waiting_for_the_directory_is_answered_once() -> None:
    """A move whose owner this node did not know yet waits for the directory; a re-attachment
    meanwhile (the periodic check learned the owner first) is answered before the move is
    even sent. The move is not judged "never applied" by that answer (which would tell the
    client "try again" and then, once the move reaches the owner, its real answer too: one
    request, two answers, e.g. `match_finished` after a "try again")."""
    net, ann = SlowNet(), FakeConn()
    net.fw.act(ann, {"type": "guess", "match_id": "m1", "guess": "0123", "id": 5})  # type: ignore[arg-type]
    cid = net.fw.cid(ann)  # type: ignore[arg-type]
    net.fw.check({"m1": ("b", 1)})  # the re-attachment goes out first
    (follow,) = net.follows()
    net.deliver(cid, _marker(follow.gen))
    net.fw.received("b", 1, Followed(cid, "m1", follow.gen, 0))  # the move is not there
    assert [m for m in ann.sent if m.get("ref") == 5] == []  # not refused: it was not sent
    net.answer()  # the directory answers: the move goes to b, after the follow
    assert [type(i).__name__ for _, i in net.out] == ["Follow", "Act"]
    later = net.fw.following(ann, "m1")  # type: ignore[arg-type]
    assert later is not None
    net.fw.lost("b")  # another re-attachment, sent after the move: its answer judges it
    refollow = net.follows()[-1]
    net.deliver(cid, {"type": "error", "code": "match_finished", "message": "the match is over",
                      "ref": 5, "match_id": "m1"})
    net.deliver(cid, _marker(refollow.gen))
    net.fw.received("b", 1, Followed(cid, "m1", refollow.gen, 0, [5]))
    assert [m["code"] for m in ann.sent if m.get("ref") == 5] == ["match_finished"]


class FakeArena:
    """What Takeover asks of the arena when it attaches players: nothing runs here."""

    def __init__(self) -> None:
        self.movers: list[Callable[[str], None]] = []
        self.recallers: list[Callable[[Any, str, Any], bool]] = []
        self.rejoined: list[str] = []

    def is_live(self, match_id: str) -> bool:
        return False

    async def rejoin(self, conn: Any, player: str, listed: list[dict[str, Any]]) -> None:
        self.rejoined += [str(m["match_id"]) for m in listed]


class FakeLobby:
    def __init__(self, conns: dict[str, FakeConn]) -> None:
        self.conns = conns

    def local(self, player: str) -> FakeConn | None:
        return self.conns.get(player)


async def test_a_match_announced_after_its_end_is_not_replayed_to_who_saw_it_end() -> None:
    """The fault harness's whole-match repeat on one connection (docs/cluster.md, Status 12):
    a player followed its match at its owner to ``finished``; the subscription ends with the
    match, and a takeover's ``Seated`` announcement of the match (sent while it still ran,
    heard after) attached the player again from seq 1: the whole match a second time. A
    player connected here that never heard of the match is still attached."""
    from server.cluster.takeover import Takeover
    from server.cluster.wire import Seated

    net, ann, bob = Net(), FakeConn("ann"), FakeConn("bob")
    cid = _attached(net, ann)
    for seq, kind in ((1, "secret_set"), (2, "guess"), (3, "finished")):
        net.deliver(cid, _event(seq, kind))
    assert [m["seq"] for m in ann.sent] == [1, 2, 3]
    assert net.fw.following(ann, "m1") is None  # type: ignore[arg-type]
    takeover = Takeover("a", FakeArena(), None, None, None, net.fw,  # type: ignore[arg-type]
                        FakeLobby({"ann": ann, "bob": bob}), None, lambda m: None, 1.0)  # type: ignore[arg-type]
    follows = len(net.follows())
    takeover.seated(Seated("c", 2, {"m1": ["ann", "bob"]}))
    await asyncio.gather(*(t for t in asyncio.all_tasks() if t is not asyncio.current_task()))
    fresh = net.follows()[follows:]
    assert [f.conn for f in fresh] == [net.fw.cid(bob)], fresh  # type: ignore[arg-type]
    assert fresh[0].cursor == 0


class MovingArena(FakeArena):
    """A match live here until a rejoin reads its log, during which it moves away: the
    rejoin gives it up (``Moving``, swallowed, nothing sent), as :meth:`Arena.rejoin` does."""

    def __init__(self) -> None:
        super().__init__()
        self.live = {"m1"}

    def is_live(self, match_id: str) -> bool:
        return match_id in self.live

    async def rejoin(self, conn: Any, player: str, listed: list[dict[str, Any]]) -> None:
        await super().rejoin(conn, player, listed)
        self.live.clear()


async def test_a_player_a_takeover_announced_follows_its_match_that_moved_during_the_read() -> None:
    """A takeover's ``Seated`` announces a match this node runs: its player connected here is
    given its seat back by the arena, which reads the log first. When the match moves to
    another node meanwhile, the arena gives it up; the player is followed at the new owner
    (before, it was attached nowhere and lost the match by its grace window)."""
    from server.cluster.takeover import Takeover
    from server.cluster.wire import Seated

    net, ann = Net(), FakeConn("ann")
    arena = MovingArena()
    takeover = Takeover("a", arena, None, None, None, net.fw,  # type: ignore[arg-type]
                        FakeLobby({"ann": ann}), None, lambda m: None, 1.0)  # type: ignore[arg-type]
    takeover.seated(Seated("a", 2, {"m1": ["ann", None]}))
    await asyncio.gather(*(t for t in asyncio.all_tasks() if t is not asyncio.current_task()))
    assert arena.rejoined == ["m1"]
    follows = net.follows()
    assert [(f.conn, f.match_id, f.cursor, f.announce) for f in follows] == [
        (net.fw.cid(ann), "m1", 0, True)  # type: ignore[arg-type]
    ]


# -- the leader's queue pairings (server/cluster/pairings.py) -----------------------------------
class _PairingStore:
    """The two things the watch asks the database: a match by id, a player's matches."""

    def __init__(self) -> None:
        self.stored: set[str] = set()

    async def match_end(self, match_id: str) -> tuple[bool, None] | None:
        return (False, None) if match_id in self.stored else None

    async def unfinished_of(self, player: str) -> list[Any]:
        return []


class _PairingDirectory:
    def __init__(self) -> None:
        self.store = _PairingStore()
        self.epochs = {"b": 4}
        self.deaths: dict[str, float] = {}

    def died_since(self, node: str, when: float) -> bool:
        return self.deaths.get(node, float("-inf")) > when


def _waiting(player: str) -> Waiting:
    return Waiting(None, player, False, "any", "free", True, DEFAULT_RULES)  # type: ignore[arg-type]


async def test_a_queue_pairings_request_is_sent_again_until_its_match_is_stored() -> None:
    """The leader paired ann and bob and asked node b (epoch 4) to start their match. While
    the database has no such match the request goes to b again, marked for epoch 4 (b starts
    it only if the first never reached it); once it is stored, nothing more is sent."""
    directory = _PairingDirectory()
    sent: list[tuple[str, Message]] = []
    requeued: list[Any] = []
    watch = PairingWatch("a", directory, lambda e, n: requeued.append(e),  # type: ignore[arg-type]
                         lambda node, item: sent.append((node, item)))
    ann, bob = _waiting("ann"), _waiting("bob")
    create = Create(["bob", "ann"], [["b", "r.2", "bob"], ["a", "r.1", "ann"]], "free",
                    [None, None], [None, None], True, None, False, None, ["m1", []])
    watch.paired(bob, ann)
    watch.creating(("bob", "ann"), "b", create)
    (pairing,) = watch.pairings

    async def check() -> None:
        watch.check()
        for _ in range(20):
            await asyncio.sleep(0)

    await check()
    assert sent == []  # not due yet: the first sending is 2 s old at the earliest
    pairing.resend_at = 0.0
    await check()
    assert [(n, dataclasses.replace(create, again=4) == i) for n, i in sent] == [("b", True)]
    assert pairing.wait == 4.0  # the next, 4 s later
    pairing.resend_at = 0.0
    directory.store.stored.add("m1")
    await check()
    assert len(sent) == 1 and watch.pairings == [] and requeued == []


def test_a_request_sent_again_starts_its_match_only_if_the_first_was_lost() -> None:
    """At the node asked to start a queue pairing's match: the request sent again starts it
    if the first sending never came, and never a second time, nor on another run of the
    node; a request with no fixed id is always acted on (it is never sent again)."""
    first = Create(["bob", "ann"], [["b", "r.2", "bob"], None], "free", [None, None],
                   [None, None], True, None, False, None, ["m1", []])
    again = dataclasses.replace(first, again=4)
    creates = Creates()
    assert creates.fresh(first, 4, lambda m: False)
    assert not creates.fresh(again, 4, lambda m: False)  # the first came: no second match
    lost = Creates()  # a node the first sending never reached
    assert not lost.fresh(dataclasses.replace(first, again=3), 4, lambda m: False)  # a run ago
    assert not lost.fresh(again, 4, lambda m: m == "m1")  # (its match runs here)
    assert lost.fresh(again, 4, lambda m: False)  # starts it, once
    assert not lost.fresh(again, 4, lambda m: False)
    plain = dataclasses.replace(first, requested=None)
    assert creates.fresh(plain, 4, lambda m: False) and creates.fresh(plain, 4, lambda m: False)
