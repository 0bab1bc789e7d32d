"""The `tierlog` source's options, parsed once where Spark plans the read (docs/design.md §6).

    spark.read.format("tierlog").option("topic", "orders")      # or .load("orders")

- topic (or the load path): the topic to read.
- endpoint, bucket, prefix, region, accessKeyId, secretAccessKey, sessionToken: the S3
  holding the topic's Delta table (default: TIERLOG_S3_* / AWS_*).
- databaseUrl (TIERLOG_DATABASE_URL): Postgres, for the cold manifest.
- planFrom = auto | delta | manifest: where the cold file list comes from, the table's Delta
  log or the Postgres manifest; auto: the manifest when a database URL is known.
- brokerUrl (TIERLOG_BROKER_URL): any broker, for includeHot and streaming's live records.
- apiKey (TIERLOG_API_KEY): the API key sent to brokerUrl (needs read on the topic).
- includeHot = false: also read the records not tiered yet, from the brokers, up to the
  high watermark at planning time.
- partitions: e.g. "0,2" (default: all).
- startingOffsets / endingOffsets = earliest / latest, or per partition JSON as Kafka's
  Spark source takes it ({"0": 10, "1": -2}, or {"topic": {...}}; -2 earliest, -1 latest);
  the end is exclusive.
- startingTimestamp / endingTimestamp: ms since the epoch; only records with
  start <= timestamp < end.
- keyFormat / valueFormat = binary | string, or json (value only).
- valueSchema: DDL of the JSON values' fields ("user STRING, amount DOUBLE"); without it the
  schema is inferred from jsonSampleSize (1000) values.
- columns: e.g. "key,timestamp": the DataFrame has only these columns (of topic, partition,
  offset, timestamp, key, value, headers, and a typed table's value_typed, value_error
  (docs/lake-tables.md); in this order), and only their Parquet columns are
  fetched and decoded. Spark 4.2 prunes no columns of a Python data source itself (its
  DataSourceReader has pushFilters but no column pruning), so a query that needs few columns
  says so here; the default, every column, is what a plain .load() gives.
- maxPartitionBytes = 128 MiB: larger files are split into several Spark partitions, each a
  run of whole row groups (sized from the footer's row-group statistics).
- minPartitions (default: the planning machine's CPU count): a batch scan's cold files are
  packed several to a Spark task, in order, up to about 1/minPartitions of the scan's bytes
  each (and maxPartitionBytes), as Spark's file sources pack small files: each task of a
  Python data source has a fixed cost. Set it to the cluster's cores for a scan of many
  small files there.
- maxRecordsPerTrigger: streaming, a cap on the records of one micro-batch.
- reportDir: diagnostics; the reader appends its plan and each task's reads there.

Environment defaults are read in the process that plans (the driver side); executors get the
resolved values inside the plan, so they need no configuration of their own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from coldstore.object_store import ObjectStoreConfig

EARLIEST, LATEST = -2, -1  # Kafka's sentinels in per-partition offset JSON
MiB = 1 << 20
Format = Literal["binary", "string", "json"]
PlanFrom = Literal["delta", "manifest"]
OffsetSpec = Literal["earliest", "latest"] | dict[int, int]


class OptionError(ValueError):
    """A bad option value; the message names the option."""


@dataclass(frozen=True)
class SourceOptions:
    """Everything the planner and the executors need, picklable."""

    topic: str
    store: ObjectStoreConfig
    database_url: str | None = None
    plan_from: PlanFrom = "delta"
    broker_url: str | None = None
    include_hot: bool = False
    partitions: frozenset[int] | None = None
    starting_offsets: OffsetSpec = "earliest"
    ending_offsets: OffsetSpec = "latest"
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    key_format: Format = "binary"
    value_format: Format = "binary"
    value_schema: str | None = None
    json_sample_size: int = 1000
    max_partition_bytes: int = 128 * MiB
    min_partitions: int = 1
    max_records_per_trigger: int | None = None
    report_dir: str | None = None
    columns: tuple[str, ...] | None = None  # None: every column of COLUMNS
    hot_chunk_records: int = 500_000
    api_key: str | None = field(default=None, repr=False)  # a secret: never in logs

    def with_(self, **changes: object) -> SourceOptions:
        return replace(self, **changes)  # type: ignore[arg-type]


def parse_options(options: Mapping[str, str], env: Mapping[str, str]) -> SourceOptions:
    """Spark's (case-insensitive) option map → SourceOptions, over the S3 variables of `env`
    (spark_tables/source.py, the entry point Spark calls, hands over the environment);
    raises OptionError."""
    opts = {k.lower(): v for k, v in options.items() if v is not None}
    topic = opts.get("topic") or opts.get("path")
    if not topic:
        raise OptionError('name the topic: .option("topic", "t") or .load("t")')
    if "/" in topic:
        raise OptionError(f"topic {topic!r}: a topic name, not a path")
    store = _store(opts, env)
    database_url = opts.get("databaseurl") or env.get("TIERLOG_DATABASE_URL") or None
    plan_from = opts.get("planfrom", "auto").lower()
    if plan_from == "auto":
        plan_from = "manifest" if database_url else "delta"
    if plan_from not in ("delta", "manifest"):
        raise OptionError(f"planFrom must be auto, delta or manifest; got {plan_from!r}")
    if plan_from == "manifest" and not database_url:
        raise OptionError("planFrom=manifest needs databaseUrl (or TIERLOG_DATABASE_URL)")
    broker_url = (opts.get("brokerurl") or env.get("TIERLOG_BROKER_URL") or "").rstrip("/")
    include_hot = _bool(opts, "includeHot", False)
    if include_hot and not broker_url:
        raise OptionError("includeHot=true needs brokerUrl (or TIERLOG_BROKER_URL)")
    value_format = _format(opts, "valueFormat", ("binary", "string", "json"))
    key_format = _format(opts, "keyFormat", ("binary", "string"))
    value_schema = opts.get("valueschema") or None
    if value_schema and value_format != "json":
        raise OptionError("valueSchema applies to valueFormat=json only")
    return SourceOptions(
        topic=topic,
        store=store,
        database_url=database_url,
        plan_from=plan_from,  # type: ignore[arg-type]
        broker_url=broker_url or None,
        api_key=opts.get("apikey") or env.get("TIERLOG_API_KEY") or None,
        include_hot=include_hot,
        partitions=_partitions(opts.get("partitions")),
        starting_offsets=_offsets(opts, "startingOffsets", "earliest"),
        ending_offsets=_offsets(opts, "endingOffsets", "latest"),
        starting_timestamp=_int(opts, "startingTimestamp", None, lo=0),
        ending_timestamp=_int(opts, "endingTimestamp", None, lo=0),
        key_format=key_format,
        value_format=value_format,
        value_schema=value_schema,
        json_sample_size=_int(opts, "jsonSampleSize", 1000, lo=1) or 1000,
        max_partition_bytes=_int(opts, "maxPartitionBytes", 128 * MiB, lo=1) or 128 * MiB,
        min_partitions=_int(opts, "minPartitions", None, lo=1) or os.cpu_count() or 1,
        max_records_per_trigger=_int(opts, "maxRecordsPerTrigger", None, lo=1),
        report_dir=opts.get("reportdir") or None,
        columns=_columns(opts.get("columns")),
    )


COLUMNS = (
    "topic",
    "partition",
    "offset",
    "timestamp",
    "key",
    "value",
    "headers",
    "value_typed",
    "value_error",
)


def _columns(raw: str | None) -> tuple[str, ...] | None:
    """The columns option: names of COLUMNS, returned in COLUMNS' order."""
    if raw is None or not raw.strip():
        return None
    names = [n.strip().lower() for n in raw.split(",")]
    unknown = [n for n in names if n not in COLUMNS]
    if unknown or len(set(names)) != len(names):
        raise OptionError(
            f"columns must name distinct columns of {', '.join(COLUMNS)}; got {raw!r}"
        )
    return tuple(c for c in COLUMNS if c in names)


def _store(opts: Mapping[str, str], env: Mapping[str, str]) -> ObjectStoreConfig:
    base = ObjectStoreConfig.from_env(env)
    return base._replace(
        bucket=opts.get("bucket") or base.bucket,
        prefix=(opts["prefix"].strip("/") if "prefix" in opts else base.prefix),
        endpoint_url=opts.get("endpoint") or base.endpoint_url,
        region=opts.get("region") or base.region,
        access_key_id=opts.get("accesskeyid") or base.access_key_id,
        secret_access_key=opts.get("secretaccesskey") or base.secret_access_key,
        session_token=opts.get("sessiontoken") or base.session_token,
    )


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "1", "yes"):
        return True
    if raw.strip().lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"{name} must be true or false; got {raw!r}")


def _int(opts: Mapping[str, str], name: str, default: int | None, *, lo: int) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"{name} must be an integer; got {raw!r}") from None
    if value < lo:
        raise OptionError(f"{name} must be >= {lo}; got {value}")
    return value


def _format(opts: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> Format:
    value = opts.get(name.lower(), "binary").lower()
    if value not in allowed:
        raise OptionError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return value  # type: ignore[return-value]


def _partitions(raw: str | None) -> frozenset[int] | None:
    if raw is None or not raw.strip():
        return None
    try:
        parts = frozenset(int(p) for p in raw.replace(" ", "").split(",") if p)
    except ValueError:
        raise OptionError(f'partitions must be a list like "0,2"; got {raw!r}') from None
    if any(p < 0 for p in parts):
        raise OptionError(f"partitions must be >= 0; got {raw!r}")
    return parts


def _offsets(
    opts: Mapping[str, str], name: str, default: Literal["earliest", "latest"]
) -> OffsetSpec:
    """earliest | latest | {"p": offset} | Kafka's {"topic": {"p": offset}}."""
    raw = opts.get(name.lower())
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()  # type: ignore[return-value]
    try:
        doc = json.loads(text)
    except ValueError:
        raise OptionError(f"{name} must be earliest, latest or JSON; got {raw!r}") from None
    if isinstance(doc, dict) and len(doc) == 1 and isinstance(next(iter(doc.values())), dict):
        doc = next(iter(doc.values()))  # Kafka's form, keyed by the (one) topic
    if not isinstance(doc, dict):
        raise OptionError(f'{name}: expected {{"0": 10, "1": -2}}; got {raw!r}')
    out: dict[int, int] = {}
    for p, o in doc.items():
        try:
            part, off = int(p), int(o)
        except (TypeError, ValueError):
            raise OptionError(f"{name}: bad entry {p!r}: {o!r}") from None
        if part < 0 or off < EARLIEST:
            raise OptionError(f"{name}: bad entry {p!r}: {o!r}")
        out[part] = off
    return out


def store_options(store: ObjectStoreConfig) -> dict[str, str]:
    """The S3 options naming `store`, for .options(**store_options(config))."""
    out = {"bucket": store.bucket, "prefix": store.prefix, "region": store.region}
    for name, value in (
        ("endpoint", store.endpoint_url),
        ("accessKeyId", store.access_key_id),
        ("secretAccessKey", store.secret_access_key),
        ("sessionToken", store.session_token),
    ):
        if value:
            out[name] = value
    return out
