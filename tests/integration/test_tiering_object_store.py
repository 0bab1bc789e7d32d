"""ObjectStore / AsyncObjectStore against moto's real HTTP server."""

from __future__ import annotations

import asyncio
import os

import pytest

from coldstore.object_store import (
    AsyncObjectStore,
    MiB,
    ObjectNotFoundError,
    ObjectStore,
    ObjectStoreConfig,
)
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401

DATA = bytes(range(256)) * 1000


@pytest.fixture
def store(s3_bucket):
    s = ObjectStore(s3_bucket)
    yield s
    s.close()


def test_put_get_range_head(store, s3_bucket):
    key = s3_bucket.key("a", "obj.bin")
    assert store.put(key, DATA) == len(DATA)
    assert store.get(key) == DATA
    assert store.head(key) == len(DATA)
    assert store.get_range(key, 0, 10) == DATA[:10]
    assert store.get_range(key, 1000, 5000) == DATA[1000:5000]
    assert store.get_range(key, len(DATA) - 3, len(DATA) + 100) == DATA[-3:]  # short at the end
    assert store.get_range(key, len(DATA), len(DATA) + 10) == b""  # past the end: like slicing
    assert store.get_range(key, 7, 7) == b""
    assert store.put(key, b"") == 0  # overwrite, empty object
    assert store.get(key) == b"" and store.head(key) == 0
    missing = s3_bucket.key("missing")
    assert store.head(missing) is None
    with pytest.raises(ObjectNotFoundError):
        store.get(missing)
    with pytest.raises(ObjectNotFoundError):
        store.get_range(missing, 0, 1)


def test_put_file_and_multipart(s3_bucket, tmp_path):
    # S3's smallest part is 5 MiB: 12 MiB in 5 MiB parts is a 3-part upload.
    config = s3_bucket._replace(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    store = ObjectStore(config)
    big = os.urandom(12 * MiB)
    path = tmp_path / "big.bin"
    path.write_bytes(big)
    for i, src in enumerate([big, path, str(path)]):
        key = config.key(f"big{i}")
        assert store.put(key, src) == len(big)
        etag = store.client.head_object(Bucket=config.bucket, Key=key)["ETag"]
        assert etag.strip('"').endswith("-3")  # a multipart ETag names its part count
        assert store.get(key) == big
        assert store.get_range(key, 5 * MiB - 2, 5 * MiB + 2) == big[5 * MiB - 2 : 5 * MiB + 2]
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 100)
    assert store.put(config.key("small"), small) == 100
    etag = store.client.head_object(Bucket=config.bucket, Key=config.key("small"))["ETag"]
    assert "-" not in etag  # a single PUT below the threshold


def test_list_and_delete(store, s3_bucket):
    keys = [
        s3_bucket.key("topics", "t", f"partition={p}", f"{i:020d}.parquet")
        for p in (0, 1)
        for i in range(3)
    ]
    for n, k in enumerate(keys):
        store.put(k, b"x" * n)
    store.put(s3_bucket.key("topics", "other", "f"), b"zz")
    listed = list(store.list(s3_bucket.key("topics", "t") + "/"))
    assert listed == [(k, n) for n, k in enumerate(keys)]  # key order, with sizes
    assert [k for k, _ in store.list(s3_bucket.key("topics", "t", "partition=1") + "/")] == keys[3:]
    assert store.delete([*keys[:4], s3_bucket.key("never-existed")]) == 5
    assert (
        [k for k, _ in store.list(s3_bucket.key("topics"))]
        == [
            s3_bucket.key("topics", "other", "f"),  # "other" sorts before "t"
            *keys[4:],
        ]
    )
    assert list(store.list(s3_bucket.key("nothing-here"))) == []


def test_ensure_bucket_and_from_env(moto_s3, monkeypatch):
    monkeypatch.setenv("TIERLOG_S3_ENDPOINT", moto_s3.endpoint)
    monkeypatch.setenv("TIERLOG_S3_BUCKET", "from-env-bucket")
    monkeypatch.setenv("TIERLOG_S3_PREFIX", "envprefix")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    config = ObjectStoreConfig.from_env(os.environ)
    store = ObjectStore(config)
    store.ensure_bucket()
    store.ensure_bucket()  # already there: fine
    store.put(config.key("k"), b"v")
    assert list(store.list("")) == [("envprefix/k", 1)]


def test_async_reads(store, s3_bucket):
    key = s3_bucket.key("async.bin")
    store.put(key, DATA)

    async def main():
        async with AsyncObjectStore(s3_bucket) as a:
            results = await asyncio.gather(
                a.get(key),
                a.get_range(key, 10, 20),
                a.get_range(key, len(DATA) - 5, len(DATA) + 5),
                a.get_range(key, len(DATA) + 1, len(DATA) + 5),
                a.head(key),
                a.head(s3_bucket.key("missing")),
            )
            with pytest.raises(ObjectNotFoundError):
                await a.get(s3_bucket.key("missing"))
            return results

    full, part, tail, past, size, none = asyncio.run(main())
    assert full == DATA and part == DATA[10:20] and tail == DATA[-5:] and past == b""
    assert size == len(DATA) and none is None


def test_async_store_must_be_open(s3_bucket):
    with pytest.raises(RuntimeError, match="not open"):
        asyncio.run(AsyncObjectStore(s3_bucket).get("k"))
