"""ProducerIdManager: how a reset moves to a new (producer id, epoch) - rule 5 of
sdk.producer.idempotence. Ids come from the reference broker with InitProducerId."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from sdk import errors
from sdk.net.client import NetClient
from sdk.net.config import CommonConfig
from sdk.producer.idempotence import EPOCH_MAX, ProducerIdManager, reset_bumps_epoch

UNKNOWN_PRODUCER_ID = errors.UnknownProducerIdError.errno
OUT_OF_ORDER = errors.OutOfOrderSequenceNumberError.errno
INVALID_EPOCH = errors.InvalidProducerEpochError.errno
FENCED = errors.ProducerFencedError.errno


@pytest.fixture
async def ids(embedded_broker: Any) -> AsyncIterator[ProducerIdManager]:
    client = NetClient(CommonConfig.build(bootstrap_servers=embedded_broker.bootstrap_servers))
    await client.start()
    manager = ProducerIdManager(client, backoff_ms=10, backoff_max_ms=100,
                                request_timeout_s=10)
    await manager.obtain()
    assert manager.producer_id >= 0 and manager.epoch == 0
    try:
        yield manager
    finally:
        await client.close()


async def test_bump_keeps_the_id_and_adds_one_to_the_epoch(ids: ProducerIdManager) -> None:
    pid = ids.producer_id
    ids.request_reset("lost sequences", bump_epoch=True)
    assert not ids.has_id
    ids.apply_reset()
    assert (ids.producer_id, ids.epoch) == (pid, 1)
    assert ids.has_id and not ids.reset_requested
    ids.bump_epoch()
    assert (ids.producer_id, ids.epoch) == (pid, 2)


async def test_bump_at_the_last_epoch_asks_for_a_new_id(ids: ProducerIdManager) -> None:
    pid = ids.producer_id
    ids.epoch = EPOCH_MAX
    ids.request_reset("lost sequences", bump_epoch=True)
    ids.apply_reset()
    assert ids.producer_id == -1 and not ids.has_id  # the sender fetches a new one next
    await ids.obtain()
    assert ids.producer_id >= 0 and ids.producer_id != pid and ids.epoch == 0


async def test_a_reason_that_needs_a_new_id_wins(ids: ProducerIdManager) -> None:
    ids.request_reset("lost sequences", bump_epoch=True)
    ids.request_reset("fenced", bump_epoch=False)
    ids.request_reset("lost sequences again", bump_epoch=True)
    ids.apply_reset()
    assert ids.producer_id == -1
    await ids.obtain()
    # The next reset is decided afresh: a bump again.
    pid = ids.producer_id
    ids.request_reset("lost sequences", bump_epoch=True)
    ids.apply_reset()
    assert (ids.producer_id, ids.epoch) == (pid, 1)


@pytest.mark.parametrize(("code", "sequence", "bump"), [
    (UNKNOWN_PRODUCER_ID, 7, True),
    (OUT_OF_ORDER, 7, True),
    (INVALID_EPOCH, 7, False),  # the broker holds a higher epoch
    (FENCED, 7, False),
    (UNKNOWN_PRODUCER_ID, 0, False),  # a fresh start was refused: a bump would be too
    (OUT_OF_ORDER, 0, False),
])
def test_which_errors_allow_a_bump(code: int, sequence: int, bump: bool) -> None:
    assert reset_bumps_epoch(code, sequence) is bump
