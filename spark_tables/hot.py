"""Records not tiered yet, from the brokers' public HTTP API (docs/design.md §5).

- `describe`: per partition, the log start and the high watermark (GET /topics/{t}).
- `read_hot`: the records of [start, end) through the fetch API as Arrow batches
  (`Accept: application/vnd.apache.arrow.stream`: the exact bytes, no base64 or JSON).

Any broker answers any partition (it forwards to the leader). `end` is a high watermark
seen at planning time, so every offset below it is committed and stays readable, with one
exception: while the query runs, the tiering worker may tier those records and local
retention may then delete them from the brokers. The broker then answers 416 with its new
log start, and the records below it are read from the cold tier instead (`cold_fallback`),
so the query still sees each record exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc

from logformat.schema import CONSUMER_SCHEMA

if TYPE_CHECKING:
    import httpx

ARROW_STREAM = "application/vnd.apache.arrow.stream"
MAX_FETCH_BYTES = 16 << 20
MAX_FETCH_RECORDS = 100_000
NO_PROGRESS_TRIES = 20  # ~10 s of long polls before a missing committed offset is an error
ColdFallback = Callable[[int, int, int], Iterator[pa.RecordBatch]]  # (partition, lo, hi)


class HotReadError(RuntimeError):
    """The brokers could not serve a planned offset range."""


class PartitionEnds(NamedTuple):
    partition: int
    log_start: int  # first offset of the whole log (hot and cold)
    hot_start: int | None  # first offset on the leader's disk
    high_watermark: int
    last_stable: int  # the last stable offset: committed reads end there (transactions)


def _client(broker_url: str, timeout_s: float, api_key: str | None) -> httpx.Client:
    import httpx  # here: only hot reads need it, and it is slow to import (its CLI extras)

    from http_transport.trust import default_trust

    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(
        base_url=broker_url,
        timeout=httpx.Timeout(timeout_s, connect=5.0),
        headers=headers,
        verify=default_trust(),  # one context per process, not one per call
    )


def describe(broker_url: str, topic: str, api_key: str | None = None) -> dict[int, PartitionEnds]:
    """Log start, high watermark and last stable offset of every partition of `topic`, now
    (a broker that does not say its last stable offset: the high watermark)."""
    with _client(broker_url, 30.0, api_key) as http:
        r = http.get(f"/topics/{quote(topic, safe='')}")
    if r.status_code == 404:
        raise HotReadError(f"topic {topic!r} does not exist ({broker_url})")
    if r.status_code != 200:
        raise HotReadError(f"describe {topic!r} at {broker_url}: HTTP {r.status_code} {r.text}")
    out: dict[int, PartitionEnds] = {}
    for p in r.json()["partitions"]:
        hw = p.get("high_watermark")
        if hw is None:
            raise HotReadError(
                f"{topic}-{p['partition']}: no high watermark (its leader is unreachable)"
            )
        hot = p.get("hot") or {}
        start = p.get("log_start_offset")
        stable = p.get("last_stable_offset")
        out[int(p["partition"])] = PartitionEnds(
            int(p["partition"]),
            int(start if start is not None else 0),
            hot.get("start"),
            int(hw),
            int(stable if stable is not None else hw),
        )
    return out


def read_hot(
    broker_url: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    cold_fallback: ColdFallback,
    api_key: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """CONSUMER_SCHEMA batches of the committed records in [start, end), in offset order."""
    path = f"/topics/{quote(topic, safe='')}/partitions/{partition}/records"
    offset, stalls = start, 0
    with _client(broker_url, 60.0, api_key) as http:
        while offset < end:
            r = http.get(
                path,
                params={
                    "offset": offset,
                    "max_records": min(MAX_FETCH_RECORDS, end - offset),
                    "max_bytes": MAX_FETCH_BYTES,
                    "wait_ms": 500,  # only waits if a new leader's watermark still lags
                },
                headers={"Accept": ARROW_STREAM},
            )
            if r.status_code == 416:
                lso = _log_start(r)
                if lso is None or lso <= offset:
                    raise HotReadError(f"{topic}-{partition} offset {offset}: {r.text}")
                upto = min(lso, end)  # tiered and deleted locally since planning: read cold
                yield from cold_fallback(partition, offset, upto)
                offset = upto
                continue
            if r.status_code != 200:
                raise HotReadError(
                    f"fetch {topic}-{partition} at {offset}: HTTP {r.status_code} {r.text}"
                )
            batch = _batch(r.content)
            next_offset = int(r.headers.get("X-Tierlog-Next-Offset", offset))
            if batch.num_rows:
                batch = _below(batch, end)
                if batch.num_rows:
                    yield batch
            if next_offset <= offset:
                stalls += 1
                if stalls >= NO_PROGRESS_TRIES:
                    raise HotReadError(
                        f"{topic}-{partition}: offset {offset} was committed at planning "
                        f"(planned end {end}) but the leader serves nothing from it"
                    )
                time.sleep(0.05)
                continue
            offset, stalls = next_offset, 0


def _log_start(r: httpx.Response) -> int | None:
    try:
        value = r.json().get("log_start_offset")
    except ValueError:
        return None
    return int(value) if value is not None else None


def _batch(body: bytes) -> pa.RecordBatch:
    table = pa.ipc.open_stream(body).read_all()
    if table.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=CONSUMER_SCHEMA)
    return table.cast(CONSUMER_SCHEMA).combine_chunks().to_batches()[0]


def _below(batch: pa.RecordBatch, end: int) -> pa.RecordBatch:
    offsets = batch.column(0)
    if offsets[-1].as_py() < end:
        return batch
    return batch.filter(pc.less(offsets, end))
