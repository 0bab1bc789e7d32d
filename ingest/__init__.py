"""The broker (DESIGN §2-3): HTTP produce/fetch, the hot log and replication.

The hot log, following the data: segment.py (one file of frames) -> partition_log.py (one
partition's log: append, read, roll, truncate, recover) -> log_manager.py (the broker's logs),
with index.py the broker-wide RocksDB index, rebuildable from the segment files.
"""
