"""The `tierlog` PySpark data source (Python Data Source API, Spark 4): batch and streaming.

    spark.read.format("tierlog").load("orders")
    spark.readStream.format("tierlog").option("brokerUrl", url).load("orders")

Spark runs these methods in Python worker processes: schema(), reader(), pushFilters() and
partitions() on the driver's side, read() in the tasks. The reader is pickled to the tasks
after pushFilters() and before partitions(), so everything read() needs travels in the
input partitions themselves (planner.ColdSlice / HotRange).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from spark_tables import report
from spark_tables.bounds import Bounds, bounds_from_filters
from spark_tables.columns import (
    OutputConverter,
    ddl_schema,
    infer_value_type,
    spark_schema,
    with_typed,
)
from spark_tables.execute import read_piece, sample_values
from spark_tables.options import SourceOptions, parse_options
from spark_tables.scan import batch_plan
from spark_tables.stream import TierlogStreamReader
from spark_tables.typed import table_typed_fields


class TierlogDataSource(DataSource):
    """Registered as "tierlog" (see spark_tables.register)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        # Spark instantiates this class: it is the data source's composition root, the one
        # place that hands the environment on. Bad options fail at load(), not later.
        self.source_options = parse_options(options, os.environ)

    @classmethod
    def name(cls) -> str:
        return "tierlog"

    def schema(self) -> StructType | str:
        opts = self.source_options
        typed = table_typed_fields(opts)  # a typed table's value columns (docs/lake-tables.md)
        if opts.value_format != "json":
            return with_typed(spark_schema(opts), typed)
        if opts.columns is not None and "value" not in opts.columns:
            return with_typed(spark_schema(opts.with_(value_format="binary")), typed)
        if opts.value_schema:
            return ddl_schema(opts, typed)
        value_type = infer_value_type(sample_values(opts, opts.json_sample_size))
        return with_typed(spark_schema(opts, value_type), typed)

    def reader(self, schema: StructType) -> DataSourceReader:
        return TierlogBatchReader(self.source_options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TierlogStreamReader(self.source_options, schema)


class TierlogBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.bounds = Bounds()

    def pushFilters(self, filters: list[Filter]) -> Sequence[Filter]:
        # Used to prune files and row groups; all are handed back, so Spark still evaluates
        # each one on the rows (pruning only has to be safe, never exact).
        self.bounds = bounds_from_filters(filters, self.opts.topic)
        return filters

    def partitions(self) -> list[InputPartition]:
        plan = batch_plan(self.opts, self.bounds)
        tasks = plan.tasks(self.opts.min_partitions, self.opts.max_partition_bytes)
        entry = {**plan.report(), "input_partitions": len(tasks), "topic": self.opts.topic}
        report.write(self.opts.report_dir, entry)
        return list(tasks)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_piece(self.opts, partition, OutputConverter(self.schema, self.opts.topic))
