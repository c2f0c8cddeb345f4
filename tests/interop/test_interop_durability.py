"""Crash safety, retention and compaction, observed through real clients.

The crash test kills the broker with SIGKILL in the middle of an acks=all produce loop
(broker started with --fsync), restarts it on the same data, and checks that every record
the producer saw acknowledged is there, at its acknowledged offset, in order, and that the
group offsets committed before the crash are back.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from interop_kit import BrokerProcess, wait_until

PARTITIONS = 3


def read_all(bootstrap: str, topic: str, partitions: int, expected_end: dict[int, int]
             ) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    finished: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(finished) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == msg.error()._PARTITION_EOF:
                    if msg.offset() >= expected_end.get(msg.partition(), 0):
                        finished.add(msg.partition())
                    continue
                raise AssertionError(msg.error())
            out[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    assert len(finished) == partitions, "did not reach the end of every partition"
    return out


def end_offsets(admin: AdminClient, topic: str, partitions: int) -> dict[int, int]:
    wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    return {tp.partition: f.result(30).offset for tp, f in admin.list_offsets(wanted).items()}


def test_kill_minus_nine_during_acks_all_loses_no_acknowledged_record(
        make_broker: object) -> None:
    broker: BrokerProcess = make_broker(fsync=True)  # type: ignore[operator]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("crash", PARTITIONS, 1)])["crash"].result(30)

    # Offsets committed before the crash must come back.
    committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "crash-group",
                          "enable.auto.commit": False})
    committed = [TopicPartition("crash", 0, 11), TopicPartition("crash", 2, 7)]
    committer.commit(offsets=committed, asynchronous=False)
    committer.close()

    acked: list[tuple[int, int, bytes]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            with lock:
                acked.append((msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]

    def produce_loop() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 1,
                             "message.timeout.ms": 5000, "partitioner": "murmur2_random"})
        i = 0
        while not stop.is_set():
            try:
                producer.produce("crash", b"value-%d" % i, key=b"k%d" % (i % 17),
                                 on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            producer.poll(0.001 if i % 50 else 0.01)
        producer.flush(10)

    thread = threading.Thread(target=produce_loop)
    thread.start()
    wait_until(lambda: len(acked) >= 3000, timeout=60, interval=0.05)
    broker.kill()
    with lock:
        acked_at_kill = list(acked)
    stop.set()
    thread.join(60)

    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    ends = end_offsets(admin, "crash", PARTITIONS)
    stored = read_all(broker.bootstrap, "crash", PARTITIONS, ends)
    by_offset = {p: {off: value for off, _k, value in records} for p, records in stored.items()}
    for partition, offset, value in acked_at_kill:
        assert by_offset[partition].get(offset) == value, (partition, offset)
    for partition, records in stored.items():
        offsets = [off for off, _k, _v in records]
        assert offsets == list(range(len(offsets))), f"gap or reorder in {partition}"
        assert ends[partition] == len(offsets)

    checker = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "crash-group",
                        "enable.auto.commit": False})
    back = checker.committed([TopicPartition("crash", 0), TopicPartition("crash", 2)],
                             timeout=30)
    checker.close()
    assert [(tp.partition, tp.offset) for tp in back] == [(0, 11), (2, 7)]


def test_retention_deletes_old_segments(make_broker: object) -> None:
    broker: BrokerProcess = make_broker(  # type: ignore[operator]
        config={"log.retention.check.interval.ms": "200"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("expiring", 1, 1, config={
        "retention.ms": "1000", "segment.bytes": "2048"})])["expiring"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(300):
        producer.produce("expiring", b"x" * 50, key=b"%d" % i)
        producer.poll(0)
    assert producer.flush(30) == 0
    partition = TopicPartition("expiring", 0)

    def earliest() -> int:
        return admin.list_offsets({partition: OffsetSpec.earliest()})[partition].result(30).offset

    assert earliest() == 0
    wait_until(lambda: earliest() == 300, timeout=30)  # every segment expired, even the last
    latest = admin.list_offsets({partition: OffsetSpec.latest()})[partition].result(30).offset
    assert latest == 300
    # Offsets continue; a consumer from the beginning starts at the new log start.
    producer.produce("expiring", b"fresh", key=b"new")
    assert producer.flush(30) == 0
    stored = read_all(broker.bootstrap, "expiring", 1, {0: 301})
    assert [(o, v) for o, _k, v in stored[0]] == [(300, b"fresh")]


def test_compaction_keeps_the_latest_value_per_key(make_broker: object) -> None:
    broker: BrokerProcess = make_broker(  # type: ignore[operator]
        config={"log.cleaner.backoff.ms": "200"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("compacted", 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048",
        "delete.retention.ms": "100"})])["compacted"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    latest: dict[bytes, bytes | None] = {}
    for round_no in range(30):
        for key in range(10):
            value = b"r%d" % round_no
            producer.produce("compacted", value, key=b"k%d" % key)
            latest[b"k%d" % key] = value
        assert producer.flush(30) == 0  # one batch per round: segments roll between them
    producer.produce("compacted", None, key=b"k0")  # a tombstone
    latest[b"k0"] = None
    for i in range(60):  # filler so the records above end up in sealed segments
        producer.produce("compacted", b"f", key=b"filler%d" % i)
        assert producer.flush(30) == 0
    total = 300 + 1 + 60

    def compacted_view() -> dict[bytes, bytes | None]:
        records = read_all(broker.bootstrap, "compacted", 1, {0: total})[0]
        view: dict[bytes, bytes | None] = {}
        for _offset, key, value in records:
            view[key] = value
        compacted_view.count = len(records)  # type: ignore[attr-defined]
        return view

    wait_until(lambda: compacted_view() is not None and
               compacted_view.count < 200, timeout=60, interval=0.5)  # type: ignore[attr-defined]
    view = compacted_view()
    for key, value in latest.items():
        if value is not None:
            assert view[key] == value
    # Offsets are kept: the log end is unchanged and what remains reads in offset order.
    records = read_all(broker.bootstrap, "compacted", 1, {0: total})[0]
    assert [o for o, _k, _v in records] == sorted(o for o, _k, _v in records)
    assert end_offsets(admin, "compacted", 1) == {0: total}
    # The tombstone itself goes once delete.retention.ms has passed after compaction.
    wait_until(lambda: b"k0" not in compacted_view(), timeout=60, interval=0.5)
