"""`tierlog dev`'s S3 endpoint: SeaweedFS (`weed mini`) via tierlog.devstack.local_s3.LocalS3.
(`tierlog dev` tiering into it end to end is in test_dev.py, on that module's one dev instance.)"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from botocore.exceptions import ClientError

from coldstore.object_store import ObjectStore, ObjectStoreConfig
from tierlog.devstack.local_s3 import SOCKET_DIR, LocalS3, LocalS3Error, socket_listened_on


def _store(env: dict[str, str], bucket: str = "tierlog") -> ObjectStore:
    return ObjectStore(ObjectStoreConfig.from_env({**env, "TIERLOG_S3_BUCKET": bucket}))


def _listening_addresses(ports: set[int]) -> dict[int, str]:
    """Local address (hex, as /proc/net/tcp shows it) of each listening socket on `ports`."""
    found: dict[int, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                addr, port_hex = fields[1].rsplit(":", 1)
                if fields[3] == "0A" and int(port_hex, 16) in ports:  # 0A = LISTEN
                    found[int(port_hex, 16)] = addr
    return found


def test_local_s3_put_get_survives_restart_and_binds_loopback(tmp_path: Path) -> None:
    s3 = LocalS3(tmp_path / "s3")
    env = s3.start()
    try:
        assert env["TIERLOG_S3_ENDPOINT"].startswith("http://127.0.0.1:")
        assert env["AWS_ACCESS_KEY_ID"] and env["AWS_SECRET_ACCESS_KEY"]
        assert (tmp_path / "s3" / "s3.json").stat().st_mode & 0o077 == 0
        store = _store(env)
        store.ensure_bucket()
        store.put("a/b.bin", b"\x00hello\xff" * 1000)
        assert store.get("a/b.bin") == b"\x00hello\xff" * 1000
        assert store.get_range("a/b.bin", 1, 6) == b"hello"
        # Every server weed runs listens on 127.0.0.1 only.
        ports = set(json.loads((tmp_path / "s3" / "ports.json").read_text()).values())
        listening = _listening_addresses(ports)
        assert listening, "no weed listener found"
        assert set(listening.values()) == {"0100007F"}, listening  # 127.0.0.1
        # Wrong credentials are refused: the endpoint is not open to other local users.
        bad = ObjectStore(
            ObjectStoreConfig.from_env({**env, "AWS_SECRET_ACCESS_KEY": "not-the-secret"})
        )
        with pytest.raises(ClientError):
            bad.get("a/b.bin")
    finally:
        s3.stop()
    # A new LocalS3 on the same directory: same endpoint and credentials, same objects.
    again = LocalS3(tmp_path / "s3")
    env2 = again.start()
    try:
        assert env2 == env
        assert _store(env2).get("a/b.bin") == b"\x00hello\xff" * 1000
    finally:
        again.stop()
    # weed leaves its local sockets in /tmp when it stops (even on Ctrl-C); stop() removes
    # those of its ports: none is left behind, run after run (a live one is another weed's
    # that took a port since).
    found = [p for port in ports for p in SOCKET_DIR.glob(f"seaweedfs-*-{port}.sock")]
    left = [p for p in found if not socket_listened_on(p)]
    assert not left, left


def test_conditional_put_and_concurrent_delta_commits(tmp_path: Path) -> None:
    with LocalS3(tmp_path / "s3") as s3:
        env = s3.env()
        store = _store(env, "delta")
        store.ensure_bucket()
        # If-None-Match: * is what delta-rs's aws_conditional_put=etag relies on.
        store.client.put_object(Bucket="delta", Key="once", Body=b"1", IfNoneMatch="*")
        with pytest.raises(ClientError) as info:
            store.client.put_object(Bucket="delta", Key="once", Body=b"2", IfNoneMatch="*")
        assert info.value.response["Error"]["Code"] == "PreconditionFailed"
        assert store.get("once") == b"1"

        config = ObjectStoreConfig.from_env({**env, "TIERLOG_S3_BUCKET": "delta"})
        opts = config.storage_options()
        assert opts["aws_conditional_put"] == "etag"
        uri = config.uri("topics", "t")
        deltalake.write_deltalake(uri, pa.table({"x": [0]}), storage_options=opts)
        # Writers that all saw version 0 race for version 1: conditional put lets exactly one
        # win each version, the others see the conflict and retry on top (appends commute).
        stale = [deltalake.DeltaTable(uri, storage_options=opts) for _ in range(4)]
        errors: list[BaseException] = []

        def append(i: int) -> None:
            try:
                deltalake.write_deltalake(stale[i], pa.table({"x": [i + 1]}), mode="append")
            except BaseException as exc:  # collected: asserted below
                errors.append(exc)

        threads = [threading.Thread(target=append, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        table = deltalake.DeltaTable(uri, storage_options=opts)
        assert table.version() == 4
        assert sorted(table.to_pyarrow_table()["x"].to_pylist()) == [0, 1, 2, 3, 4]


def test_start_failure_names_the_cause_and_the_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        s3 = LocalS3(tmp_path / "s3", port=port, ready_timeout=20)
        with pytest.raises(LocalS3Error) as info:
            s3.start()
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "weed.log" in message
    assert s3.proc is None  # nothing left running
