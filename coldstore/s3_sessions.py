"""The process's boto3 and aiobotocore sessions, which S3 clients are made from.

A session loads botocore's S3 model and endpoint rules from JSON (~0.1 s of CPU) the first
time it makes a client; a session per store paid that for every store (38 of the suite's
workers' 176 sampled CPU-s in one profile). From one session a client costs ~4 ms, and the
async session shares the sync one's loader, so neither loads the models twice.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol


class ClientConfig(Protocol):
    """What a client is made from (coldstore.object_store.ObjectStoreConfig is one)."""

    @property
    def access_key_id(self) -> str | None: ...

    def botocore_options(self) -> dict[str, Any]: ...

    def client_kwargs(self) -> dict[str, Any]: ...


_sessions = threading.Lock()
_session: Any = None  # boto3.session.Session, made by the first s3_client call
_aio: Any = None  # aiobotocore's AioSession, sharing that session's loader


def s3_client(config: ClientConfig) -> Any:
    """A boto3 S3 client for `config`, from the process's one boto3 session. Not boto3's
    default session: clients are made under a lock of our own, as a session's client
    creation is not thread-safe (the clients are). Without keys in `config`, a session of
    its own: a session keeps the credentials its chain found."""
    # boto3 (~0.06 s of CPU to import) only where a store is made: every broker imports
    # this module (the lake endpoint), most without S3.
    import boto3.session
    from botocore.config import Config

    options = {"config": Config(**config.botocore_options()), **config.client_kwargs()}
    if config.access_key_id is None:
        return boto3.session.Session().client("s3", **options)
    with _sessions:
        return _shared_session().client("s3", **options)


def _shared_session() -> Any:
    """The process's boto3 session (call with `_sessions` held)."""
    global _session
    import boto3.session

    if _session is None:
        _session = boto3.session.Session()
    return _session


def aio_session(config: ClientConfig) -> Any:
    """aiobotocore's session for `config`'s client: with keys, the process's one, whose JSON
    loader (botocore's models, cached) is the sync session's (s3_client), so neither loads
    them twice; without keys, one of its own (as s3_client)."""
    global _aio
    from aiobotocore.session import AioSession, get_session

    if config.access_key_id is None:
        return get_session()
    with _sessions:
        if _aio is None:
            loader = _shared_session()._session.get_component("data_loader")
            _aio = AioSession()
            _aio.register_component("data_loader", loader)
        return _aio
