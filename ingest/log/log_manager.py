"""The broker's logs: one LogIndex and the LocalLogs in its data dir (Kafka's LogManager).

Layout: `{data_dir}/index` (RocksDB) and `{data_dir}/{topic}-{partition}/` per partition,
each with `partition.json` naming the topic id. Which partitions to keep is the broker's call
(from metadata): `existing()` lists what is on disk, `drop()` removes what is not wanted.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading

from ingest.log.index import LogIndex
from ingest.log.local_log import LocalLog, LogConfig
from ingest.log.segment import PARTITION_FILE, read_partition_file, remove_dir
from metadata.types import TopicNamePartition

log = logging.getLogger(__name__)

INDEX_DIR = "index"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class LogManager:
    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        os.makedirs(data_dir, exist_ok=True)
        for name in os.listdir(data_dir):  # finish deletions a crash interrupted
            if name.endswith(".deleted"):
                shutil.rmtree(os.path.join(data_dir, name), ignore_errors=True)
        self.index = LogIndex(os.path.join(data_dir, INDEX_DIR))
        self._logs: dict[TopicNamePartition, LocalLog] = {}
        self._lock = threading.RLock()

    def existing(self) -> list[tuple[str, str, int]]:
        """(topic, topic_id, partition) of every partition directory on disk, loaded or not."""
        found: list[tuple[str, str, int]] = []
        for name in sorted(os.listdir(self.data_dir)):
            path = os.path.join(self.data_dir, name)
            if name == INDEX_DIR or name.endswith(".deleted") or not os.path.isdir(path):
                continue
            meta = read_partition_file(path)
            if meta is None:
                log.warning(f"ignoring a directory without {PARTITION_FILE}", extra={"dir": path})
                continue
            topic, topic_id, partition = (
                meta.get("topic"),
                meta.get("topic_id"),
                meta.get("partition"),
            )
            if isinstance(topic, str) and isinstance(topic_id, str) and isinstance(partition, int):
                found.append((topic, topic_id, partition))
        return found

    def get_or_create(
        self, topic: str, topic_id: str, partition: int, config: LogConfig
    ) -> LocalLog:
        """The open log of (topic, partition); a different topic id replaces the old one."""
        key = TopicNamePartition(topic, partition)
        with self._lock:
            plog = self._logs.get(key)
            if plog is not None and plog.topic_id == topic_id:
                plog.update_config(config)
                return plog
            if plog is not None:  # the topic was deleted and re-created meanwhile
                plog.delete()
                del self._logs[key]
            path = os.path.join(self.data_dir, partition_dir_name(topic, partition))
            plog = LocalLog.open(path, topic, topic_id, partition, self.index, config)
            self._logs[key] = plog
            return plog

    def reopen(self, plog: LocalLog) -> LocalLog:
        """Open `plog`'s partition again (log recovery repairs what the failure left) and
        close `plog`; raises, keeping `plog`, while the storage still fails."""
        key = TopicNamePartition(plog.topic, plog.partition)
        with self._lock:
            fresh = LocalLog.open(
                plog.dir, plog.topic, plog.topic_id, plog.partition, self.index, plog.config
            )
            try:
                _ = fresh.active_segment.fd  # opened for appending: what failed must work now
            except OSError:
                fresh.close()
                raise
            self._logs[key] = fresh
        try:
            plog.close()
        except Exception:  # its files are the fresh log's now; the old descriptors just go
            log.exception("closing a failed log", extra={"topic": key[0], "partition": key[1]})
        return fresh

    def get(self, topic: str, partition: int) -> LocalLog | None:
        return self._logs.get(TopicNamePartition(topic, partition))

    def all(self) -> list[LocalLog]:
        return list(self._logs.values())

    def drop(self, topic: str, partition: int) -> None:
        """Delete a partition's files and index entries, whether it is open or not."""
        with self._lock:
            plog = self._logs.pop(TopicNamePartition(topic, partition), None)
            if plog is not None:
                plog.delete()
                return
            path = os.path.join(self.data_dir, partition_dir_name(topic, partition))
            meta = read_partition_file(path)
            topic_id = meta.get("topic_id") if meta else None
            if isinstance(topic_id, str):
                self.index.drop_partition(topic_id, partition)
            remove_dir(path)

    def roll_due(self, now_ms: int) -> list[LocalLog]:
        """Roll every log whose active segment is older than its segment.ms; returns them."""
        rolled = []
        for plog in self.all():
            try:
                if plog.maybe_roll(now_ms):
                    rolled.append(plog)
            except Exception:  # one bad log must not stop the others from rolling
                log.exception(
                    "roll failed", extra={"topic": plog.topic, "partition": plog.partition}
                )
        return rolled

    def flush(self) -> None:
        for plog in self.all():
            plog.flush()

    def close(self) -> None:
        with self._lock:
            for plog in self._logs.values():
                try:
                    plog.close()
                except Exception:
                    log.exception(
                        "close failed", extra={"topic": plog.topic, "partition": plog.partition}
                    )
            self._logs.clear()
            self.index.close()
