"""``python -m server_ref``: run one reference broker (or a cluster) until SIGTERM or SIGINT.

Prints one line once it serves, ``server_ref ready bootstrap_servers=HOST:PORT
data_dir=DIR``, which scripts and tests wait for (``--port 0`` picks a free port), followed by
one ``listener NAME protocol=PROTOCOL port=PORT`` line per listener (``--config
listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0``; the bootstrap is the first).

``--brokers N [--controllers 1|3] --data-dir DIR`` runs a cluster instead (one process per
node, ``server_ref.cluster``) and prints ``server_ref ready bootstrap_servers=...`` then one
``node ID role=broker|controller pid=PID port=PORT`` line per node, as
``tools/apache_kafka.py start`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import tempfile
from pathlib import Path

from sdk.errors import ConfigError, KafkaError
from server_ref.broker import Broker
from server_ref.config import BrokerConfig
from server_ref.server import start_broker, stop_broker


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m server_ref",
                                     description="Kafka-protocol reference broker")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=9092, help="port (0: any free port)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where logs and state live (default: a new temporary directory)")
    parser.add_argument("--advertised-host", default=None,
                        help="host name given to clients in metadata (default: --host)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker config with Kafka's name, e.g. num.partitions=3 "
                             "(repeatable)")
    parser.add_argument("--fsync", action="store_true",
                        help="fsync every append before acknowledging it")
    parser.add_argument("--no-zero-copy", action="store_true",
                        help="copy fetch data instead of using sendfile")
    parser.add_argument("--brokers", type=int, default=1,
                        help="number of brokers; more than 1 (or --controllers) runs a "
                             "cluster, one process per node")
    parser.add_argument("--controllers", type=int, default=None, choices=(1, 3),
                        help="controller quorum size in cluster mode (default 1)")
    parser.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                        help="serve Prometheus metrics at http://HOST:PORT/metrics "
                             "(0: any free port; needs prometheus_client); in cluster mode "
                             "one port per node, PORT, PORT+1, ... (0: free ones), printed "
                             "as 'metrics node=ID url=URL' lines")
    parser.add_argument("--log-level", default="WARNING",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser.parse_args(argv)


async def serve(config: BrokerConfig, data_dir: Path, metrics_port: int | None = None
                ) -> None:
    broker = Broker(config, data_dir)
    server = await start_broker(broker, config.host, config.port, metrics_port=metrics_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"server_ref ready bootstrap_servers={broker.host}:{broker.port} "
          f"data_dir={data_dir}", flush=True)
    # Then one line per listener (the ready line stays first for scripts reading one line).
    for name, port in server.ports.items():
        protocol = server.protocols.get(name, "PLAINTEXT")
        print(f"listener {name} protocol={protocol} port={port}", flush=True)
    if broker.metrics is not None and broker.metrics.endpoint is not None:
        print(f"metrics url={broker.metrics.endpoint.url}", flush=True)
    try:
        await stop.wait()
    finally:
        await stop_broker(broker, server)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.brokers != 1 or args.controllers is not None:
        from server_ref.cluster.launcher import run_cluster

        return run_cluster(args.brokers, args.controllers or 1, args.data_dir, args.config,
                           fsync=args.fsync, log_level=args.log_level,
                           metrics_port=args.metrics_port)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="server_ref-"))
    try:
        config = BrokerConfig.from_properties(
            args.config, host=args.host, port=args.port, data_dir=data_dir,
            advertised_host=args.advertised_host, fsync=args.fsync,
            zero_copy=not args.no_zero_copy)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(config, data_dir, args.metrics_port))
    except (KafkaError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
