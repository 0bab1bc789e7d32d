"""Topic configs under Kafka's names: types, defaults, validation, and a typed view.

Overrides are stored as canonical strings (Kafka style: "604800000", "true", "compact,delete"),
so what a user set reads back the same whatever JSON type it arrived as.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from logformat.errors import ErrorCode, TierlogError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
MAX_TOPIC_NAME = 249
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_INTEGER = re.compile(r"[+-]?\d+")


def _bad(name: str, why: str) -> TierlogError:
    return TierlogError(ErrorCode.INVALID_CONFIG, f"invalid value for {name}: {why}")


class _Spec(NamedTuple):
    default: str
    parse: Callable[[str, object], str]  # (name, raw) -> canonical string, or raises
    doc: str


def _integer(lo: int, hi: int) -> Callable[[str, object], str]:
    def parse(name: str, raw: object) -> str:
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise _bad(name, f"expected an integer in [{lo}, {hi}], got {raw!r}")
        if isinstance(raw, str) and not _INTEGER.fullmatch(raw.strip()):
            raise _bad(name, f"expected an integer in [{lo}, {hi}], got {raw!r}")
        value = int(raw.strip()) if isinstance(raw, str) else raw
        if not lo <= value <= hi:
            raise _bad(name, f"{value} is out of range [{lo}, {hi}]")
        return str(value)

    return parse


def _ratio(name: str, raw: object) -> str:
    try:
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise ValueError
        value = float(raw)
    except ValueError:
        raise _bad(name, f"expected a number in [0, 1], got {raw!r}") from None
    if not 0.0 <= value <= 1.0:
        raise _bad(name, f"{value} is out of range [0, 1]")
    return repr(value)


def _boolean(name: str, raw: object) -> str:
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower()
    raise _bad(name, f"expected true or false, got {raw!r}")


def _choice(
    *allowed: str, rejected: Mapping[str, str] | None = None
) -> Callable[[str, object], str]:
    def parse(name: str, raw: object) -> str:
        if isinstance(raw, str):
            for a in allowed:  # Kafka matches enum-like values case-insensitively
                if raw.strip().lower() == a.lower():
                    return a
            if rejected and raw.strip().lower() in rejected:
                raise _bad(
                    name, f"{raw!r} {rejected[raw.strip().lower()]}; allowed: {', '.join(allowed)}"
                )
        raise _bad(name, f"expected one of {', '.join(allowed)}, got {raw!r}")

    return parse


def _cleanup_policy(name: str, raw: object) -> str:
    parts = [p.strip().lower() for p in raw.split(",")] if isinstance(raw, str) else None
    if not parts or not all(p in ("delete", "compact") for p in parts):
        raise _bad(name, f'expected "delete", "compact" or "compact,delete", got {raw!r}')
    return ",".join(sorted(set(parts)))


# Confluent's subject name strategies (their class names' last part).
SUBJECT_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
# lake.mode: bytes only, each value decoded by its id prefix, or by the subject's latest schema.
LAKE_MODES = ("key_value", "value_schema_id_prefix", "value_schema_latest")
_ARROW_ONLY = "is not supported: frames use Arrow IPC compression, which offers zstd and lz4"

# name -> spec. Defaults are Kafka's, except remote.storage.enable (tiering is on by default).
SPECS: dict[str, _Spec] = {
    "cleanup.policy": _Spec("delete", _cleanup_policy, "delete, compact, or both"),
    "compression.type": _Spec(
        "producer",
        _choice(
            "producer",
            "uncompressed",
            "zstd",
            "lz4",
            rejected={"gzip": _ARROW_ONLY, "snappy": _ARROW_ONLY},
        ),
        "codec of stored frames; producer keeps what the producer sent",
    ),
    "delete.retention.ms": _Spec(
        "86400000", _integer(0, LONG_MAX), "how long tombstones survive compaction"
    ),
    "file.delete.delay.ms": _Spec(
        "60000", _integer(0, LONG_MAX), "grace before a deleted segment's file is removed"
    ),
    "flush.messages": _Spec(
        str(LONG_MAX),
        _integer(1, LONG_MAX),
        "fsync after this many records (replication is the durability)",
    ),
    "flush.ms": _Spec(str(LONG_MAX), _integer(0, LONG_MAX), "fsync at least this often"),
    "local.retention.bytes": _Spec(
        "-2", _integer(-2, LONG_MAX), "hot-copy size bound per partition; -2 = retention.bytes"
    ),
    "local.retention.ms": _Spec(
        "-2", _integer(-2, LONG_MAX), "hot-copy age bound; -2 = retention.ms"
    ),
    "max.compaction.lag.ms": _Spec(
        str(LONG_MAX), _integer(1, LONG_MAX), "max time a record stays uncompacted"
    ),
    "max.message.bytes": _Spec("1048588", _integer(0, INT_MAX), "largest frame accepted"),
    "message.timestamp.after.max.ms": _Spec(
        "3600000", _integer(0, LONG_MAX), "max future skew of CreateTime (Kafka 4 default)"
    ),
    "message.timestamp.before.max.ms": _Spec(
        str(LONG_MAX), _integer(0, LONG_MAX), "max past skew of CreateTime"
    ),
    "message.timestamp.type": _Spec(
        "CreateTime", _choice("CreateTime", "LogAppendTime"), "which timestamp records keep"
    ),
    "min.cleanable.dirty.ratio": _Spec("0.5", _ratio, "dirty share that triggers compaction"),
    "min.compaction.lag.ms": _Spec(
        "0", _integer(0, LONG_MAX), "min time a record stays uncompacted"
    ),
    "min.insync.replicas": _Spec(
        "1", _integer(1, INT_MAX), "ISR size that acks=all requires (<= replication factor)"
    ),
    "remote.storage.enable": _Spec("true", _boolean, "tier sealed segments to object storage"),
    "retention.bytes": _Spec(
        "-1", _integer(-1, LONG_MAX), "whole-log size bound per partition; -1 = none"
    ),
    "retention.ms": _Spec("604800000", _integer(-1, LONG_MAX), "whole-log age bound; -1 = none"),
    # Kafka's minimum is 14 bytes; 1 KiB still lets tests roll segments quickly.
    "segment.bytes": _Spec("1073741824", _integer(1024, INT_MAX), "segment roll size"),
    "segment.ms": _Spec("604800000", _integer(1, LONG_MAX), "segment roll age"),
    "unclean.leader.election.enable": _Spec(
        "false", _boolean, "allow electing a leader from outside the ISR"
    ),
    # Broker-side schema validation (ingest/schema_ids.py), Confluent Server's names.
    "confluent.key.schema.validation": _Spec(
        "false", _boolean, "refuse batches whose keys lack a schema id registered for the topic"
    ),
    "confluent.key.subject.name.strategy": _Spec(
        "TopicNameStrategy", _choice(*SUBJECT_STRATEGIES), "the subject a key's id must be under"
    ),
    "confluent.value.schema.validation": _Spec(
        "false", _boolean, "refuse batches whose values lack a schema id registered for the topic"
    ),
    "confluent.value.subject.name.strategy": _Spec(
        "TopicNameStrategy", _choice(*SUBJECT_STRATEGIES), "the subject a value's id must be under"
    ),
    # The layout of the topic's Delta table (docs/lake-tables.md), Redpanda's
    # redpanda.iceberg.mode values; read by tiering for each file it writes.
    "lake.mode": _Spec(
        "key_value",
        _choice(*LAKE_MODES),
        "key_value: bytes only; value_schema_id_prefix / value_schema_latest: also a typed "
        "value column",
    ),
}


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """Effective configs of one topic, typed; local.* already resolved against retention.*."""

    cleanup_policy: frozenset[str]
    compression_type: str
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    local_retention_bytes: int  # resolved: never -2
    local_retention_ms: int  # resolved: never -2
    max_compaction_lag_ms: int
    max_message_bytes: int
    message_timestamp_after_max_ms: int
    message_timestamp_before_max_ms: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    min_insync_replicas: int
    remote_storage_enable: bool
    retention_bytes: int  # -1 = unbounded
    retention_ms: int  # -1 = unbounded
    segment_bytes: int
    segment_ms: int
    unclean_leader_election_enable: bool
    key_schema_validation: bool = False
    key_subject_strategy: str = "TopicNameStrategy"
    value_schema_validation: bool = False
    value_subject_strategy: str = "TopicNameStrategy"
    lake_mode: str = "key_value"

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy


def validate_topic_name(name: object) -> str:
    """Kafka's rules: 1..249 chars of [a-zA-Z0-9._-], and not "." or ".."."""
    if not isinstance(name, str) or not name:
        raise TierlogError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name must be non-empty")
    if len(name) > MAX_TOPIC_NAME:
        raise TierlogError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name is {len(name)} characters; the limit is {MAX_TOPIC_NAME}",
        )
    if name in (".", ".."):
        raise TierlogError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if not _TOPIC_NAME.fullmatch(name):
        raise TierlogError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} is illegal: use only ASCII letters, digits, '.', '_' and '-'",
        )
    return name


def canonical(name: str, value: object) -> str:
    """One config value as its canonical string; INVALID_CONFIG if the name or value is bad."""
    spec = SPECS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise TierlogError(
            ErrorCode.INVALID_CONFIG,
            f"unknown topic config {name!r}; known configs: {', '.join(SPECS)}",
        )
    return spec.parse(name, value)


def validate_configs(configs: Mapping[str, object]) -> dict[str, str]:
    """Canonical overrides, checked one by one and together. A None value means "default"."""
    if not isinstance(configs, Mapping):
        raise TierlogError(ErrorCode.INVALID_CONFIG, "configs must be an object of name -> value")
    out = {name: canonical(name, value) for name, value in configs.items() if value is not None}
    topic_config(out)  # cross-field rules
    return dict(sorted(out.items()))


def merge_configs(
    current: Mapping[str, str], set_: Mapping[str, object], delete: Iterable[str]
) -> dict[str, str]:
    """Incremental alter: ``set_`` wins, ``delete`` restores defaults; the result is validated."""
    delete = list(delete)
    for name in delete:
        if name not in SPECS:
            canonical(name, None)  # raises the unknown-config error
        if name in set_:
            raise TierlogError(ErrorCode.INVALID_CONFIG, f"{name} is both set and deleted")
    merged: dict[str, object] = {k: v for k, v in current.items() if k not in delete}
    merged.update(set_)
    return validate_configs(merged)


def effective_configs(overrides: Mapping[str, str]) -> dict[str, str]:
    """Every config with its value for this topic: overrides over defaults, sorted by name."""
    return {name: overrides.get(name, spec.default) for name, spec in sorted(SPECS.items())}


def topic_config(overrides: Mapping[str, object]) -> TopicConfig:
    """The typed view of a topic's overrides (validated; cross-field rules as in Kafka)."""
    values = {name: spec.default for name, spec in SPECS.items()}
    values.update({name: canonical(name, value) for name, value in overrides.items()})

    def i(name: str) -> int:
        return int(values[name])

    retention_ms, retention_bytes = i("retention.ms"), i("retention.bytes")
    local_ms, local_bytes = i("local.retention.ms"), i("local.retention.bytes")
    # Kafka's LogConfig rule: with a bounded retention, the local bound must be within it.
    for local_name, local, total_name, total in (
        ("local.retention.ms", local_ms, "retention.ms", retention_ms),
        ("local.retention.bytes", local_bytes, "retention.bytes", retention_bytes),
    ):
        if total != -1 and local != -2 and (local == -1 or local > total):
            raise _bad(local_name, f"{local} must be <= {total_name} ({total}), or -2")
    remote = values["remote.storage.enable"] == "true"
    # -2 means "same as the whole log"; without tiering the hot copy is the whole log.
    if local_ms == -2 or not remote:
        local_ms = retention_ms
    if local_bytes == -2 or not remote:
        local_bytes = retention_bytes
    if i("min.compaction.lag.ms") > i("max.compaction.lag.ms"):
        raise _bad("min.compaction.lag.ms", "must be <= max.compaction.lag.ms")
    return TopicConfig(
        cleanup_policy=frozenset(values["cleanup.policy"].split(",")),
        compression_type=values["compression.type"],
        delete_retention_ms=i("delete.retention.ms"),
        file_delete_delay_ms=i("file.delete.delay.ms"),
        flush_messages=i("flush.messages"),
        flush_ms=i("flush.ms"),
        local_retention_bytes=local_bytes,
        local_retention_ms=local_ms,
        max_compaction_lag_ms=i("max.compaction.lag.ms"),
        max_message_bytes=i("max.message.bytes"),
        message_timestamp_after_max_ms=i("message.timestamp.after.max.ms"),
        message_timestamp_before_max_ms=i("message.timestamp.before.max.ms"),
        message_timestamp_type=values["message.timestamp.type"],
        min_cleanable_dirty_ratio=float(values["min.cleanable.dirty.ratio"]),
        min_compaction_lag_ms=i("min.compaction.lag.ms"),
        min_insync_replicas=i("min.insync.replicas"),
        remote_storage_enable=remote,
        retention_bytes=retention_bytes,
        retention_ms=retention_ms,
        segment_bytes=i("segment.bytes"),
        segment_ms=i("segment.ms"),
        unclean_leader_election_enable=values["unclean.leader.election.enable"] == "true",
        key_schema_validation=values["confluent.key.schema.validation"] == "true",
        key_subject_strategy=values["confluent.key.subject.name.strategy"],
        value_schema_validation=values["confluent.value.schema.validation"] == "true",
        value_subject_strategy=values["confluent.value.subject.name.strategy"],
        lake_mode=values["lake.mode"],
    )


def check_min_insync(overrides: Mapping[str, str], replication_factor: int) -> None:
    """min.insync.replicas above the replication factor would make acks=all always fail."""
    mir = int(overrides.get("min.insync.replicas", SPECS["min.insync.replicas"].default))
    if mir > replication_factor:
        raise TierlogError(
            ErrorCode.INVALID_CONFIG,
            f"min.insync.replicas ({mir}) must be <= the replication factor ({replication_factor})",
        )
