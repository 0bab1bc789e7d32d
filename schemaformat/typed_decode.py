"""A batch of record values → one typed struct column and an error column (docs/lake-tables.md).

Modes (the topic config `lake.mode`): `value_schema_id_prefix` decodes each value with the
schema its Confluent prefix names; `value_schema_latest` decodes values without a prefix with
the latest schema of the topic's value subject. A value that does not decode (no magic byte,
an unknown id, truncated, not what its schema says, a type the table cannot hold) gets a null
struct and the reason in the error column; a null value (a tombstone) gets neither.

Evolution: `plan` merges the types of the schemas a batch uses into the table's type
(schemaformat/arrow_merge.py); a schema whose type cannot merge is refused for that batch, so
its records carry the conflict as their error and the table stays as it was.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemaformat.arrow_merge import TypeConflict, merge
from schemaformat.arrow_types import (
    JSON_TEXT,
    UnsupportedSchema,
    avro_struct,
    json_struct,
    protobuf_struct,
)
from schemaformat.arrow_values import conform, proto_value
from schemaformat.avro_arrow import AvroColumnDecoder
from schemaformat.base import ParsedSchema
from schemaformat.wire import WireFormatError, decode_indexes, prefix_ids, unframe

ID_PREFIX, LATEST = "value_schema_id_prefix", "value_schema_latest"
TYPED_MODES = (ID_PREFIX, LATEST)
TYPED_COLUMNS = ("value_typed", "value_error")  # the typed struct, and why a value has none


class SchemaLookup(Protocol):
    """Where schemas come from: the registry's store, or its REST API."""

    def schema(self, schema_id: int) -> ParsedSchema:
        """The schema under the id; LookupError (with a message) if there is none."""
        ...

    def latest_id(self) -> int | None:
        """The id of the latest version of the topic's value subject (None: no subject)."""
        ...


class ValueReader:
    """One schema's column type and the decoding of its values (after the id prefix)."""

    def __init__(self, schema: ParsedSchema) -> None:
        self.schema_type = schema.schema_type
        self.arrow_ready = False  # values need conform() to be Arrow's
        self.native: AvroColumnDecoder | None = None  # decodes a whole column at once
        if schema.schema_type == "AVRO":
            import fastavro

            avro_schema = getattr(schema, "schema")  # noqa: B009 (AvroSchema's own)
            self._avro = fastavro.parse_schema(avro_schema.to_json())
            self.struct = avro_struct(avro_schema)
            self._wrap = not _is_record(avro_schema.to_json())
            self.native = AvroColumnDecoder.for_schema(avro_schema.to_json())
            # fastavro's values are what Arrow takes for these types, except uuids, times of
            # day and values kept as JSON text: without those, conforming is Arrow's job.
            text = schema.text()
            self.arrow_ready = not _has_json_text(self.struct) and not any(
                t in text for t in ('"uuid"', '"time-millis"', '"time-micros"')
            )
        elif schema.schema_type == "PROTOBUF":
            self._message = getattr(schema, "message_class")([0])  # noqa: B009
            self.struct = protobuf_struct(self._message.DESCRIPTOR)
            self._wrap = False
        elif schema.schema_type == "JSON":
            document, documents = getattr(schema, "document"), getattr(schema, "documents")  # noqa: B009
            self.struct = json_struct(document, documents)
            self._wrap = self.struct.names == ["value"] and not _is_object(document)
        else:
            raise UnsupportedSchema(f"no column type for {schema.schema_type} schemas")

    def read(self, body: bytes, framed: bool) -> Any:
        value = self._read(body, framed)
        return {"value": value} if self._wrap else value

    def _read(self, body: bytes, framed: bool) -> Any:
        if self.schema_type == "AVRO":
            import fastavro

            source = io.BytesIO(body)
            try:
                value = fastavro.schemaless_reader(source, self._avro, None)
            except (ValueError, TypeError, IndexError, EOFError, KeyError) as error:
                raise WireFormatError(f"the Avro payload does not decode: {error}") from None
            if source.tell() != len(body):
                raise WireFormatError(f"{len(body) - source.tell()} bytes follow the Avro value")
            return value
        if self.schema_type == "PROTOBUF":
            return self._read_protobuf(body, framed)
        try:
            return json.loads(body)
        except ValueError as error:
            raise WireFormatError(f"the JSON payload is not JSON: {error}") from None

    def _read_protobuf(self, body: bytes, framed: bool) -> Any:
        from google.protobuf.message import DecodeError

        if framed:
            indexes, body = decode_indexes(body)
            if indexes != [0]:
                raise WireFormatError(
                    f"message indexes {indexes}: the table types the schema's first message"
                )
        message = self._message()
        try:
            message.ParseFromString(body)
        except DecodeError as error:
            raise WireFormatError(f"the Protobuf payload does not decode: {error}") from None
        return proto_value(message)


def _has_json_text(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return any(f.metadata == JSON_TEXT or _has_json_text(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_map(t):
        return _has_json_text(t.value_field.type if pa.types.is_list(t) else t.item_type) or (
            (t.value_field if pa.types.is_list(t) else t.item_field).metadata == JSON_TEXT
        )
    return False


def _is_record(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("type") == "record"


def _is_object(doc: Any) -> bool:
    return isinstance(doc, dict) and (doc.get("type") == "object" or "properties" in doc)


class Plan(NamedTuple):
    """The struct a batch is written with, and why each refused schema id was refused."""

    struct: pa.StructType | None  # None: no schema decodes anything in the batch
    refused: dict[int, str]
    latest: int | None = None  # value_schema_latest: the id every value is decoded with


class Typed(NamedTuple):
    typed: pa.Array  # StructArray of the plan's struct (all null without one)
    errors: pa.Array  # string: why a value has no typed struct
    reasons: Counter[str]  # errors by kind, for the metric


class TypedDecoder:
    """Decodes the values of one topic; caches a reader per schema id (an id names one
    schema forever). Not thread-safe: one per encoding thread or topic."""

    def __init__(self, mode: str, lookup: SchemaLookup) -> None:
        if mode not in TYPED_MODES:
            raise ValueError(f"lake.mode {mode!r} has no typed column")
        self.mode, self.lookup = mode, lookup
        self._readers: dict[int, ValueReader | str] = {}  # or why there is none

    def reader(self, schema_id: int) -> ValueReader | str:
        hit = self._readers.get(schema_id)
        if hit is None:
            try:
                hit = ValueReader(self.lookup.schema(schema_id))
            except LookupError as error:
                hit = f"schema id {schema_id}: {error.args[0] if error.args else 'unknown'}"
            except UnsupportedSchema as error:
                hit = f"schema id {schema_id} has no column type: {error}"
            self._readers[schema_id] = hit
        return hit

    def schema_ids(self, values: pa.Array, prefixed: np.ndarray | None = None) -> set[int]:
        """The schema ids a batch's values use (cheap: no value is decoded); `prefixed` is
        `prefix_ids(values)` when the caller has it."""
        if self.mode == LATEST:
            latest = self.lookup.latest_id()
            return set() if latest is None else {latest}
        ids = prefix_ids(values) if prefixed is None else prefixed
        if len(ids) and ids[0] >= 0 and (ids == ids[0]).all():  # the common case: one id
            return {int(ids[0])}
        return {int(i) for i in np.unique(ids[ids >= 0])}

    def plan(self, table: pa.StructType | None, ids: Iterable[int]) -> Plan:
        """Merge the ids' types, oldest id first, into the table's typed column type."""
        struct, refused = table, {}
        ids = sorted(ids)
        for schema_id in ids:
            reader = self.reader(schema_id)
            if isinstance(reader, str):
                continue  # its records carry the reason
            try:
                struct = reader.struct if struct is None else merge(struct, reader.struct)
            except TypeConflict as error:
                refused[schema_id] = f"schema id {schema_id} does not fit the table: {error}"
        latest = ids[-1] if self.mode == LATEST and ids else None
        return Plan(struct if isinstance(struct, pa.StructType) else None, refused, latest)

    def decode(self, values: pa.Array, plan: Plan, prefixed: np.ndarray | None = None) -> Typed:
        """The typed and error columns of a batch: values whose schema has a native decoder
        decoded a column at a time (schemaformat/avro_arrow.py), the rest one by one.
        `prefixed` is `prefix_ids(values)` when the caller has it."""
        done: list[tuple[np.ndarray, pa.Array]] = []  # (rows, their typed values)
        slow = np.ones(len(values), dtype=bool)
        if plan.struct is not None:
            skip = 5 if self.mode == ID_PREFIX else 0  # the wire-format prefix
            for rows, native in self._native_groups(values, plan, prefixed):
                got = native.decode(values, rows, skip, plan.struct)
                if got is not None:
                    typed, right = got
                    if right.all():  # the common case: no row needs the per-value decoder
                        done.append((rows, typed))
                    else:
                        done.append((rows[right], typed.filter(pa.array(right))))
                    slow[done[-1][0]] = False
        if not done:
            return self._decode_each(values, plan)
        slow_rows = np.flatnonzero(slow)
        if not len(slow_rows) and len(done) == 1:  # rows already in order, and no errors
            return Typed(done[0][1], pa.nulls(len(values), pa.string()), Counter())
        rest = self._decode_each(values.take(pa.array(slow_rows)), plan)
        # Errors only ever come from the per-value decoder: its rows' errors, in row order.
        errors = pc.replace_with_mask(
            pa.nulls(len(values), pa.string()), pa.array(slow), rest.errors
        )
        order = np.concatenate([slow_rows, *(rows for rows, _ in done)])
        where = np.empty(len(values), dtype=np.int64)
        where[order] = np.arange(len(values))
        parts = pa.concat_arrays([rest.typed, *(typed for _, typed in done)])
        return Typed(parts.take(pa.array(where)), errors, rest.reasons)

    def _native_groups(
        self, values: pa.Array, plan: Plan, prefixed: np.ndarray | None
    ) -> Iterable[tuple[np.ndarray, AvroColumnDecoder]]:
        """(rows, the decoder) per schema id whose values decode natively."""
        if self.mode == LATEST:
            if plan.latest is None:
                return
            valid = values.is_valid().to_numpy(zero_copy_only=False)
            groups = [(plan.latest, np.flatnonzero(valid))]
        else:
            ids = prefix_ids(values) if prefixed is None else prefixed
            found = self.schema_ids(values, ids)
            if len(found) == 1 and ids.min() >= 0:  # every value of one id
                groups = [(found.pop(), np.arange(len(values)))]
            else:
                groups = [(i, np.flatnonzero(ids == i)) for i in found]
        for schema_id, rows in groups:
            reader = self.reader(schema_id)
            if isinstance(reader, str) or reader.native is None or schema_id in plan.refused:
                continue
            if len(rows):
                yield rows, reader.native

    def _decode_each(self, values: pa.Array, plan: Plan) -> Typed:
        rows: list[Any] = []
        errors: list[str | None] = []
        reasons: Counter[str] = Counter()
        raw: list[tuple[int, int]] = []  # (row, schema id) of rows not conformed yet
        top = pa.field("", plan.struct) if plan.struct is not None else None
        for value in values.to_pylist():
            row, error, reason, schema_id = self._one(value, plan, top)
            if schema_id is not None:
                raw.append((len(rows), schema_id))
            rows.append(row)
            errors.append(error)
            if reason:
                reasons[reason] += 1
        struct = plan.struct if plan.struct is not None else pa.struct([])
        try:
            typed = pa.array(rows, struct)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            # A row Arrow refused (a fast-path row, or a decimal wider than its precision):
            # each row checked alone, so only the bad ones lose their typed value.
            self._refit(rows, errors, reasons, dict(raw), top)
            typed = pa.array(rows, struct)
        return Typed(typed, pa.array(errors, pa.string()), reasons)

    @staticmethod
    def _refit(
        rows: list[Any],
        errors: list[str | None],
        reasons: Counter[str],
        raw: dict[int, int],
        top: pa.Field | None,
    ) -> None:
        assert top is not None  # rows with values imply a struct
        for i, row in enumerate(rows):
            if row is None:
                continue
            try:
                fitted = conform(row, top) if i in raw else row
                pa.array([fitted], top.type)
                rows[i] = fitted
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as error:
                where = f"schema id {raw[i]}: " if i in raw else ""
                rows[i], errors[i] = None, f"{where}the value does not fit its column: {error}"
                reasons["decode"] += 1

    def _one(
        self, value: bytes | None, plan: Plan, top: pa.Field | None
    ) -> tuple[Any, str | None, str, int | None]:
        """(row, error, reason, the schema id when the row is left for Arrow to convert)."""
        if value is None:
            return None, None, "", None
        try:
            if self.mode == ID_PREFIX:
                framed = unframe(value)
                schema_id, body = framed.schema_id, framed.body
            elif plan.latest is None:
                return None, "the topic's value subject has no schema", "unknown_schema", None
            else:
                schema_id, body = plan.latest, value
        except WireFormatError as error:
            return None, str(error), "no_schema_id", None
        if schema_id in plan.refused:
            return None, plan.refused[schema_id], "type_conflict", None
        reader = self.reader(schema_id)
        if isinstance(reader, str):
            return None, reader, "unknown_schema", None
        if top is None:
            return None, "no schema of the batch has a column type", "unknown_schema", None
        try:
            value = reader.read(body, self.mode == ID_PREFIX)
            if reader.arrow_ready:  # Arrow converts it as it is (checked per batch)
                return value, None, "", schema_id
            return conform(value, top), None, "", None
        except (WireFormatError, ValueError) as error:
            return None, f"schema id {schema_id}: {error}", "decode", None
