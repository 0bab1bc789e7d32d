"""The hot reader against a stand-in broker: clipping at the planned end, and records that
were tiered and deleted from the broker meanwhile read from the cold tier instead."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pyarrow as pa
import pytest

from logformat.schema import CONSUMER_SCHEMA
from spark_tables import hot


def batch(lo: int, hi: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [
            {"offset": o, "timestamp": o, "key": None, "value": b"%d" % o, "headers": None}
            for o in range(lo, hi)
        ],
        schema=CONSUMER_SCHEMA,
    )


class StubBroker:
    """Serves offsets [log_start, hw) three at a time; below log_start answers 416."""

    def __init__(self, log_start: int, hw: int) -> None:
        self.log_start, self.hw = log_start, hw
        broker = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                q = parse_qs(urlparse(self.path).query)
                off = int(q["offset"][0])
                if off < broker.log_start:
                    body = json.dumps(
                        {"error_code": "OFFSET_OUT_OF_RANGE", "log_start_offset": broker.log_start}
                    ).encode()
                    self.send_response(416)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                hi = min(broker.hw, off + 3)
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, CONSUMER_SCHEMA) as w:
                    if hi > off:
                        w.write_batch(batch(off, hi))
                data = sink.getvalue().to_pybytes()
                self.send_response(200)
                self.send_header("X-Tierlog-Next-Offset", str(max(off, hi)))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def offsets(batches: Iterator[pa.RecordBatch]) -> list[int]:
    return [o for b in batches for o in b.column(0).to_pylist()]


def test_reads_up_to_the_planned_end_only() -> None:
    b = StubBroker(0, 20)
    got = offsets(hot.read_hot(b.url, "t", 0, 2, 10, lambda *a: iter(())))
    assert got == list(range(2, 10))
    b.server.shutdown()
    b.server.server_close()


def test_records_deleted_from_the_broker_come_from_the_cold_tier_once() -> None:
    b = StubBroker(log_start=7, hw=12)  # 3..6 were tiered and deleted locally since planning
    asked: list[tuple[int, int, int]] = []

    def cold(p: int, lo: int, hi: int) -> Iterator[pa.RecordBatch]:
        asked.append((p, lo, hi))
        yield batch(lo, hi)

    assert offsets(hot.read_hot(b.url, "t", 1, 3, 12, cold)) == list(range(3, 12))
    assert asked == [(1, 3, 7)]
    b.server.shutdown()
    b.server.server_close()


def test_a_committed_offset_that_never_comes_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hot, "NO_PROGRESS_TRIES", 2)
    b = StubBroker(0, 5)  # planned up to 9, but the broker has only 5
    with pytest.raises(hot.HotReadError, match="serves nothing"):
        offsets(hot.read_hot(b.url, "t", 0, 0, 9, lambda *a: iter(())))
    b.server.shutdown()
    b.server.server_close()
