"""S3 clients come from one boto3 session per process (coldstore.s3_sessions.s3_client): the
second store's client loads none of botocore's JSON models again, nor does the async store's
(aiobotocore's session shares the loader); a store without keys gets a session of its own, so
the credentials it finds are the chain's as they are now."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from botocore.loaders import JSONFileLoader

from coldstore.object_store import AsyncObjectStore, ObjectStore, ObjectStoreConfig

ENDPOINT = "http://127.0.0.1:9"  # never contacted: making a client sends nothing


def _keyed(bucket: str) -> ObjectStoreConfig:
    return ObjectStoreConfig(
        bucket, endpoint_url=ENDPOINT, access_key_id="ak", secret_access_key="sk"
    )


def _count_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    loaded: list[str] = []
    load_file = JSONFileLoader.load_file

    def counted(self: JSONFileLoader, file_path: str) -> Any:
        loaded.append(file_path)
        return load_file(self, file_path)

    monkeypatch.setattr(JSONFileLoader, "load_file", counted)
    return loaded


def test_a_second_store_loads_no_model_again(monkeypatch: pytest.MonkeyPatch) -> None:
    ObjectStore(_keyed("first"))
    loaded = _count_loads(monkeypatch)
    second = ObjectStore(_keyed("second"))
    assert loaded == []
    assert second.client.meta.endpoint_url == ENDPOINT


def test_the_async_store_shares_the_loaded_models(monkeypatch: pytest.MonkeyPatch) -> None:
    ObjectStore(_keyed("sync"))
    loaded = _count_loads(monkeypatch)

    async def opened() -> str:
        async with AsyncObjectStore(_keyed("async")) as store:
            return str(store.client.meta.endpoint_url)

    assert asyncio.run(opened()) == ENDPOINT
    assert asyncio.run(opened()) == ENDPOINT  # another loop, the same session
    assert loaded == []


def test_a_store_without_keys_finds_the_credentials_of_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chained = ObjectStoreConfig("chain", endpoint_url=ENDPOINT)
    for key in ("one", "two"):
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", f"ak-{key}")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", f"sk-{key}")
        creds = ObjectStore(chained).client._request_signer._credentials
        assert creds.access_key == f"ak-{key}"
