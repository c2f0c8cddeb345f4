"""SubscriptionState: modes, assignment, positions, resets, pausing and lag."""

from __future__ import annotations

import re

import pytest

from sdk.consumer.subscription import (
    IsolationLevel,
    OffsetResetStrategy,
    SubscriptionMode,
    SubscriptionState,
)
from sdk.errors import IllegalStateError
from sdk.types import OffsetAndMetadata
from sdk.types import TopicPartition as TP

A0, A1, B0 = TP("a", 0), TP("a", 1), TP("b", 0)


def test_modes_are_mutually_exclusive() -> None:
    s = SubscriptionState()
    assert s.subscribe(["a", "b"])
    assert not s.subscribe(["b", "a"])  # unchanged
    with pytest.raises(IllegalStateError, match="unsubscribe"):
        s.assign([A0])
    with pytest.raises(IllegalStateError):
        s.subscribe_pattern("a.*")
    s.unsubscribe()
    s.assign([A0])
    assert s.mode is SubscriptionMode.MANUAL
    with pytest.raises(IllegalStateError):
        s.subscribe(["a"])


def test_bad_arguments() -> None:
    s = SubscriptionState()
    with pytest.raises(TypeError, match="collection"):
        s.subscribe("a")
    with pytest.raises(ValueError, match="invalid topic"):
        s.subscribe(["a", ""])
    with pytest.raises(TypeError):
        s.assign([("a", 0)])
    with pytest.raises(ValueError, match="invalid topic pattern"):
        s.subscribe_pattern("(")
    assert s.mode is SubscriptionMode.NONE
    with pytest.raises(ValueError, match="option"):
        SubscriptionState(default_reset="option")


def test_pattern_matches_whole_names_and_skips_internal_topics() -> None:
    s = SubscriptionState()
    s.subscribe_pattern(re.compile(r"orders-\d+"))
    assert s.match_topics(["orders-1", "orders-22", "orders-x", "old-orders-1", "__consumer_offsets"])
    assert s.subscription == {"orders-1", "orders-22"}
    assert not s.match_topics(["orders-22", "orders-1"])
    s2 = SubscriptionState()
    s2.subscribe_pattern(".*")
    s2.match_topics(["t", "__consumer_offsets"], internal=["__consumer_offsets"])
    assert s2.subscription == {"t"}


def test_group_assignment_checks_topics() -> None:
    s = SubscriptionState()
    s.subscribe(["a"])
    with pytest.raises(IllegalStateError, match="unsubscribed topics"):
        s.assign_from_group([B0])
    s.assign_from_group([A0, A1])
    assert s.assigned_partitions() == {A0, A1}
    # A pattern member accepts topics the leader matched before it did.
    p = SubscriptionState()
    p.subscribe_pattern("a|b")
    p.assign_from_group([B0])
    assert "b" in p.subscription
    manual = SubscriptionState()
    manual.assign([A0])
    with pytest.raises(IllegalStateError):
        manual.assign_from_group([A0])


def test_reassignment_keeps_positions_of_partitions_that_stay() -> None:
    s = SubscriptionState()
    s.assign([A0, A1])
    s.seek(A0, 10)
    version = s.assignment_version
    s.assign([A0, B0])
    assert s.assignment_version == version + 1
    assert s.position(A0) == 10 and s.position(B0) is None
    with pytest.raises(IllegalStateError, match="not assigned"):
        s.position(A1)


def test_cooperative_add_and_remove() -> None:
    s = SubscriptionState()
    s.subscribe(["a"])
    s.assign_from_group([A0])
    s.seek(A0, 5)
    s.add_assigned([A0, A1])
    assert s.position(A0) == 5 and s.assigned_partitions() == {A0, A1}
    s.remove_assigned([A0])
    assert s.assigned_partitions() == {A1}


def test_positions_resets_and_epochs() -> None:
    s = SubscriptionState(default_reset="earliest")
    s.assign([A0, A1])
    assert s.missing_positions() == [A0, A1]
    s.request_reset(A0)
    assert s.reset_pending() == {A0: OffsetResetStrategy.EARLIEST}
    assert s.missing_positions() == [A1]
    epoch = s.state(A0).epoch
    s.request_reset(A0, "latest")
    assert s.state(A0).epoch == epoch + 1
    # A lookup started for "earliest" must not land after the strategy changed.
    assert not s.complete_reset(A0, 0, OffsetResetStrategy.EARLIEST)
    assert s.complete_reset(A0, 42, OffsetResetStrategy.LATEST)
    assert s.position(A0) == 42 and not s.reset_pending()
    assert not s.has_all_positions()
    s.seek(A1, 7)
    assert s.has_all_positions()
    with pytest.raises(ValueError, match="offset"):
        s.seek(A1, -1)


def test_advance_keeps_the_epoch_and_consumed_offsets_follow_it() -> None:
    s = SubscriptionState()
    s.assign([A0, A1])
    s.seek(A0, 3)
    epoch = s.state(A0).epoch
    s.advance(A0, 8, leader_epoch=2)
    assert s.state(A0).epoch == epoch  # consuming does not invalidate prefetched data
    assert s.consumed_offsets() == {A0: OffsetAndMetadata(8, "", 2)}


def test_pause_resume_and_fetchable() -> None:
    s = SubscriptionState()
    s.assign([A0, A1, B0])
    s.seek(A0, 0)
    s.seek(A1, 0)
    s.request_reset(B0)
    assert sorted(s.fetchable_partitions()) == [A0, A1]
    s.pause([A0])
    assert s.paused() == {A0}
    assert s.fetchable_partitions() == [A1]
    s.resume([A0])
    assert sorted(s.fetchable_partitions()) == [A0, A1]
    with pytest.raises(IllegalStateError):
        s.pause([TP("zz", 0)])


def test_lag_uses_lso_under_read_committed() -> None:
    s = SubscriptionState()
    s.assign([A0])
    assert s.lag(A0) is None
    s.seek(A0, 10)
    s.update_watermarks(A0, high_watermark=25, last_stable_offset=20, log_start_offset=-1)
    assert s.lag(A0) == 15
    assert s.state(A0).log_start_offset is None
    rc = SubscriptionState(isolation_level=IsolationLevel.READ_COMMITTED)
    rc.assign([A0])
    rc.seek(A0, 10)
    rc.update_watermarks(A0, high_watermark=25, last_stable_offset=20)
    assert rc.lag(A0) == 10
    rc.update_watermarks(TP("other", 0), high_watermark=1)  # unassigned: ignored


def test_metadata_topics() -> None:
    s = SubscriptionState()
    s.subscribe(["a"])
    s.set_group_topics(["a", "b"])
    assert s.metadata_topics == {"a", "b"}
    s.unsubscribe()
    s.assign([B0])
    assert s.metadata_topics == {"b"}
    s.assign([])
    assert s.mode is SubscriptionMode.NONE
