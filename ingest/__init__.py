"""The broker (docs/design.md §2-3): HTTP produce/fetch, the hot log and replication.

In layers, following the data: api/ (HTTP) -> produce.py -> replication/ (Partition: group
commit, ISR, high watermark; followers, controller) -> unified/ (UnifiedLog: producer state over
the log) -> log/ (LocalLog: segments and the broker-wide RocksDB index, rebuildable from the
segment files); beside them cleaner/ (hot key compaction) and tiered/ (the broker's tiering
duties and reads across tiers). import-linter keeps the layers (pyproject.toml).
"""
