"""The compaction worker's settings table (cluster/settings_table.py): `tierlog compaction`'s
flags, its TIERLOG_* variables and docs/settings.md come from it."""

from __future__ import annotations

from cluster import node_settings as node
from cluster.settings_table import Setting, SettingsTable, at_least

TARGET_FILE_BYTES = Setting(
    "target_file_bytes",
    int,
    64 << 20,
    "merges and key compaction write cold files of about this size",
    env="TIERLOG_COMPACTION_TARGET_FILE_BYTES",
    validate=at_least(1),
)
MIN_GRACE_MS = Setting(
    "min_grace_ms",
    int,
    60_000,
    "removed files' objects stay at least this long (and file.delete.delay.ms)",
    env="TIERLOG_COMPACTION_MIN_GRACE_MS",
    validate=at_least(0),
)
STALE_UPLOAD_MS = Setting(
    "stale_upload_ms",
    int,
    24 * 3600 * 1000,
    "abort multipart uploads left open this long (a writer killed mid-upload)",
    env="TIERLOG_COMPACTION_STALE_UPLOAD_MS",
    validate=at_least(1),
)
# A crash-test hook, off by default: hold an erasure's rewrite between uploading its new files
# and its Delta commit, the window a kill -9 must land in (tests/integration/
# test_erasure_cluster.py's compaction-killed case). docs/erasure.md says what a crash there does.
ERASURE_COMMIT_PAUSE_MS = Setting(
    "erasure_commit_pause_ms",
    int,
    0,
    "crash tests only (0 = off): an erasure waits this long after uploading its new files "
    "and before its Delta commit",
    env="TIERLOG_COMPACTION_ERASURE_COMMIT_PAUSE_MS",
    validate=at_least(0),
)

COMPACTION = SettingsTable(
    "compaction",
    "A compaction worker: cold retention, file merges and key compaction in S3.",
    (
        *node.worker_settings("compaction", "TIERLOG_COMPACTION_POLL_MS", 10_000),
        TARGET_FILE_BYTES,
        MIN_GRACE_MS,
        STALE_UPLOAD_MS,
        ERASURE_COMMIT_PAUSE_MS,
    ),
)
