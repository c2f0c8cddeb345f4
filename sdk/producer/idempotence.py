"""Idempotent producing: the producer id and epoch, and when a batch may fail.

The broker keeps, per producer id and partition, the sequence number it expects next and
the last five batches it appended. Every batch carries ``(producer id, epoch, base
sequence)``; sequences count records per partition. A resent batch that was already written
is recognised as a duplicate and acknowledged again instead of being appended twice, and a
batch whose sequence is ahead of what the broker expects is refused
(OUT_OF_ORDER_SEQUENCE_NUMBER) instead of being appended out of order. So the producer may
resend freely under the same producer id and epoch: retries never duplicate or reorder.

The sender (``sdk.producer.sender``) applies these rules:

* A batch gets its sequence when it is first sent (drained) and keeps it across retries.
  At most ``max_in_flight_requests_per_connection`` (<= 5) batches of one partition are in
  flight; only one until the partition acknowledged a batch of the current producer id and
  epoch (a broker with no state for a producer takes its first batch whatever its sequence,
  so a batch behind a failed first one would be written ahead of it). After a failed
  attempt a partition sends only its retried batches, lowest sequence first and one at a
  time, before any new batch.
* MESSAGE_TOO_LARGE for a batch of several records splits it: its parts take its sequence
  numbers and are sent next, as retries (``Sender._split``).
* OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is *not* the next one the broker should see
  (an earlier batch of the partition is being retried) is a consequence of that earlier
  failure: the batch is retried after it. For the next expected batch, and for
  UNKNOWN_PRODUCER_ID / INVALID_PRODUCER_EPOCH / PRODUCER_FENCED, the broker has lost or
  replaced our state: the batch (definitely not written) is kept and the producer state is
  reset (below).

When can a batch fail under idempotence?  (DESIGN.md, "When can a batch fail?")

A batch gets its sequence numbers when it is first sent. Its outcome is *unknown* once an
attempt ended without an answer (the connection broke or the request timed out) or with an
answer the leader gives after appending it (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND:
the records may still be committed); it stays unknown until an attempt succeeds. A batch
fails only in these cases:

1. **Never sent**: ``delivery_timeout_ms`` passed before it could be sent (no leader,
   broker unreachable, no producer id yet, stuck behind a retry) -> DeliveryTimeoutError.
   It was not written and holds no sequence numbers; nothing else is affected.
2. **Sent, outcome known, refused for good**: the broker answered with a non-retriable
   error (e.g. MESSAGE_TOO_LARGE for a single record, INVALID_RECORD,
   TOPIC_AUTHORIZATION_FAILED) -> that
   error; or with retriable errors until ``retries`` attempts were used up, or until
   ``delivery_timeout_ms`` passed -> the last error (e.g. NOT_ENOUGH_REPLICAS: the
   application learns why, not only that time ran out).
   It was definitely not written: the partition's later batches get their sequence
   numbers moved down by its record count and carry on.
3. **Sent, outcome unknown**, and then failed as in 2 (typically by
   ``delivery_timeout_ms`` -> DeliveryTimeoutError): the records *may* have been written.
   The broker's expected sequence can no longer be known, so the producer state is
   reset (5).
4. **Waiting for a retry with an unknown outcome when the producer state is reset** -> its
   last error (e.g. KafkaConnectionError): resending it under a new producer id or epoch
   could write it twice, so it is failed instead.
5. **The reset itself** (after 3, or when the broker lost or replaced our producer state:
   OUT_OF_ORDER_SEQUENCE_NUMBER for the very next expected batch, UNKNOWN_PRODUCER_ID,
   INVALID_PRODUCER_EPOCH, PRODUCER_FENCED) fails nothing else: the sender waits until no
   request is in flight, applies 4, moves to a new (producer id, epoch), restarts every
   partition's sequences at 0 and resends the batches known not to be written, in their
   order, before new ones. How the new pair is obtained (KIP-360, as Java since 2.5):

   * after 3, OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID the epoch is *bumped
     locally*: same producer id, epoch + 1, no round trip. A broker takes a higher epoch of
     a producer it knows when the batch starts at sequence 0 (and one it does not know
     anyway), and from then on refuses the old epoch, so a late copy of an old batch can
     no longer be written;
   * after INVALID_PRODUCER_EPOCH or PRODUCER_FENCED, a new producer id is fetched with
     InitProducerId: the broker holds a higher epoch than ours (or does not take bumped
     epochs: tansu answers PRODUCER_FENCED to one), and bumping cannot win against it;
   * also when the refused batch was sent at sequence 0 (the broker refused a fresh start,
     so a bumped epoch would be refused the same way), and when the epoch is already
     32767 (it would overflow).

   A broker that refuses bumped epochs thus costs one refused request per reset, then
   the producer carries on under a new id.
6. **Closing**: ``close(timeout)`` fails what is still unacknowledged at the timeout with
   ProducerClosedError (the outcome of batches in flight at that moment is unknown).

Nothing else fails a batch: a retriable error (leader moved, broker restarting, connection
lost, not enough replicas) is retried with the same sequence until the delivery timeout.
"""

from __future__ import annotations

import logging
import time

from sdk.errors import KafkaError, raise_for_code
from sdk.net.client import NetClient
from sdk.net.retry import Backoff
from sdk.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

__all__ = ["EPOCH_MAX", "SEQUENCE_MASK", "ProducerIdManager", "reset_bumps_epoch"]

log = logging.getLogger(__name__)

SEQUENCE_MASK = 0x7FFFFFFF  # sequences wrap at 2**31 on the wire; kept unbounded in memory
EPOCH_MAX = 0x7FFF  # epochs are int16 on the wire; past this a new producer id is needed
# Resets that keep the producer id (rule 5): the broker forgot or lost track of our
# sequences, but nobody holds a higher epoch than ours.
_BUMPABLE = (45, 59)  # OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID
# Idempotent (non-transactional) producers still send a timeout; Java uses its default.
_TRANSACTION_TIMEOUT_MS = 60_000


class ProducerIdManager:
    """Holds the producer id and epoch and obtains them with InitProducerId."""

    def __init__(self, client: NetClient, *, backoff_ms: int, backoff_max_ms: int,
                 request_timeout_s: float) -> None:
        self._client = client
        self.producer_id = -1
        self.epoch = -1
        self.reset_requested = False
        self._new_id_needed = False  # the pending reset must fetch a new id (rule 5)
        self.last_error: BaseException | None = None
        self.retry_at = 0.0
        self._failures = 0
        self._backoff = Backoff(backoff_ms, backoff_max_ms)
        self._timeout_s = request_timeout_s

    @property
    def has_id(self) -> bool:
        return self.producer_id >= 0 and not self.reset_requested

    def request_reset(self, reason: str, *, bump_epoch: bool) -> None:
        """Ask for a reset (rule 5), applied by the sender with :meth:`apply_reset` once no
        request is in flight. ``bump_epoch`` says whether this reason allows keeping the id;
        when several reasons pile up before the reset, one that needs a new id wins."""
        if not self.reset_requested:
            how = "bumping the epoch of" if bump_epoch else "replacing"
            log.warning("%s the idempotent producer id %s (epoch %s): %s", how,
                        self.producer_id, self.epoch, reason)
        self.reset_requested = True
        self._new_id_needed = self._new_id_needed or not bump_epoch

    def apply_reset(self) -> None:
        """Carry out the requested reset: bump the epoch, or forget the id."""
        if self._new_id_needed:
            self.clear()
        else:
            self.bump_epoch()

    def bump_epoch(self) -> None:
        """Same producer id, epoch + 1, decided locally (KIP-360). At EPOCH_MAX the epoch
        cannot grow: the id is forgotten and a new one fetched instead."""
        if self.producer_id < 0 or self.epoch >= EPOCH_MAX:
            self.clear()
            return
        self.epoch += 1
        self.reset_requested = False
        self._new_id_needed = False
        log.info("idempotent producer id %s bumped to epoch %s", self.producer_id, self.epoch)

    def clear(self) -> None:
        """Forget the id (after the sender applied a reset); a new one is fetched next."""
        self.producer_id = -1
        self.epoch = -1
        self.reset_requested = False
        self._new_id_needed = False

    async def obtain(self) -> None:
        """InitProducerId with retries (within the request timeout); on failure the error is
        kept in ``last_error`` and ``retry_at`` set for the next try."""
        request = InitProducerIdRequest(transactional_id=None,
                                        transaction_timeout_ms=_TRANSACTION_TIMEOUT_MS)

        def check(response: InitProducerIdResponse) -> None:
            raise_for_code(response.error_code, "InitProducerId")

        try:
            response = await self._client.call(request, check=check, timeout_s=self._timeout_s)
        except KafkaError as exc:
            self.last_error = exc
            self._failures += 1
            self.retry_at = time.monotonic() + self._backoff.delay(self._failures)
            log.info("InitProducerId failed (%s); next try in %.3f s", exc,
                     self.retry_at - time.monotonic())
            return
        self.producer_id = response.producer_id
        self.epoch = response.producer_epoch
        self.last_error = None
        self._failures = 0
        self.retry_at = 0.0
        log.debug("idempotent producer id %s epoch %s", self.producer_id, self.epoch)


def reset_bumps_epoch(error_code: int, sent_sequence: int) -> bool:
    """Whether the reset that broker error ``error_code`` calls for, for a batch sent at
    sequence ``sent_sequence``, may keep the producer id and bump the epoch (rule 5).

    Not after INVALID_PRODUCER_EPOCH or PRODUCER_FENCED (the broker holds a higher epoch),
    and not when a batch starting at sequence 0 was refused: that is how a broker refuses a
    bumped epoch, and bumping again would be refused the same way.
    """
    return error_code in _BUMPABLE and sent_sequence != 0
