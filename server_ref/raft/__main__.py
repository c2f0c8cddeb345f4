"""Run one quorum node as its own process: ``python -m server_ref.raft``.

The state machine is a list of entries, so a quorum can be driven and checked from outside
(the process-level tests kill, pause and restart these processes). Commands, one per line
on stdin: ``append HEX [HEX...]`` (one batch, leader only), ``snapshot`` (snapshot the list
at the last applied offset), ``state`` (print the list), ``describe``. Events, one per line
on stdout: ``ready``,
``leader ID EPOCH`` (ID -1 when unknown), ``commit BASE LAST HEX[,HEX...]``,
``snapshot LAST COUNT``, ``appended LAST``, ``append-error NAME LEADER CLASS``, ``quorum JSON``,
``state LAST HEX,...``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from dataclasses import asdict

from server_ref.raft.api import CommittedBatch, LeaderAndEpoch, RaftConfig, parse_voters
from server_ref.raft.node import RaftNode


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class ListState:
    """The demonstration state machine: every committed entry, in order."""

    def __init__(self) -> None:
        self.entries: list[bytes] = []
        self.last_offset = -1

    def on_commit(self, batch: CommittedBatch) -> None:
        self.entries.extend(batch.records)
        self.last_offset = batch.last_offset
        _emit(f"commit {batch.base_offset} {batch.last_offset} "
              + ",".join(r.hex() for r in batch.records))

    def on_snapshot(self, payload: bytes, last_offset: int) -> None:
        self.entries = [bytes.fromhex(h) for h in json.loads(payload or b"[]")]
        self.last_offset = last_offset
        _emit(f"snapshot {last_offset} {len(self.entries)}")

    def payload(self) -> bytes:
        return json.dumps([e.hex() for e in self.entries]).encode()


async def _append(node: RaftNode, values: list[bytes]) -> None:
    try:
        last = await node.append(values)
        _emit(f"appended {last}")
    except Exception as exc:  # reported to the driver, which decides what it means
        leader = node.leader().leader_id
        # NAME is Kafka's error name; CLASS tells "not the leader: nothing written"
        # (RaftNotLeaderError) from "leadership lost: outcome unknown" (RaftClosedError).
        _emit(f"append-error {getattr(exc, 'name', type(exc).__name__)} "
              f"{-1 if leader is None else leader} {type(exc).__name__}")


async def _commands(node: RaftNode, state: ListState, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    pending: set[asyncio.Task[None]] = set()
    while not stop.is_set():
        line = (await reader.readline()).decode()
        if not line:
            break
        words = line.split()
        if not words:
            continue
        if words[0] == "append":
            task = loop.create_task(_append(node, [bytes.fromhex(w) for w in words[1:]]))
            pending.add(task)
            task.add_done_callback(pending.discard)
        elif words[0] == "snapshot":
            if state.last_offset >= 0:
                sid = node.snapshot(state.last_offset, state.payload())
                _emit(f"snapshot-written {sid.end_offset} {sid.epoch}")
        elif words[0] == "state":
            _emit(f"state {state.last_offset} " + ",".join(e.hex() for e in state.entries))
        elif words[0] == "describe":
            _emit("quorum " + json.dumps(asdict(node.describe_quorum())))
        else:
            _emit(f"error unknown command {words[0]!r}")
    stop.set()


async def _main(args: argparse.Namespace) -> None:
    voters = parse_voters(args.voters)
    config = RaftConfig(election_timeout_ms=args.election_timeout_ms,
                        fetch_timeout_ms=args.fetch_timeout_ms,
                        fetch_max_wait_ms=args.fetch_max_wait_ms, cluster_id=args.cluster_id,
                        fsync=args.fsync)
    node = RaftNode(args.node_id, voters, args.data_dir, config)
    state = ListState()

    def on_leader(leader: LeaderAndEpoch) -> None:
        _emit(f"leader {-1 if leader.leader_id is None else leader.leader_id} {leader.epoch}")

    node.register_listener(state.on_commit, state.on_snapshot, on_leader)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await node.start()
    _emit(f"ready node={args.node_id} role={'voter' if node.is_voter else 'observer'}")
    commands = loop.create_task(_commands(node, state, stop))
    await stop.wait()
    commands.cancel()
    await node.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m server_ref.raft",
                                     description="one node of the metadata quorum")
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--voters", required=True, help="controller.quorum.voters: id@host:port,...")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--cluster-id", default=None)
    parser.add_argument("--election-timeout-ms", type=int, default=1000)
    parser.add_argument("--fetch-timeout-ms", type=int, default=2000)
    parser.add_argument("--fetch-max-wait-ms", type=int, default=500)
    parser.add_argument("--fsync", action="store_true")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        asyncio.run(_main(args))
    except ValueError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    main()
