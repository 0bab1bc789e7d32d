"""The log cleaner never launders a corrupt frame: rewriting would give it a valid CRC."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.cleaner.log_cleaner import LogCleaner
from logformat.frame import HEADER_SIZE, CorruptFrameError, decode_header
from tests.unit.ingest.conftest import LogEnv
from tests.unit.ingest.test_ingest_log_cleaner import COMPACT, NOW, fill, small


def test_a_corrupt_frame_stops_the_clean_and_is_not_rewritten(env: LogEnv) -> None:
    log = small(env)
    fill(log, 200, keys=5)
    first = log.segments()[0]
    with open(first.path, "r+b") as f:
        data = bytearray(f.read())
        h = decode_header(data, 0)
        pos = h.size  # the second frame
        data[pos + HEADER_SIZE + 3] ^= 0x10
        f.seek(0)
        f.write(data)
    before = Path(first.path).read_bytes()
    with pytest.raises(CorruptFrameError) as e:
        LogCleaner().clean(log, COMPACT, log.log_end_offset, now_ms=NOW, force=True)
    assert e.value.offset == decode_header(data, pos).base_offset
    assert Path(log.segments()[0].path).read_bytes() == before  # left as it was
