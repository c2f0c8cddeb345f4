"""Tiered storage on the reference broker, remote tier in a directory (the default backend).

Topics get small segments and little local retention, so most of each one lives only in
the remote tier; every client reads it back from offset 0, byte for byte. These tests need
no peer broker: Apache Kafka runs tiered storage only with a RemoteStorageManager plugin
(its local one ships in test jars only), so the config refusals are asserted against the
messages in Kafka's LogConfig instead.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from sdk import AdminClient, ConfigResource
from sdk.errors import InvalidConfigError, OffsetOutOfRangeError
from sdk.types import NewTopic, TopicPartition
from tests.integration.tiered_kit import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST_TIERED,
    fetch_once,
    list_offset,
    make_records,
    produce,
    read_confluent,
    read_kafka_python,
    read_sdk,
    tiered_broker,
    tiered_topic_configs,
    wait_until,
)

COUNT = 3000


def _partition(broker, topic: str):  # type: ignore[no-untyped-def]
    return broker.broker.topics.get(topic).partitions[0]


def _remote_files(broker, topic: str) -> list[Path]:  # type: ignore[no-untyped-def]
    root = broker.data_dir / "remote-storage"
    return sorted(p for p in root.rglob("*") if p.is_file() and topic in str(p))


def _mostly_remote(broker, topic: str, end: int):  # type: ignore[no-untyped-def]
    def check() -> bool:  # every closed segment copied, local retention applied
        part = _partition(broker, topic)
        remote = broker.broker.remote
        return (remote.highest_tiered_offset(part) == part.log.active_segment.base_offset - 1
                and part.log.log_start_offset > end // 2
                and remote.remote_bytes(part) > part.log.size_in_bytes())
    return check


@pytest.fixture
def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    embedded = tiered_broker(tmp_path / "data")
    yield embedded
    embedded.close()


def test_most_of_a_topic_only_remote_is_read_from_zero_by_every_client(broker) -> None:  # type: ignore[no-untyped-def]
    topic = "tiered-read"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())])
    records = make_records(COUNT)
    produce(broker.bootstrap_servers, topic, records)
    wait_until(_mostly_remote(broker, topic, COUNT), "most of the topic copied and local "
               "segments deleted")
    part = _partition(broker, topic)
    remote = broker.broker.remote
    local_start = part.log.log_start_offset
    assert remote.remote_bytes(part) > part.log.size_in_bytes()
    # the log start spans both tiers; the local one is where the local log begins
    assert list_offset(broker.bootstrap_servers, topic, EARLIEST) == (0, 0)
    assert list_offset(broker.bootstrap_servers, topic, EARLIEST_LOCAL) == (0, local_start)
    code, highest = list_offset(broker.bootstrap_servers, topic, LATEST_TIERED)
    assert code == 0 and local_start - 1 <= highest < COUNT
    # a fetch at 0 is answered from the remote tier, with the log start across tiers
    code, data, log_start = fetch_once(broker.bootstrap_servers, topic, 0)
    assert (code, log_start) == (0, 0) and data

    for read in (read_sdk, read_confluent, read_kafka_python):
        assert read(broker.bootstrap_servers, topic, COUNT) == records, read.__name__

    broker.restart()  # the metadata log is replayed: the remote data is served again
    part = _partition(broker, topic)
    assert broker.broker.remote.remote_bytes(part) > 0
    assert part.log.log_start_offset >= local_start
    assert read_sdk(broker.bootstrap_servers, topic, COUNT) == records
    assert read_confluent(broker.bootstrap_servers, topic, COUNT) == records


def test_timestamps_in_the_remote_tier_are_found(broker) -> None:  # type: ignore[no-untyped-def]
    from sdk import Producer

    topic = "tiered-times"
    base = int(time.time() * 1000) - 10 * COUNT  # one record per 10 ms, ending about now
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())])
        with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=2) as producer:
            for i, (key, value, _) in enumerate(make_records(COUNT)):
                producer.send(topic, value, key=key, partition=0, timestamp_ms=base + 10 * i)
        wait_until(_mostly_remote(broker, topic, COUNT), "the topic tiered")
        local_start = _partition(broker, topic).log.log_start_offset
        tp = TopicPartition(topic, 0)
        for offset in (0, 1, local_start // 3, local_start - 1, local_start, COUNT - 1):
            found = admin.list_offsets({tp: base + 10 * offset - 5})[tp]
            assert (found.error, found.offset, found.timestamp) == \
                (None, offset, base + 10 * offset), offset
        assert admin.list_offsets({tp: base + 10 * COUNT})[tp].offset == -1


def test_read_committed_over_the_remote_tier_skips_aborted_transactions(broker) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer as ConfluentProducer

    topic = "tiered-txn"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())])
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap_servers,
                                  "transactional.id": "tiered-txn", "linger.ms": 5})
    producer.init_transactions(30)
    committed: list[bytes] = []
    for round_ in range(12):
        producer.begin_transaction()
        values = [f"{round_}-{i}".encode() * 30 for i in range(100)]
        for value in values:
            producer.produce(topic, value, partition=0)
        if round_ % 3 == 1:
            producer.flush(30)  # written, then aborted (librdkafka drops what is unsent)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed.extend(values)
    producer.flush(30)
    wait_until(_mostly_remote(broker, topic, 12 * 100), "the transactions tiered")
    part = _partition(broker, topic)
    remote_segments = broker.broker.remote.state_of(part).finished()
    assert any(s.has_txn_index for s in remote_segments)  # aborted ones' index went along
    assert any(p.suffix == ".txnindex" for p in _remote_files(broker, topic))
    assert _read_values_committed(broker.bootstrap_servers, topic, len(committed)) == committed


def _read_values_committed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from sdk import Consumer

    out: list[bytes] = []
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                  isolation_level="read_committed") as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(r.value for r in records)
        # nothing past the committed ones: the end is reached with no more records
        out.extend(r.value for rs in consumer.poll(timeout_ms=500).values() for r in rs)
    return out


def test_retention_removes_remote_segments_and_their_objects(broker) -> None:  # type: ignore[no-untyped-def]
    topic = "tiered-retention"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())])
        records = make_records(COUNT)
        produce(broker.bootstrap_servers, topic, records)
        wait_until(_mostly_remote(broker, topic, COUNT), "the topic tiered")
        part = _partition(broker, topic)
        remote = broker.broker.remote
        before = remote.remote_bytes(part)
        files_before = _remote_files(broker, topic)
        # keep about a third of the whole log (both tiers)
        total = before + part.log.size_in_bytes()
        admin.alter_configs({ConfigResource.topic(topic): {"retention.bytes": str(total // 3)}})

        def trimmed() -> bool:
            segments = remote.state_of(part).segments.values()
            return remote.log_start_offset(part) > 0 and remote.remote_bytes(part) < before \
                and all(s.state.value == "COPY_SEGMENT_FINISHED" for s in segments)
        wait_until(trimmed, "remote retention: metadata, then objects")
    start = remote.log_start_offset(part)
    assert list_offset(broker.bootstrap_servers, topic, EARLIEST) == (0, start)
    files_after = _remote_files(broker, topic)
    assert len(files_after) < len(files_before)
    gone = set(files_before) - set(files_after)
    assert any(p.name.endswith(".log") for p in gone)  # objects of deleted segments went
    # below the new start: out of range; from it: everything to the end, as produced
    assert fetch_once(broker.bootstrap_servers, topic, 0)[0] == OffsetOutOfRangeError.errno
    assert read_sdk(broker.bootstrap_servers, topic, COUNT - start, start) == records[start:]


def test_time_retention_removes_old_remote_segments_and_local_ms_empties_the_local_tier(
        broker, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    """retention.ms (both tiers) deletes remote segments whose newest record is older,
    metadata then objects, and logs it; local.retention.ms alone (local.retention.bytes
    follows the unbounded retention.bytes) drops every copied local segment once older."""
    from sdk import Producer

    caplog.set_level(logging.INFO, logger="server_ref.tiered")
    topic, hour_ms, half = "tiered-time-retention", 3_600_000, COUNT // 2
    records = make_records(COUNT)
    now = int(time.time() * 1000)
    stamps = [now - 2 * hour_ms + i if i < half else now + i for i in range(COUNT)]
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs(**{
            "retention.ms": str(hour_ms), "local.retention.ms": "1000",
            "local.retention.bytes": "-2"}))]).raise_if_failed()
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=2,
                  batch_size=4096) as producer:
        for (key, value, headers), stamp in zip(records, stamps, strict=True):
            producer.send(topic, value, key=key, headers=headers or None, partition=0,
                          timestamp_ms=stamp)
    part = _partition(broker, topic)
    remote = broker.broker.remote

    def settled() -> bool:
        active = part.log.active_segment.base_offset
        return (remote.highest_tiered_offset(part) == active - 1
                and part.log.log_start_offset == active  # every closed segment: time is up
                and remote.log_start_offset(part) > 0)
    wait_until(settled, "old remote segments deleted and the local tier down to the active "
               "segment")
    start = remote.log_start_offset(part)
    finished = remote.state_of(part).finished()
    # only segments holding a record younger than retention.ms remain, from the log start
    assert 0 < start <= half and finished[0].start_offset == start
    assert all(s.max_timestamp >= now for s in finished)
    assert list_offset(broker.bootstrap_servers, topic, EARLIEST) == (0, start)
    assert fetch_once(broker.bootstrap_servers, topic, 0)[0] == OffsetOutOfRangeError.errno
    assert not [p for p in _remote_files(broker, topic)
                if p.suffix == ".log" and int(p.name.split("-", 1)[0]) < start]
    assert read_sdk(broker.bootstrap_servers, topic, COUNT - start, start) == records[start:]
    assert "deleted remote segment 0-" in caplog.text and "(retention)" in caplog.text
    assert "copied segment" in caplog.text


def test_delete_records_moves_the_log_start_across_tiers(broker) -> None:  # type: ignore[no-untyped-def]
    topic = "tiered-delete-records"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())])
        records = make_records(COUNT)
        produce(broker.bootstrap_servers, topic, records)
        wait_until(_mostly_remote(broker, topic, COUNT), "the topic tiered")
        part = _partition(broker, topic)
        cut = part.log.log_start_offset // 2  # inside the remote tier
        tp = TopicPartition(topic, 0)
        assert admin.delete_records({tp: cut})[tp].low_watermark == cut
    assert list_offset(broker.bootstrap_servers, topic, EARLIEST) == (0, cut)
    assert fetch_once(broker.bootstrap_servers, topic, cut - 1)[0] == \
        OffsetOutOfRangeError.errno
    assert read_confluent(broker.bootstrap_servers, topic, COUNT - cut, cut) == records[cut:]
    remote = broker.broker.remote
    wait_until(lambda: all(s.end_offset >= cut for s in remote.state_of(part).finished()),
               "remote segments below the new start deleted")
    broker.restart()  # the moved start is in the metadata log
    assert list_offset(broker.bootstrap_servers, topic, EARLIEST) == (0, cut)


def test_enabling_on_an_existing_topic_copies_its_segments(broker) -> None:  # type: ignore[no-untyped-def]
    topic = "tiered-later"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, {"segment.bytes": "16384"})])
        records = make_records(COUNT)
        produce(broker.bootstrap_servers, topic, records)
        part = _partition(broker, topic)
        assert broker.broker.remote.state_of(part) is None
        admin.alter_configs({ConfigResource.topic(topic): {"remote.storage.enable": "true",
                                                           "local.retention.bytes": "20000"}})
        wait_until(_mostly_remote(broker, topic, COUNT), "the existing segments copied")
    assert read_kafka_python(broker.bootstrap_servers, topic, COUNT) == records


def test_kafka_rules_for_turning_remote_storage_on_and_off(tmp_path: Path) -> None:
    off = tiered_broker(tmp_path / "off", **{"remote.log.storage.system.enable": "false"})
    try:
        with AdminClient(bootstrap_servers=off.bootstrap_servers) as admin:
            result = admin.create_topics([NewTopic("t", 1, 1, {"remote.storage.enable":
                                                               "true"})])["t"]
            assert isinstance(result.error, InvalidConfigError)
            assert "Tiered Storage functionality is disabled in the broker" in str(result.error)
    finally:
        off.close()
    broker = tiered_broker(tmp_path / "on")
    try:
        with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
            compacted = admin.create_topics([NewTopic("c", 1, 1, {
                "remote.storage.enable": "true", "cleanup.policy": "compact"})])["c"]
            assert isinstance(compacted.error, InvalidConfigError)
            assert "Remote log storage is unsupported for the compacted topics" in \
                str(compacted.error)
            too_big = admin.create_topics([NewTopic("b", 1, 1, {
                "remote.storage.enable": "true", "retention.bytes": "1000",
                "local.retention.bytes": "2000"})])["b"]
            assert "Value must not be more than retention.bytes property value: 1000" in \
                str(too_big.error)
            topic = "tiered-off"
            admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())])
            records = make_records(COUNT)
            produce(broker.bootstrap_servers, topic, records)
            wait_until(_mostly_remote(broker, topic, COUNT), "the topic tiered")
            resource = ConfigResource.topic(topic)
            refused = admin.alter_configs({resource: {"remote.storage.enable": "false"}})
            assert "It is invalid to disable remote storage without deleting remote data" in \
                str(refused[resource].error)
            unequal = admin.alter_configs({resource: {"remote.log.copy.disable": "true"}})
            assert "When `remote.log.copy.disable` is set to true, the `local.retention.bytes` " \
                "and `retention.bytes` must be set to the identical value" in \
                str(unequal[resource].error)
            # read only: no more copies, the remote data stays readable
            read_only = admin.alter_configs({resource: {
                "remote.log.copy.disable": "true", "local.retention.bytes": None}})
            assert read_only[resource].error is None
            assert read_sdk(broker.bootstrap_servers, topic, COUNT) == records
            # off, deleting the remote data: the log starts where the local log does
            deleted = admin.alter_configs({resource: {
                "remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}})
            assert deleted[resource].error is None
            part = _partition(broker, topic)
            wait_until(lambda: not broker.broker.remote.state_of(part).segments,
                       "remote segments deleted")
            local_start = part.log.log_start_offset
            assert list_offset(broker.bootstrap_servers, topic, EARLIEST) == (0, local_start)
            assert not [p for p in _remote_files(broker, topic) if p.suffix == ".log"]
            assert read_sdk(broker.bootstrap_servers, topic, COUNT - local_start,
                            local_start) == records[local_start:]
    finally:
        broker.close()


def test_log_dirs_and_cli_show_local_and_remote_bytes(broker, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from sdk.cli import main

    topic = "tiered-sizes"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())])
        produce(broker.bootstrap_servers, topic, make_records(COUNT))
        wait_until(_mostly_remote(broker, topic, COUNT), "the topic tiered")
        part = _partition(broker, topic)
        local, remote = part.log.size_in_bytes(), broker.broker.remote.remote_bytes(part)
        dirs = admin.describe_log_dirs()[0]
    tp = TopicPartition(topic, 0)
    assert [d.is_remote for d in dirs] == [False, True]
    assert dirs[0].replicas[tp].size == local and dirs[1].replicas[tp].size == remote
    assert dirs[1].path == f"remote:file://{broker.data_dir.resolve()}/remote-storage"
    capsys.readouterr()
    assert main(["--bootstrap-server", broker.bootstrap_servers, "topics", "describe", topic,
                 "--sizes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc[0]["partitions"][0]["local_bytes"] == local
    assert doc[0]["partitions"][0]["remote_bytes"] == remote
    assert main(["--bootstrap-server", broker.bootstrap_servers, "topics", "describe", topic,
                 "--sizes"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert header.split()[-2:] == ["LOCAL_BYTES", "REMOTE_BYTES"]
    assert row.split()[-2:] == [str(local), str(remote)]


def test_a_broker_with_tiering_off_refuses_to_start_while_a_topic_has_it(tmp_path: Path
                                                                         ) -> None:
    from sdk.errors import ConfigError
    from server_ref import EmbeddedBroker

    data = tmp_path / "data"
    broker = tiered_broker(data)
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("kept", 1, 1, tiered_topic_configs())])
    broker.close()
    off = EmbeddedBroker(data_dir=data)
    with pytest.raises(ConfigError) as refused:
        off.start()
    assert "You have to delete all topics with the property remote.storage.enable=true " \
        "before disabling tiered storage cluster-wide" in str(refused.value)
    off.close()
    tiered_broker(data).close()  # with it on again, the broker starts


def test_deleting_a_topic_deletes_its_remote_data(broker) -> None:  # type: ignore[no-untyped-def]
    topic = "tiered-deleted"
    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())])
        produce(broker.bootstrap_servers, topic, make_records(COUNT))
        wait_until(_mostly_remote(broker, topic, COUNT), "the topic tiered")
        assert _remote_files(broker, topic)
        assert admin.delete_topics([topic])[topic].error is None
    wait_until(lambda: not _remote_files(broker, topic), "the deleted topic's objects gone")
