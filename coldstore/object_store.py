"""The byte mover: S3 objects in, S3 objects out (docs/design.md §4, §8).

Keys are whole bucket keys, prefix included (what the manifest records), so a stored key
stays valid whatever the process's configuration; `layout.py` builds them.

Configuration comes from TIERLOG_S3_ENDPOINT (unset = AWS itself), TIERLOG_S3_BUCKET,
TIERLOG_S3_PREFIX and the usual AWS_* variables (credentials, AWS_REGION /
AWS_DEFAULT_REGION, default us-east-1). Custom endpoints (MinIO, SeaweedFS, moto) get
path-style addressing: they rarely have wildcard DNS for virtual-hosted buckets.

Retries are botocore's "standard" mode (exponential backoff with jitter, retry quota,
throttling and 5xx/connection errors), never a hand-rolled loop.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError

from coldstore.s3_sessions import aio_session, s3_client
from failures.families import UnavailableError

MiB = 1 << 20
_DELETE_BATCH = 1000  # the DeleteObjects API limit
_NOT_FOUND = frozenset(("404", "NoSuchKey", "NotFound", "NoSuchBucket"))


class IncompleteUpload(NamedTuple):
    key: str
    upload_id: str
    initiated: datetime  # by the S3 server's clock (UTC)


class ObjectNotFoundError(KeyError):
    """No object at that key."""


class S3UnavailableError(UnavailableError):
    """S3 answered a server error (5xx) even after botocore's retries: try again later."""

    def __init__(self, message: str) -> None:
        super().__init__("S3", message)


# What a caller that can wait (a node starting up) retries: the endpoint unreachable or
# timing out (botocore's own errors) and server errors; never a refusal such as AccessDenied.
S3_TRANSIENT_ERRORS: tuple[type[Exception], ...] = (BotoCoreError, S3UnavailableError)


class ObjectStoreConfig(NamedTuple):
    bucket: str = "tierlog"
    prefix: str = ""  # without leading/trailing "/"; "" = the bucket's root
    endpoint_url: str | None = None  # None = AWS S3
    region: str = "us-east-1"
    access_key_id: str | None = None  # None = boto3's / delta-rs's own credential chain
    secret_access_key: str | None = None
    session_token: str | None = None
    max_attempts: int = 8
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 60.0
    max_pool_connections: int = 32
    multipart_threshold: int = 16 * MiB
    multipart_chunksize: int = 16 * MiB

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ObjectStoreConfig:
        """From TIERLOG_S3_* and boto3's AWS_* variables in `env` (the composition root hands
        over the process's environment: this library reads none itself)."""
        return cls(
            bucket=env.get("TIERLOG_S3_BUCKET") or "tierlog",
            prefix=(env.get("TIERLOG_S3_PREFIX") or "").strip("/"),
            endpoint_url=env.get("TIERLOG_S3_ENDPOINT") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            access_key_id=env.get("AWS_ACCESS_KEY_ID") or None,
            secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=env.get("AWS_SESSION_TOKEN") or None,
        )

    def key(self, *parts: str) -> str:
        """A bucket key under the prefix: key("topics", "t") -> "{prefix}/topics/t"."""
        return "/".join(p.strip("/") for p in (self.prefix, *parts) if p.strip("/"))

    def uri(self, *parts: str) -> str:
        return f"s3://{self.bucket}/{self.key(*parts)}"

    def storage_options(self) -> dict[str, str]:
        """deltalake (delta-rs / object_store) options for the same endpoint and credentials.

        Concurrent Delta commits need an atomic "create the next log entry if absent":
        `aws_conditional_put=etag` uses S3's If-None-Match (AWS, MinIO, moto, SeaweedFS support
        it), so no DynamoDB lock and no unsafe rename.
        """
        # The connect phase's timeout, as boto3's (client_kwargs' config). object_store has no
        # per-read timeout like boto3's read_timeout, only a whole-request one, which would
        # cut long uploads short: that stays object_store's (30 s).
        opts = {
            "AWS_REGION": self.region,
            "aws_conditional_put": "etag",
            "connect_timeout": f"{self.connect_timeout_s:g}s",
        }
        if self.endpoint_url:
            opts["AWS_ENDPOINT_URL"] = self.endpoint_url
            opts["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
            if self.endpoint_url.startswith("http://"):
                opts["AWS_ALLOW_HTTP"] = "true"
        if self.access_key_id:
            opts["AWS_ACCESS_KEY_ID"] = self.access_key_id
        if self.secret_access_key:
            opts["AWS_SECRET_ACCESS_KEY"] = self.secret_access_key
        if self.session_token:
            opts["AWS_SESSION_TOKEN"] = self.session_token
        return opts

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of boto3's / aiobotocore's create_client("s3", ...)."""
        return {
            "endpoint_url": self.endpoint_url,
            "region_name": self.region,
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "aws_session_token": self.session_token,
        }

    def botocore_options(self) -> dict[str, Any]:
        """Keyword arguments of botocore's Config (aiobotocore's AioConfig takes the same)."""
        opts: dict[str, Any] = {
            "retries": {"mode": "standard", "max_attempts": self.max_attempts},
            "connect_timeout": self.connect_timeout_s,
            "read_timeout": self.read_timeout_s,
            "max_pool_connections": self.max_pool_connections,
            "tcp_keepalive": True,
        }
        if self.endpoint_url:
            opts["s3"] = {"addressing_style": "path"}
            # S3-compatible servers vary in support for the default CRC trailers
            # (aws-chunked uploads); checksum only where the API requires one.
            opts["request_checksum_calculation"] = "when_required"
            opts["response_checksum_validation"] = "when_required"
        return opts


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _http_status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


class ObjectStore:
    """Synchronous S3 access (boto3). Thread-safe: boto3 clients may be shared by threads."""

    def __init__(self, config: ObjectStoreConfig) -> None:
        from boto3.s3.transfer import TransferConfig

        self.config = config
        self.bucket = config.bucket
        self.client: Any = s3_client(config)
        self._transfer = TransferConfig(
            multipart_threshold=config.multipart_threshold,
            multipart_chunksize=config.multipart_chunksize,
            max_concurrency=4,
        )

    def put(self, key: str, data: bytes | bytearray | memoryview | str | os.PathLike[str]) -> int:
        """Upload bytes, or the file at a path; multipart above the threshold. Returns size."""
        if isinstance(data, str | os.PathLike):
            size = os.path.getsize(data)
            self.client.upload_file(os.fspath(data), self.bucket, key, Config=self._transfer)
            return size
        body = memoryview(data)
        if body.nbytes < self.config.multipart_threshold:
            # One PUT, no transfer-manager threads for the common small object.
            payload = data if isinstance(data, bytes) else bytes(body)
            self.client.put_object(Bucket=self.bucket, Key=key, Body=payload)
        else:
            self.client.upload_fileobj(io.BytesIO(body), self.bucket, key, Config=self._transfer)
        return body.nbytes

    def get(self, key: str) -> bytes:
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _error_code(exc) in _NOT_FOUND:
                raise ObjectNotFoundError(key) from None
            raise
        with contextlib.closing(resp["Body"]) as body:
            return bytes(body.read())

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object, like slicing: short or empty past its end."""
        if end <= start:
            return b""
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=key, Range=_range(start, end))
        except ClientError as exc:
            code = _error_code(exc)
            if code in _NOT_FOUND:
                raise ObjectNotFoundError(key) from None
            if code == "InvalidRange":  # start at or past the end
                return b""
            raise
        with contextlib.closing(resp["Body"]) as body:
            return bytes(body.read())

    def head(self, key: str) -> int | None:
        """The object's size, or None when there is none."""
        try:
            resp = self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _error_code(exc) in _NOT_FOUND:
                return None
            raise
        return int(resp["ContentLength"])

    def list(self, prefix: str) -> Iterator[tuple[str, int]]:
        """(key, size) of every object whose key starts with `prefix`, in key order."""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        )
        for page in pages:
            for obj in page.get("Contents", ()):
                yield str(obj["Key"]), int(obj["Size"])

    def delete(self, keys: Iterable[str]) -> int:
        """Delete keys (absent ones are fine: S3 deletes are idempotent). Returns the count."""
        batch: list[str] = []
        count = 0
        for key in keys:
            batch.append(key)
            if len(batch) == _DELETE_BATCH:
                count += self._delete_batch(batch)
                batch = []
        if batch:
            count += self._delete_batch(batch)
        return count

    def _delete_batch(self, keys: Sequence[str]) -> int:
        resp = self.client.delete_objects(
            Bucket=self.bucket,
            Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True},
        )
        errors = resp.get("Errors") or []
        if errors:
            first = errors[0]
            raise OSError(
                f"{len(errors)} of {len(keys)} deletes failed, e.g. {first.get('Key')}: "
                f"{first.get('Code')} {first.get('Message')}"
            )
        return len(keys)

    def incomplete_uploads(self, prefix: str) -> Iterator[IncompleteUpload]:
        """Multipart uploads under `prefix` never completed nor aborted: a process killed
        mid-upload leaves one, and its parts are stored (and billed) until it is aborted."""
        pages = self.client.get_paginator("list_multipart_uploads").paginate(
            Bucket=self.bucket, Prefix=prefix
        )
        for page in pages:
            for up in page.get("Uploads", ()):
                yield IncompleteUpload(str(up["Key"]), str(up["UploadId"]), up["Initiated"])

    def abort_upload(self, upload: IncompleteUpload) -> None:
        """Abort a multipart upload (one already gone is fine): its parts are deleted."""
        try:
            self.client.abort_multipart_upload(
                Bucket=self.bucket, Key=upload.key, UploadId=upload.upload_id
            )
        except ClientError as exc:
            if _error_code(exc) not in ("NoSuchUpload", *_NOT_FOUND):
                raise

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (racing creators are fine)."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return
        except ClientError as exc:
            if _http_status(exc) >= 500:
                raise S3UnavailableError(f"S3 server error on bucket {self.bucket}: {exc}") from exc
            if _error_code(exc) not in _NOT_FOUND:
                raise
        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        if self.config.region != "us-east-1":  # us-east-1 rejects an explicit constraint
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.config.region}
        try:
            self.client.create_bucket(**kwargs)
        except ClientError as exc:
            if _error_code(exc) not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise

    def close(self) -> None:
        self.client.close()


def _range(start: int, end: int) -> str:
    if start < 0:
        raise ValueError("start must be >= 0")
    return f"bytes={start}-{end - 1}"  # HTTP ranges are inclusive


class AsyncObjectStore:
    """Async reads for the fetch path (aiobotocore): one pooled client per instance,
    opened by `async with AsyncObjectStore(config) as store:` (or open() / close())."""

    def __init__(self, config: ObjectStoreConfig) -> None:
        self.config = config
        self.bucket = config.bucket
        self._stack: contextlib.AsyncExitStack | None = None
        self._client: Any = None

    async def __aenter__(self) -> AsyncObjectStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        # Imported here: the sync tiering worker never needs aiohttp loaded.
        from aiobotocore.config import AioConfig

        if self._client is not None:
            return
        stack = contextlib.AsyncExitStack()
        self._client = await stack.enter_async_context(
            aio_session(self.config).create_client(
                "s3",
                config=AioConfig(**self.config.botocore_options()),
                **self.config.client_kwargs(),
            )
        )
        self._stack = stack

    async def close(self) -> None:
        if self._stack is not None:
            stack, self._stack, self._client = self._stack, None, None
            await stack.aclose()

    @property
    def client(self) -> Any:
        if self._client is None:
            raise RuntimeError("AsyncObjectStore is not open (use `async with`)")
        return self._client

    async def _read(self, key: str, **kwargs: Any) -> bytes:
        try:
            resp = await self.client.get_object(Bucket=self.bucket, Key=key, **kwargs)
        except ClientError as exc:
            code = _error_code(exc)
            if code in _NOT_FOUND:
                raise ObjectNotFoundError(key) from None
            if code == "InvalidRange":
                return b""
            raise
        async with resp["Body"] as body:
            return bytes(await body.read())

    async def get(self, key: str) -> bytes:
        return await self._read(key)

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object, like slicing: short or empty past its end."""
        if end <= start:
            return b""
        return await self._read(key, Range=_range(start, end))

    async def head(self, key: str) -> int | None:
        try:
            resp = await self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _error_code(exc) in _NOT_FOUND:
                return None
            raise
        return int(resp["ContentLength"])


def storage_options(config: ObjectStoreConfig) -> dict[str, str]:
    """deltalake storage_options for `config`."""
    return config.storage_options()
