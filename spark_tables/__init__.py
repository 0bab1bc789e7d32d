"""Spark over tierlog topics (docs/design.md §6): the `tierlog` Python data source (batch and
streaming, no extra JVM jars), and a delta-spark session helper for the JVM Delta reader."""

from spark_tables.options import store_options
from spark_tables.session import FILTER_PUSHDOWN_CONF, register, tierlog_session

__all__ = ["FILTER_PUSHDOWN_CONF", "register", "store_options", "tierlog_session"]
