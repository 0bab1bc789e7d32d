"""The failure policy (failures/): every error code has a family, the families say what is
retriable, third-party errors are sorted once, and the edges keep their answers."""

from __future__ import annotations

import errno

import httpx
import psycopg
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from kio.schema.errors import ErrorCode as KafkaError
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from coldstore.object_store import S3UnavailableError
from failures.classify import family, is_retriable
from failures.families import (
    FAMILY_OF,
    AuthorizationError,
    Family,
    InvalidRequestError,
    NotLeaderError,
    StorageError,
    UnavailableError,
)
from ingest.kafka.protocol import kafka_error
from ingest.log.storage_errors import storage_error
from logformat.errors import ErrorCode, TierlogError


def test_every_error_code_has_a_family() -> None:
    assert set(FAMILY_OF) == set(ErrorCode)


def _client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject"
    )


@pytest.mark.parametrize(
    ("exc", "expected", "retriable"),
    [
        (NotLeaderError("moved"), Family.NOT_LEADER, True),
        (StorageError("disk"), Family.STORAGE, True),
        (UnavailableError("Postgres", "away"), Family.UNAVAILABLE, True),
        (InvalidRequestError("no"), Family.INVALID_REQUEST, False),
        (AuthorizationError("denied"), Family.AUTHORIZATION, False),
        (TierlogError(ErrorCode.REQUEST_TIMED_OUT, "slow"), Family.UNAVAILABLE, True),
        (TierlogError(ErrorCode.INVALID_CONFIG, "bad"), Family.INVALID_REQUEST, False),
        (OperationalError("SELECT 1", {}, Exception("refused")), Family.UNAVAILABLE, True),
        (IntegrityError("INSERT", {}, Exception("dup")), Family.CONFLICT, False),
        (ProgrammingError("SELEC", {}, Exception("syntax")), Family.INTERNAL, False),
        (EndpointConnectionError(endpoint_url="http://s3"), Family.UNAVAILABLE, True),
        (NoCredentialsError(), Family.INTERNAL, False),
        (_client_error("InternalError", 500), Family.UNAVAILABLE, True),
        (_client_error("SlowDown", 503), Family.THROTTLED, True),
        (_client_error("AccessDenied", 403), Family.AUTHORIZATION, False),
        (S3UnavailableError("5xx"), Family.UNAVAILABLE, True),
        (httpx.ConnectError("refused"), Family.UNAVAILABLE, True),
        (psycopg.OperationalError("connection refused"), Family.UNAVAILABLE, True),
        (ConnectionRefusedError(), Family.UNAVAILABLE, True),
        (OSError(errno.ENOSPC, "No space left on device"), Family.STORAGE, True),
        (OSError(errno.ENOENT, "gone"), Family.INTERNAL, False),
        (KeyError("a bug"), Family.INTERNAL, False),
    ],
)
def test_each_failure_is_sorted_into_its_family(
    exc: BaseException, expected: Family, retriable: bool
) -> None:
    assert family(exc) is expected
    assert is_retriable(exc) is retriable


def test_adapters_raise_family_errors_the_edges_answer_as_before() -> None:
    disk = storage_error(OSError(errno.ENOSPC, "No space left on device"))
    assert isinstance(disk, StorageError) and disk.retriable
    assert disk.code is ErrorCode.KAFKA_STORAGE_ERROR and disk.http_status == 503
    assert kafka_error(disk) is KafkaError.kafka_storage_error
    s3 = S3UnavailableError("S3 server error")
    assert s3.to_json()["dependency"] == "S3" and s3.http_status == 503
    assert kafka_error(s3) is KafkaError.request_timed_out
    assert kafka_error(NotLeaderError("moved")) is KafkaError.not_leader_or_follower
