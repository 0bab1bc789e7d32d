"""The types a tiering batch is made of: its settings, the worker it runs on (a Protocol, so
the batch does not import the worker that imports it), an uploaded file, and a typed lake
table's decoder (tiering/batch.py, tiering/batch_commit.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

from coldstore.parquet_writer import ParquetFile
from metadata.segment_registry import FileSpec, SegmentClaim
from schemaformat.typed_decode import TypedDecoder
from tiering.typed_columns import BatchTypes

if TYPE_CHECKING:
    import os

    from coldstore.delta_table import DeltaTopicTable
    from coldstore.object_store import ObjectStore, ObjectStoreConfig
    from metadata.cold_manifest import ColdManifest
    from metadata.segment_registry import SegmentRegistry
    from metadata.transactions import TxnRepo
    from tiering.segment_source import SegmentSource

MiB = 1 << 20


class BatchSettings(NamedTuple):
    """How much one Delta commit carries. The defaults: 16 segments or 1 GiB of segments
    (a commit then costs ~1/16 of what it did per segment, and the temp disk a batch may
    hold stays bounded), 2 upload threads (one upload in flight while the next encodes,
        one spare for S3's latency), 2 encoder threads (pyarrow's decode, CRC and zstd work
    releases the GIL: on this 2-core machine, shared with a broker and S3, 2 threads tiered
    123.6 MB/s of raw records where 1 did 75.6; bench/tiering.py --encode-threads)."""

    max_segments: int = 16
    max_bytes: int = 1024 * MiB
    upload_threads: int = 2
    encode_threads: int = 2


class Uploaded(NamedTuple):
    claim: SegmentClaim
    parquet: ParquetFile
    file: FileSpec  # ours: the object just uploaded


class BatchHost(Protocol):
    """What a batch uses of the worker running it (tiering.worker.TieringWorker): named here
    so the batch does not import the worker that imports it."""

    batch: BatchSettings
    config: ObjectStoreConfig
    lease_ms: int
    manifest: ColdManifest
    registry: SegmentRegistry
    row_group_bytes: int | None
    step_seconds: dict[str, float]
    store: ObjectStore
    temp_dir: str | os.PathLike[str] | None
    txns: TxnRepo

    @property
    def source(self) -> SegmentSource: ...

    def table(self, claim: SegmentClaim) -> DeltaTopicTable: ...

    def typed_decoder(self, claim: SegmentClaim) -> TypedDecoder | None: ...


class Typing(NamedTuple):
    """A typed lake table's batch (lake.mode): the topic's decoder and the batch's type."""

    decoder: TypedDecoder
    types: BatchTypes
