"""Which family a raised exception belongs to: the families' own errors say so; the
third-party errors adapters have not translated yet (SQLAlchemy's, botocore's, pyarrow's,
the OS's, httpx's) are sorted here, once, so every duty and worker loop decides alike."""

from __future__ import annotations

import asyncio
import errno

import httpx
import psycopg
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from sqlalchemy import exc as sa

from failures.families import RETRIABLE, Family, FamilyError, family_of
from logformat.errors import TierlogError

_DISK = frozenset({errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT})
_S3_THROTTLED = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded"})
_S3_DENIED = frozenset({"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"})
_S3_MISSING = frozenset({"NoSuchKey", "NoSuchBucket", "404"})
_BOTO_NETWORK = (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)


def _client_error(exc: ClientError) -> Family:
    code = str(exc.response.get("Error", {}).get("Code", ""))
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    if code in _S3_THROTTLED or status == 503:
        return Family.THROTTLED
    if status >= 500:
        return Family.UNAVAILABLE
    if code in _S3_DENIED or status == 403:
        return Family.AUTHORIZATION
    if code in _S3_MISSING or status == 404:
        return Family.NOT_FOUND
    return Family.INTERNAL


def _sqlalchemy(exc: sa.SQLAlchemyError) -> Family:
    if isinstance(exc, sa.DBAPIError) and exc.connection_invalidated:
        return Family.UNAVAILABLE
    if isinstance(exc, sa.OperationalError | sa.InterfaceError | sa.DisconnectionError):
        return Family.UNAVAILABLE
    if isinstance(exc, sa.TimeoutError):  # the pool had no connection to give in time
        return Family.UNAVAILABLE
    if isinstance(exc, sa.IntegrityError):
        return Family.CONFLICT
    return Family.INTERNAL


def family(exc: BaseException) -> Family:
    """The family of `exc`; INTERNAL (a bug) when nothing says otherwise."""
    if isinstance(exc, FamilyError):
        return exc.family
    if isinstance(exc, TierlogError):
        return family_of(exc.code)
    if isinstance(exc, sa.SQLAlchemyError):
        return _sqlalchemy(exc)
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):  # psycopg direct
        return Family.UNAVAILABLE
    if isinstance(exc, ClientError):
        return _client_error(exc)
    if isinstance(exc, _BOTO_NETWORK):
        return Family.UNAVAILABLE
    if isinstance(exc, BotoCoreError):  # no credentials, a bad parameter: not an outage
        return Family.INTERNAL
    if isinstance(exc, httpx.TransportError | asyncio.TimeoutError | TimeoutError):
        return Family.UNAVAILABLE
    if isinstance(exc, ConnectionError):
        return Family.UNAVAILABLE
    if isinstance(exc, OSError) and exc.errno in _DISK:
        return Family.STORAGE
    return Family.INTERNAL


def is_retriable(exc: BaseException) -> bool:
    """Whether trying the same thing again later can succeed (an outage, not a bug)."""
    return family(exc) in RETRIABLE
