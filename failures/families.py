"""Error families (Kafka's own split: `RetriableException` vs the rest). Every ErrorCode
belongs to one family; a family says whether trying again later can succeed.

The classes subclass logformat's TierlogError, so every caller that catches or answers
TierlogError (the HTTP edge's status, the Kafka edge's code) keeps working unchanged.
"""

from __future__ import annotations

from enum import Enum
from typing import ClassVar

from logformat.errors import ErrorCode, TierlogError


class Family(Enum):
    NOT_LEADER = "not leader"  # ask the metadata again, then the new leader
    STORAGE = "storage"  # this node's disk failed a read or write
    UNAVAILABLE = "unavailable dependency"  # Postgres, S3 or a peer is away or too slow
    THROTTLED = "throttled"  # a limit or quota: wait, then try again
    INVALID_REQUEST = "invalid request"  # the request is wrong: the same one fails again
    AUTHORIZATION = "authorization"  # not allowed, or not who it says
    NOT_FOUND = "not found"
    CONFLICT = "conflict"  # a fenced epoch, a duplicate, a state the request does not fit
    INTERNAL = "internal"  # a bug: log it with its traceback


RETRIABLE = frozenset({Family.NOT_LEADER, Family.STORAGE, Family.UNAVAILABLE, Family.THROTTLED})

_E = ErrorCode
FAMILY_OF: dict[ErrorCode, Family] = {
    _E.UNKNOWN_SERVER_ERROR: Family.INTERNAL,
    _E.NOT_LEADER_OR_FOLLOWER: Family.NOT_LEADER,
    _E.LEADER_NOT_AVAILABLE: Family.NOT_LEADER,
    _E.FENCED_LEADER_EPOCH: Family.NOT_LEADER,
    _E.UNKNOWN_LEADER_EPOCH: Family.NOT_LEADER,
    _E.COORDINATOR_NOT_AVAILABLE: Family.NOT_LEADER,
    _E.KAFKA_STORAGE_ERROR: Family.STORAGE,
    _E.NOT_ENOUGH_REPLICAS: Family.UNAVAILABLE,
    _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Family.UNAVAILABLE,
    _E.REQUEST_TIMED_OUT: Family.UNAVAILABLE,
    _E.THROTTLING_QUOTA_EXCEEDED: Family.THROTTLED,
    _E.INVALID_REQUEST: Family.INVALID_REQUEST,
    _E.INVALID_TOPIC_EXCEPTION: Family.INVALID_REQUEST,
    _E.INVALID_PARTITIONS: Family.INVALID_REQUEST,
    _E.INVALID_REPLICATION_FACTOR: Family.INVALID_REQUEST,
    _E.INVALID_CONFIG: Family.INVALID_REQUEST,
    _E.INVALID_RECORD: Family.INVALID_REQUEST,
    _E.INVALID_TIMESTAMP: Family.INVALID_REQUEST,
    _E.CORRUPT_MESSAGE: Family.INVALID_REQUEST,
    _E.RECORD_LIST_TOO_LARGE: Family.INVALID_REQUEST,
    _E.MESSAGE_TOO_LARGE: Family.INVALID_REQUEST,
    _E.UNSUPPORTED_MEDIA_TYPE: Family.INVALID_REQUEST,
    _E.METHOD_NOT_ALLOWED: Family.INVALID_REQUEST,
    _E.INVALID_GROUP_ID: Family.INVALID_REQUEST,
    _E.UNSUPPORTED_ASSIGNOR: Family.INVALID_REQUEST,
    _E.OFFSET_METADATA_TOO_LARGE: Family.INVALID_REQUEST,
    _E.CLUSTER_AUTHORIZATION_FAILED: Family.AUTHORIZATION,
    _E.TOPIC_AUTHORIZATION_FAILED: Family.AUTHORIZATION,
    _E.GROUP_AUTHORIZATION_FAILED: Family.AUTHORIZATION,
    _E.SASL_AUTHENTICATION_FAILED: Family.AUTHORIZATION,
    _E.UNKNOWN_TOPIC_OR_PARTITION: Family.NOT_FOUND,
    _E.NOT_FOUND: Family.NOT_FOUND,
    _E.GROUP_ID_NOT_FOUND: Family.NOT_FOUND,
    _E.OFFSET_OUT_OF_RANGE: Family.NOT_FOUND,
    _E.TOPIC_ALREADY_EXISTS: Family.CONFLICT,
    _E.OUT_OF_ORDER_SEQUENCE_NUMBER: Family.CONFLICT,
    _E.INVALID_PRODUCER_EPOCH: Family.CONFLICT,
    _E.UNKNOWN_PRODUCER_ID: Family.CONFLICT,
    _E.UNKNOWN_MEMBER_ID: Family.CONFLICT,
    _E.FENCED_MEMBER_EPOCH: Family.CONFLICT,
    _E.STALE_MEMBER_EPOCH: Family.CONFLICT,
    _E.NON_EMPTY_GROUP: Family.CONFLICT,
    _E.GROUP_MAX_SIZE_REACHED: Family.CONFLICT,
    # the admin APIs of DeleteRecords, AlterUserScramCredentials and ElectLeaders
    _E.POLICY_VIOLATION: Family.INVALID_REQUEST,
    _E.UNSUPPORTED_SASL_MECHANISM: Family.INVALID_REQUEST,
    _E.UNACCEPTABLE_CREDENTIAL: Family.INVALID_REQUEST,
    _E.DUPLICATE_RESOURCE: Family.CONFLICT,
    _E.RESOURCE_NOT_FOUND: Family.NOT_FOUND,
    _E.ELECTION_NOT_NEEDED: Family.CONFLICT,
    # Kafka's are InvalidMetadataExceptions: retriable, the leadership may settle
    _E.PREFERRED_LEADER_NOT_AVAILABLE: Family.UNAVAILABLE,
    _E.ELIGIBLE_LEADERS_NOT_AVAILABLE: Family.UNAVAILABLE,
}


def family_of(code: ErrorCode) -> Family:
    return FAMILY_OF.get(code, Family.INTERNAL)


class FamilyError(TierlogError):
    """A TierlogError raised by an adapter, of a known family. `code` defaults to the
    family's usual Kafka error."""

    family: ClassVar[Family] = Family.INTERNAL
    default_code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, code: ErrorCode | None = None, **extra: object) -> None:
        super().__init__(code or self.default_code, message, **extra)

    @property
    def retriable(self) -> bool:
        return self.family in RETRIABLE


class NotLeaderError(FamilyError):
    family = Family.NOT_LEADER
    default_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class StorageError(FamilyError):
    """This node's disk failed (Kafka's KAFKA_STORAGE_ERROR: another replica may serve)."""

    family = Family.STORAGE
    default_code = ErrorCode.KAFKA_STORAGE_ERROR


class UnavailableError(FamilyError):
    """A dependency (Postgres, S3, a peer) is away, refusing or too slow: try again later.
    `dependency` names it."""

    family = Family.UNAVAILABLE
    default_code = ErrorCode.REQUEST_TIMED_OUT

    def __init__(
        self, dependency: str, message: str, code: ErrorCode | None = None, **extra: object
    ) -> None:
        super().__init__(f"{dependency}: {message}", code, dependency=dependency, **extra)
        self.dependency = dependency


class InvalidRequestError(FamilyError):
    family = Family.INVALID_REQUEST
    default_code = ErrorCode.INVALID_REQUEST


class AuthorizationError(FamilyError):
    family = Family.AUTHORIZATION
    default_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class InternalError(FamilyError):
    """A state that should not happen: a bug, never retried blindly."""

    family = Family.INTERNAL
    default_code = ErrorCode.UNKNOWN_SERVER_ERROR
