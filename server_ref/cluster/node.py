"""One node of a cluster as its own process: ``python -m server_ref.cluster.node``.

    python -m server_ref.cluster.node --role controller --node-id 101 \\
        --voters 101@127.0.0.1:9093 --data-dir DIR --cluster-id ID [--config k=v ...]
    python -m server_ref.cluster.node --role broker --node-id 1 --port 9092 \\
        --voters 101@127.0.0.1:9093 --data-dir DIR --cluster-id ID [--config k=v ...]
        [--metrics-port PORT]

A controller is a Raft voter of ``__cluster_metadata`` with the quorum controller on top
(its APIs on the voter's listener); a broker is a reference broker in cluster mode (a Raft
observer, registration, replication). Prints ``node ID ready role=ROLE port=PORT`` once it
serves, and stops cleanly on SIGTERM/SIGINT. The launcher (``launcher.py``) starts these.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from server_ref.config import BrokerConfig
from server_ref.raft.api import RaftConfig, parse_voters

__all__ = ["main"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m server_ref.cluster.node")
    parser.add_argument("--role", choices=("broker", "controller"), required=True)
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="the broker's client port")
    parser.add_argument("--voters", required=True, help="controller.quorum.voters")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--cluster-id", required=True)
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--fsync", action="store_true")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="serve this node's Prometheus metrics on it (0: a free port)")
    return parser.parse_args(argv)


def _split_quorum_settings(items: list[str]) -> tuple[list[str], dict[str, str]]:
    """``controller.quorum.*`` settings go to Raft, the rest to the broker config."""
    rest, quorum = [], {}
    for item in items:
        key, _, value = item.partition("=")
        if key.strip().startswith("controller.quorum."):
            quorum[key.strip()] = value.strip()
        else:
            rest.append(item)
    return rest, quorum


async def run_controller(args: argparse.Namespace, config: BrokerConfig,
                         quorum: dict[str, str]) -> None:
    from server_ref.controller.apis import register_controller_apis
    from server_ref.controller.controller import QuorumController
    from server_ref.raft.node import RaftNode

    voters = parse_voters(args.voters)
    raft_config = RaftConfig(
        election_timeout_ms=int(quorum.get("controller.quorum.election.timeout.ms", 1000)),
        fetch_timeout_ms=int(quorum.get("controller.quorum.fetch.timeout.ms", 2000)),
        request_timeout_ms=int(quorum.get("controller.quorum.request.timeout.ms", 2000)),
        cluster_id=args.cluster_id, fsync=args.fsync)
    node = RaftNode(args.node_id, voters, args.data_dir / "raft", raft_config)
    controller = QuorumController(
        node, cluster_id=args.cluster_id,
        session_timeout_ms=int(config.get("broker.session.timeout.ms")),
        topic_default=config.topic_default,
        snapshot_bytes=int(config.get("metadata.log.max.record.bytes.between.snapshots")))
    register_controller_apis(node.server, controller, config)
    from server_ref.controller.rebalance import LeaderRebalancer

    rebalancer = LeaderRebalancer.from_config(controller, config)
    await node.start()
    endpoint = None
    if args.metrics_port is not None:
        from server_ref.metrics.cluster import start_controller_metrics

        endpoint = await start_controller_metrics(controller, args.host, args.metrics_port)
    print(f"node {args.node_id} ready role=controller port={voters[args.node_id][1]}"
          + _metrics_part(endpoint), flush=True)
    try:
        await _until_signal()
    finally:
        if endpoint is not None:
            await endpoint.close()
        await rebalancer.close()
        await controller.close()
        await node.close()


async def run_broker(args: argparse.Namespace, config: BrokerConfig,
                     quorum: dict[str, str]) -> None:
    from server_ref.broker import Broker
    from server_ref.cluster.agent import ClusterAgent
    from server_ref.server import start_broker, stop_broker

    voters = parse_voters(args.voters)
    raft_config = RaftConfig(
        request_timeout_ms=int(quorum.get("controller.quorum.request.timeout.ms", 2000)),
        fetch_timeout_ms=int(quorum.get("controller.quorum.fetch.timeout.ms", 2000)),
        cluster_id=args.cluster_id)
    broker = Broker(config, args.data_dir)
    broker.cluster = ClusterAgent(broker, voters, raft_config)
    server = await start_broker(broker, args.host, args.port, metrics_port=args.metrics_port)
    endpoint = broker.metrics.endpoint if broker.metrics is not None else None
    print(f"node {args.node_id} ready role=broker port={broker.port}"
          + _metrics_part(endpoint), flush=True)
    try:
        await _until_signal()
    finally:
        await stop_broker(broker, server)


def _metrics_part(endpoint: Any) -> str:
    return f" metrics={endpoint.url}" if endpoint is not None else ""


async def _until_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format=f"%(asctime)s %(levelname)s node{args.node_id} %(name)s: "
                               "%(message)s")
    items, quorum = _split_quorum_settings(args.config)
    config = BrokerConfig.from_properties(
        [*items, f"node.id={args.node_id}"], host=args.host, port=args.port,
        data_dir=args.data_dir, fsync=args.fsync, cluster_id=args.cluster_id)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    runner = run_controller if args.role == "controller" else run_broker
    try:
        asyncio.run(runner(args, config, quorum))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
