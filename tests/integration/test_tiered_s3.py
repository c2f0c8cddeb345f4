"""Tiered storage with the S3 backend, against a real S3 API server process: moto's server
mode, started by the tests, SIGSTOPped, killed and started again to take the store away
while the broker copies and serves."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sdk import AdminClient, ConfigResource
from sdk.errors import UnknownServerError
from sdk.types import NewTopic
from server_ref.tiered.metadata import (
    METADATA_PARTITIONS,
    METADATA_TOPIC,
    PartitionRemoteState,
    RemoteSegment,
    SegmentState,
    index_of,
)
from tests.integration.tiered_kit import (
    EARLIEST,
    LATEST_TIERED,
    MotoServer,
    fetch_once,
    list_offset,
    make_records,
    produce,
    read_confluent,
    read_kafka_python,
    read_sdk,
    s3_broker_config,
    tiered_broker,
    tiered_topic_configs,
    wait_until,
)

BUCKET = "kafka-tier"
COUNT = 2000
SECRET = "s3cr3t-never-logged"


@pytest.fixture
def moto() -> Iterator[MotoServer]:
    server = MotoServer().start()
    server.client().create_bucket(Bucket=BUCKET)
    yield server
    server.kill()


def _config(moto: MotoServer) -> dict[str, str]:
    config = s3_broker_config(moto, BUCKET)
    config["remote.log.storage.s3.secret.access.key"] = SECRET
    config["remote.log.storage.s3.request.timeout.ms"] = "1500"
    return config


def _partition(broker, topic: str):  # type: ignore[no-untyped-def]
    return broker.broker.topics.get(topic).partitions[0]


def _all_closed_copied(broker, topic: str):  # type: ignore[no-untyped-def]
    def check() -> bool:
        part = _partition(broker, topic)
        remote = broker.broker.remote
        state = remote.state_of(part)
        return (remote.highest_tiered_offset(part) == part.log.active_segment.base_offset - 1
                and part.log.log_start_offset > 0 and state is not None
                and all(s.state.value == "COPY_SEGMENT_FINISHED"
                        for s in state.segments.values()))
    return check


def _expected_keys(broker, topic: str) -> list[str]:  # type: ignore[no-untyped-def]
    state = broker.broker.remote.state_of(_partition(broker, topic))
    return sorted(f"tiered/{k}" for s in state.finished() for k in s.keys())


def test_s3_tier_serves_every_client_and_keeps_credentials_secret(
        moto: MotoServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="server_ref")
    broker = tiered_broker(tmp_path / "data", **_config(moto))
    try:
        topic = "s3-read"
        with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())])
            records = make_records(COUNT)
            produce(broker.bootstrap_servers, topic, records)
            wait_until(_all_closed_copied(broker, topic), "segments copied to S3")
            # every object of every finished segment, nothing else
            assert moto.keys(BUCKET) == _expected_keys(broker, topic)
            assert {k.rsplit(".", 1)[1] for k in moto.keys(BUCKET)} == {
                "log", "index", "timeindex", "snapshot", "leader_epoch_checkpoint"}
            for read in (read_sdk, read_confluent, read_kafka_python):
                assert read(broker.bootstrap_servers, topic, COUNT) == records, read.__name__
            described = admin.describe_configs([ConfigResource.broker(0)])
            entries = described[ConfigResource.broker(0)].entries
            secret = entries["remote.log.storage.s3.secret.access.key"]
            assert secret.value is None and secret.is_sensitive
        broker.restart()
        assert read_sdk(broker.bootstrap_servers, topic, COUNT) == records
    finally:
        broker.close()
    assert "copied segment" in caplog.text
    assert SECRET not in caplog.text and SECRET not in repr(broker.config)


def test_s3_store_paused_mid_run_copies_retry_and_nothing_is_lost(
        moto: MotoServer, tmp_path: Path) -> None:
    broker = tiered_broker(tmp_path / "data", **_config(moto))
    try:
        topic = "s3-outage"
        with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())])
        first = make_records(COUNT, "a")
        produce(broker.bootstrap_servers, topic, first)
        wait_until(_all_closed_copied(broker, topic), "the first records tiered")
        part = _partition(broker, topic)
        remote = broker.broker.remote
        tiered_before = remote.highest_tiered_offset(part)

        moto.pause()  # the store stops answering (SIGSTOP)
        second = make_records(COUNT, "b")
        produce(broker.bootstrap_servers, topic, second)
        # a fetch from the remote tier fails with Kafka's answer, a retriable one for clients
        code, _, _ = fetch_once(broker.bootstrap_servers, topic, 0)
        assert code == UnknownServerError.errno
        everything = first + second
        # readers from offset 0 meanwhile: they retry until the store is back
        pool = ThreadPoolExecutor(2)
        waiting = [pool.submit(read, broker.bootstrap_servers, topic, 2 * COUNT)
                   for read in (read_sdk, read_confluent)]
        # local reads go on
        local_start = part.log.log_start_offset
        assert read_sdk(broker.bootstrap_servers, topic, 2 * COUNT - local_start,
                        local_start) == everything[local_start:]
        # copies fail and are retried; nothing uncopied leaves the local log
        wait_until(lambda: any(s.state.value in ("COPY_SEGMENT_STARTED",
                                                 "DELETE_SEGMENT_STARTED")
                               for s in remote.state_of(part).segments.values()),
                   "a copy tried against the paused store")
        assert remote.highest_tiered_offset(part) == tiered_before
        assert part.log.log_start_offset <= tiered_before + 1

        # the broker stops mid-copy; the store comes back; the broker starts again
        broker.stop()
        moto.resume()
        broker.start()
        wait_until(_all_closed_copied(broker, topic), "the copies retried after the outage")
        part = _partition(broker, topic)
        assert broker.broker.remote.highest_tiered_offset(part) > tiered_before
        # the interrupted copy's objects were deleted: only finished segments' objects remain
        wait_until(lambda: moto.keys(BUCKET) == _expected_keys(broker, topic),
                   "no objects of the interrupted copy left")
        assert [f.result() for f in waiting] == [everything, everything]
        pool.shutdown()
        assert read_sdk(broker.bootstrap_servers, topic, 2 * COUNT) == everything
    finally:
        broker.close()


def test_s3_store_killed_then_restarted_copies_catch_up(moto: MotoServer,
                                                          tmp_path: Path) -> None:
    broker = tiered_broker(tmp_path / "data", **_config(moto))
    try:
        topic = "s3-killed"
        port = moto.port
        moto.kill()  # down before anything was copied: connections refused
        with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())])
        records = make_records(COUNT)
        produce(broker.bootstrap_servers, topic, records)
        part = _partition(broker, topic)
        remote = broker.broker.remote
        # a failed copy leaves its COPY_SEGMENT_STARTED entry, which the next run turns into
        # DELETE_SEGMENT_STARTED (its objects to delete first, once the store answers)
        wait_until(lambda: remote.state_of(part) is not None and any(
            s.state.value in ("COPY_SEGMENT_STARTED", "DELETE_SEGMENT_STARTED")
            for s in remote.state_of(part).segments.values()), "a failed copy attempt")
        assert remote.highest_tiered_offset(part) == -1
        assert part.log.log_start_offset == 0  # nothing copied: nothing deleted locally
        assert list_offset(broker.bootstrap_servers, topic, EARLIEST) == (0, 0)

        moto.port = port  # the same endpoint, a fresh (empty) store
        moto.start()
        moto.client().create_bucket(Bucket=BUCKET)
        wait_until(_all_closed_copied(broker, topic), "copies after the store came back")
        wait_until(lambda: moto.keys(BUCKET) == _expected_keys(broker, topic),
                   "only finished segments' objects")
        assert read_sdk(broker.bootstrap_servers, topic, COUNT) == records
    finally:
        broker.close()


def _metadata_state(bootstrap: str, topic_id: str) -> PartitionRemoteState:
    """A partition's remote segments as ``__remote_log_metadata`` holds them, read by a
    client (the broker under test is another process) and replayed as a broker would."""
    from sdk import Consumer
    from sdk.types import TopicPartition

    tp = TopicPartition(METADATA_TOPIC, index_of(topic_id, 0, METADATA_PARTITIONS))
    state = PartitionRemoteState()
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        end = consumer.end_offsets([tp])[tp]
        while consumer.position(tp) < end:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    doc = json.loads(record.value)
                    if record.key == f"{topic_id}:0".encode() and doc["type"] == "segment":
                        state.apply(RemoteSegment.from_json(doc))
    return state


def test_broker_killed_mid_copy_leaves_no_half_segment_and_loses_nothing(
        moto: MotoServer, tmp_path: Path) -> None:
    """The broker process SIGKILLed while an upload hangs in the (SIGSTOPped) store: the
    segment stays COPY_SEGMENT_STARTED in the metadata log, is never read from the remote
    tier and its local copy is kept; after the restart its objects are deleted, it is
    copied again and every record reads back byte for byte."""
    from tests.interop.interop_kit import BrokerProcess

    data = tmp_path / "data"
    config = {**_config(moto), "remote.log.storage.system.enable": "true",
              "remote.log.manager.task.interval.ms": "100",
              "log.retention.check.interval.ms": "100",
              # an upload to the paused store hangs (until the kill) instead of failing
              "remote.log.storage.s3.request.timeout.ms": "300000"}
    process = BrokerProcess(data, config=config).start()
    broker = None
    try:
        topic = "s3-crash"
        with AdminClient(bootstrap_servers=process.bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 1, 1, tiered_topic_configs())]
                                ).raise_if_failed()
            topic_id = str(admin.describe_topics([topic])[topic].topic_id)
        first, second = make_records(COUNT, "a"), make_records(COUNT, "b")
        produce(process.bootstrap, topic, first)
        wait_until(lambda: list_offset(process.bootstrap, topic, LATEST_TIERED)[1] > 0,
                   "a first segment copied")
        moto.pause()
        produce(process.bootstrap, topic, second)
        wait_until(lambda: bool(_metadata_state(process.bootstrap, topic_id).in_state(
            SegmentState.COPY_SEGMENT_STARTED)), "a copy started against the paused store")
        process.kill()  # a crash: the upload thread dies inside its request
        moto.resume()

        # Started again in place (in-process, to look inside), its copy task held back
        broker = tiered_broker(data, **{**_config(moto),
                                        "remote.log.manager.task.interval.ms": "3600000"})
        part = _partition(broker, topic)
        remote = broker.broker.remote
        state = remote.state_of(part)
        started = state.in_state(SegmentState.COPY_SEGMENT_STARTED)
        assert started, "the interrupted copy is in the replayed metadata log"
        for segment in started:  # not readable remotely, still in the local log
            assert state.segment_for(segment.start_offset) is None
            assert part.log.log_start_offset <= segment.start_offset
        assert read_sdk(broker.bootstrap_servers, topic, 2 * COUNT) == first + second

        stale = {s.segment_id for s in started}

        def recovered() -> bool:
            broker.call(remote.wake)
            return (_all_closed_copied(broker, topic)()
                    and not stale & set(remote.state_of(part).segments)
                    and moto.keys(BUCKET) == _expected_keys(broker, topic))
        wait_until(recovered, "the interrupted copy's objects deleted and the segment "
                   "copied again")
        assert remote.highest_tiered_offset(part) >= max(s.end_offset for s in started)
        for read in (read_sdk, read_confluent, read_kafka_python):
            assert read(broker.bootstrap_servers, topic, 2 * COUNT) == first + second, \
                read.__name__
    finally:
        moto.resume()
        process.kill()
        if broker is not None:
            broker.close()
