"""Exceptions raised by the SDK and by the reference broker.

Two families share the base :class:`KafkaError`:

* **Broker errors**: one :class:`BrokerResponseError` subclass per Kafka error code, named in
  CamelCase after Kafka's name (``NOT_LEADER_OR_FOLLOWER`` -> :class:`NotLeaderOrFollowerError`).
  Their facts (number, name, flags, description) come from :data:`sdk.error_codes.ERROR_CODES`;
  the class statements exist so readers and type checkers see every name, and only declare the
  number and the marker bases, which are checked against the table when the class is created.
  :func:`for_code` maps a code to its class; an unknown code gets a class that keeps its number.
* **Client-side errors**: raised by the SDK itself (timeouts, lost connections, bad config,
  undecodable bytes...). They chain their cause: ``raise X(...) from exc`` or ``X(..., cause=exc)``
  when the error is handed to a future rather than raised.

The mixins :class:`RetriableError` and :class:`InvalidMetadataError` cut across both families,
so ``except RetriableError`` catches a retriable broker code as well as a lost connection.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from sdk.error_codes import ERROR_CODES, class_name_for

if TYPE_CHECKING:
    from sdk.types import TopicPartition


class KafkaError(Exception):
    """Base of every error the SDK raises."""

    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False

    def __init__(self, message: str | None = None, *, cause: BaseException | None = None) -> None:
        # Keep args to (message,) or () so the default pickling (cls(*args)) round-trips.
        if message is None:
            super().__init__()
        else:
            super().__init__(message)
        if cause is not None:
            self.__cause__ = cause

    @property
    def message(self) -> str | None:
        """The detail message given at construction, if any."""
        return self.args[0] if self.args else None

    def __str__(self) -> str:
        if self.args and self.args[0]:
            return str(self.args[0])
        # A bare `raise WakeupError()` still prints something useful: the class's summary.
        doc = type(self).__doc__
        return doc.strip().splitlines()[0] if doc else type(self).__name__

    def __repr__(self) -> str:
        # What str() shows, not just args: a bare broker error keeps its description and a
        # ConfigError its key, value and what is allowed (the default repr drops them).
        return f"{type(self).__name__}({str(self)!r})"


class RetriableError(KafkaError):
    """Marker: the same request may succeed if tried again (after a backoff)."""

    retriable = True


class InvalidMetadataError(RetriableError):
    """Marker: retriable once the client has refreshed its cluster metadata."""

    invalid_metadata = True


# ============================================================================ broker errors

_BY_CODE: dict[int, type[BrokerResponseError]] = {}
_UNKNOWN_CODES: dict[int, type[BrokerResponseError]] = {}


class BrokerResponseError(KafkaError):
    """An error code from a broker's response. One subclass per code; see the class attributes."""

    errno: ClassVar[int]
    name: ClassVar[str]  # Kafka's upper-case name, e.g. "NOT_LEADER_OR_FOLLOWER"
    description: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code: int | None = cls.__dict__.get("errno")
        info = ERROR_CODES.get(code) if code is not None else None
        if code is None or info is None:
            return  # a grouping class (AuthorizationError) or an unknown code from for_code()
        cls.name = info.name
        cls.retriable = info.retriable
        cls.invalid_metadata = info.invalid_metadata
        cls.description = info.description
        if (issubclass(cls, RetriableError), issubclass(cls, InvalidMetadataError)) != (
            info.retriable,
            info.invalid_metadata,
        ):
            raise TypeError(f"{cls.__name__}: marker bases disagree with the table for code {code}")
        if code in _BY_CODE:
            raise TypeError(f"error code {code} has two classes: {_BY_CODE[code]} and {cls}")
        _BY_CODE[code] = cls

    def __str__(self) -> str:
        text = f"{self.name} ({self.errno}): {self.description}"
        return f"{text} [{self.args[0]}]" if self.args and self.args[0] else text

    def __reduce__(self) -> str | tuple[Any, ...]:
        # Classes for unknown codes are made at run time and cannot be found by name, so
        # canonical classes pickle by code and are looked up again on load.
        if for_code(self.errno) is type(self):
            return (_rebuild, (self.errno, self.args), self.__dict__ or None)
        return super().__reduce__()


def _rebuild(code: int, args: tuple[Any, ...]) -> BrokerResponseError:
    return for_code(code)(*args)


class AuthorizationError(BrokerResponseError):
    """Groups the ``*_AUTHORIZATION_FAILED`` codes: the principal lacks a permission."""


class AuthenticationError(KafkaError):
    """The client could not prove who it is: SASL refused (the broker's codes 33, 34, 58) or
    the TLS handshake failed (:class:`SslAuthenticationError`). Fatal for that connection
    attempt: the client waits at least ``reconnect_backoff_max_ms`` before trying that broker
    again, and the message names the mechanism and the broker's words, never a credential."""


# One class per code, compact: the facts live in the table, these only add visibility.
# fmt: off
class UnknownServerError(BrokerResponseError):
    errno = -1

class OffsetOutOfRangeError(BrokerResponseError):
    errno = 1

class CorruptMessageError(RetriableError, BrokerResponseError):
    errno = 2

class UnknownTopicOrPartitionError(InvalidMetadataError, BrokerResponseError):
    errno = 3

class InvalidFetchSizeError(BrokerResponseError):
    errno = 4

class LeaderNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno = 5

class NotLeaderOrFollowerError(InvalidMetadataError, BrokerResponseError):
    errno = 6

class RequestTimedOutError(RetriableError, BrokerResponseError):
    errno = 7

class BrokerNotAvailableError(BrokerResponseError):
    errno = 8

class ReplicaNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno = 9

class MessageTooLargeError(BrokerResponseError):
    errno = 10

class StaleControllerEpochError(BrokerResponseError):
    errno = 11

class OffsetMetadataTooLargeError(BrokerResponseError):
    errno = 12

class NetworkError(InvalidMetadataError, BrokerResponseError):
    errno = 13

class CoordinatorLoadInProgressError(RetriableError, BrokerResponseError):
    errno = 14

class CoordinatorNotAvailableError(RetriableError, BrokerResponseError):
    errno = 15

class NotCoordinatorError(RetriableError, BrokerResponseError):
    errno = 16

class InvalidTopicError(BrokerResponseError):
    errno = 17

class RecordListTooLargeError(BrokerResponseError):
    errno = 18

class NotEnoughReplicasError(RetriableError, BrokerResponseError):
    errno = 19

class NotEnoughReplicasAfterAppendError(RetriableError, BrokerResponseError):
    errno = 20

class InvalidRequiredAcksError(BrokerResponseError):
    errno = 21

class IllegalGenerationError(BrokerResponseError):
    errno = 22

class InconsistentGroupProtocolError(BrokerResponseError):
    errno = 23

class InvalidGroupIdError(BrokerResponseError):
    errno = 24

class UnknownMemberIdError(BrokerResponseError):
    errno = 25

class InvalidSessionTimeoutError(BrokerResponseError):
    errno = 26

class RebalanceInProgressError(BrokerResponseError):
    errno = 27

class InvalidCommitOffsetSizeError(BrokerResponseError):
    errno = 28

class TopicAuthorizationFailedError(AuthorizationError):
    errno = 29

class GroupAuthorizationFailedError(AuthorizationError):
    errno = 30

class ClusterAuthorizationFailedError(AuthorizationError):
    errno = 31

class InvalidTimestampError(BrokerResponseError):
    errno = 32

class UnsupportedSaslMechanismError(AuthenticationError, BrokerResponseError):
    errno = 33

class IllegalSaslStateError(AuthenticationError, BrokerResponseError):
    errno = 34

class UnsupportedVersionError(BrokerResponseError):
    errno = 35

class TopicAlreadyExistsError(BrokerResponseError):
    errno = 36

class InvalidPartitionsError(BrokerResponseError):
    errno = 37

class InvalidReplicationFactorError(BrokerResponseError):
    errno = 38

class InvalidReplicaAssignmentError(BrokerResponseError):
    errno = 39

class InvalidConfigError(BrokerResponseError):
    errno = 40

class NotControllerError(RetriableError, BrokerResponseError):
    errno = 41

class InvalidRequestError(BrokerResponseError):
    errno = 42

class UnsupportedForMessageFormatError(BrokerResponseError):
    errno = 43

class PolicyViolationError(BrokerResponseError):
    errno = 44

class OutOfOrderSequenceNumberError(BrokerResponseError):
    errno = 45

class DuplicateSequenceNumberError(BrokerResponseError):
    errno = 46

class InvalidProducerEpochError(BrokerResponseError):
    errno = 47

class InvalidTxnStateError(BrokerResponseError):
    errno = 48

class InvalidProducerIdMappingError(BrokerResponseError):
    errno = 49

class InvalidTransactionTimeoutError(BrokerResponseError):
    errno = 50

class ConcurrentTransactionsError(RetriableError, BrokerResponseError):
    errno = 51

class TransactionCoordinatorFencedError(BrokerResponseError):
    errno = 52

class TransactionalIdAuthorizationFailedError(AuthorizationError):
    errno = 53

class SecurityDisabledError(BrokerResponseError):
    errno = 54

class OperationNotAttemptedError(BrokerResponseError):
    errno = 55

class KafkaStorageError(InvalidMetadataError, BrokerResponseError):
    errno = 56

class LogDirNotFoundError(BrokerResponseError):
    errno = 57

class SaslAuthenticationFailedError(AuthenticationError, BrokerResponseError):
    errno = 58

class UnknownProducerIdError(BrokerResponseError):
    errno = 59

class ReassignmentInProgressError(BrokerResponseError):
    errno = 60

class DelegationTokenAuthDisabledError(BrokerResponseError):
    errno = 61

class DelegationTokenNotFoundError(BrokerResponseError):
    errno = 62

class DelegationTokenOwnerMismatchError(BrokerResponseError):
    errno = 63

class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    errno = 64

class DelegationTokenAuthorizationFailedError(AuthorizationError):
    errno = 65

class DelegationTokenExpiredError(BrokerResponseError):
    errno = 66

class InvalidPrincipalTypeError(BrokerResponseError):
    errno = 67

class NonEmptyGroupError(BrokerResponseError):
    errno = 68

class GroupIdNotFoundError(BrokerResponseError):
    errno = 69

class FetchSessionIdNotFoundError(RetriableError, BrokerResponseError):
    errno = 70

class InvalidFetchSessionEpochError(RetriableError, BrokerResponseError):
    errno = 71

class ListenerNotFoundError(InvalidMetadataError, BrokerResponseError):
    errno = 72

class TopicDeletionDisabledError(BrokerResponseError):
    errno = 73

class FencedLeaderEpochError(InvalidMetadataError, BrokerResponseError):
    errno = 74

class UnknownLeaderEpochError(RetriableError, BrokerResponseError):
    errno = 75

class UnsupportedCompressionTypeError(BrokerResponseError):
    errno = 76

class StaleBrokerEpochError(BrokerResponseError):
    errno = 77

class OffsetNotAvailableError(RetriableError, BrokerResponseError):
    errno = 78

class MemberIdRequiredError(BrokerResponseError):
    errno = 79

class PreferredLeaderNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno = 80

class GroupMaxSizeReachedError(BrokerResponseError):
    errno = 81

class FencedInstanceIdError(BrokerResponseError):
    errno = 82

class EligibleLeadersNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno = 83

class ElectionNotNeededError(InvalidMetadataError, BrokerResponseError):
    errno = 84

class NoReassignmentInProgressError(BrokerResponseError):
    errno = 85

class GroupSubscribedToTopicError(BrokerResponseError):
    errno = 86

class InvalidRecordError(BrokerResponseError):
    errno = 87

class UnstableOffsetCommitError(RetriableError, BrokerResponseError):
    errno = 88

class ThrottlingQuotaExceededError(RetriableError, BrokerResponseError):
    errno = 89

class ProducerFencedError(BrokerResponseError):
    errno = 90

class ResourceNotFoundError(BrokerResponseError):
    errno = 91

class DuplicateResourceError(BrokerResponseError):
    errno = 92

class UnacceptableCredentialError(BrokerResponseError):
    errno = 93

class InconsistentVoterSetError(BrokerResponseError):
    errno = 94

class InvalidUpdateVersionError(BrokerResponseError):
    errno = 95

class FeatureUpdateFailedError(BrokerResponseError):
    errno = 96

class PrincipalDeserializationFailureError(BrokerResponseError):
    errno = 97

class SnapshotNotFoundError(BrokerResponseError):
    errno = 98

class PositionOutOfRangeError(BrokerResponseError):
    errno = 99

class UnknownTopicIdError(InvalidMetadataError, BrokerResponseError):
    errno = 100

class DuplicateBrokerRegistrationError(BrokerResponseError):
    errno = 101

class BrokerIdNotRegisteredError(BrokerResponseError):
    errno = 102

class InconsistentTopicIdError(InvalidMetadataError, BrokerResponseError):
    errno = 103

class InconsistentClusterIdError(BrokerResponseError):
    errno = 104

class TransactionalIdNotFoundError(BrokerResponseError):
    errno = 105

class FetchSessionTopicIdError(RetriableError, BrokerResponseError):
    errno = 106

class IneligibleReplicaError(BrokerResponseError):
    errno = 107

class NewLeaderElectedError(BrokerResponseError):
    errno = 108

class OffsetMovedToTieredStorageError(BrokerResponseError):
    errno = 109

class FencedMemberEpochError(BrokerResponseError):
    errno = 110

class UnreleasedInstanceIdError(BrokerResponseError):
    errno = 111

class UnsupportedAssignorError(BrokerResponseError):
    errno = 112

class StaleMemberEpochError(BrokerResponseError):
    errno = 113

class MismatchedEndpointTypeError(BrokerResponseError):
    errno = 114

class UnsupportedEndpointTypeError(BrokerResponseError):
    errno = 115

class UnknownControllerIdError(BrokerResponseError):
    errno = 116

class UnknownSubscriptionIdError(BrokerResponseError):
    errno = 117

class TelemetryTooLargeError(BrokerResponseError):
    errno = 118

class InvalidRegistrationError(BrokerResponseError):
    errno = 119

class TransactionAbortableError(BrokerResponseError):
    errno = 120

class InvalidRecordStateError(BrokerResponseError):
    errno = 121

class ShareSessionNotFoundError(RetriableError, BrokerResponseError):
    errno = 122

class InvalidShareSessionEpochError(RetriableError, BrokerResponseError):
    errno = 123

class FencedStateEpochError(BrokerResponseError):
    errno = 124

class InvalidVoterKeyError(BrokerResponseError):
    errno = 125

class DuplicateVoterError(BrokerResponseError):
    errno = 126

class VoterNotFoundError(BrokerResponseError):
    errno = 127

class InvalidRegularExpressionError(BrokerResponseError):
    errno = 128

class RebootstrapRequiredError(BrokerResponseError):
    errno = 129

class StreamsInvalidTopologyError(BrokerResponseError):
    errno = 130

class StreamsInvalidTopologyEpochError(BrokerResponseError):
    errno = 131

class StreamsTopologyFencedError(BrokerResponseError):
    errno = 132

class ShareSessionLimitReachedError(RetriableError, BrokerResponseError):
    errno = 133
# fmt: on


# Java exception names that differ from Kafka's error names (and one pre-KIP-392 name).
NotLeaderForPartitionError = NotLeaderOrFollowerError
RecordTooLargeError = MessageTooLargeError
RecordBatchTooLargeError = RecordListTooLargeError
ControllerMovedError = StaleControllerEpochError
TopicExistsError = TopicAlreadyExistsError
InvalidConfigurationError = InvalidConfigError
OutOfOrderSequenceError = OutOfOrderSequenceNumberError
DuplicateSequenceError = DuplicateSequenceNumberError
InvalidPidMappingError = InvalidProducerIdMappingError
SaslAuthenticationError = SaslAuthenticationFailedError


def _fill_missing_classes() -> None:
    # Safety net: a table row added without a class statement still gets a proper class.
    for code, info in ERROR_CODES.items():
        if code not in _BY_CODE:
            marker = (
                InvalidMetadataError
                if info.invalid_metadata
                else RetriableError
                if info.retriable
                else None
            )
            bases = (BrokerResponseError,) if marker is None else (marker, BrokerResponseError)
            name = class_name_for(info.name)
            globals()[name] = type(name, bases, {"errno": code, "__module__": __name__})


_fill_missing_classes()

BROKER_ERRORS: MappingProxyType[int, type[BrokerResponseError]] = MappingProxyType(_BY_CODE)
"""Read-only view: code -> exception class, for every code in the table."""


def for_code(code: int) -> type[BrokerResponseError]:
    """The exception class for a non-zero error code.

    An unknown code (a newer broker) gets a class of its own that keeps the number, named
    ``UNKNOWN_CODE_<n>``; it is made once and cached. Code 0 is success and raises ValueError.
    """
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls
    if code == 0:
        raise ValueError("error code 0 (NONE) means success; it has no exception class")
    cls = _UNKNOWN_CODES.get(code)
    if cls is None:
        label = str(code) if code >= 0 else f"Minus{-code}"
        made = type(
            f"UnknownCode{label}Error",
            (BrokerResponseError,),
            {
                "errno": code,
                "name": f"UNKNOWN_CODE_{code}",
                "description": "An error code this client does not know (perhaps from a newer broker).",
                "__module__": __name__,
            },
        )
        cls = _UNKNOWN_CODES.setdefault(code, made)  # setdefault: racing threads agree
    return cls


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the exception for ``code`` with an optional detail message; do nothing for 0."""
    if code:
        raise for_code(code)(message)


# ======================================================================= client-side errors


class MalformedDataError(KafkaError):
    """Bytes on the wire or on disk do not decode: truncated, corrupt or out of range."""


class CorruptRecordError(MalformedDataError):
    """A record batch failed its CRC-32C check."""


class NoCommonVersionError(KafkaError):
    """The client and the broker share no version of an API the client needs."""


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not finish within its timeout."""

    # Not retriable: by the time this reaches a caller the time budget is already spent.


class DeliveryTimeoutError(KafkaTimeoutError):
    """A record was not acknowledged within delivery.timeout.ms."""


class KafkaConnectionError(InvalidMetadataError, ConnectionError):
    """A connection to a broker could not be made or was lost."""

    # Invalid-metadata: a broker that went away has often handed its leaderships to others.


class RequestTimeoutError(KafkaConnectionError, KafkaTimeoutError):
    """No response arrived within the request timeout; the connection was closed.

    Retriable (the request may be sent again on a new connection) and a TimeoutError.
    """


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake with a broker failed: an untrusted or expired certificate, a host
    name the certificate does not name, or a client certificate the broker refused."""


class NoBrokersAvailableError(KafkaError):
    """None of the bootstrap or known brokers could be reached."""


class IllegalStateError(KafkaError):
    """The call is not allowed in the object's current state."""


class ProducerClosedError(IllegalStateError):
    """The producer is closed."""


class ConsumerClosedError(IllegalStateError):
    """The consumer is closed."""


class WakeupError(KafkaError):
    """A blocking call was interrupted by wakeup()."""


class _Unset(enum.Enum):
    UNSET = enum.auto()  # an enum member survives pickling as the same singleton


class ConfigError(KafkaError, ValueError):
    """A configuration value is unknown, missing or invalid.

    ``key`` names the setting, ``value`` what was given and ``allowed`` what would be accepted
    (a phrase such as ``"an int >= 0"`` or a collection of values); all appear in ``str()``.
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        value: object = _Unset.UNSET,
        allowed: str | Iterable[object] | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message, cause=cause)
        self.key = key
        self.value = value
        self.allowed = allowed if allowed is None or isinstance(allowed, str) else tuple(allowed)

    def __str__(self) -> str:
        text = super().__str__()
        parts = [f"{self.key}: {text}" if self.key else text]
        if self.value is not _Unset.UNSET:
            parts.append(f"got {self.value!r}")
        if isinstance(self.allowed, str):
            parts.append(f"allowed: {self.allowed}")
        elif self.allowed is not None:
            parts.append("allowed: " + ", ".join(repr(v) for v in self.allowed))
        return "; ".join(parts)


def is_retriable(exc: BaseException | None) -> bool:
    """Whether ``exc`` is an SDK error that a retry may cure (the RetriableError marker)."""
    return isinstance(exc, KafkaError) and exc.retriable


# ========================================================== errors of one role or feature
# Defined here so every public exception is importable from sdk.errors; the modules that
# raise them re-export them (sdk.consumer.errors, sdk.admin.results, sdk.spark.errors,
# sdk.records.errors).


class UnsupportedCompressionError(MalformedDataError):
    """A batch names a compression codec id this SDK does not know (not 0-4).

    Client-side, unlike the broker's UNSUPPORTED_COMPRESSION_TYPE (code 76) response error.
    """


class RecordDeserializationError(KafkaError):
    """A key or value deserializer failed. The consumer's position stays on the record:
    ``seek(tp, offset + 1)`` skips it."""

    def __init__(self, tp: TopicPartition, offset: int, part: str, cause: BaseException) -> None:
        super().__init__(
            f"cannot deserialize the {part} of the record at {tp} offset {offset}: {cause!r}",
            cause=cause,
        )
        self.topic_partition = tp
        self.offset = offset


class NoOffsetForPartitionError(KafkaError):
    """A partition has no committed offset and ``auto_offset_reset`` is "none"."""

    def __init__(self, partitions: list[TopicPartition]) -> None:
        names = ", ".join(str(tp) for tp in sorted(partitions))
        super().__init__(
            f"no committed offset for {names} and auto_offset_reset is 'none'; seek() to a "
            "position or set auto_offset_reset to 'earliest' or 'latest'"
        )
        self.partitions = sorted(partitions)


class CommitFailedError(KafkaError):
    """The group rebalanced (or dropped this member) before the commit: the partitions may
    now belong to another member, so these offsets were not committed."""


class ItemsFailedError(KafkaError):
    """Some items of an admin operation failed; ``errors`` maps each failed key to its error.

    The first item's error is chained as ``__cause__``, so a traceback shows it in full.
    """

    def __init__(self, what: str, errors: Mapping[Any, KafkaError], total: int) -> None:
        detail = "; ".join(f"{key}: {err}" for key, err in errors.items())
        super().__init__(f"{what}: {len(errors)} of {total} failed: {detail}",
                         cause=next(iter(errors.values()), None))
        self.errors: dict[object, KafkaError] = dict(errors)


class DataLossError(IllegalStateError):
    """Spark source: records the query was due to read are no longer in Kafka (deleted by
    retention, a partition or topic deleted, or a topic recreated). Raised only with
    ``failOnDataLoss=true`` (the default); with ``false`` the source skips what is gone."""

    @classmethod
    def about(cls, what: str) -> DataLossError:
        """The error for ``what`` happened, with the usual advice appended. (A classmethod
        rather than ``__init__``, so pickling, which calls ``cls(message)``, round-trips.)"""
        return cls(
            f"{what}. Some data may have been lost because it is no longer available in "
            "Kafka. If you want the query to go on (skipping the lost data) rather than fail, "
            "set the source option 'failOnDataLoss' to 'false'."
        )


class OffsetNotFoundError(KafkaError):
    """Spark source: no record has a timestamp at or after the requested starting timestamp,
    and ``startingOffsetsByTimestampStrategy`` is ``error`` (the default)."""


class DeliveryFailedError(KafkaError):
    """Spark sink: a write task could not deliver some of its records (the cause is the
    first error); Spark retries the task."""


class TransactionAbortedError(KafkaError):
    """A record of a transaction that was aborted before the record was sent: it was not
    written (records already written by then are discarded for read_committed readers)."""
