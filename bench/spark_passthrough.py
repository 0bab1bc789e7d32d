"""A pass-through Python data source for bench/spark_scan.py: the ceiling of any Python source.

`capture()` runs the tierlog source's own planning and read() in this process, once, before
anything is timed, and writes each input partition's output batches to a local Arrow IPC
file. The `tierlog_passthrough` source then has one input partition per file, and its read()
memory-maps the file and yields those very batches: the same rows, schema, batch sizes and
partitioning as the tierlog source, with no S3, no Parquet decoding and no conversion. What
it costs is what Spark's Python data source API costs (a Python worker per task, Arrow IPC
over a socket to the JVM, the JVM turning Arrow columns into rows); a tierlog query slower
than it spends the difference in our code.

Registered only in the benchmark's session (`register`); not a user-facing format.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from spark_tables.columns import OutputConverter
from spark_tables.source import TierlogDataSource

NAME = "tierlog_passthrough"


def capture(options: Mapping[str, str], dest: Path) -> StructType:
    """The tierlog source's output for `options` (no filters), one IPC file per input
    partition in `dest`, in the plan's order; returns the source's Spark schema."""
    source = TierlogDataSource(dict(options))
    schema = source.schema()
    if not isinstance(schema, StructType):  # a DDL string: only with valueSchema
        raise ValueError(f"capture() needs a source whose schema is a StructType: {schema!r}")
    reader = source.reader(schema)
    target = OutputConverter(schema, source.source_options.topic).target
    dest.mkdir(parents=True, exist_ok=True)
    for i, piece in enumerate(reader.partitions()):
        path = dest / f"{i:05d}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, target) as out:
            for batch in reader.read(piece):
                out.write_batch(batch)
    (dest / "schema.json").write_text(schema.json())
    return schema


@dataclass
class ArrowFile(InputPartition):
    path: str


class PassthroughDataSource(DataSource):
    """format("tierlog_passthrough").load(dir): the batches `capture()` wrote to `dir`."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        text = (Path(self.options["path"]) / "schema.json").read_text()
        return StructType.fromJson(json.loads(text))

    def reader(self, schema: StructType) -> DataSourceReader:
        return PassthroughReader(Path(self.options["path"]))


class PassthroughReader(DataSourceReader):
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def partitions(self) -> list[InputPartition]:
        return [ArrowFile(str(p)) for p in sorted(self.directory.glob("*.arrow"))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ArrowFile)
        # Memory-mapped: the batches are views of the page cache, not copies.
        reader = pa.ipc.open_file(pa.memory_map(partition.path))
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


def register(spark: SparkSession) -> None:
    spark.dataSource.register(PassthroughDataSource)
