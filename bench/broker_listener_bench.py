"""The reference broker's request path with listeners, TLS and SASL: does the plaintext path
cost more than before, and what does each secured listener cost?

Runs ``python -m server_ref`` from two source trees side by side (this checkout, and a git
revision extracted with ``git archive``; default: the commit before the security work) and
from this checkout with PLAINTEXT, SSL and SASL_SSL (PLAIN) listeners. Each round, per
broker and listener: one connection sends N Metadata requests (no topics), pipelined 64
deep, then a confluent-kafka producer sends M 100-byte records (acks=1). Reported, medians
over the rounds taking turns: requests per second and the broker's CPU microseconds per
request (user + system from /proc), records per second and CPU per 1000 records.

    .venv/bin/python bench/broker_listener_bench.py [--base REV] [--rounds 5] \\
        [--requests 50000] [--records 200000]
"""

from __future__ import annotations

import argparse
import re
import socket
import ssl
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

import trustme
from confluent_kafka import Producer
from peer_loops import confluent_produce

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from sdk.protocol.framing import ClientFraming  # noqa: E402
from sdk.protocol.messages.metadata import MetadataRequest  # noqa: E402

DEFAULT_BASE = "1601e1d"  # the last commit before listeners, TLS, SASL and ACLs
DEPTH = 64
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_bench="bench-secret";')


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, clock ticks


@dataclass
class Target:
    label: str
    pid: int
    address: str
    client: dict[str, str]  # confluent settings for this listener
    context: ssl.SSLContext | None = None
    sasl: bool = False


@contextmanager
def broker(tree: Path, config: list[str], data: Path) -> Iterator[tuple[int, dict[str, int]]]:
    args = [sys.executable, "-m", "server_ref", "--port", "0", "--data-dir", str(data)]
    for entry in config:
        args += ["--config", entry]
    proc = subprocess.Popen(args, cwd=tree, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        match = re.search(r"bootstrap_servers=\S+:(\d+)", ready)
        assert match, ready
        ports = {"PLAINTEXT": int(match[1])}
        for _ in range(len(config) and config[0].count("://")):
            line = re.fullmatch(r"listener (\w+) protocol=\w+ port=(\d+)",
                                proc.stdout.readline().strip())
            assert line
            ports[line[1]] = int(line[2])
        yield proc.pid, ports
    finally:
        proc.terminate()
        proc.wait(30)


def requests(target: Target, count: int) -> tuple[float, float]:
    """(requests per second, broker CPU microseconds per request)."""
    host, port = target.address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    if target.context is not None:
        sock = target.context.wrap_socket(sock, server_hostname="localhost")
    framing = ClientFraming(client_id="bench")
    with sock:
        if target.sasl:
            _login(sock, framing)
        request = MetadataRequest(topics=[], allow_auto_topic_creation=False)
        cpu0, t0 = cpu_seconds(target.pid), time.perf_counter()
        sent = received = 0
        while received < count:
            while sent < count and sent - received < DEPTH:
                sock.sendall(framing.encode_request(request, 9)[1])
                sent += 1
            received += len(framing.feed(sock.recv(1 << 20)))
        elapsed, cpu = time.perf_counter() - t0, cpu_seconds(target.pid) - cpu0
    return count / elapsed, cpu / count * 1e6


def _login(sock: socket.socket, framing: ClientFraming) -> None:
    from sdk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from sdk.protocol.messages.sasl_handshake import SaslHandshakeRequest

    for message in (SaslHandshakeRequest(mechanism="PLAIN"),
                    SaslAuthenticateRequest(auth_bytes=b"\0bench\0bench-secret")):
        sock.sendall(framing.encode_request(message, 1)[1])
        answers = framing.feed(sock.recv(1 << 16))
        while not answers:
            answers = framing.feed(sock.recv(1 << 16))
        assert getattr(answers[0][1], "error_code", 0) == 0


def records(target: Target, count: int) -> tuple[float, float]:
    """(records per second, broker CPU seconds per 1000 records)."""
    producer = Producer({"bootstrap.servers": target.address, "acks": 1, "linger.ms": 5,
                         **target.client})
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    producer.produce(topic, b"w")
    producer.flush(30)
    value = b"x" * 100
    cpu0, t0 = cpu_seconds(target.pid), time.perf_counter()
    confluent_produce(producer, topic, value, count, poll_s=0.001)
    assert producer.flush(60) == 0
    elapsed, cpu = time.perf_counter() - t0, cpu_seconds(target.pid) - cpu0
    return count / elapsed, cpu / count * 1000


def extract(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", rev, "server_ref", "sdk"], cwd=ROOT,
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=DEFAULT_BASE, help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="listener-bench-"))
    ca = trustme.CA()
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(work / "broker.pem"))
    ca.cert_pem.write_to_path(str(work / "ca.pem"))
    context = ssl.create_default_context(cafile=str(work / "ca.pem"))
    secured = ["listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
               "ssl.keystore.type=PEM", f"ssl.keystore.location={work / 'broker.pem'}",
               "sasl.enabled.mechanisms=PLAIN",
               f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}"]
    tls_client = {"ssl.ca.location": str(work / "ca.pem")}
    base_tree = extract(args.base, work / "base")
    results: dict[str, list[tuple[float, float, float, float]]] = {}
    with broker(base_tree, [], work / "d1") as (base_pid, base_ports), \
            broker(ROOT, [], work / "d2") as (head_pid, head_ports), \
            broker(ROOT, secured, work / "d3") as (sec_pid, sec_ports):
        targets = [
            Target(f"{args.base} PLAINTEXT", base_pid, f"127.0.0.1:{base_ports['PLAINTEXT']}",
                   {}),
            Target("this tree PLAINTEXT", head_pid, f"127.0.0.1:{head_ports['PLAINTEXT']}",
                   {}),
            Target("this tree, 3 listeners: PLAINTEXT", sec_pid,
                   f"127.0.0.1:{sec_ports['PLAINTEXT']}", {}),
            Target("this tree, 3 listeners: SSL", sec_pid, f"127.0.0.1:{sec_ports['SSL']}",
                   {"security.protocol": "SSL", **tls_client}, context),
            Target("this tree, 3 listeners: SASL_SSL PLAIN", sec_pid,
                   f"127.0.0.1:{sec_ports['SASL_SSL']}",
                   {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                    "sasl.username": "bench", "sasl.password": "bench-secret", **tls_client},
                   context, sasl=True),
        ]
        for target in targets:  # warm-up
            requests(target, 2000)
            records(target, 5000)
        for round_no in range(args.rounds):
            order = targets[round_no % len(targets):] + targets[:round_no % len(targets)]
            for target in order:
                rps, cpu_req = requests(target, args.requests)
                recs, cpu_rec = records(target, args.records)
                results.setdefault(target.label, []).append((rps, cpu_req, recs, cpu_rec))
    print(f"{'broker / listener':42} {'Metadata/s':>11} {'CPU us/req':>11} "
          f"{'records/s':>10} {'CPU s/1k rec':>12}")
    for label, rows in results.items():
        medians = [statistics.median(r[i] for r in rows) for i in range(4)]
        print(f"{label:42} {medians[0]:11.0f} {medians[1]:11.1f} {medians[2]:10.0f} "
              f"{medians[3]:12.4f}")


if __name__ == "__main__":
    main()
