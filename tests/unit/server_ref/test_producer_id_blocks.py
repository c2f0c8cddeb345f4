"""The metadata image keeps the next block of producer ids (AllocateProducerIds): applied
from ``producer_ids`` records in log order, never moving back, and carried by snapshots,
so a controller elected later, or a node restarted from a snapshot, goes on after the last
block handed out."""

from __future__ import annotations

from server_ref.controller import records
from server_ref.controller.image import MetadataImage


def test_blocks_move_forward_and_survive_a_snapshot() -> None:
    image = MetadataImage()
    assert image.next_producer_id == 0
    for broker, end in ((1, 1000), (2, 2000), (1, 3000)):
        image.apply(records.decode(records.encode(
            {"type": "producer_ids", "broker": broker, "epoch": 5, "next": end})))
    assert image.next_producer_id == 3000
    image.apply({"type": "producer_ids", "broker": 3, "epoch": 5, "next": 1000})  # stale
    assert image.next_producer_id == 3000
    restored = MetadataImage.from_snapshot(image.to_snapshot(), 42)
    assert restored.next_producer_id == 3000


def test_a_snapshot_without_the_field_starts_at_zero() -> None:
    """Snapshots written before producer id blocks existed."""
    image = MetadataImage()
    payload = image.to_snapshot().replace(b'"next_producer_id":0,', b"")
    payload = payload.replace(b'"next_producer_id": 0, ', b"")
    assert b"next_producer_id" not in payload
    assert MetadataImage.from_snapshot(payload, 0).next_producer_id == 0
