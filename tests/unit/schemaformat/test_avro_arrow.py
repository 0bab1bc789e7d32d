"""A column of Avro values decoded at once (schemaformat/avro_arrow.py) gives what decoding
each value gives, keeps each row to its own bytes, and leaves what it cannot read to the
per-value decoder."""

from __future__ import annotations

import datetime
import io
import json
import random
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa

from schemaformat.avro_arrow import AvroColumnDecoder
from schemaformat.base import ParsedSchema
from schemaformat.kinds import kinds
from schemaformat.typed_decode import ID_PREFIX, LATEST, TypedDecoder
from schemaformat.wire import frame

LINE = {
    "type": "record",
    "name": "Line",
    "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "small", "type": "int"},
        {"name": "ok", "type": "boolean"},
        {"name": "ratio", "type": "float"},
        {"name": "amount", "type": "double"},
        {"name": "who", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "note", "type": ["null", "string"]},
        {"name": "rank", "type": ["long", "null"]},
        {"name": "lines", "type": {"type": "array", "items": LINE}},
        {"name": "tags", "type": ["null", {"type": "array", "items": "string"}]},
        {"name": "state", "type": {"type": "enum", "name": "S", "symbols": ["NEW", "PAID", "X"]}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {
            "name": "ship",
            "type": {
                "type": "record",
                "name": "Ship",
                "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "long"}],
            },
        },
    ],
}
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
SMALL = {
    "type": "record",
    "name": "Small",
    "fields": [{"name": "n", "type": "long"}, {"name": "s", "type": "string"}],
}


class Lookup:
    def __init__(self, schemas: dict[int, dict[str, Any]], latest: int | None = None) -> None:
        self.schemas = {i: kinds()["AVRO"].parse(json.dumps(d), {}) for i, d in schemas.items()}
        self.latest = latest

    def schema(self, schema_id: int) -> ParsedSchema:
        if schema_id not in self.schemas:
            raise LookupError("not registered")
        return self.schemas[schema_id]

    def latest_id(self) -> int | None:
        return self.latest


def encode(doc: dict[str, Any], value: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(doc), value)
    return out.getvalue()


def order(rng: random.Random, i: int) -> dict[str, Any]:
    return {
        "id": rng.choice([0, -1, 63, -64, 64, 2**62, -(2**63), 2**63 - 1, i]),
        "small": rng.choice([0, -(2**31), 2**31 - 1, i]),
        "ok": i % 2 == 0,
        "ratio": rng.choice([0.5, -2.25, 1024.0]),
        "amount": rng.uniform(-1e9, 1e9),
        "who": rng.choice(["", "Zoë", "東京", "x" * 200]),
        "raw": bytes(rng.randrange(256) for _ in range(rng.randrange(0, 140))),
        "note": rng.choice([None, "", "gift"]),
        "rank": rng.choice([None, 7, -(2**40)]),
        "lines": [{"sku": f"s{j}", "qty": j - 1} for j in range(rng.randrange(0, 4))],
        "tags": rng.choice([None, [], ["a"], ["b"] * 70]),
        "state": rng.choice(["X", "PAID", "NEW"]),
        "at": EPOCH + datetime.timedelta(milliseconds=rng.randrange(-(2**41), 2**41)),
        "at_us": rng.choice([None, EPOCH + datetime.timedelta(microseconds=i * 10**9 + 7)]),
        "day": datetime.date(1900, 1, 1) + datetime.timedelta(days=rng.randrange(0, 70_000)),
        "ship": {"city": rng.choice(["Oslo", "Lima"]), "zip": i * 1000},
    }


def decode(decoder: TypedDecoder, values: list[bytes | None]) -> tuple[list[Any], list[Any]]:
    array = pa.array(values, pa.binary())
    plan = decoder.plan(None, decoder.schema_ids(array))
    typed = decoder.decode(array, plan)
    return typed.typed.to_pylist(), typed.errors.to_pylist()


def test_a_column_decodes_to_the_values_produced_for_every_type_it_takes() -> None:
    rng = random.Random(29)
    orders = [order(rng, i) for i in range(400)]
    decoder = TypedDecoder(ID_PREFIX, Lookup({1: ORDER}))
    reader = decoder.reader(1)
    assert not isinstance(reader, str) and reader.native is not None  # the native path
    bodies = pa.array([encode(ORDER, o) for o in orders])
    native = reader.native.decode(bodies, np.arange(len(orders)), 0, reader.struct)
    assert native is not None and native[1].all()  # every row decoded by the column decoder
    rows, errors = decode(decoder, [frame(1, encode(ORDER, o)) for o in orders])
    assert errors == [None] * len(orders)
    assert rows == orders


def test_a_body_with_a_neighbours_bytes_is_not_taken_for_that_value() -> None:
    # The two bodies together are exactly two valid values, split in the wrong place: read as
    # one block they decode to both values; only the size check sees neither row is its own.
    a, b = encode(SMALL, {"n": 1, "s": "ab"}), encode(SMALL, {"n": 5, "s": "xyz"})
    good = encode(SMALL, {"n": 2, "s": "ok"})
    decoder = TypedDecoder(ID_PREFIX, Lookup({1: SMALL}))
    values = [frame(1, good), frame(1, a + b[:2]), frame(1, b[2:]), frame(1, good)]
    rows, errors = decode(decoder, list(values))
    assert rows == [{"n": 2, "s": "ok"}, None, None, {"n": 2, "s": "ok"}]
    assert "2 bytes follow the Avro value" in errors[1]
    assert errors[2] is not None and errors[0] is None and errors[3] is None


def test_bad_values_in_a_column_cost_only_their_own_rows() -> None:
    decoder = TypedDecoder(ID_PREFIX, Lookup({1: SMALL, 2: ORDER}))
    rng = random.Random(7)
    values: list[bytes | None] = []
    expected: list[Any] = []
    for i in range(60):
        if i % 3:
            o = order(rng, i)
            values.append(frame(2, encode(ORDER, o)))
            expected.append(o)
        else:
            values.append(frame(1, encode(SMALL, {"n": i, "s": "s"})))
            expected.append({"n": i, "s": "s"})
    bad = {
        10: frame(1, b"\x02\x04\xff\xfe"),  # not UTF-8
        11: frame(2, encode(ORDER, order(rng, 0))[:-3]),  # truncated
        12: b"no prefix",
        13: None,  # a tombstone
        14: frame(3, b"\x00"),  # an unknown id
    }
    for row, value in bad.items():
        values[row], expected[row] = value, None
    rows, errors = decode(decoder, values)
    # neighbours keep their values, in order across schema ids; the table's struct has both
    # schemas' fields, a row's other schema's fields are null
    names = ["n", "s", *(f["name"] for f in ORDER["fields"])]
    assert rows == [None if e is None else {n: e.get(n) for n in names} for e in expected]
    assert [i for i, e in enumerate(errors) if e is not None] == [10, 11, 12, 14]


def test_latest_mode_decodes_unprefixed_values_as_a_column() -> None:
    decoder = TypedDecoder(LATEST, Lookup({4: SMALL}, latest=4))
    values = [encode(SMALL, {"n": i, "s": str(i)}) for i in range(5)]
    rows, errors = decode(decoder, [*values, None, b"\x02"])
    assert rows == [{"n": i, "s": str(i)} for i in range(5)] + [None, None]
    assert errors[5] is None and errors[6] is not None


def test_schemas_the_size_check_cannot_follow_keep_the_per_value_decoder() -> None:
    for field_type in (
        {"type": "map", "values": "long"},
        {"type": "string", "logicalType": "uuid"},
        {"type": "long", "logicalType": "local-timestamp-millis"},
        ["null", "long", "string"],
    ):
        doc = {"type": "record", "name": "R", "fields": [{"name": "f", "type": field_type}]}
        assert AvroColumnDecoder.for_schema(doc) is None, field_type
    assert AvroColumnDecoder.for_schema({"type": "array", "items": "long"}) is None


def _fastavro(doc: dict[str, Any], body: bytes) -> Any:
    """fastavro's value of exactly these bytes, or None if they are not one value."""
    source = io.BytesIO(body)
    try:
        value = fastavro.schemaless_reader(source, fastavro.parse_schema(doc), None)
    except Exception:  # whatever a mangled body makes fastavro raise
        return None
    return value if source.tell() == len(body) else None


def test_a_row_the_column_decoder_takes_is_what_fastavro_reads_from_its_own_bytes() -> None:
    # Mangled bodies (bytes flipped, cut, doubled, spliced from a neighbour): every row the
    # column decoder calls right must be one value, read from exactly its bytes, as fastavro
    # reads it; good rows beside bad ones stay right.
    rng = random.Random(5)
    decoder = TypedDecoder(ID_PREFIX, Lookup({1: ORDER}))
    reader = decoder.reader(1)
    assert not isinstance(reader, str) and reader.native is not None
    bodies = [encode(ORDER, order(rng, i)) for i in range(600)]
    for i in range(0, 600, 3):
        b = bytearray(bodies[i])
        cut = rng.randrange(len(b))
        match i % 4:
            case 0:
                b[cut] = rng.randrange(256)
            case 1:
                del b[cut:]
            case 2:
                b += bodies[i + 1][: rng.randrange(1, 9)]
            case _:
                b = b[:cut] + bytearray(bodies[i + 1][cut:])
        bodies[i] = bytes(b)
    got = reader.native.decode(pa.array(bodies), np.arange(600), 0, reader.struct)
    assert got is not None
    typed, right = got
    untouched = [i for i in range(600) if i % 3]
    assert right[untouched].all()
    rows = typed.filter(pa.array(right)).to_pylist()  # wrong rows may hold anything
    for i, row in zip(np.flatnonzero(right), rows, strict=True):
        assert row == _fastavro(ORDER, bodies[i]), i
    assert not right.all()  # some mangled bodies were caught by the column decoder itself


def _long(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    return bytes(out + bytes([z]))


def test_arrays_in_several_blocks_and_blocks_with_their_size() -> None:
    # Avro lets a writer split an array into blocks, and give a block's byte size with a
    # negative count (Java's buffered encoders do); fastavro's writer never does.
    doc = {
        "type": "record",
        "name": "A",
        "fields": [{"name": "xs", "type": {"type": "array", "items": "string"}}],
    }

    def s(text: str) -> bytes:
        return _long(len(text)) + text.encode()

    sized = s("b") + s("cc")
    bodies = [
        _long(1) + s("a") + _long(-2) + _long(len(sized)) + sized + _long(0),
        _long(0),
        _long(2) + s("x") + s("y") + _long(1) + s("z") + _long(0),
    ]
    decoder = TypedDecoder(LATEST, Lookup({1: doc}, latest=1))
    reader = decoder.reader(1)
    assert not isinstance(reader, str) and reader.native is not None
    got = reader.native.decode(pa.array(bodies), np.arange(3), 0, reader.struct)
    assert got is not None and got[1].all()
    assert got[0].to_pylist() == [{"xs": ["a", "b", "cc"]}, {"xs": []}, {"xs": ["x", "y", "z"]}]
    assert [_fastavro(doc, b) for b in bodies] == got[0].to_pylist()
    # A block count of -2**63 (its size would follow) has no positive count: the row is
    # wrong, and its neighbours are not.
    bad = [bodies[0], _long(-(2**63)) + _long(1) + s("a") + _long(0), bodies[2]]
    got = reader.native.decode(pa.array(bad), np.arange(3), 0, reader.struct)
    assert got is not None and got[1].tolist() == [True, False, True]


# Items of every kind inside arrays (their places are written per step, or reordered):
# nullable items, arrays of arrays, records with nullable fields, enums, flags, floats,
# timestamps and dates, and strings that are not ASCII.
ITEM = {
    "type": "record",
    "name": "Item",
    "fields": [
        {"name": "name", "type": ["null", "string"]},
        {"name": "sizes", "type": {"type": "array", "items": "int"}},
    ],
}
NESTED = {
    "type": "record",
    "name": "Nested",
    "fields": [
        {"name": "maybe", "type": {"type": "array", "items": ["null", "string"]}},
        {"name": "grid", "type": {"type": "array", "items": {"type": "array", "items": "long"}}},
        {"name": "items", "type": {"type": "array", "items": ["null", ITEM]}},
        {"name": "flags", "type": {"type": "array", "items": "boolean"}},
        {"name": "ratios", "type": {"type": "array", "items": "float"}},
        {"name": "states", "type": {"type": "array", "items": ORDER["fields"][11]["type"]}},
        {
            "name": "days",
            "type": {"type": "array", "items": {"type": "int", "logicalType": "date"}},
        },
        {
            "name": "ats",
            "type": {
                "type": "array",
                "items": {"type": "long", "logicalType": "timestamp-millis"},
            },
        },
        {"name": "raws", "type": {"type": "array", "items": "bytes"}},
    ],
}


def nested(rng: random.Random) -> dict[str, Any]:
    def some(make: Any, most: int = 4) -> list[Any]:
        return [make() for _ in range(rng.choice([0, 1, 1, 2, most]))]

    def item() -> dict[str, Any] | None:
        name = rng.choice([None, "", "bolt", "Zoë", "東京"])
        return rng.choice([None, {"name": name, "sizes": some(lambda: rng.randrange(-9, 9))}])

    return {
        "maybe": some(lambda: rng.choice([None, "x", "ñ", ""]), 7),
        "grid": some(lambda: some(lambda: rng.choice([0, -1, 2**40, -(2**63)]), 5)),
        "items": some(item, 5),
        "flags": some(lambda: rng.random() < 0.5),
        "ratios": some(lambda: rng.choice([0.5, -2.25, 1024.0])),
        "states": some(lambda: rng.choice(["X", "PAID", "NEW"])),
        "days": some(lambda: datetime.date(1970, 1, 1) + datetime.timedelta(rng.randrange(-9, 9))),
        "ats": some(lambda: EPOCH + datetime.timedelta(milliseconds=rng.randrange(2**41))),
        "raws": some(lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(4)))),
    }


def test_items_of_every_kind_in_arrays_are_what_fastavro_reads() -> None:
    rng = random.Random(11)
    decoder = TypedDecoder(LATEST, Lookup({1: NESTED}, latest=1))
    reader = decoder.reader(1)
    assert not isinstance(reader, str) and reader.native is not None
    values = [nested(rng) for _ in range(500)]
    bodies = [encode(NESTED, v) for v in values]
    got = reader.native.decode(pa.array(bodies), np.arange(500), 0, reader.struct)
    assert got is not None and got[1].all()
    assert got[0].type == reader.struct  # the schema's table type
    assert got[0].to_pylist() == values
    # Mangled bodies, as for ORDER above: a row called right is fastavro's value of its bytes.
    for i in range(0, 500, 2):
        b = bytearray(bodies[i])
        cut = rng.randrange(len(b))
        if i % 4:
            b[cut] = rng.randrange(256)
        else:
            b = b[:cut] + bytearray(bodies[i + 1][cut:])
        bodies[i] = bytes(b)
    got = reader.native.decode(pa.array(bodies), np.arange(500), 0, reader.struct)
    assert got is not None
    typed, right = got
    assert right[1::2].all()
    rows = typed.filter(pa.array(right)).to_pylist()
    for i, row in zip(np.flatnonzero(right), rows, strict=True):
        assert row == _fastavro(NESTED, bodies[i]), i
    assert not right.all()


def test_a_string_in_an_array_that_is_not_utf8_fails_its_row_alone() -> None:
    doc = {
        "type": "record",
        "name": "A",
        "fields": [{"name": "xs", "type": {"type": "array", "items": "string"}}],
    }
    good = encode(doc, {"xs": ["ok", "Zoë"]})
    bad = _long(2) + _long(1) + b"a" + _long(2) + b"\xff\xfe" + _long(0)
    decoder = TypedDecoder(LATEST, Lookup({1: doc}, latest=1))
    reader = decoder.reader(1)
    assert not isinstance(reader, str) and reader.native is not None
    got = reader.native.decode(pa.array([good, bad, good]), np.arange(3), 0, reader.struct)
    assert got is not None and got[1].tolist() == [True, False, True]
    assert got[0].filter(pa.array(got[1])).to_pylist() == [{"xs": ["ok", "Zoë"]}] * 2


def test_a_body_cut_at_the_end_of_the_buffer_fails_its_row_alone() -> None:
    # The buffer is read in place: reads past the last body's end go past the buffer's end
    # (a float's 8 bytes, a varint's continuation bytes); they fail that row, nothing else.
    doc = {
        "type": "record",
        "name": "F",
        "fields": [{"name": "n", "type": "long"}, {"name": "x", "type": "double"}],
    }
    good = encode(doc, {"n": 300, "x": 2.5})
    decoder = TypedDecoder(LATEST, Lookup({1: doc}, latest=1))
    reader = decoder.reader(1)
    assert not isinstance(reader, str) and reader.native is not None
    for last in (good[:-3], good[:1], b"\xff\xff", b"\x80"):
        bodies = pa.array([good, good, last])
        assert bodies.buffers()[2].size == 2 * len(good) + len(last)
        got = reader.native.decode(bodies, np.arange(3), 0, reader.struct)
        assert got is not None and got[1].tolist() == [True, True, False], last
        assert got[0][:2].to_pylist() == [{"n": 300, "x": 2.5}] * 2
