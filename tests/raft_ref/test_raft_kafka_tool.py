"""Kafka's own ``kafka-metadata-quorum.sh`` (MetadataQuorumCommand) reads our quorum through
``--bootstrap-controller``: DescribeCluster (KIP-919 controller endpoints) to find the
leader, then DescribeQuorum in Kafka's layout."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from apache_support import apache_cluster, require_apache_kafka

from raft_ref.procs import Quorum
from tools.apache_kafka import java_command, new_cluster_id

TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"


def run_tool(quorum: Quorum | str, *args: str) -> str:
    boot = quorum if isinstance(quorum, str) else \
        ",".join(f"127.0.0.1:{p}" for p in quorum.ports.values())
    done = subprocess.run(java_command(TOOL, "--bootstrap-controller", boot, *args),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def status(quorum: Quorum | str) -> dict[str, str]:
    out = run_tool(quorum, "describe", "--status")
    return {k: v.strip() for k, v in re.findall(r"^(\w+):\s+(.*)$", out, re.M)}


def test_kafka_metadata_quorum_tool_describes_our_quorum(tmp_path: Path) -> None:
    require_apache_kafka()
    with Quorum(tmp_path) as quorum:
        leader, epoch = quorum.wait_leader()
        last = quorum.append(leader, ["a", "b", "c"])
        quorum.wait_applied(list(quorum.nodes), ["a", "b", "c"])
        seen = status(quorum)
        assert seen["ClusterId"] == "raft-test-cluster"
        assert (int(seen["LeaderId"]), int(seen["LeaderEpoch"])) == (leader, epoch)
        assert int(seen["HighWatermark"]) == last + 1
        voters = json.loads(seen["CurrentVoters"])
        assert [(v["id"], v["endpoints"]) for v in voters] == [
            (i, [f"CONTROLLER://127.0.0.1:{quorum.ports[i]}"]) for i in (1, 2, 3)]
        assert json.loads(seen["CurrentObservers"]) == [{"id": 1001}]

        rows = [line.split() for line in run_tool(quorum, "describe", "--replication")
                .splitlines()[1:] if line.strip()]
        roles = {int(r[0]): r[-1] for r in rows}
        assert roles == {leader: "Leader", **{i: "Follower" for i in (1, 2, 3) if i != leader},
                         1001: "Observer"}
        assert all(int(r[2]) == last + 1 for r in rows)  # every log end offset

        # After a SIGKILL of the leader the tool finds the new one in its higher epoch.
        quorum.nodes[leader].kill()
        new_leader, new_epoch = quorum.wait_leader(above_epoch=epoch)
        seen = status(quorum)
        assert (int(seen["LeaderId"]), int(seen["LeaderEpoch"])) == (new_leader, new_epoch)


def test_the_tool_prints_the_same_shape_for_apache_kafkas_quorum_and_ours(tmp_path: Path
                                                                          ) -> None:
    """One voter each (Apache Kafka: its combined node; ours: a voter process): same keys,
    same voter and observer forms, same replication columns. What differs, and why: the
    high watermark (Kafka's metadata log holds its feature and registration records; ours
    only what was appended here)."""
    with apache_cluster(1, 1) as kafka:
        node = kafka.controllers[0]
        theirs_boot = f"127.0.0.1:{node.controller_port or node.port}"
        theirs = status(theirs_boot)
        theirs_rows = run_tool(theirs_boot, "describe", "--replication").splitlines()
    with Quorum(tmp_path, voters=1, observers=0, cluster_id=new_cluster_id()) as quorum:
        quorum.wait_leader()
        quorum.append(1, ["x"])
        ours = status(quorum)
        our_rows = run_tool(quorum, "describe", "--replication").splitlines()
    assert list(ours) == list(theirs)  # the same fields, in the same order
    for seen in (theirs, ours):
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", seen["ClusterId"])
        assert (seen["LeaderId"], seen["LeaderEpoch"]) == ("1", "1")
        assert int(seen["HighWatermark"]) > 0
        assert (seen["MaxFollowerLag"], seen["MaxFollowerLagTimeMs"]) == ("0", "0")
        assert seen["CurrentObservers"] == "[]"
        voters = json.loads(seen["CurrentVoters"])
        assert [sorted(v) for v in voters] == [["endpoints", "id"]]
        assert re.fullmatch(r"CONTROLLER://127\.0\.0\.1:\d+", voters[0]["endpoints"][0])
    assert our_rows[0].split() == theirs_rows[0].split()  # the column header
    assert our_rows[1].split()[-1] == theirs_rows[1].split()[-1] == "Leader"
    assert our_rows[1].split()[1] == theirs_rows[1].split()[1]  # the (zero) directory id
