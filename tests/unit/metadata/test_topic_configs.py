"""Topic config validation and the typed view, without a database."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from logformat.errors import ErrorCode, TierlogError
from metadata.configs import (
    SPECS,
    effective_configs,
    merge_configs,
    topic_config,
    validate_configs,
    validate_topic_name,
)


def invalid(fn: Callable[..., object], *args: object) -> TierlogError:
    with pytest.raises(TierlogError) as e:
        fn(*args)
    assert e.value.code is ErrorCode.INVALID_CONFIG
    assert e.value.http_status == 400
    return e.value


def test_defaults_are_kafkas() -> None:
    c = topic_config({})
    assert c.retention_ms == 604_800_000 and c.retention_bytes == -1
    assert c.local_retention_ms == 604_800_000 and c.local_retention_bytes == -1  # -2 resolved
    assert c.segment_bytes == 1_073_741_824 and c.segment_ms == 604_800_000
    assert c.cleanup_policy == frozenset({"delete"}) and c.delete and not c.compact
    assert c.min_insync_replicas == 1 and c.unclean_leader_election_enable is False
    assert c.max_message_bytes == 1_048_588 and c.compression_type == "producer"
    assert c.message_timestamp_type == "CreateTime" and c.remote_storage_enable is True
    assert c.delete_retention_ms == 86_400_000 and c.min_compaction_lag_ms == 0


def test_every_default_is_valid_and_canonical() -> None:
    for name, spec in SPECS.items():
        assert spec.parse(name, spec.default) == spec.default, name


@pytest.mark.parametrize(
    ("name", "raw", "canonical"),
    [
        ("retention.ms", 1000, "1000"),
        ("retention.ms", "1000", "1000"),
        ("retention.ms", " -1 ", "-1"),
        ("retention.bytes", -1, "-1"),
        ("segment.bytes", 1024, "1024"),
        ("unclean.leader.election.enable", True, "true"),
        ("unclean.leader.election.enable", "TRUE", "true"),
        ("remote.storage.enable", False, "false"),
        ("cleanup.policy", "delete,compact", "compact,delete"),
        ("cleanup.policy", " compact , delete ", "compact,delete"),
        ("cleanup.policy", "compact", "compact"),
        ("compression.type", "ZSTD", "zstd"),
        ("compression.type", "uncompressed", "uncompressed"),
        ("message.timestamp.type", "logappendtime", "LogAppendTime"),
        ("min.cleanable.dirty.ratio", 1, "1.0"),
        ("min.cleanable.dirty.ratio", "0.25", "0.25"),
    ],
)
def test_values_are_canonicalized(name: str, raw: object, canonical: str) -> None:
    assert validate_configs({name: raw}) == {name: canonical}


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("retention.ms", "soon"),
        ("retention.ms", 1.5),
        ("retention.ms", True),  # a bool is not a number here, even though Python says so
        ("retention.ms", -3),
        ("retention.bytes", -2),
        ("local.retention.ms", -3),
        ("segment.bytes", 1023),
        ("segment.bytes", 2**31),
        ("segment.ms", 0),
        ("min.insync.replicas", 0),
        ("max.message.bytes", -1),
        ("unclean.leader.election.enable", 1),
        ("unclean.leader.election.enable", "yes"),
        ("cleanup.policy", ""),
        ("cleanup.policy", "delete,archive"),
        ("compression.type", "brotli"),
        ("message.timestamp.type", "WallClock"),
        ("min.cleanable.dirty.ratio", 1.5),
        ("min.cleanable.dirty.ratio", "nan"),
        ("retention.ms", [1]),
    ],
)
def test_bad_values_name_the_config(name: str, raw: object) -> None:
    err = invalid(validate_configs, {name: raw})
    assert name in err.message


def test_unknown_config_lists_known_ones() -> None:
    err = invalid(validate_configs, {"retention.hours": 1})
    assert "retention.hours" in err.message and "retention.ms" in err.message


@pytest.mark.parametrize("codec", ["gzip", "snappy", "GZIP"])
def test_gzip_and_snappy_are_rejected_with_a_reason(codec: str) -> None:
    err = invalid(validate_configs, {"compression.type": codec})
    assert "Arrow" in err.message and "zstd" in err.message


def test_local_retention_resolution() -> None:
    c = topic_config({"retention.ms": "5000", "retention.bytes": "100000"})
    assert (c.local_retention_ms, c.local_retention_bytes) == (5000, 100000)
    c = topic_config({"retention.ms": "5000", "local.retention.ms": "1000"})
    assert c.local_retention_ms == 1000
    c = topic_config({"retention.ms": "-1", "local.retention.ms": "-1"})
    assert c.local_retention_ms == -1
    # Without tiering the hot copy is the whole log, so only retention.* applies.
    c = topic_config(
        {"remote.storage.enable": "false", "retention.ms": "9000", "local.retention.ms": "1000"}
    )
    assert c.local_retention_ms == 9000


@pytest.mark.parametrize(
    "overrides",
    [
        {"retention.ms": "5000", "local.retention.ms": "6000"},
        {"retention.ms": "5000", "local.retention.ms": "-1"},
        {"retention.bytes": "100", "local.retention.bytes": "101"},
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
    ],
)
def test_cross_field_rules(overrides: dict[str, str]) -> None:
    invalid(validate_configs, overrides)


def test_none_means_default() -> None:
    assert validate_configs({"retention.ms": None, "segment.ms": 10}) == {"segment.ms": "10"}


def test_merge_sets_and_deletes() -> None:
    current = {"retention.ms": "1000", "segment.ms": "10"}
    assert merge_configs(current, {"segment.bytes": 2048}, ["retention.ms"]) == {
        "segment.bytes": "2048",
        "segment.ms": "10",
    }
    invalid(merge_configs, current, {}, ["no.such.config"])
    invalid(merge_configs, current, {"segment.ms": 5}, ["segment.ms"])
    # the merged result is what gets validated
    invalid(merge_configs, {"retention.ms": "5000"}, {"local.retention.ms": 6000}, [])


def test_effective_configs_cover_every_config() -> None:
    eff = effective_configs({"retention.ms": "1"})
    assert set(eff) == set(SPECS) and eff["retention.ms"] == "1"
    assert eff["segment.bytes"] == "1073741824" and list(eff) == sorted(eff)


@pytest.mark.parametrize("name", ["a", "orders", "my.topic_v2-x", "A" * 249, "..a", "_"])
def test_valid_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    "name", ["", ".", "..", "a" * 250, "with space", "slash/x", "é", None, "tab\t", "star*"]
)
def test_invalid_topic_names(name: object) -> None:
    with pytest.raises(TierlogError) as e:
        validate_topic_name(name)
    assert e.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION


def test_lake_mode_takes_redpandas_names_and_defaults_to_key_value() -> None:
    assert topic_config({}).lake_mode == "key_value"
    for mode in ("key_value", "value_schema_id_prefix", "value_schema_latest"):
        assert topic_config({"lake.mode": mode.upper()}).lake_mode == mode
        assert validate_configs({"lake.mode": mode}) == {"lake.mode": mode}
    error = invalid(validate_configs, {"lake.mode": "typed"})
    assert "lake.mode" in str(error) and "value_schema_id_prefix" in str(error)
