"""AllocateProducerIds (KIP-730): the active controller hands brokers blocks of producer ids.

Each block is ``BLOCK_SIZE`` ids (Kafka's 1,000) from the image's ``next_producer_id``; the
controller commits a ``producer_ids`` record {broker, epoch, next} before it answers, so a
new active controller (or a node replaying the log or a snapshot) goes on after the last
block handed out and no two producers ever get the same id, whichever broker gave it and
however often brokers restart. Only a registered broker at its current epoch gets a block
(BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH otherwise, as Kafka's controller answers).
"""

from __future__ import annotations

from typing import Any

from sdk.errors import (
    BrokerIdNotRegisteredError,
    KafkaError,
    StaleBrokerEpochError,
    UnknownServerError,
)
from sdk.protocol.messages.allocate_producer_ids import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)
from server_ref.controller.controller import QuorumController

__all__ = ["BLOCK_SIZE", "register_producer_id_apis"]

BLOCK_SIZE = 1000


def register_producer_id_apis(server: Any, controller: QuorumController) -> None:
    async def allocate(req: AllocateProducerIdsRequest, version: int
                       ) -> AllocateProducerIdsResponse:
        def decide() -> tuple[list[dict[str, Any]], int]:
            broker = controller.image.brokers.get(req.broker_id)
            if broker is None:
                raise BrokerIdNotRegisteredError(f"broker {req.broker_id} is not registered")
            if broker.epoch != req.broker_epoch:
                raise StaleBrokerEpochError(
                    f"broker {req.broker_id} epoch {req.broker_epoch} is not its current "
                    f"epoch {broker.epoch}")
            start = controller.image.next_producer_id
            return [{"type": "producer_ids", "broker": req.broker_id,
                     "epoch": req.broker_epoch, "next": start + BLOCK_SIZE}], start

        try:
            start = await controller.write(decide)
        except KafkaError as exc:
            code = int(getattr(exc, "errno", UnknownServerError.errno))
            return AllocateProducerIdsResponse(error_code=code, producer_id_start=-1,
                                               producer_id_len=0)
        return AllocateProducerIdsResponse(producer_id_start=start,
                                           producer_id_len=BLOCK_SIZE)

    server.register(67, 0, 0, allocate)
