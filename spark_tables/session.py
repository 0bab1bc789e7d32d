"""Registering the source with a SparkSession, and a ready-made local session.

from spark_tables import tierlog_session
spark = tierlog_session()                      # local[*], source registered
spark.read.format("tierlog").load("orders").createOrReplaceTempView("orders")
spark.sql("SELECT partition, count(*) FROM orders GROUP BY partition").show()
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The reader prunes files with pushed filters; Spark refuses a reader that implements
# pushFilters unless this is on (off by default in Spark 4.2).
FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: SparkSession) -> None:
    """Make format("tierlog") available in `spark` (batch and streaming)."""
    from spark_tables.source import TierlogDataSource

    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    spark.dataSource.register(TierlogDataSource)


def tierlog_session(
    app_name: str = "tierlog",
    master: str = "local[*]",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession with the tierlog source registered (getOrCreate: an existing session
    is reused and registered too)."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.sql.session.timeZone", "UTC")
        .config(FILTER_PUSHDOWN_CONF, "true")
    )
    # Python workers run this interpreter (and its packages), not whatever `python3` is first
    # on PATH: SparkContext reads PYSPARK_PYTHON when it starts.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    register(spark)
    return spark
