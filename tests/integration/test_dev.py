"""`tierlog dev` end to end: its own Postgres and S3, a broker, tiering into a Delta table,
the README's tour as written, Ctrl-C, data across restarts. The tests share one dev instance
(its start, with initdb and SeaweedFS, takes seconds); the last one stops and restarts it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import deltalake
import httpx
import pytest

from coldstore.layout import table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from http_transport.trust import default_trust
from logformat.partitioner import partition_for_key
from tests.integration.cluster import wait_for
from tests.integration.dev_process import DevInstance, dev_root
from tierlog.devstack.dev import fetch_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def _dev_instance() -> Iterator[DevInstance]:
    path = dev_root()
    # The README's tour runs in `path` as in a checkout: its relative paths (.tierlog/dev.env,
    # .venv/bin/activate, examples/) resolve there.
    for name in (".venv", "examples"):
        (path / name).symlink_to(ROOT / name)
    # The tiering worker looks for sealed segments every 200 ms (1 s by default). The
    # compaction worker keeps its 10 s: a replica's finished hot erasure pass wakes it
    # (cluster/wakeups.py), so the README's erasure examples no longer wait for its polls.
    dev = DevInstance(path, data_dir=".tierlog", env={"TIERLOG_POLL_MS": "200"})
    try:
        yield dev
    finally:
        if dev.running():
            dev.ctrl_c()
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def dev(_dev_instance: DevInstance) -> DevInstance:
    """The module's dev instance, running (started on first use, or again after a test
    stopped it)."""
    if not _dev_instance.running():
        _dev_instance.start()
    return _dev_instance


def test_dev_tiers_records_into_a_delta_table_in_its_s3(dev: DevInstance) -> None:
    """`tierlog dev` end to end: produce to small segments, and the tiering worker it runs
    puts every record in the topic's Delta table in its S3 endpoint; describe shows the
    cold range, and the table opens with deltalake using the credentials in dev.env."""
    port, base, dev_data = dev.port, dev.base, dev.data_dir
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
        r = httpx.post(
            f"{base}/topics/events/records",
            json={"records": records},
            timeout=30,
            verify=default_trust(),
        )
        assert r.status_code == 200, r.text
        for rec, o in zip(records, r.json()["offsets"], strict=True):
            produced[(o["partition"], o["offset"])] = (
                rec["key"].encode(),
                rec["value"].encode(),
            )
    hw = {p: 1 + max(o for q, o in produced if q == p) for p in (0, 1)}
    assert all(hw.values())

    def all_cold() -> bool:
        parts = httpx.get(f"{base}/topics/events", timeout=10, verify=default_trust()).json()[
            "partitions"
        ]
        return all(
            p["cold"] == {"start": 0, "end": hw[p["partition"]]} and p["tiering_lag"] == 0
            for p in parts
        )

    wait_for("every record in the cold tier", all_cold, timeout=60, every=0.5)
    config = ObjectStoreConfig.from_env(dev.env_file())
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


def _tour_script(kcat: bool) -> str:
    """The shell blocks of the README's "A 5-minute tour", in order, each announced (so a
    failure shows where it stopped); kcat's only where kcat is installed (apt's kcat). The
    Spark block, `python examples/spark_query.py greetings`, is the example
    test_dev_tiers_records_into_a_delta_table_in_its_s3 runs against this dev (a second
    Spark start would cost the suite a minute or more)."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("\n## A 5-minute tour\n")
    section = readme[start : readme.index("\n## ", start + 1)]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 4, blocks
    assert blocks[2].startswith("python examples/spark_query.py greetings "), blocks[2]
    run = [blocks[0], blocks[1], *([blocks[3]] if kcat else [])]
    return "".join(f"echo '== tour block {i}' >&2\n{b}" for i, b in enumerate(run, 1))


def test_the_readmes_tour_runs_as_written_and_reaches_s3(dev: DevInstance) -> None:
    """A newcomer's first minutes (issue 27): the tour's commands, run as written in a shell
    with nothing but dev.env, produce, consume, find the records in the topic's Delta table
    in S3 within 60 s (`lake describe --wait 60`: the default segment.ms of dev's topics
    seals them), see them in `topics describe`, and read them with kcat."""
    kcat = shutil.which("kcat") is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIERLOG_", "AWS_"))}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(ROOT / ".venv"))
    )
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _tour_script(kcat)],
        cwd=dev.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert {"alice\thello", "bob\thi", "carol\they"} <= set(lines), out.stdout  # consumed
    table_line = next(line for line in lines if line.startswith("Topic: greetings\tTable: "))
    assert "\tRecords: 3\t" in table_line, out.stdout  # lake describe, after its wait
    records = [("alice", "hello"), ("bob", "hi"), ("carol", "hey")]
    placed = {key: partition_for_key(key.encode(), 3) for key, _ in records}
    per_partition = {p: [k for k, _ in records if placed[k] == p] for p in set(placed.values())}
    for p, keys in per_partition.items():  # topics describe: all of it in S3
        row = next(line for line in lines if f"\tPartition: {p}\tLeader:" in line)
        n = len(keys)
        assert re.search(rf"\tInS3: {n} of {n} records, [\d.]+ (B|KiB)$", row), row
    # The records are in the Delta table, read with dev.env's credentials.
    config = ObjectStoreConfig.from_env(dev.env_file())
    rows = (
        deltalake.DeltaTable(
            table_uri(config, "greetings"), storage_options=config.storage_options()
        )
        .to_pyarrow_table()
        .to_pylist()
    )
    assert {(r["partition"], r["key"], r["value"]) for r in rows} == {
        (placed["alice"], b"alice", b"hello"),
        (placed["bob"], b"bob", b"hi"),
        (placed["carol"], b"carol", b"hey"),
    }
    if kcat:  # kcat reads the same three records, at the partitions and offsets HTTP chose
        read = {line for line in lines if re.fullmatch(r"\d+:\d+ \w+=\w+", line)}
        assert read == {
            f"{placed[k]}:{per_partition[placed[k]].index(k)} {k}={v}" for k, v in records
        }, out.stdout


def test_the_readmes_erasure_examples_run_as_written(dev: DevInstance) -> None:
    """The README's "Erasing a key" block (issue 31), run as written after records of the
    keys reached S3: both requests end done, and neither the broker nor the Delta table
    returns a record of either key; the others stay."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("\n## Erasing a key\n")
    section = readme[start : readme.index("\n## ", start + 1)]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.S)
    setup = (
        "set -a; . .tierlog/dev.env; set +a\n"
        "source .venv/bin/activate\n"
        "tierlog topics create greetings --partitions 3 2>/dev/null || true\n"
        "printf 'alice:hello\\nbob:hi\\ncarol:hey\\n' | tierlog produce greetings --key-sep :\n"
        "tierlog lake describe greetings --wait 60 >/dev/null\n"
    )
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", setup + block],
        cwd=dev.root,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    # curl's answer (pending), then `erase --wait`'s line and the two of `erasures`: done
    assert '"state":"pending"' in out.stdout, out.stdout
    assert out.stdout.count("of greetings: done (1 key(s)); hot: ") == 3, out.stdout
    config = ObjectStoreConfig.from_env(dev.env_file())
    rows = deltalake.DeltaTable(
        table_uri(config, "greetings"), storage_options=config.storage_options()
    ).to_pyarrow_table()
    keys = set(rows.column("key").to_pylist())
    assert b"alice" not in keys and b"bob" not in keys and b"carol" in keys
    # A file whose every record was erased goes whole: its partition's log then starts later.
    for p in httpx.get(f"{dev.base}/topics/greetings").json()["partitions"]:
        start = p["log_start_offset"] or 0
        r = httpx.get(
            f"{dev.base}/topics/greetings/partitions/{p['partition']}/records",
            params={"offset": start},
        )
        assert r.status_code == 200, r.text
        assert not {"alice", "bob"} & {rec["key"] for rec in r.json()["records"]}


def test_dev_runs_the_quickstart_and_keeps_data(dev: DevInstance) -> None:
    data_dir, log, base = dev.data_dir, dev.log, dev.base
    try:
        # The README's curl quickstart, as HTTP calls.
        r = httpx.post(f"{base}/topics", json={"name": "quickstart", "partitions": 3})
        assert r.status_code == 201, r.text
        r = httpx.post(
            f"{base}/topics/quickstart/records",
            json={
                "records": [
                    {"key": "alice", "value": {"hello": "world"}},
                    {"key": "bob", "value": "hi"},
                ]
            },
        )
        assert r.status_code == 200, r.text
        placed = r.json()["offsets"]
        # The S3 endpoint dev started (SeaweedFS): named in the banner and in data_dir/dev.env,
        # on loopback, with the bucket created and the credentials working.
        s3_env = dev.env_file()
        endpoint = s3_env["TIERLOG_S3_ENDPOINT"]
        assert endpoint.startswith("http://127.0.0.1:")
        assert f"S3 at {endpoint} bucket tierlog" in log.read_text()
        assert "workers: tiering" in log.read_text()  # the tiering worker runs beside
        store = ObjectStore(ObjectStoreConfig.from_env(s3_env))
        store.put("dev-test/marker", b"kept")
    finally:
        dev.ctrl_c()
    assert (data_dir / "postgres").is_dir()
    with pytest.raises(httpx.TransportError):  # Ctrl-C stopped S3 too
        httpx.get(f"{endpoint}/healthz", timeout=2)
    dev.start()
    try:
        again = dev.env_file()
        assert {k: again[k] for k in s3_env if k.startswith(("TIERLOG_S3", "AWS_"))} == {
            k: v for k, v in s3_env.items() if k.startswith(("TIERLOG_S3", "AWS_"))
        }  # the same endpoint and credentials (Postgres may take another port)
        assert store.get("dev-test/marker") == b"kept"
        for o, value in zip(placed, [{"hello": "world"}, "hi"], strict=True):
            doc = httpx.get(
                f"{base}/topics/quickstart/partitions/{o['partition']}/records",
                params={"offset": o["offset"]},
            ).json()
            assert doc["records"][0]["value"] == value
    finally:
        dev.ctrl_c()
