"""Fixtures for the hot-log tests: real files in tmp_path and a real rocksdict index."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from ingest.log.index import LogIndex
from ingest.log.local_log import LocalLog, LogConfig
from ingest.unified.producer_state import ProducerStateManager
from logformat.frame import encode_frame
from logformat.schema import HEADERS, RECORD_SCHEMA, TIMESTAMP

FrameFactory = Callable[..., bytearray]


def make_frame(n: int = 3, ts: int | Sequence[int] = 1_000, value_size: int = 16) -> bytearray:
    """A frame of n records; `ts` is one timestamp for all or one per record."""
    stamps = [ts] * n if isinstance(ts, int) else list(ts)
    assert len(stamps) == n
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(range(n), pa.int32()),
            pa.array(stamps, TIMESTAMP),
            pa.array([b"key-%d" % i for i in range(n)], pa.binary()),
            pa.array([bytes([65 + i % 26]) * value_size for i in range(n)], pa.binary()),
            pa.array([None] * n, HEADERS),
        ],
        schema=RECORD_SCHEMA,
    )
    return bytearray(encode_frame(batch))


class LogEnv:
    """One broker data dir: opens, closes, 'crashes' and reopens a partition log."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.topic, self.topic_id, self.partition = "orders", str(uuid.uuid4()), 0
        self.index = LogIndex(str(root / "index"))
        self.log: LocalLog | None = None

    @property
    def dir(self) -> Path:
        return self.root / f"{self.topic}-{self.partition}"

    def open(self, config: LogConfig | None = None) -> LocalLog:
        self.log = LocalLog.open(
            str(self.dir),
            self.topic,
            self.topic_id,
            self.partition,
            self.index,
            config or LogConfig(),
        )
        return self.log

    def crash(self) -> None:
        """Stop without close(): no clean-shutdown mark; the page cache keeps the files."""
        assert self.log is not None
        for seg in self.log._segs.segments:
            seg.close()
        self.log = None
        self.index.close()
        self.index = LogIndex(str(self.root / "index"))

    def reopen(self, config: LogConfig | None = None, *, clean: bool = True) -> LocalLog:
        if clean:
            assert self.log is not None
            self.log.close()
            self.index.close()
            self.index = LogIndex(str(self.root / "index"))
        else:
            self.crash()
        return self.open(config)

    def segment_files(self) -> list[Path]:
        return sorted(self.dir.glob("*.log"))

    @staticmethod
    def read_all(log: LocalLog, start: int | None = None) -> list[tuple[int, int]]:
        """(base_offset, record_count) of every frame from `start`, following next offsets."""
        out: list[tuple[int, int]] = []
        offset = log.log_start_offset if start is None else start
        while offset < log.log_end_offset:
            frames = log.read(offset, 1 << 20)
            assert frames, offset
            for header, data in frames:
                assert len(data) == header.size
                out.append((header.base_offset, header.record_count))
                offset = header.next_offset
        return out

    def shutdown(self) -> None:
        if self.log is not None:
            self.log.close()
        self.index.close()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[LogEnv]:
    e = LogEnv(tmp_path)
    yield e
    e.shutdown()


@pytest.fixture
def frame() -> FrameFactory:
    return make_frame


@pytest.fixture
def bare(env: LogEnv) -> ProducerStateManager:
    """A producer-state manager of `env`'s partition, with nothing loaded."""
    return ProducerStateManager(env.index, env.topic_id, env.partition)
