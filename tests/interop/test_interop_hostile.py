"""Hostile connections next to a well-behaved client: random bytes, truncated frames, huge
length prefixes, unknown API keys and versions. The broker closes the bad connections and
the confluent-kafka producer and consumer beside them never notice."""

from __future__ import annotations

import random
import socket
import struct
import threading

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from interop_kit import BrokerProcess


def hostile_payloads(rng: random.Random) -> list[bytes]:
    header = struct.pack(">hhi", 3, 12, 1) + b"\x00\x04evil"
    return [
        bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 512))),  # noise
        struct.pack(">i", 0x7FFFFFF0) + b"\x00" * 64,  # huge length prefix
        struct.pack(">i", -5),  # negative length
        struct.pack(">i", 100) + header[:10],  # truncated frame, then hang up
        struct.pack(">i", len(header)) + struct.pack(">hhi", 999, 0, 2) + header[8:],
        struct.pack(">i", len(header)) + struct.pack(">hhi", 0, 77, 3) + header[8:],
        struct.pack(">i", len(header) + 3) + header + b"\xff\xff\xff",  # garbage body
    ]


def attack(port: int, rounds: int, seed: int) -> int:
    rng = random.Random(seed)
    closed_by_broker = 0
    for _ in range(rounds):
        for payload in hostile_payloads(rng):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                try:
                    sock.sendall(payload)
                    sock.shutdown(socket.SHUT_WR)
                    while sock.recv(65536):
                        pass
                    closed_by_broker += 1
                except OSError:
                    closed_by_broker += 1
    return closed_by_broker


def test_bad_connections_do_not_disturb_good_clients(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("steady", 2, 1)])["steady"].result(30)
    results: list[int] = []
    attackers = [threading.Thread(target=lambda s=s: results.append(attack(broker.port, 5, s)))
                 for s in range(3)]
    for t in attackers:
        t.start()

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 2})
    failures: list = []
    total = 3000
    for i in range(total):
        producer.produce("steady", b"%d" % i, key=b"%d" % (i % 7),
                         on_delivery=lambda err, _m: failures.append(err) if err else None)
        if i % 100 == 0:
            producer.poll(0.01)
    assert producer.flush(60) == 0
    for t in attackers:
        t.join(120)
    assert failures == []
    assert sum(results) == 3 * 5 * len(hostile_payloads(random.Random(0)))

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "steady-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("steady", p, OFFSET_BEGINNING) for p in range(2)])
    seen = set()
    try:
        while len(seen) < total:
            msg = consumer.poll(10)
            assert msg is not None, f"stalled after {len(seen)} records"
            assert msg.error() is None, msg.error()
            seen.add(msg.value())
    finally:
        consumer.close()
    assert seen == {b"%d" % i for i in range(total)}
    assert broker.proc is not None and broker.proc.poll() is None
    assert "Traceback" not in broker.log_text()
