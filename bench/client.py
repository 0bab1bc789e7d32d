"""The Python client at broker speed (issue 15): Producer and Consumer against raw HTTP.

    .venv/bin/python -m bench.client [--records 200000] [--bulk-records 1000000]
    .venv/bin/python -m bench.client --smoke      # tiny sizes (the test suite runs this)

Starts its own Postgres, then one broker, then a 3-broker cluster (RF=3,
min.insync.replicas=2). On each: the baseline, raw Arrow HTTP produce to the partitions'
leaders, then `send()` in a loop (defaults, and tuned), `send_batch` and `send_table`
(bench/client_produce.py), then the consumer cases over the topic send_table wrote
(bench/client_consume.py: the raw Arrow fetch as their baseline, poll(), poll_arrow()).
Last, the consumer cases over cold data (bench/client_cold.py): a topic tiered to S3 and
deleted from the hot tier as bench/replay.py sets it up, read through the broker's cold path.
Prints records/s, p50/p99 latency, the ratio to the baseline of the same setup and kind, and
the settings each case used; every case checks that what it sent arrived, or read it once.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.client_cold import cold_cases
from bench.client_consume import consume_cases
from bench.client_produce import PARTITIONS, Row, produce_cases
from bench.databases import new_database
from bench.servers import bench_postgres
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster


def run_setup(
    setup: str,
    url: str,
    create: Callable[[str], object],
    args: argparse.Namespace,
) -> list[tuple[str, Row]]:
    rows, table_topic = produce_cases(url, "bench", create, args.records, args.bulk_records)
    rows += consume_cases(url, table_topic, args.bulk_records + 1, args.smoke, tiers=("hot",))
    return [(setup, row) for row in rows]


def _baseline_of(case: str) -> str:
    """The case a row is compared with: producers with raw Arrow produce, consumer cases with
    the raw Arrow fetch of the same tier."""
    if case.startswith("consume "):  # a tier with no data: nothing to compare
        return ""
    if case.startswith("Consumer."):
        return "baseline: raw Arrow fetch " + case[case.rindex("(") :]
    return "raw Arrow"


def print_table(rows: list[tuple[str, Row]]) -> None:
    baselines = {(s, str(r["case"])): r for s, r in rows}
    baselines.update(
        {(s, "raw Arrow"): r for s, r in rows if str(r["case"]).startswith("raw Arrow")}
    )
    print(
        f"\n{'setup':<16} {'case':<28} {'records/s':>11} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'vs raw':>7}  settings"
    )
    for setup, row in rows:
        case = str(row["case"])
        base = None if "baseline" in case else baselines.get((setup, _baseline_of(case)))
        rate = float(str(row["records_per_s"]))
        ratio = (
            f"{rate / float(str(base['records_per_s'])):>7.0%}"
            if base is not None and row is not base and float(str(base["records_per_s"]))
            else f"{'-':>7}"
        )
        print(
            f"{setup:<16} {row['case']!s:<28} {rate:>11,.0f} {float(str(row['p50_ms'])):>8.1f} "
            f"{float(str(row['p99_ms'])):>8.1f} {ratio}  {row['settings']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000, help="per send() case")
    parser.add_argument("--bulk-records", type=int, default=1_000_000, help="per bulk case")
    parser.add_argument("--smoke", action="store_true", help="2,000 / 20,000 records")
    parser.add_argument("--cold-records", type=int, default=500_000, help="tiered to S3")
    parser.add_argument("--no-cluster", action="store_true", help="one broker only")
    parser.add_argument("--no-cold", action="store_true", help="no cold-data cases")
    args = parser.parse_args()
    if args.smoke:
        args.records, args.bulk_records, args.cold_records = 2_000, 20_000, 20_000
    rows: list[tuple[str, Row]] = []
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        os.chmod(tmp, 0o755)
        pg = bench_postgres(Path(tmp) / "pg", fast=args.smoke)  # --no-sync: only the smoke
        db = pg.start()
        try:
            broker = BrokerProcess(db, Path(tmp) / "single", 99).start()
            try:
                create = lambda t: broker.create_topic(t, partitions=PARTITIONS)  # noqa: E731
                rows += run_setup("1 broker", broker.url, create, args)
            finally:
                broker.stop()
            if not args.no_cluster:
                (Path(tmp) / "cluster").mkdir()
                c = Cluster(new_database(db, "cluster"), Path(tmp) / "cluster", 3).start()
                try:
                    create = lambda t: c.create_topic(  # noqa: E731
                        t, partitions=PARTITIONS, min_insync_replicas=2
                    )
                    rows += run_setup("3 brokers RF=3", c.any().url, create, args)
                finally:
                    c.stop()
        finally:
            pg.stop()
    if not args.no_cold:
        rows += [("1 broker, cold", row) for row in cold_cases(args.cold_records, args.smoke)]
    print(
        f"tierlog client benchmark: {PARTITIONS}-partition topics, ~100 B JSON values with "
        f"keys, acks=all, idempotence on; {args.records:,} records per send() case, "
        f"{args.bulk_records:,} per bulk case; cold: {args.cold_records:,} records of 100 B "
        f"random values tiered to S3; {os.cpu_count()} cores shared by brokers and client; "
        "every case checked that all its records arrived, or were read once"
    )
    print_table(rows)


if __name__ == "__main__":
    main()
