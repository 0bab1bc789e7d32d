"""Frames: round trips, CRC coverage, in-place assignment and torn-tail scanning."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logformat import frame
from logformat.frame import CorruptFrameError, decode_header, decode_records, encode_frame, scan
from logformat.records import MAX_TIMESTAMP_MS, build_batch
from logformat.schema import RECORD_SCHEMA

CODECS = [None, "zstd", "lz4"]

payloads = st.one_of(st.none(), st.binary(max_size=64))
headers = st.one_of(
    st.none(),
    st.lists(st.fixed_dictionaries({"key": st.text(max_size=8), "value": payloads}), max_size=3),
)
records = st.lists(
    st.tuples(payloads, payloads, headers, st.one_of(st.none(), st.integers(0, MAX_TIMESTAMP_MS))),
    min_size=1,
    max_size=20,
)


def make_batch(recs, now_ms=1_700_000_000_000):
    keys, values, hs, ts = (list(c) for c in zip(*recs, strict=True))
    return build_batch(keys, values, hs, ts, now_ms)


def sample_batch(n=5):
    return make_batch(
        [
            (f"k{i}".encode(), b"v" * i if i % 2 else None, [{"key": "h", "value": b"x"}], 1000 + i)
            for i in range(n)
        ]
    )


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=records)
def test_round_trip(codec, recs):
    batch = make_batch(recs)
    buf = encode_frame(
        batch,
        base_offset=7,
        leader_epoch=3,
        producer_id=42,
        producer_epoch=2,
        base_sequence=9,
        compression=codec,
    )
    header = decode_header(buf)
    assert header.size == len(buf)
    assert (header.base_offset, header.leader_epoch, header.record_count) == (7, 3, len(recs))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 2, 9)
    assert header.compression == codec
    ts = batch.column(1).cast(pa.int64()).to_pylist()
    assert header.first_timestamp == ts[0]
    assert header.max_timestamp == max(ts)
    assert header.last_offset == 7 + len(recs) - 1
    out = decode_records(buf)
    assert out.schema.equals(RECORD_SCHEMA)
    assert out.equals(batch)
    assert out.to_pylist() == batch.to_pylist()


def test_unicode_and_tombstones_survive():
    recs = [
        ("ключ".encode(), None, [{"key": "名前", "value": "värde".encode()}], None),
        (None, b"\x00\xff", [{"key": "", "value": None}], 0),
    ]
    batch = make_batch(recs)
    assert decode_records(encode_frame(batch, compression="zstd")).to_pylist() == batch.to_pylist()


def test_default_producer_fields():
    header = decode_header(encode_frame(sample_batch()))
    assert header.producer_id == frame.NO_PRODUCER_ID
    assert header.producer_epoch == frame.NO_PRODUCER_EPOCH
    assert header.base_sequence == frame.NO_SEQUENCE
    assert header.compression is None


@pytest.mark.parametrize("codec", CODECS)
def test_any_flipped_crc_covered_byte_is_detected(codec):
    buf = encode_frame(sample_batch(3), compression=codec)
    # Bytes 16.. are payload_length, crc, the header tail and the payload: all protected.
    for i in range(16, len(buf)):
        for mask in (0x01, 0x80):
            bad = bytearray(buf)
            bad[i] ^= mask
            with pytest.raises(CorruptFrameError):
                decode_records(bad)
            result = scan(bad)
            assert result.frames == [] and result.torn and result.valid_end == 0


def test_bad_magic_is_detected():
    bad = bytearray(encode_frame(sample_batch()))
    bad[0] ^= 0xFF
    with pytest.raises(CorruptFrameError, match="magic"):
        decode_header(bad)


@pytest.mark.parametrize("codec", CODECS)
def test_assign_keeps_crc_valid(codec):
    batch = sample_batch()
    buf = bytearray(encode_frame(batch, compression=codec))
    frame.assign(buf, 123_456_789_000, 17)
    header = decode_header(buf)
    assert (header.base_offset, header.leader_epoch) == (123_456_789_000, 17)
    frame.verify_crc(buf, 0, header)
    assert decode_records(buf).equals(batch)
    # In place inside a larger buffer, through a memoryview, at a position.
    big = bytearray(b"x" * 5) + buf
    frame.assign(memoryview(big), 5, 1, pos=5)
    assert decode_header(big, 5).base_offset == 5
    assert decode_records(big, 5).equals(batch)


def test_decoded_buffers_are_aligned():
    batch = sample_batch()
    buf = encode_frame(batch)
    for pre in range(8):
        out = decode_records(bytes(pre) + buf, pre)
        assert out.equals(batch)
        for col in out.columns:
            assert all(b is None or b.address % 8 == 0 for b in col.buffers())


def _segment(n_frames=4, codec=None):
    frames = [encode_frame(sample_batch(i + 1), compression=codec) for i in range(n_frames)]
    return frames, b"".join(frames)


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_scan_truncated_at_every_byte_of_last_frame(codec):
    frames, buf = _segment(codec=codec)
    last_start = len(buf) - len(frames[-1])
    whole = scan(buf)
    assert not whole.torn and whole.valid_end == len(buf) and len(whole.frames) == len(frames)
    positions = [pos for pos, _ in whole.frames]
    for cut in range(last_start, len(buf)):
        result = scan(buf[:cut])
        assert [pos for pos, _ in result.frames] == positions[:-1]
        assert result.valid_end == last_start
        assert result.torn == (cut != last_start)


def test_scan_stops_at_corrupt_middle_frame_and_from_start():
    frames, buf = _segment()
    bad = bytearray(buf)
    second = len(frames[0])
    bad[second + 70] ^= 0x10
    result = scan(bad)
    assert len(result.frames) == 1 and result.valid_end == second and result.torn
    # verify=False skips CRCs (trusted bytes), so the flip goes unnoticed.
    assert not scan(bad, verify=False).torn
    tail = scan(buf, start=second)
    assert tail.frames[0][0] == second and not tail.torn


def test_iter_headers():
    _frames, buf = _segment()
    got = list(frame.iter_headers(buf))
    assert [h.record_count for _, h in got] == [1, 2, 3, 4]
    with pytest.raises(CorruptFrameError):
        list(frame.iter_headers(buf[:-1]))


def test_empty_batch_wrong_schema_and_codec_rejected():
    with pytest.raises(ValueError, match="at least one"):
        encode_frame(sample_batch().slice(0, 0))
    other = pa.RecordBatch.from_pydict({"key": [b"a"]})
    with pytest.raises(ValueError, match="schema"):
        encode_frame(other)
    with pytest.raises(ValueError, match="codec"):
        encode_frame(sample_batch(), compression="snappy")


def test_short_and_garbage_buffers():
    with pytest.raises(CorruptFrameError, match="short"):
        decode_header(b"TLF1")
    buf = bytearray(encode_frame(sample_batch()))
    buf[26:30] = (0).to_bytes(4, "little")  # record_count 0
    with pytest.raises(CorruptFrameError, match="record count"):
        decode_header(buf)
    assert scan(b"").frames == [] and not scan(b"").torn
    assert scan(b"\x00" * 100).torn


def test_first_corrupt_offset_checks_every_frame_crc_and_offset():
    frames = []
    base = 10
    for n in (2, 3, 4):
        frames.append(encode_frame(sample_batch(n), base_offset=base))
        base += n
    seg = b"".join(bytes(f) for f in frames)
    assert frame.first_corrupt_offset(seg, 10) is None
    assert frame.first_corrupt_offset(seg, 11) == 11  # not dense from the segment's base
    flipped = bytearray(seg)
    flipped[len(frames[0]) + frame.HEADER_SIZE + 5] ^= 0x01  # one bit in the 2nd payload
    assert frame.first_corrupt_offset(flipped, 10) == 12
    moved = bytearray(seg)  # base_offset is outside the CRC: the density check catches it
    frame.assign(moved, 99, 0, pos=len(frames[0]) + len(frames[1]))
    assert frame.first_corrupt_offset(moved, 10) == 15
    assert frame.first_corrupt_offset(seg[:-1], 10) == 15  # cut short
    with pytest.raises(CorruptFrameError) as e:
        decode_records(flipped, len(frames[0]))
    assert e.value.offset is None
