"""The delta-spark session helper's configuration, and its quick jar-availability check."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from coldstore.object_store import ObjectStoreConfig
from spark_tables import delta_session as ds


def test_packages_match_the_installed_pyspark_and_delta() -> None:
    delta, aws = ds.packages()
    assert delta.startswith("io.delta:delta-spark_4.2_2.13:4.4.")
    assert aws == f"org.apache.hadoop:hadoop-aws:{ds.hadoop_version()}"


def test_s3a_settings_for_a_local_endpoint() -> None:
    store = ObjectStoreConfig(
        bucket="b",
        prefix="p",
        endpoint_url="http://127.0.0.1:9000",
        access_key_id="ak",
        secret_access_key="sk",
    )
    conf = ds.s3a_conf(store)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.access.key"] == "ak"
    assert ds.s3a_uri(store, "orders") == "s3a://b/p/topics/orders"
    aws = ds.s3a_conf(
        ObjectStoreConfig(session_token="t", access_key_id="a", secret_access_key="s")
    )
    assert "TemporaryAWSCredentialsProvider" in aws["spark.hadoop.fs.s3a.aws.credentials.provider"]
    assert "spark.hadoop.fs.s3a.endpoint" not in aws


def test_jars_in_the_ivy_cache_need_no_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for coordinate in ds.packages():
        jar = ds._ivy_jar(coordinate, tmp_path)
        jar.parent.mkdir(parents=True, exist_ok=True)
        jar.touch()
    monkeypatch.setenv("TIERLOG_SPARK_IVY", str(tmp_path))
    assert ds.jars_available() == (True, f"ivy cache {tmp_path}")


def test_an_unreachable_repository_is_reported_quickly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERLOG_SPARK_IVY", str(tmp_path))

    def blackhole(address: tuple[str, int], timeout: float) -> socket.socket:
        time.sleep(min(timeout, 0.1))
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", blackhole)
    started = time.monotonic()
    ok, why = ds.jars_available(timeout_s=3)
    assert not ok and "unreachable" in why and "hadoop-aws" in why
    assert time.monotonic() - started < 3
