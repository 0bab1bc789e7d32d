"""`tierlog dev`'s S3 endpoint: SeaweedFS (`weed mini`) via tierlog.local_s3.LocalS3, and
`tierlog dev` tiering into it end to end."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import deltalake
import httpx
import pyarrow as pa
import pytest
from botocore.exceptions import ClientError

from tests.integration.cluster import wait_for
from tests.integration.ports import free_port
from tests.integration.test_dev import _ctrl_c, _s3_env, _start
from tiering.layout import table_uri
from tiering.object_store import ObjectStore, ObjectStoreConfig
from tierlog.dev import fetch_port
from tierlog.local_s3 import LocalS3, LocalS3Error

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.fixture
def dev_data() -> Iterator[Path]:
    # Not pytest's tmp_path: as root, dev runs Postgres as the postgres user, which cannot
    # traverse /tmp/pytest-of-root (mode 700).
    path = Path(tempfile.mkdtemp(prefix="tierlog-dev-s3-test-"))
    path.chmod(0o755)
    yield path / "data"
    shutil.rmtree(path, ignore_errors=True)


def test_dev_tiers_records_into_a_delta_table_in_its_s3(dev_data: Path, tmp_path: Path) -> None:
    """`tierlog dev` end to end: produce to small segments, and the tiering worker it runs
    puts every record in the topic's Delta table in its S3 endpoint; describe shows the
    cold range, and the table opens with deltalake using the credentials in s3.env."""
    port = free_port(span=11)  # dev: the broker on port, the fetch node on port + 10
    base = f"http://127.0.0.1:{port}"
    proc = _start(dev_data, port, tmp_path / "dev.log")
    try:
        r = httpx.post(
            f"{base}/topics",
            json={
                "name": "events",
                "partitions": 2,
                # 1 MiB segments, and segment.ms seals the last one too, so all gets tiered
                "configs": {"segment.bytes": 1048576, "segment.ms": 1000},
            },
        )
        assert r.status_code == 201, r.text
        produced: dict[tuple[int, int], tuple[bytes, bytes]] = {}
        for batch in range(8):
            records = [
                {"key": f"user-{i % 37}", "value": f"event {batch * 400 + i} " + "x" * 500}
                for i in range(400)
            ]
            r = httpx.post(f"{base}/topics/events/records", json={"records": records}, timeout=30)
            assert r.status_code == 200, r.text
            for rec, o in zip(records, r.json()["offsets"], strict=True):
                produced[(o["partition"], o["offset"])] = (
                    rec["key"].encode(),
                    rec["value"].encode(),
                )
        hw = {p: 1 + max(o for q, o in produced if q == p) for p in (0, 1)}
        assert all(hw.values())

        def all_cold() -> bool:
            parts = httpx.get(f"{base}/topics/events", timeout=10).json()["partitions"]
            return all(
                p["cold"] == {"start": 0, "end": hw[p["partition"]]} and p["tiering_lag"] == 0
                for p in parts
            )

        wait_for("every record in the cold tier", all_cold, timeout=60, every=0.5)
        config = ObjectStoreConfig.from_env(_s3_env(dev_data))
        table = deltalake.DeltaTable(
            table_uri(config, "events"), storage_options=config.storage_options()
        ).to_pyarrow_table()
        rows = {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in table.to_pylist()}
        assert table.num_rows == len(rows) == len(produced)  # each offset once
        assert rows == produced
        # The fetch node dev runs (no broker role) replays the topic from the beginning.
        fetch_url = f"http://127.0.0.1:{fetch_port(port, 1)}"
        wait_for(
            "the fetch node is ready",
            lambda: httpx.get(f"{fetch_url}/readyz", timeout=5).status_code == 200,
            timeout=30,
        )
        out = subprocess.run(
            [
                *(sys.executable, "-m", "tierlog", "consume", "events", "--url", fetch_url),
                *("--from-beginning", "--print-offset", "--max-messages", str(len(produced))),
                *("--timeout-ms", "30000"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.splitlines()) == len(produced)
        # The README's Spark example against this dev instance gets every row.
        out = subprocess.run(
            [
                *(sys.executable, str(ROOT / "examples" / "spark_query.py"), "events"),
                *("--url", base, "--data-dir", str(dev_data)),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        counts = {}
        for line in out.stdout.splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) == 6 and cells[0].isdigit():  # partition | records | first | last ...
                counts[int(cells[0])] = (int(cells[1]), int(cells[2]), int(cells[3]))
        assert counts == {p: (n, 0, n - 1) for p, n in hw.items()}, out.stdout
    finally:
        _ctrl_c(proc)
