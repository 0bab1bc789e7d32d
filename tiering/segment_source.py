"""Copy a sealed segment from an in-sync replica to a local temp file (docs/design.md §2, §4).

Which replica: an alive in-sync follower first (tiering then costs the leader nothing), the
leader last. Replicas roll their segments independently, so a follower's segment with the same
base offset may end elsewhere: the download is accepted only if its size is exactly the size
the leader registered, else the next replica is tried. So is it when a frame of the copy fails
its CRC check: the replica refuses to serve a copy it finds corrupt (503), and the worker
checks every frame of what it received too, so a bad copy costs one attempt, not a backoff.

The body is streamed to disk, never held in memory: segments are up to segment.bytes (1 GiB).
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

import httpx
from sqlalchemy.engine import Engine

from cluster.internal_http import (
    internal_client,
)
from logformat.frame import first_corrupt_offset
from metadata.brokers import BrokerRepo
from metadata.partition_state import PartitionStateRepo
from metadata.segment_registry import SegmentClaim
from metadata.topics import TopicRepo
from metadata.types import BrokerRegistration, PartitionRecord

log = logging.getLogger(__name__)
_CHUNK = 1 << 20


class SegmentUnavailableError(RuntimeError):
    """No in-sync replica could serve the segment with the expected size."""


class Downloaded(NamedTuple):
    path: Path
    broker_id: int
    size: int


def replica_order(
    part: PartitionRecord, brokers: list[BrokerRegistration]
) -> list[BrokerRegistration]:
    """Alive in-sync replicas to download from: followers first, then the leader."""
    alive = {b.id: b for b in brokers if b.alive}
    followers = [alive[i] for i in part.isr if i != part.leader and i in alive]
    leader = [alive[part.leader]] if part.leader is not None and part.leader in alive else []
    return followers + leader


def segment_path(topic: str, partition: int, base_offset: int) -> str:
    return f"/internal/topics/{topic}/partitions/{partition}/segments/{base_offset}"


def _first_corrupt(path: Path, size: int, base_offset: int) -> int | None:
    """Offset of the first frame of the file that fails its CRC or offset check."""
    if size == 0:
        return None
    with (
        open(path, "rb") as f,
        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m,
        memoryview(m) as view,
    ):
        return first_corrupt_offset(view, base_offset)


class SegmentSource:
    """Thread-safe: httpx clients are; the cluster secret is read once (it never changes)."""

    def __init__(self, engine: Engine, *, timeout_s: float = 60.0) -> None:
        self.topics = TopicRepo(engine)
        self.brokers = BrokerRepo(engine)
        self._secret = PartitionStateRepo(engine).cluster_secret()
        # Connect/read timeouts per chunk, not for the whole body: big segments take a while.
        self.http = internal_client(lambda: self._secret, httpx.Timeout(timeout_s, connect=5.0))

    def close(self) -> None:
        self.http.close()

    def download(self, claim: SegmentClaim, dest_dir: str | os.PathLike[str]) -> Downloaded:
        """Stream the claimed segment into a new file in `dest_dir` (the caller deletes it)."""
        parts = [p for p in self.topics.partitions(claim.topic) if p.partition == claim.partition]
        if not parts or parts[0].topic_id != claim.topic_id:
            raise SegmentUnavailableError(f"{claim.topic}-{claim.partition} no longer exists")
        candidates = replica_order(parts[0], self.brokers.list())
        errors: list[str] = []
        for broker in candidates:
            try:
                return self._fetch(broker, claim, dest_dir)
            except (httpx.HTTPError, OSError, SegmentUnavailableError) as exc:
                errors.append(f"broker {broker.id}: {exc}")
                log.warning(
                    "segment download failed, trying the next replica",
                    extra={
                        "topic": claim.topic,
                        "partition": claim.partition,
                        "base_offset": claim.base_offset,
                        "broker": broker.id,
                        "error": str(exc),
                    },
                )
        raise SegmentUnavailableError(
            f"{claim.topic}-{claim.partition} segment {claim.base_offset}: "
            + ("; ".join(errors) or "no alive in-sync replica")
        )

    def _fetch(
        self, broker: BrokerRegistration, claim: SegmentClaim, dest_dir: str | os.PathLike[str]
    ) -> Downloaded:
        url = broker.url.rstrip("/") + segment_path(claim.topic, claim.partition, claim.base_offset)
        fd, name = tempfile.mkstemp(prefix=f"seg-{claim.base_offset}-", dir=dest_dir)
        path, size = Path(name), 0
        try:
            with (
                os.fdopen(fd, "wb") as out,
                self.http.stream(
                    "GET",
                    url,
                    params={"end_offset": claim.end_offset},  # other boundaries: 404
                ) as r,
            ):
                if r.status_code != 200:
                    r.read()
                    raise SegmentUnavailableError(f"HTTP {r.status_code}: {r.text[:200]}")
                for chunk in r.iter_bytes(_CHUNK):
                    size += len(chunk)
                    if size > claim.size_bytes:
                        break  # a longer segment (rolled later on this replica): not ours
                    out.write(chunk)
            if size != claim.size_bytes:
                raise SegmentUnavailableError(
                    f"size mismatch: got {size}+ bytes, the segment has {claim.size_bytes}"
                    if size > claim.size_bytes
                    else f"size mismatch: got {size} bytes, the segment has {claim.size_bytes}"
                )
            bad = _first_corrupt(path, size, claim.base_offset)
            if bad is not None:
                raise SegmentUnavailableError(f"the copy is corrupt from offset {bad} (CRC check)")
            return Downloaded(path, broker.id, size)
        except BaseException:
            with contextlib.suppress(OSError):
                path.unlink()
            raise
