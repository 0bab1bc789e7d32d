"""Kafka-style error names with the HTTP status each maps to (DESIGN §5)."""

from __future__ import annotations

from enum import Enum


class ErrorCode(str, Enum):  # noqa: UP042 (str(code) behaviour is part of the contract)
    """Kafka's error names, as the API reports them; the value is the name itself."""

    UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"
    INVALID_REQUEST = "INVALID_REQUEST"
    INVALID_TOPIC_EXCEPTION = "INVALID_TOPIC_EXCEPTION"
    INVALID_PARTITIONS = "INVALID_PARTITIONS"
    INVALID_REPLICATION_FACTOR = "INVALID_REPLICATION_FACTOR"
    INVALID_CONFIG = "INVALID_CONFIG"
    INVALID_RECORD = "INVALID_RECORD"
    INVALID_TIMESTAMP = "INVALID_TIMESTAMP"
    CORRUPT_MESSAGE = "CORRUPT_MESSAGE"
    UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
    TOPIC_ALREADY_EXISTS = "TOPIC_ALREADY_EXISTS"
    RECORD_LIST_TOO_LARGE = "RECORD_LIST_TOO_LARGE"
    MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
    OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
    NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
    LEADER_NOT_AVAILABLE = "LEADER_NOT_AVAILABLE"
    NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
    UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
    OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
    UNKNOWN_PRODUCER_ID = "UNKNOWN_PRODUCER_ID"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    NOT_FOUND = "NOT_FOUND"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"
    REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
    THROTTLING_QUOTA_EXCEEDED = "THROTTLING_QUOTA_EXCEEDED"


HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: 500,
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.INVALID_TOPIC_EXCEPTION: 400,
    ErrorCode.INVALID_PARTITIONS: 400,
    ErrorCode.INVALID_REPLICATION_FACTOR: 400,
    ErrorCode.INVALID_CONFIG: 400,
    ErrorCode.INVALID_RECORD: 400,
    ErrorCode.INVALID_TIMESTAMP: 400,
    ErrorCode.CORRUPT_MESSAGE: 400,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 404,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.TOPIC_ALREADY_EXISTS: 409,
    ErrorCode.RECORD_LIST_TOO_LARGE: 413,
    ErrorCode.MESSAGE_TOO_LARGE: 413,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.OFFSET_OUT_OF_RANGE: 416,
    ErrorCode.THROTTLING_QUOTA_EXCEEDED: 429,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: 503,
    ErrorCode.LEADER_NOT_AVAILABLE: 503,
    ErrorCode.NOT_ENOUGH_REPLICAS: 503,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: 503,
    ErrorCode.KAFKA_STORAGE_ERROR: 503,
    ErrorCode.REQUEST_TIMED_OUT: 503,
    ErrorCode.FENCED_LEADER_EPOCH: 409,
    ErrorCode.UNKNOWN_LEADER_EPOCH: 409,
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: 409,
    ErrorCode.INVALID_PRODUCER_EPOCH: 409,
    ErrorCode.UNKNOWN_PRODUCER_ID: 409,
}


class TierlogError(Exception):
    """An error with a Kafka error name; the HTTP layer turns it into JSON and a status."""

    def __init__(self, code: ErrorCode, message: str, **extra: object) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.extra = extra

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 400)

    def to_json(self) -> dict[str, object]:
        return {"error_code": self.code.value, "message": self.message, **self.extra}
