"""Typed lake tables (docs/lake-tables.md): what the typed columns cost tiering and the table,
and what they save a query.

    .venv/bin/python -m bench.typed_lake [--records 200000] [--rounds 3]
    .venv/bin/python -m bench.typed_lake --smoke     # tiny sizes (the test suite)

One segment of `--records` Avro orders in Confluent's wire format (an id, then ~100 B of
Avro: id, customer, amount, a nested ship {city, zip}, tags), zstd frames as a broker writes
them, is turned into one Parquet data file by tiering's own writer
(coldstore.parquet_writer.write_parquet), once bytes-only (lake.mode=key_value) and once
with tiering's typed columns (tiering/typed_columns.py), the two alternating `--rounds`
times. The schema is parsed once, as the worker's registry look-up does once per id (the
look-up is not what is measured). Then local Spark (local[1]) sums `amount` per ship city
from each file: over `value_typed.ship.city` / `value_typed.amount`, and over the bytes
column decoded in Spark by mapInArrow (fastavro), the way a query must without typed
columns. Checks: both files hold every record, every typed value equals the one encoded, and
both queries give the same sums.

Goals (issue 29): typed tiering >= 70% of key_value's records/s; table bytes <= 1.6x; the
typed aggregate >= 3x faster, reading <= 30% of the bytes (Parquet column chunks read).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from coldstore.parquet_writer import write_parquet
from logformat.frame import encode_frame
from logformat.records import build_batch
from schemaformat.base import ParsedSchema
from schemaformat.kinds import kinds
from schemaformat.typed_decode import ID_PREFIX, TypedDecoder
from schemaformat.wire import frame
from spark_tables.session import tierlog_session
from tiering.typed_columns import BatchTypes, typed_parquet

SCHEMA_ID = 1
PRUNED = "struct<value_typed:struct<amount:double,ship:struct<city:string>>>"
FRAME_RECORDS = 1000
CITIES = ["Oslo", "Lima", "Pune", "Kyiv", "Accra", "Hanoi", "Quito", "Riga"]
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {
            "name": "ship",
            "type": {
                "type": "record",
                "name": "Ship",
                "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "int"}],
            },
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}


class _Parsed:
    """The schema, parsed once (the worker reads each id from the registry once)."""

    def __init__(self) -> None:
        self.parsed = kinds()["AVRO"].parse(json.dumps(ORDER), {})

    def schema(self, schema_id: int) -> ParsedSchema:
        return self.parsed

    def latest_id(self) -> int | None:
        return SCHEMA_ID


def _order(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "customer": f"customer-{i % 5000:05d}",
        "amount": (i % 1000) / 4,
        "ship": {"city": CITIES[i % len(CITIES)], "zip": 10000 + i % 90000},
        "tags": ["gift"] if i % 3 == 0 else ["standard", "eu"],
    }


def _segment(records: int) -> tuple[bytes, list[dict[str, Any]]]:
    parsed = fastavro.parse_schema(ORDER)
    orders = [_order(i) for i in range(records)]
    frames = []
    for base in range(0, records, FRAME_RECORDS):
        chunk = orders[base : base + FRAME_RECORDS]
        values: list[bytes | None] = []
        for order in chunk:
            out = io.BytesIO()
            fastavro.schemaless_writer(out, parsed, order)
            values.append(frame(SCHEMA_ID, out.getvalue()))
        keys: list[bytes | None] = [b"k%d" % o["id"] for o in chunk]
        batch = build_batch(
            keys, values, [None] * len(chunk), [None] * len(chunk), 1_700_000_000_000
        )
        frames.append(bytes(encode_frame(batch, base_offset=base, compression="zstd")))
    return b"".join(frames), orders


def _tier(segment: bytes, out: Path, typed: bool) -> tuple[float, float]:
    """(seconds, CPU seconds of this process): on a loaded machine the CPU time is the
    steadier figure."""
    t0, c0 = time.perf_counter(), time.process_time()
    if typed:
        decoder = TypedDecoder(ID_PREFIX, _Parsed())
        typed_parquet(lambda c: write_parquet(segment, out, extra=c), decoder, BatchTypes(None))
    else:
        write_parquet(segment, out)
    return time.perf_counter() - t0, time.process_time() - c0


def _chunk_bytes(path: Path, prefixes: tuple[str, ...]) -> int:
    """Compressed bytes of the column chunks whose path starts with one of `prefixes`."""
    meta = pq.ParquetFile(path).metadata
    total = 0
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            if col.path_in_schema.startswith(prefixes):
                total += col.total_compressed_size
    return total


def _decode_batches(batches: Any) -> Any:
    """mapInArrow over the bytes column: Confluent's prefix off, each value Avro-decoded (a
    query's only way to the fields without typed columns)."""
    parsed = fastavro.parse_schema(ORDER)
    for batch in batches:
        cities, amounts = [], []
        for value in batch.column("value").to_pylist():
            order = fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed, None)
            cities.append(order["ship"]["city"])
            amounts.append(order["amount"])
        yield pa.RecordBatch.from_pydict({"city": cities, "amount": amounts})


def _spark_queries(
    typed_file: Path, plain_file: Path, rounds: int, warm: bool
) -> tuple[float, float, bool]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "1",
    }
    spark = tierlog_session("typed-lake-bench", "local[1]", conf)  # workers run this Python
    spark.sparkContext.setLogLevel("ERROR")
    decoded = StructType([StructField("city", StringType()), StructField("amount", DoubleType())])

    def typed_df() -> Any:
        df = spark.read.parquet(str(typed_file))
        cols = df.select(F.col("value_typed.ship.city").alias("city"), "value_typed.amount")
        return cols.groupBy("city").agg(F.sum("amount"))

    def typed_query() -> list[Any]:
        return sorted(typed_df().collect())

    def bytes_query() -> list[Any]:
        df = spark.read.parquet(str(plain_file)).select("value")
        cols = df.mapInArrow(_decode_batches, decoded)
        return sorted(cols.groupBy("city").agg(F.sum("amount")).collect())

    try:
        # Projection pushdown: the scan must read the two leaves only (Spark's nested schema
        # pruning), not the whole struct nor the record columns.
        plan = typed_df()._jdf.queryExecution().executedPlan().toString()
        read = re.search(r"ReadSchema: (\S+)", plan)
        print(f"typed query's Parquet ReadSchema: {read.group(1) if read else '?'}")
        if read is None or read.group(1) != PRUNED:
            raise SystemExit(f"the typed query does not prune its columns: {plan}")
        if warm:  # the JVM, the Python workers (a smoke run times nothing anyone reads)
            typed_query(), bytes_query()
        t_typed = t_bytes = float("inf")
        for _ in range(rounds):
            t0 = time.perf_counter()
            a = typed_query()
            t_typed = min(t_typed, time.perf_counter() - t0)
            t0 = time.perf_counter()
            b = bytes_query()
            t_bytes = min(t_bytes, time.perf_counter() - t0)
        same = [tuple(r) for r in a] == [tuple(r) for r in b]
    finally:
        spark.stop()
    return t_typed, t_bytes, same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    args = parser.parse_args()
    if args.smoke:
        args.records, args.rounds = 5_000, 1
    segment, orders = _segment(args.records)
    load = os.getloadavg()[0]
    print(
        f"tierlog typed lake benchmark: {args.records:,} Avro records (~100 B values), "
        f"{len(segment) / 1e6:.1f} MB segment, {args.rounds} rounds, load average {load:.2f}"
    )
    with tempfile.TemporaryDirectory(prefix="typed-lake-") as tmp:
        plain, typed = Path(tmp) / "plain.parquet", Path(tmp) / "typed.parquet"
        best = {"key_value": float("inf"), "typed": float("inf")}
        cpu = dict(best)
        for _ in range(args.rounds):  # alternate, so drift hits both
            for case, path in (("key_value", plain), ("typed", typed)):
                wall, used = _tier(segment, path, case == "typed")
                best[case], cpu[case] = min(best[case], wall), min(cpu[case], used)
        _check(typed, plain, orders)
        print()
        print("case                       records/s   seconds     file MB  vs key_value  CPU s")
        size = {"key_value": plain.stat().st_size, "typed": typed.stat().st_size}
        for case in ("key_value", "typed"):
            ratio = best["key_value"] / best[case]
            print(
                f"tiering, lake.mode={case:<9} {args.records / best[case]:>9,.0f} "
                f"{best[case]:>9.3f} {size[case] / 1e6:>11.2f}  {ratio:>6.0%} speed "
                f"{cpu[case]:>7.3f}"
            )
        print(f"typed / key_value by CPU time: {cpu['key_value'] / cpu['typed']:.0%} speed")
        print(f"table bytes typed / bytes-only: {size['typed'] / size['key_value']:.2f}x")
        t_typed, t_bytes, same = _spark_queries(typed, plain, args.rounds, not args.smoke)
        read_typed = _chunk_bytes(typed, ("value_typed.amount", "value_typed.ship.city"))
        read_bytes = _chunk_bytes(plain, ("value",))
        print()
        warmed = "no warm-up, a smoke run" if args.smoke else "after a warm-up"
        print(f"Spark (local[1], {warmed}) sum(amount) per ship city  seconds  Parquet bytes read")
        print(f"over value_typed.ship.city, value_typed.amount {t_typed:>10.3f} {read_typed:>12,}")
        print(f"over value, decoded (mapInArrow, fastavro) {t_bytes:>10.3f} {read_bytes:>12,}")
        print(
            f"typed: {t_bytes / t_typed:.1f}x faster, reads {read_typed / read_bytes:.0%} "
            "of the bytes"
        )
        if not same:
            raise SystemExit("the two queries disagree")
        print("both files hold every record; typed values equal the encoded; sums agree")


def _check(typed: Path, plain: Path, orders: list[dict[str, Any]]) -> None:
    t = pq.read_table(typed)
    p = pq.read_table(plain)
    if t.num_rows != len(orders) or p.num_rows != len(orders):
        raise SystemExit(f"rows: typed {t.num_rows}, plain {p.num_rows}, sent {len(orders)}")
    if t.column("value") != p.column("value"):
        raise SystemExit("the typed file's value bytes differ from the plain file's")
    got = t.column("value_typed").to_pylist()
    if got != orders:
        bad = next(i for i, (a, b) in enumerate(zip(got, orders, strict=True)) if a != b)
        raise SystemExit(f"record {bad}: typed {got[bad]} != sent {orders[bad]}")


if __name__ == "__main__":
    pa.set_cpu_count(max(1, pa.cpu_count()))
    main()
