"""The tiering worker's settings table (cluster/settings_table.py): `tierlog tiering`'s
flags, its TIERLOG_* variables and docs/settings.md come from it."""

from __future__ import annotations

from cluster import node_settings as node
from cluster.settings_table import Setting, SettingsTable, at_least

LEASE_MS = Setting(
    "lease_ms",
    int,
    120_000,
    "claim lease: a segment whose worker is silent this long is taken over",
    env="TIERLOG_TIERING_LEASE_MS",
    validate=at_least(1),
)
BATCH_SEGMENTS = Setting(
    "batch_segments",
    int,
    16,
    "sealed segments (of one topic) per Delta commit, at most",
    env="TIERLOG_TIERING_BATCH_SEGMENTS",
    validate=at_least(1),
)
BATCH_MB = Setting(
    "batch_mb",
    int,
    1024,
    "MiB of segments per Delta commit, at most (the temp disk a batch may use)",
    env="TIERLOG_TIERING_BATCH_MB",
    validate=at_least(1),
)
ENCODE_THREADS = Setting(
    "encode_threads",
    int,
    2,
    "threads turning segments into Parquet",
    env="TIERLOG_TIERING_ENCODE_THREADS",
    validate=at_least(1),
)
UPLOAD_THREADS = Setting(
    "upload_threads",
    int,
    2,
    "threads uploading Parquet files to S3",
    env="TIERLOG_TIERING_UPLOAD_THREADS",
    validate=at_least(1),
)

TIERING = SettingsTable(
    "tiering",
    "A tiering worker: sealed segments to the topic's Delta table in S3.",
    (
        *node.worker_settings(
            "tiering",
            "TIERLOG_POLL_MS",
            30_000,
            "how often an idle worker looks for work unwoken: a NOTIFY wakes it when a"
            " segment becomes claimable, so this is only a safety net",
        ),
        LEASE_MS,
        BATCH_SEGMENTS,
        BATCH_MB,
        ENCODE_THREADS,
        UPLOAD_THREADS,
    ),
)
