"""HeartbeatTimer: driven by explicit times, no clock."""

from __future__ import annotations

import pytest

from sdk.consumer.heartbeat import HeartbeatTimer


def timer(now: float = 100.0) -> HeartbeatTimer:
    return HeartbeatTimer(session_timeout_ms=10_000, heartbeat_interval_ms=3_000,
                          max_poll_interval_ms=60_000, retry_backoff_ms=500, now=now)


def test_heartbeat_due_every_interval_after_the_last_send() -> None:
    t = timer()
    assert not t.should_heartbeat(102.9)
    assert t.time_to_next_heartbeat(101.0) == pytest.approx(2.0)
    assert t.should_heartbeat(103.0)
    t.sent_heartbeat(103.0)
    assert not t.should_heartbeat(110.0)  # one in flight: never two at once
    t.received_heartbeat(103.2)
    assert not t.should_heartbeat(105.9)
    assert t.should_heartbeat(106.0)


def test_failed_heartbeat_retries_after_backoff() -> None:
    t = timer()
    t.sent_heartbeat(103.0)
    t.failed_heartbeat(103.1)
    assert not t.should_heartbeat(103.5)
    assert t.should_heartbeat(103.6)
    t.sent_heartbeat(103.6)
    t.received_heartbeat(103.7)
    assert t.next_heartbeat_at() == pytest.approx(106.6)


def test_session_expires_without_successful_heartbeats() -> None:
    t = timer()
    assert not t.session_expired(109.9)
    t.sent_heartbeat(103.0)
    t.received_heartbeat(105.0)
    assert not t.session_expired(114.9)
    assert t.session_expired(115.0)
    t.reset_session(120.0)  # rejoined
    assert not t.session_expired(129.0)
    assert t.session_expired(130.0)


def test_poll_interval() -> None:
    t = timer()
    assert t.time_to_poll_deadline(130.0) == pytest.approx(30.0)
    assert not t.poll_expired(159.9)
    assert t.poll_expired(160.0)
    t.polled(150.0)
    assert not t.poll_expired(209.0)
    assert t.poll_expired(210.0)


def test_next_event_is_the_earliest_deadline() -> None:
    t = timer()
    assert t.time_to_next_event(100.0) == pytest.approx(3.0)  # heartbeat
    t.sent_heartbeat(103.0)
    assert t.time_to_next_event(103.0) == pytest.approx(7.0)  # session, heartbeat in flight


def test_rejects_heartbeat_interval_not_below_session_timeout() -> None:
    with pytest.raises(ValueError, match="lower than the session timeout"):
        HeartbeatTimer(session_timeout_ms=3000, heartbeat_interval_ms=3000, max_poll_interval_ms=1)
