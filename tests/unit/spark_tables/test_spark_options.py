"""Option parsing of the tierlog source (no Spark needed)."""

from __future__ import annotations

import os

import pytest

from coldstore.object_store import ObjectStoreConfig
from spark_tables.options import EARLIEST, LATEST, OptionError, parse_options, store_options

ENV = {
    "TIERLOG_S3_ENDPOINT": "http://127.0.0.1:9000",
    "TIERLOG_S3_BUCKET": "envbucket",
    "TIERLOG_S3_PREFIX": "/envprefix/",
    "AWS_ACCESS_KEY_ID": "ak",
    "AWS_SECRET_ACCESS_KEY": "sk",
    "AWS_REGION": "eu-west-1",
}


def test_defaults_come_from_the_environment() -> None:
    o = parse_options({"path": "orders"}, ENV)
    assert o.topic == "orders"
    assert o.store == ObjectStoreConfig(
        bucket="envbucket",
        prefix="envprefix",
        endpoint_url="http://127.0.0.1:9000",
        region="eu-west-1",
        access_key_id="ak",
        secret_access_key="sk",
    )
    assert (o.plan_from, o.include_hot, o.partitions) == ("delta", False, None)
    assert (o.starting_offsets, o.ending_offsets) == ("earliest", "latest")
    assert (o.key_format, o.value_format) == ("binary", "binary")
    assert o.min_partitions == (os.cpu_count() or 1)  # as many tasks as cores to pack into
    assert parse_options({"path": "orders", "minPartitions": "64"}, ENV).min_partitions == 64


def test_options_win_over_the_environment_case_insensitively() -> None:
    o = parse_options(
        {
            "TOPIC": "t",
            "Endpoint": "http://s3:1",
            "bucket": "b",
            "prefix": "",
            "accesskeyid": "a2",
            "secretAccessKey": "s2",
            "databaseUrl": "postgresql://x/db",
            "brokerUrl": "http://b:8080/",
            "includeHot": "TRUE",
            "partitions": "2, 0",
            "maxRecordsPerTrigger": "10",
        },
        ENV,
    )
    assert (o.store.endpoint_url, o.store.bucket, o.store.prefix) == ("http://s3:1", "b", "")
    assert (o.store.access_key_id, o.store.secret_access_key) == ("a2", "s2")
    assert o.plan_from == "manifest"  # auto: a database URL is known
    assert o.broker_url == "http://b:8080" and o.include_hot
    assert o.partitions == frozenset({0, 2})
    assert o.max_records_per_trigger == 10


def test_offsets_take_kafkas_json_forms() -> None:
    o = parse_options(
        {
            "topic": "t",
            "startingOffsets": '{"t": {"0": 5, "1": -2}}',
            "endingOffsets": '{"0": -1, "1": 9}',
        },
        {},
    )
    assert o.starting_offsets == {0: 5, 1: EARLIEST}
    assert o.ending_offsets == {0: LATEST, 1: 9}
    assert (
        parse_options({"topic": "t", "startingOffsets": "Latest"}, {}).starting_offsets == "latest"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "name the topic"),
        ({"topic": "a/b"}, "not a path"),
        ({"topic": "t", "includeHot": "true"}, "needs brokerUrl"),
        ({"topic": "t", "includeHot": "maybe"}, "true or false"),
        ({"topic": "t", "partitions": "0,x"}, "partitions"),
        ({"topic": "t", "startingOffsets": "[1]"}, "startingOffsets"),
        ({"topic": "t", "startingOffsets": '{"0": -3}'}, "bad entry"),
        ({"topic": "t", "valueFormat": "xml"}, "valueFormat"),
        ({"topic": "t", "keyFormat": "json"}, "keyFormat"),
        ({"topic": "t", "valueSchema": "a INT"}, "valueFormat=json"),
        ({"topic": "t", "planFrom": "manifest"}, "needs databaseUrl"),
        ({"topic": "t", "maxPartitionBytes": "0"}, ">= 1"),
        ({"topic": "t", "minPartitions": "0"}, "minPartitions must be >= 1"),
        ({"topic": "t", "startingTimestamp": "soon"}, "integer"),
    ],
)
def test_bad_options_are_refused_with_their_name(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_options(options, {})


def test_store_options_round_trip() -> None:
    store = ObjectStoreConfig.from_env(ENV)
    assert parse_options({"topic": "t", **store_options(store)}, {}).store == store
