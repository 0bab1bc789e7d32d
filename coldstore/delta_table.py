"""A topic's Delta table: add already-uploaded Parquet files to the log (docs/design.md §4).

The data file is uploaded by ObjectStore first and then *referenced* by a Delta add action
(deltalake's transaction API): never rewritten, so the bytes the manifest points at are
exactly the bytes that were uploaded.

Idempotence: each commit carries a Delta `txn` action per partition it touches, app id
"{topic}-{partition}", version = the highest base offset of that partition's files in the
commit; one commit may carry files of many partitions (commit_files), all visible or none.
Before committing, each file is checked: if its partition's txn version is >= its base
offset and a live file of the partition covers that offset, the file is already in the table
(a retry after a crash or timeout) and is left out. This relies on a partition's files being
committed in offset order, which the tiering worker guarantees (only a partition's lowest
untiered segment is claimable); a commit below the txn version with no file covering it is
refused (OutOfOrderCommitError), never silently dropped.

Concurrency: commits are optimistic. With S3 conditional put (storage option
aws_conditional_put=etag) exactly one writer creates each log version; deltalake re-reads the
winner's commit and retries when the two don't conflict, which blind appends to different
partitions never do. Two commits with the same app id do conflict ("concurrent transaction"):
the loser re-reads the table, finds the winner's txn version and returns as for a retry.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Sequence
from typing import NamedTuple

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.fs import DeltaStorageHandler
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

from coldstore.delta_actions import (
    DeltaFile,
    app_id,
    covers,
    file_stats,
    live_files,
    remove_action,
    table_schema,
)
from coldstore.layout import PARTITION_COLUMN
from coldstore.parquet_writer import ParquetFile
from logformat.schema import CONSUMER_SCHEMA

_COMMIT_ATTEMPTS = 5  # our own retries of a same-app-id conflict (deltalake retries the rest)
_MAX_COMMIT_RETRIES = 100  # deltalake's rebase-and-retry budget per commit under contention
# A checkpoint every 10 commits (written by the commit that reaches a multiple of it, in
# deltalake's post-commit hook). Measured against moto: deltalake 1.6 re-reads every log
# entry since the last checkpoint about three times per commit, so a commit's cost grows
# with the distance from the checkpoint: at Delta's default of 100 a commit went from ~30
# requests (40 ms) after a checkpoint to ~130 (470 ms) 40 commits later; at 10 it stays at
# ~30, plus a checkpoint (one Parquet file of the live files' actions) every 10th. Fresh
# readers (Spark, a new worker) also replay at most 10 JSON entries. Set at creation only:
# tables created before keep their interval (changing it is a metadata commit that would
# conflict with every concurrent append).
CHECKPOINT_INTERVAL = 10
_MARKER = "tierlog.commitId"  # commitInfo key that lets us find our own commit's version


class OutOfOrderCommitError(RuntimeError):
    """A later file of the partition is committed and none covers this one's offsets."""


class PendingFile(NamedTuple):
    """An uploaded data file to add to the table."""

    partition: int
    parquet: ParquetFile
    object_key: str


class BatchCommit(NamedTuple):
    version: int  # a table version at which every file of the batch is visible
    already: list[PendingFile]  # left out: the table held their offsets already


class DeltaTopicTable:
    """One topic's Delta table at `uri` (s3://bucket/{prefix}/topics/{topic}).

    Thread-safe: calls on one instance are serialized (it caches one table snapshot); use
    one instance per worker thread for parallel commits."""

    def __init__(
        self, uri: str, storage_options: dict[str, str] | None = None, *, topic: str | None = None
    ) -> None:
        self.uri = uri.rstrip("/")
        self.topic = topic or self.uri.rsplit("/", 1)[-1]  # names the txn app ids
        self.storage_options = storage_options
        self._key_prefix = _key_prefix(self.uri)
        self._table: DeltaTable | None = None
        self._fs: DeltaStorageHandler | None = None
        self._lock = threading.Lock()

    # -- the table ------------------------------------------------------------------------

    def exists(self) -> bool:
        # Not DeltaTable.is_deltatable: deltalake (1.6) holds the GIL through its S3 requests
        # and their retries, which freezes every other thread of the process (/healthz,
        # /metrics, other workers) for as long as S3 is slow. Loading the table releases it.
        try:
            DeltaTable(self.uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return False
        return True

    def ensure_created(self, schema: pa.Schema = CONSUMER_SCHEMA) -> None:
        """Create the table if absent. Racing workers are fine: with conditional put only one
        writes version 0; the others fail that commit, then find the table."""
        with self._lock:
            if not self.exists():
                try:
                    DeltaTable.create(
                        self.uri,
                        table_schema(schema),
                        mode="ignore",
                        partition_by=[PARTITION_COLUMN],
                        name=self.topic,
                        configuration={"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)},
                        storage_options=self.storage_options,
                        # No rebase-and-retry: a create that lost the race for version 0
                        # would otherwise commit a second CREATE (new table id) as version 1.
                        commit_properties=CommitProperties(max_commit_retries=0),
                    )
                except CommitFailedError:
                    if not self.exists():
                        raise
            table = self._load()
            if table.metadata().partition_columns != [PARTITION_COLUMN]:
                raise ValueError(f"{self.uri} is not partitioned by {PARTITION_COLUMN!r}")

    def version(self) -> int:
        with self._lock:
            return self._load().version()

    def transaction_version(self, partition: int) -> int | None:
        """The latest committed base offset of `partition` (its Delta txn version)."""
        with self._lock:
            return self._load().transaction_version(app_id(self.topic, partition))

    def _load(self) -> DeltaTable:
        # One snapshot, brought up to date incrementally (deltalake's own commit path still
        # replays the log since the last checkpoint: see CHECKPOINT_INTERVAL).
        if self._table is None:
            self._table = DeltaTable(self.uri, storage_options=self.storage_options)
        else:
            self._table.update_incremental()
        return self._table

    def column_type(self, name: str) -> pa.DataType | None:
        """The type of a column of the table's schema (None: the table has no such column)."""
        with self._lock:
            schema = pa.schema(self._load().schema().to_arrow())
        return schema.field(name).type if name in schema.names else None

    def merge_columns(self, fields: Sequence[pa.Field]) -> int:
        """Delta schema evolution: the columns `fields` (nullable; structs gain the fields they
        lack) added to the table's schema by a metadata-only commit, unless it has them all
        already. deltalake's transaction API carries no metadata action, so this is a commit
        of its own, made just before the commit of the first file that uses the columns: a
        reader in between sees the new columns, all null. Returns the table's version."""
        with self._lock:
            table = self._load()
            have = pa.schema(table.schema().to_arrow())
            if all(f.name in have.names and _holds(have.field(f.name), f) for f in fields):
                return table.version()
            empty = pa.table({f.name: pa.array([], f.type) for f in fields}, pa.schema(fields))
            write_deltalake(
                table,
                empty,
                mode="append",
                schema_mode="merge",
                partition_by=[PARTITION_COLUMN],
                commit_properties=CommitProperties(max_commit_retries=_MAX_COMMIT_RETRIES),
            )
            table.update_incremental()
            return table.version()

    # -- commits --------------------------------------------------------------------------

    def relpath(self, object_key: str) -> str:
        """A bucket key, URI or path under the table → its path relative to the table root."""
        key = object_key
        if key.startswith(self.uri + "/"):
            return key[len(self.uri) + 1 :]
        if self._key_prefix and key.startswith(self._key_prefix + "/"):
            return key[len(self._key_prefix) + 1 :]
        if "://" in key or key.startswith("/"):
            raise ValueError(f"{object_key!r} is not under the table {self.uri}")
        return key

    def commit_file(self, partition: int, parquet: ParquetFile, object_key: str) -> int:
        """Add the uploaded file `object_key` (holding `parquet`) to `partition`.

        Returns a table version at which the file is visible: its commit's, or, when it was
        already committed, the version read."""
        return self.commit_files([PendingFile(partition, parquet, object_key)]).version

    def commit_files(self, files: Sequence[PendingFile]) -> BatchCommit:
        """Add uploaded files, of any partitions, in ONE commit (all visible or none).

        Each partition's txn carries the highest base offset among its files. A file whose
        offsets the table already holds (a retry, or a lapsed attempt that got there first)
        is left out and reported in `already`; the others are committed together. A
        partition's files must come in offset order and follow what the table holds."""
        if not files:
            raise ValueError("nothing to commit")
        adds = [(f, self._add_action(f)) for f in files]
        with self._lock:
            for attempt in range(_COMMIT_ATTEMPTS):
                table = self._load()
                todo = [(f, a) for f, a in adds if not self._already_committed(table, f)]
                already = [f for f, _ in adds if all(f is not g for g, _ in todo)]
                if not todo:
                    return BatchCommit(table.version(), already)
                txns: dict[int, int] = {}
                for f, _ in todo:
                    txns[f.partition] = max(f.parquet.base_offset, txns.get(f.partition, -1))
                try:
                    version = self._commit(
                        table,
                        [a for _, a in todo],
                        [Transaction(app_id(self.topic, p), v) for p, v in txns.items()],
                    )
                except CommitFailedError:
                    # Same-app-id race: another worker may have committed some of these.
                    if attempt == _COMMIT_ATTEMPTS - 1:
                        raise
                    continue
                return BatchCommit(version, already)
            raise AssertionError("unreachable")

    def _add_action(self, f: PendingFile) -> AddAction:
        path = self.relpath(f.object_key)
        if not path.startswith(f"{PARTITION_COLUMN}={f.partition}/"):
            raise ValueError(f"{path!r} is not in the directory of partition {f.partition}")
        return AddAction(
            path=path,
            size=f.parquet.size_bytes,
            partition_values={PARTITION_COLUMN: str(f.partition)},
            modification_time=int(time.time() * 1000),
            data_change=True,
            stats=file_stats(f.parquet),
        )

    def covering(self, partition: int, offset: int) -> DeltaFile | None:
        """The live file of `partition` that holds `offset` (lists the table's files: for
        the rare retry that found its segment already committed, not for every commit)."""
        with self._lock:
            for f in live_files(self._load()):
                if f.partition == partition and covers(f, offset):
                    return f
        return None

    def _already_committed(self, table: DeltaTable, f: PendingFile) -> bool:
        app, base = app_id(self.topic, f.partition), f.parquet.base_offset
        done = table.transaction_version(app)
        if done is None or done < base:
            return False
        if done == base:
            return True
        if any(g.partition == f.partition and covers(g, base) for g in live_files(table)):
            return True
        raise OutOfOrderCommitError(
            f"{app}: offset {done} is committed but no file covers base offset {base}"
        )

    def _commit(
        self,
        table: DeltaTable,
        actions: Sequence[AddAction | RemoveAction],
        txns: list[Transaction] | None = None,
    ) -> int:
        read_version = table.version()
        marker = uuid.uuid4().hex
        table.create_write_transaction(
            list(actions),
            mode="append",
            schema=table.schema(),
            partition_by=[PARTITION_COLUMN],
            commit_properties=CommitProperties(
                custom_metadata={_MARKER: marker},
                max_commit_retries=_MAX_COMMIT_RETRIES,
                app_transactions=txns,
            ),
        )
        table.update_incremental()
        latest = table.version()
        if latest == read_version + 1:
            return latest
        return self._find_commit(marker, read_version + 1, latest)

    def _find_commit(self, marker: str, first: int, last: int) -> int:
        """The version in first..last whose commitInfo carries `marker`.

        Reads the log entries themselves: deltalake's history() numbers commits relative to
        its snapshot while listing the log anew, so under concurrent writers it misnumbers."""
        if self._fs is None:
            self._fs = DeltaStorageHandler(self.uri, self.storage_options)
        for version in range(first, last + 1):
            with self._fs.open_input_file(f"_delta_log/{version:020d}.json") as f:
                text = f.read().decode()
            for line in text.splitlines():
                info = json.loads(line).get("commitInfo")
                if info is not None:
                    if info.get(_MARKER) == marker:
                        return version
                    break
        return last  # not found (cannot happen): still a version that holds the commit

    def remove_files(self, paths: Sequence[str], *, data_change: bool) -> int:
        """Logically remove files (retention: data_change=True; compaction rewrites:
        data_change=False). Absent paths are skipped. Returns the table version after it."""
        with self._lock:
            table = self._load()
            live = {f.path: f for f in live_files(table)}
            now = int(time.time() * 1000)
            removes = []
            for p in dict.fromkeys(self.relpath(p) for p in paths):
                f = live.get(p)
                if f is not None:
                    removes.append(remove_action(f, data_change, now))
            if not removes:
                return table.version()
            return self._commit(table, removes)

    def replace_files(
        self,
        partition: int,
        remove_paths: Sequence[str],
        adds: Sequence[tuple[ParquetFile, str]],
        *,
        data_change: bool = False,
    ) -> int:
        """One commit removing `remove_paths` and adding the uploaded `adds` (ParquetFile,
        object key) of `partition` (compaction's rewrites: data_change=False). Every removed
        path must be live, else ValueError and nothing is committed: a rewrite must never
        re-add data that someone else removed. Returns the commit's version."""
        now = int(time.time() * 1000)
        actions: list[AddAction | RemoveAction] = []
        for parquet, key in adds:
            path = self.relpath(key)
            if not path.startswith(f"{PARTITION_COLUMN}={partition}/"):
                raise ValueError(f"{path!r} is not in the directory of partition {partition}")
            actions.append(
                AddAction(
                    path=path,
                    size=parquet.size_bytes,
                    partition_values={PARTITION_COLUMN: str(partition)},
                    modification_time=now,
                    data_change=data_change,
                    stats=file_stats(parquet),
                )
            )
        with self._lock:
            table = self._load()
            live = {f.path: f for f in live_files(table)}
            for p in dict.fromkeys(self.relpath(p) for p in remove_paths):
                f = live.get(p)
                if f is None or f.partition != partition:
                    raise ValueError(f"{p!r} is not a live file of partition {partition}")
                actions.append(remove_action(f, data_change, now))
            return self._commit(table, actions)

    # -- reading --------------------------------------------------------------------------

    def files(self) -> list[DeltaFile]:
        """The table's live data files, by partition then offset."""
        with self._lock:
            return live_files(self._load())


def _holds(have: pa.Field, want: pa.Field) -> bool:
    """Whether the table's column `have` already holds every field of `want`."""
    a, b = have.type, want.type
    if pa.types.is_struct(b):
        if not pa.types.is_struct(a):
            return False
        names = [f.name for f in a]
        return all(f.name in names and _holds(a.field(f.name), f) for f in b)
    if pa.types.is_list(b) or pa.types.is_large_list(b):
        return hasattr(a, "value_field") and _holds(a.value_field, b.value_field)
    if pa.types.is_map(b):
        return pa.types.is_map(a) and _holds(a.item_field, b.item_field)
    return True  # a leaf: same name is enough here; tiering's plan checked the types


def _key_prefix(uri: str) -> str:
    """The bucket key of an s3:// table root ("" for local paths)."""
    if not uri.startswith("s3://"):
        return ""
    parts = uri.split("/", 3)
    return parts[3] if len(parts) > 3 else ""
