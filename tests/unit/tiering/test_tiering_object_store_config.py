"""ObjectStoreConfig, layout and S3 helper logic (no network; moto's in-process mock)."""

from __future__ import annotations

import pytest
from moto import mock_aws

from coldstore.layout import data_file_key, data_file_relpath, table_key, table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig, storage_options


def test_from_env_defaults():
    c = ObjectStoreConfig.from_env({})
    assert (c.bucket, c.prefix, c.endpoint_url, c.region) == ("tierlog", "", None, "us-east-1")
    assert c.access_key_id is None
    opts = c.storage_options()
    assert opts == {
        "AWS_REGION": "us-east-1",
        "aws_conditional_put": "etag",
        "connect_timeout": "5s",  # boto3's connect timeout, for deltalake's client too
    }
    assert "s3" not in c.botocore_options()  # AWS itself: virtual-hosted style


def test_from_env_custom_endpoint():
    env = {
        "TIERLOG_S3_ENDPOINT": "http://127.0.0.1:9000",
        "TIERLOG_S3_BUCKET": "logs",
        "TIERLOG_S3_PREFIX": "/prod/eu/",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "ak",
        "AWS_SECRET_ACCESS_KEY": "sk",
        "AWS_SESSION_TOKEN": "tok",
    }
    c = ObjectStoreConfig.from_env(env)
    assert (c.bucket, c.prefix, c.region) == ("logs", "prod/eu", "eu-west-1")
    assert c.key("topics", "t", "") == "prod/eu/topics/t"
    assert c.uri("topics", "t") == "s3://logs/prod/eu/topics/t"
    assert c.storage_options() == {
        "AWS_REGION": "eu-west-1",
        "aws_conditional_put": "etag",
        "connect_timeout": "5s",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "ak",
        "AWS_SECRET_ACCESS_KEY": "sk",
        "AWS_SESSION_TOKEN": "tok",
    }
    b = c.botocore_options()
    assert b["s3"] == {"addressing_style": "path"}
    assert b["retries"] == {"mode": "standard", "max_attempts": c.max_attempts}
    assert ObjectStoreConfig.from_env({"AWS_REGION": "ap-south-1"}).region == "ap-south-1"


def test_storage_options_of_an_https_endpoint():
    opts = storage_options(
        ObjectStoreConfig.from_env({"TIERLOG_S3_ENDPOINT": "https://s3.example.test"})
    )
    assert opts["AWS_ENDPOINT_URL"] == "https://s3.example.test"
    assert "AWS_ALLOW_HTTP" not in opts  # https needs no opt-in


def test_layout():
    c = ObjectStoreConfig(bucket="b", prefix="pre")
    assert table_key(c, "orders") == "pre/topics/orders"
    assert table_uri(c, "orders") == "s3://b/pre/topics/orders"
    assert data_file_relpath(3, 42, "u") == "partition=3/00000000000000000042-u.parquet"
    k1, k2 = data_file_key(c, "orders", 3, 42), data_file_key(c, "orders", 3, 42)
    assert k1.startswith("pre/topics/orders/partition=3/00000000000000000042-")
    assert k1.endswith(".parquet") and k1 != k2  # every upload attempt is a new object
    assert table_key(ObjectStoreConfig(bucket="b"), "t") == "topics/t"


@pytest.fixture
def mocked_store(monkeypatch):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(k, "testing")
    with mock_aws():
        yield ObjectStore(ObjectStoreConfig(bucket="unit-bucket", region="eu-central-1"))


def test_delete_batches_past_the_api_limit(mocked_store):
    store = mocked_store
    store.ensure_bucket()
    store.ensure_bucket()  # idempotent; and a non-us-east-1 bucket needs its constraint
    keys = [f"x/{i:05d}" for i in range(2345)]
    for k in keys[::500]:  # absent keys are fine to delete; a few real ones suffice
        store.client.put_object(Bucket=store.bucket, Key=k, Body=b"1")
    calls = []
    real = store.client.delete_objects

    def counting(**kw):
        calls.append(len(kw["Delete"]["Objects"]))
        return real(**kw)

    store.client.delete_objects = counting
    assert store.delete(iter(keys)) == 2345
    assert calls == [1000, 1000, 345]
    assert list(store.list("x/")) == []
    assert store.delete([]) == 0


def test_missing_objects(mocked_store):
    store = mocked_store
    store.ensure_bucket()
    assert store.head("nope") is None
    with pytest.raises(KeyError):
        store.get("nope")
    assert store.get_range("k", 5, 5) == b""


def test_deltalake_s_client_takes_the_connect_timeout() -> None:
    opts = ObjectStoreConfig(connect_timeout_s=0.5).storage_options()
    assert opts["connect_timeout"] == "0.5s"  # a duration object_store parses
    assert "timeout" not in opts  # a whole-request bound would cut long uploads short
