"""The metadata quorum as real processes on loopback: elections, commits, SIGKILL,
SIGSTOP/SIGCONT, truncation of an uncommitted suffix, catch-up through FetchSnapshot."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from raft_ref.procs import NodeProc, Quorum

OBSERVER = 1001
KILL_ROUNDS = 4


def entries(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def leader_log_end(node: NodeProc) -> int:
    """The log end offset the leader ``node`` reports for itself (DescribeQuorum view)."""
    since = len(node.events)
    node.send("describe")
    line = node.wait_for(lambda e: e.startswith("quorum "), since=since)
    info = json.loads(line.split(" ", 1)[1])
    return next(v["log_end_offset"] for v in info["voters"] if v["replica_id"] == node.node_id)


@pytest.fixture
def quorum(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Quorum(tmp_path) as q:
        yield q


def test_three_voters_elect_one_leader_and_commit_in_order_everywhere(quorum: Quorum) -> None:
    leader, epoch = quorum.wait_leader()
    assert epoch >= 1
    expected: list[str] = []
    last = -1
    for k in range(10):
        batch = entries(f"b{k}", 3)
        offset = quorum.append(leader, batch)
        assert offset > last  # committed offsets grow
        last = offset
        expected += batch
    # Every voter and the observer applied every committed entry once, in order.
    quorum.wait_applied(list(quorum.nodes), expected)
    # A follower refuses appends and names the leader.
    follower = next(i for i in quorum.nodes if i != leader and i < 1000)
    node = quorum.nodes[follower]
    since = len(node.events)
    node.send("append " + b"x".hex())
    answer = node.wait_for(lambda e: e.startswith(("appended", "append-error")), since=since)
    assert answer == f"append-error NOT_CONTROLLER {leader} RaftNotLeaderError"


def test_sigkill_leader_rounds_elect_higher_epochs_and_lose_nothing(quorum: Quorum) -> None:
    leader, epoch = quorum.wait_leader()
    expected: list[str] = []
    for rnd in range(KILL_ROUNDS):
        batch = entries(f"r{rnd}", 5)
        quorum.append(leader, batch)
        expected += batch
        quorum.nodes[leader].kill()
        new_leader, new_epoch = quorum.wait_leader(above_epoch=epoch)
        assert new_leader != leader and new_epoch > epoch
        after = entries(f"r{rnd}-after", 2)
        quorum.append(new_leader, after)
        expected += after
        # The killed node comes back on its data, catches up, and follows.
        quorum.nodes[leader].start()
        quorum.wait_applied(list(quorum.nodes), expected)
        assert quorum.wait_leader(above_epoch=epoch) == (new_leader, new_epoch)
        leader, epoch = new_leader, new_epoch


def test_restarted_leader_truncates_its_uncommitted_divergent_suffix(quorum: Quorum) -> None:
    leader, epoch = quorum.wait_leader()
    committed = entries("committed", 4)
    quorum.append(leader, committed)
    quorum.wait_applied(list(quorum.nodes), committed)
    followers = [n for i, n in quorum.nodes.items() if i not in (leader, OBSERVER)]
    for f in followers:
        f.pause()
    # A Fetch the leader parked before the pause would carry the suffix into a paused
    # follower's socket buffer (Raft may then commit it: unacknowledged entries are
    # allowed to survive). Let such fetches expire empty (max wait 200 ms) first.
    time.sleep(1)
    old = quorum.nodes[leader]
    end_before = leader_log_end(old)
    old.send("append " + " ".join(v.encode().hex() for v in entries("lost", 3)))
    while leader_log_end(old) == end_before:
        pass  # until the leader has written the suffix to its log
    # Check-quorum: hearing from no follower for 1.5 fetch timeouts, the leader resigns.
    old.wait_for(lambda e: e == f"leader -1 {epoch}", since=old.life_start())
    old.kill()  # the suffix is on its disk only: never committed
    for f in followers:
        f.resume()
    survivors = [i for i in quorum.nodes if i not in (leader,)]
    new_leader, new_epoch = quorum.wait_leader(above_epoch=epoch, among=survivors)
    assert new_leader != leader
    later = entries("later", 3)
    quorum.append(new_leader, later)
    old.start()
    # Its log replays only what is committed: the "lost" entries are truncated away.
    quorum.wait_applied(list(quorum.nodes), committed + later)
    assert quorum.wait_leader(above_epoch=epoch) == (new_leader, new_epoch)
    stderr = (old.data_dir.parent / f"node-{old.node_id}.stderr").read_text()
    assert "truncates its log" in stderr


def test_paused_leader_is_replaced_and_learns_the_new_epoch_when_resumed(quorum: Quorum) -> None:
    leader, epoch = quorum.wait_leader()
    first = entries("before-pause", 3)
    quorum.append(leader, first)
    old = quorum.nodes[leader]
    old.pause()
    others = [i for i in quorum.nodes if i != leader]
    new_leader, new_epoch = quorum.wait_leader(above_epoch=epoch, among=others)
    assert new_leader != leader
    second = entries("while-paused", 3)
    quorum.append(new_leader, second)
    since = len(old.events)
    old.resume()
    # Resumed, it hears of the higher epoch (BeginQuorumEpoch or a fenced fetch) and follows.
    old.wait_for(lambda e: e == f"leader {new_leader} {new_epoch}", since=since)
    quorum.wait_applied(list(quorum.nodes), first + second)


def test_voter_and_observer_far_behind_catch_up_through_fetch_snapshot(quorum: Quorum
                                                                       ) -> None:
    leader, _epoch = quorum.wait_leader()
    behind = next(i for i in quorum.nodes if i not in (leader, OBSERVER))
    quorum.nodes[behind].kill()
    quorum.nodes[OBSERVER].kill()  # a broker that was down
    expected = []
    for k in range(5):
        batch = entries(f"s{k}", 4)
        quorum.append(leader, batch)
        expected += batch
    lead = quorum.nodes[leader]
    since = len(lead.events)
    lead.send("snapshot")
    written = lead.wait_for(lambda e: e.startswith("snapshot-written"), since=since)
    end_offset = int(written.split()[1])
    tail = entries("tail", 2)
    quorum.append(leader, tail)
    for lagging in (behind, OBSERVER):
        node = quorum.nodes[lagging]
        node.start()
        # The log it needs is gone: it installs the leader's snapshot, then fetches the rest.
        node.wait_for(lambda e: e == f"snapshot {end_offset - 1} {len(expected)}",
                      since=node.life_start())
    quorum.wait_applied([behind, OBSERVER], [f"<snapshot {len(expected)}>", *tail])
    others = [i for i in quorum.nodes if i not in (behind, OBSERVER)]
    quorum.wait_applied(others, expected + tail)


def test_graceful_stop_of_the_leader_ends_its_epoch(quorum: Quorum) -> None:
    leader, epoch = quorum.wait_leader()
    quorum.append(leader, ["x"])
    quorum.nodes[leader].stop()  # SIGTERM: the leader sends EndQuorumEpoch to the voters
    others = [i for i in quorum.nodes if i != leader]
    new_leader, _new_epoch = quorum.wait_leader(above_epoch=epoch, among=others)
    quorum.append(new_leader, ["y"])
    for i in others:
        if i < 1000:
            stderr = (quorum.nodes[i].data_dir.parent / f"node-{i}.stderr").read_text()
            assert f"leader {leader} ends epoch {epoch}" in stderr
    quorum.nodes[leader].start()
    quorum.wait_applied(list(quorum.nodes), ["x", "y"])
