"""Cost, computed: dollars per GB ingested, per GB-month stored and per GB replayed.

    .venv/bin/python -m bench.cost [--mb 256] [--value-bytes 1024] [--segment-mb 8]
    .venv/bin/python -m bench.cost --smoke         # 4 MB, 1 MiB segments (the test suite)

Starts its own Postgres, a SeaweedFS S3 endpoint behind a metering proxy (every request any
node makes to S3 passes through it and is counted by S3's price class, with its bytes:
tests/integration/s3_faults.py with no faults), one broker and one fetch node. In one run, the
three workloads of the tiering, compaction and replay benchmarks on the same topic:

1. ingest: --mb of ~1 KB JSON events (bench/events.py) produced over HTTP, then a tiering
   worker (in this process, its default batching) copies every segment to the Delta table;
2. compaction: one pass of a compaction worker (its defaults) over the table;
3. replay: the whole topic read from offset 0 through the fetch node (from S3), checked
   against what was produced (dense offsets, checksum of the values: bench/replay_check.py).

The S3 requests and bytes each phase made are turned into dollars at published prices
(bench/cost_model.py, printed with the table), side by side with the baseline: the same
records kept as history on three replicas' broker disks. The replay is checked and the
metered requests must be non-zero for each phase, or the run fails.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

import httpx
import pyarrow as pa

from bench.cost_model import Measured, Prices, Requests, broker_disk_row, tierlog_row
from bench.events import arrow_body, make_records
from bench.replay_check import PassCheck, ProducedDigests
from bench.servers import start_pg_and_s3
from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import table_key, table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from compaction.worker import CompactionWorker
from metadata.db import make_engine
from tests.integration.brokers import BrokerProcess
from tests.integration.fetch_nodes import FetchNodeProcess
from tests.integration.s3_faults import FaultyS3Proxy
from tiering.worker import TieringWorker

ARROW = "application/vnd.apache.arrow.stream"
MiB = 1 << 20
TOPIC = "cost"


def produce(http: httpx.Client, args: argparse.Namespace, produced: ProducedDigests) -> int:
    """--mb of events into TOPIC; the key + value bytes produced."""
    rng = random.Random(7)
    # A request is one frame, and a frame never spans segments: a quarter segment at most.
    per_request = max(1, min(1000, args.segment_mb * MiB // (4 * args.value_bytes)))
    raw = 0
    while raw < args.mb * 1e6:
        keys, values = make_records(rng, per_request, args.value_bytes)
        r = http.post(
            f"/topics/{TOPIC}/records",
            params={"acks": "1"},
            content=arrow_body(keys, values),
            headers={"content-type": ARROW},
        )
        if r.status_code != 200:
            raise SystemExit(f"produce failed: {r.status_code} {r.text[:300]}")
        produced.produced(pa.array(values, pa.binary()))
        raw += sum(map(len, keys)) + sum(map(len, values))
    return raw


def tier_all(http: httpx.Client, worker: TieringWorker, timeout_s: float) -> int:
    """Run the worker until the whole log is in S3 and gone from the broker; the log's end."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        worker.run_once()
        p = http.get(f"/topics/{TOPIC}").json()["partitions"][0]
        end = p["log_end_offset"]
        if p["cold"] and p["cold"]["end"] == end and p["hot"]["start"] == end:
            return int(end)
        time.sleep(0.2)
    raise SystemExit(f"the topic was not all tiered within {timeout_s:g} s")


def replay(node: FetchNodeProcess, end: int, produced: ProducedDigests) -> int:
    """Read [0, end) through the fetch node, checked; the key + value bytes read."""
    check = PassCheck("replay via fetch node", 0, end, produced)
    offset, raw = 0, 0
    while offset < end:
        r = node.http.get(
            f"/topics/{TOPIC}/partitions/0/records",
            params={"offset": offset, "max_records": 100_000, "max_bytes": 16 * MiB},
            headers={"accept": ARROW},
        )
        if r.status_code != 200:
            raise SystemExit(f"replay fetch failed: {r.status_code} {r.text[:300]}")
        table = pa.ipc.open_stream(r.content).read_all()
        nxt = check.answer(table, offset, int(r.headers["x-tierlog-next-offset"]))
        table = table.filter(pa.compute.less(table.column("offset"), nxt))
        raw += sum(
            pa.compute.binary_length(table.column(c)).to_numpy().sum() for c in ("key", "value")
        )
        offset = nxt
    check.finish()
    return int(raw)


def table_bytes(store: ObjectStore, config: ObjectStoreConfig) -> int:
    """The topic's table as S3 holds it now: live data files and the Delta log (files a
    compaction replaced are deleted after their grace period and are not counted)."""
    table = DeltaTopicTable(table_uri(config, TOPIC), config.storage_options())
    data = sum(f.size for f in table.files())
    prefix = table_key(config, TOPIC).rstrip("/") + "/_delta_log/"
    return data + sum(size for _key, size in store.list(prefix))


def run(args: argparse.Namespace, tmp: Path) -> Measured:
    pg, url, s3, s3_env = start_pg_and_s3(tmp)
    proxy = FaultyS3Proxy(s3_env["TIERLOG_S3_ENDPOINT"], error_rate=0).start()
    os.environ.update(
        {**s3_env, "TIERLOG_S3_ENDPOINT": proxy.endpoint, "TIERLOG_S3_BUCKET": "cost"}
    )
    config = ObjectStoreConfig.from_env(os.environ)
    store = ObjectStore(config)
    store.ensure_bucket()
    # The broker and the fetch node start side by side, both ready before any S3 request is
    # metered (the node only serves the replay, phase 3).
    broker = BrokerProcess(url, tmp / "broker").start(wait=False)
    node = FetchNodeProcess(url, tmp / "fetch.log", {})
    engine = make_engine(url)
    try:
        node.launch()
        broker.wait_ready()
        node.wait_ready()
        broker.create_topic(
            TOPIC, segment_bytes=args.segment_mb * MiB, segment_ms=2000, local_retention_ms=1000
        )
        produced = ProducedDigests()
        raw = produce(broker.http, args, produced)
        u0 = proxy.usage()
        worker = TieringWorker(engine, config, "cost-tiering")
        try:
            end = tier_all(broker.http, worker, args.timeout_s)
        finally:
            worker.close()
        u1 = proxy.usage()
        compactor = CompactionWorker(engine, config, "cost-compaction")
        try:
            compactor.run_once()
        finally:
            compactor.close()
        u2 = proxy.usage()
        stored = table_bytes(store, config)
        u3 = proxy.usage()
        replayed = replay(node, end, produced)
        u4 = proxy.usage()
    finally:
        node.stop()
        broker.stop()
        engine.dispose()
        store.close()
        proxy.stop()
        s3.stop()
        pg.stop()
    if replayed != raw:
        raise SystemExit(f"replayed {replayed:,} bytes of keys and values, produced {raw:,}")
    m = Measured(
        raw, stored, Requests.between(u0, u1), Requests.between(u1, u2), Requests.between(u3, u4)
    )
    for name, req in (("tiering", m.tiering), ("replay", m.replay)):
        if req.put + req.get == 0:
            raise SystemExit(f"the proxy metered no S3 request for {name}: not measured")
    return m


def report(args: argparse.Namespace, m: Measured, prices: Prices) -> None:
    print(
        f"tierlog cost benchmark: 1 broker, 1 fetch node, 1 partition, {m.raw_bytes / 1e6:,.1f} "
        f"MB of keys and values (~{args.value_bytes} B JSON events), {args.segment_mb} MiB "
        "segments, tiering and compaction workers with their defaults"
    )
    for line in prices.lines():
        print(f"  {line}")
    print("\nS3 requests metered at the endpoint, per phase:")
    print(f"  1. ingest (tiering)   {m.tiering}")
    print(f"  2. compaction pass    {m.compaction}")
    print(f"  3. replay from 0      {m.replay}")
    print(
        f"  table in S3 after compaction: {m.table_bytes / 1e6:,.2f} MB "
        f"({m.table_bytes / m.raw_bytes:.2f} of the raw bytes)"
    )
    ours, base = tierlog_row(m, prices), broker_disk_row(prices)
    print(f"\n{'$ per':<26} {'tierlog (S3 history)':>21} {'3 broker disks':>15} {'ratio':>7}")
    names = ("GB ingested", "GB-month of history", "GB replayed")
    for name, a, b in zip(names, ours, base, strict=True):
        ratio = f"{a / b:.2f}" if b else "-"
        print(f"{name:<26} {a:>21.6f} {b:>15.6f} {ratio:>7}")
    year = 12 * ours[1] + ours[0], 12 * base[1] + base[0]
    label = "GB kept a year (in+store)"
    print(f"{label:<26} {year[0]:>21.6f} {year[1]:>15.6f} {year[0] / year[1]:>7.2f}")
    print(
        "\nreplay checked: every offset from 0 once, values' checksum equal to the produced; "
        "ingest per GB includes the hot tier's replication between zones, on both sides"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=256, help="MB of keys and values to ingest")
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--segment-mb", type=int, default=8)
    parser.add_argument("--timeout-s", type=float, default=600, help="longest wait for tiering")
    defaults = Prices()
    for field in ("s3_gb_month", "s3_put_per_1k", "s3_get_per_1k", "disk_gb_month", "inter_az_gb"):
        parser.add_argument(
            f"--{field.replace('_', '-')}", type=float, default=getattr(defaults, field)
        )
    parser.add_argument("--smoke", action="store_true", help="4 MB, 1 MiB segments")
    args = parser.parse_args()
    if args.smoke:
        args.mb, args.segment_mb, args.timeout_s = 4, 1, 120
    prices = Prices(
        args.s3_gb_month,
        args.s3_put_per_1k,
        args.s3_get_per_1k,
        args.disk_gb_month,
        args.inter_az_gb,
    )
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        os.chmod(tmp, 0o755)  # as root, Postgres runs as the postgres user
        measured = run(args, Path(tmp))
    report(args, measured, prices)


if __name__ == "__main__":
    main()
