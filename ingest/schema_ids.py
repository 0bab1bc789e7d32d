"""Broker-side schema validation (Confluent Server's `confluent.value.schema.validation`):
on a topic that asks for it, every value (and/or key) must start with Confluent's wire
format, magic byte 0 and a 4-byte big-endian schema id, and that id must be registered
under the subject the topic's strategy names: `<topic>-value` / `<topic>-key`
(TopicNameStrategy), the record's full name (RecordNameStrategy) or `<topic>-<full name>`
(TopicRecordNameStrategy). One bad record refuses the whole batch, nothing is written.

Null values (tombstones) pass: they carry no schema. Ids are checked once per distinct id
per batch (numpy over the Arrow buffers, no Python per record). An id's subjects are cached
(ids never change meaning); a cached answer is trusted for POSITIVE_TTL_S, so a version
deleted in the registry stops being accepted within that time. An id not registered is
asked again at most every NEGATIVE_TTL_S (a flood of bad ids costs one query per id and
interval, not one per batch).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import pyarrow as pa

from logformat.errors import ErrorCode, TierlogError
from logformat.frame import decode_records
from metadata.configs import TopicConfig
from metadata.registry_store import RegistryStore
from schemaformat.naming import record_name
from schemaformat.wire import prefix_ids


class PlannedAppend(Protocol):
    """What the check reads of one planned HTTP append (ingest/produce.py's plan, described
    here so the broker's id check does not import the produce path above it)."""

    @property
    def partition(self) -> int: ...
    @property
    def frames(self) -> Sequence[bytes | bytearray]: ...
    @property
    def positions(self) -> Sequence[int] | None: ...
    @property
    def record_count(self) -> int: ...


class PlannedProduce(Protocol):
    @property
    def appends(self) -> Sequence[PlannedAppend]: ...


POSITIVE_TTL_S = 60.0
NEGATIVE_TTL_S = 1.0
_MAX_CACHED = 100_000


class SchemaValidationError(TierlogError):
    """A record without a registered schema id: Kafka INVALID_RECORD, HTTP 422; `index`
    (in the JSON answer too) is the record's position in the batch."""

    def __init__(self, topic: str, column: str, index: int, why: str, **extra: object) -> None:
        super().__init__(
            ErrorCode.INVALID_RECORD,
            f"record {index} of the batch to topic {topic!r} is refused by schema validation: "
            f"its {column} {why}; nothing of the batch was written",
            index=index,
            **extra,
        )
        self.topic, self.column, self.index, self.why = topic, column, index, why

    @property
    def http_status(self) -> int:
        return 422


_refused = SchemaValidationError


def framed_ids(values: pa.Array) -> tuple[np.ndarray, np.ndarray, int | None]:
    """(positions of the non-null records, their schema ids, the first position whose
    bytes are not in the wire format or None)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    ids = prefix_ids(values)  # -1: null, too short, or no magic byte
    positions = np.flatnonzero(values.is_valid().to_numpy(zero_copy_only=False))
    found = ids[positions]
    unframed = found < 0
    if unframed.any():
        return positions, np.empty(0, np.int64), int(positions[np.argmax(unframed)])
    return positions, found, None


class SchemaIdCheck:
    def __init__(self, store: RegistryStore, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._clock = clock
        self._subjects: dict[int, tuple[float, frozenset[str]]] = {}  # id → (until, subjects)
        self._names: dict[int, str | None] = {}  # id → record full name (never changes)
        self._missed: dict[int, float] = {}  # id → not asked again until

    async def check_batch(
        self, topic: str, config: TopicConfig, batch: pa.RecordBatch, first_index: int = 0
    ) -> None:
        """Refuse `batch` (SchemaValidationError) unless every record passes the topic's
        validation; `first_index`: the request position of the batch's first record."""
        for column, on, strategy in (
            ("value", config.value_schema_validation, config.value_subject_strategy),
            ("key", config.key_schema_validation, config.key_subject_strategy),
        ):
            if on:
                await self._check_column(topic, column, strategy, batch.column(column), first_index)

    async def check_plan(self, topic: str, config: TopicConfig, plan: PlannedProduce) -> None:
        """HTTP produce: the planned frames' records, errors naming request positions."""
        if not (config.value_schema_validation or config.key_schema_validation):
            return
        before = 0  # records of the appends already checked
        for append in plan.appends:
            within = 0  # records of this append's frames already checked
            for frame in append.frames:
                batch = decode_records(frame, verify=False)
                try:
                    await self.check_batch(topic, config, batch, within)
                except SchemaValidationError as exc:
                    at = exc.index
                    index = append.positions[at] if append.positions is not None else before + at
                    raise SchemaValidationError(
                        topic, exc.column, index, exc.why, partition=append.partition
                    ) from None
                within += batch.num_rows
            before += append.record_count

    async def _check_column(
        self, topic: str, column: str, strategy: str, values: pa.Array, first_index: int
    ) -> None:
        positions, ids, unframed = framed_ids(values)
        if unframed is not None:
            why = "does not start with magic byte 0 and a 4-byte schema id"
            raise _refused(topic, column, first_index + unframed, why)
        if len(ids) == 0:
            return
        distinct = [int(i) for i in np.unique(ids)]
        await self._resolve(distinct, strategy != "TopicNameStrategy")
        for schema_id in distinct:
            subject = self._subject(topic, column, strategy, schema_id)
            if subject is None or subject not in self._known(schema_id):
                subject = subject if subject is not None else "(no record name)"
                await self._resolve([schema_id], strategy != "TopicNameStrategy", force=True)
                if subject in self._known(schema_id):
                    continue
                at = int(positions[int(np.argmax(ids == schema_id))])
                why = f"names schema id {schema_id}, not registered under subject {subject!r}"
                raise _refused(topic, column, first_index + at, why)

    def _subject(self, topic: str, column: str, strategy: str, schema_id: int) -> str | None:
        if strategy == "TopicNameStrategy":
            return f"{topic}-{column}"
        name = self._names.get(schema_id)
        if name is None:
            return None
        return name if strategy == "RecordNameStrategy" else f"{topic}-{name}"

    def _known(self, schema_id: int) -> frozenset[str]:
        hit = self._subjects.get(schema_id)
        return hit[1] if hit is not None and hit[0] > self._clock() else frozenset()

    async def _resolve(self, ids: Sequence[int], names: bool, force: bool = False) -> None:
        now = self._clock()
        wanted = [
            i for i in ids if (force or not self._known(i)) and self._missed.get(i, 0.0) <= now
        ]
        if not wanted:
            return
        found = await asyncio.to_thread(self._store.live_subjects_of, wanted)
        if names:
            for i in found:
                if i not in self._names:
                    stored = await asyncio.to_thread(self._store.schema, i)
                    self._names[i] = (
                        record_name(stored.schema_type, stored.text) if stored else None
                    )
        if len(self._subjects) + len(wanted) > _MAX_CACHED:
            self._subjects, self._missed = {}, {}
        until = now + POSITIVE_TTL_S
        for i in wanted:
            if i in found:
                self._subjects[i] = (until, found[i])
            else:
                self._subjects.pop(i, None)
            if force or i not in found:  # asked again at most every NEGATIVE_TTL_S
                self._missed[i] = now + NEGATIVE_TTL_S
