"""A partition's transactions as its leader keeps them in memory (ingest/service/txn_log.py
changes them, under the partition's lock): its spans, the producers whose batches need no
check, and what each read may see of it (TxnView: the last stable offset, the ranges hidden).
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Iterable
from typing import NamedTuple

import pyarrow as pa

from cluster.read_contract import FetchResult
from ingest.replication.group_commit import AppendResult
from logformat.txn_rows import in_spans, marker_rows
from metadata.transactions import Span

_NO_END = 2**63  # past every offset


class TxnView(NamedTuple):
    """What one read may see of a partition: records below `stable` only, none in `hidden`."""

    stable: int  # the last stable offset (read_committed) or the high watermark
    hidden: tuple[tuple[int, int], ...]  # [first, last] ranges left out
    transactional: bool = False  # the partition has seen transactions: look for markers

    def reaching(self, first: int, last: int) -> tuple[tuple[int, int], ...]:
        """The hidden ranges with an offset in [first, last] (sorted and disjoint, so their
        last offsets are sorted too): a read looks at those, not at every one."""
        start = bisect.bisect_left(self.hidden, first, key=_last)
        return self.hidden[start : bisect.bisect_right(self.hidden, (last, _NO_END))]

    def apply(self, got: FetchResult, offset: int) -> FetchResult:
        batch, next_offset = got.batch, min(got.next_offset, max(self.stable, offset))
        plain = not self.hidden and not self.transactional
        if batch.num_rows == 0 or (plain and next_offset == got.next_offset):
            return got._replace(next_offset=next_offset)
        offsets = batch.column(0).to_numpy()
        keep = offsets < next_offset
        if self.transactional:
            keep &= ~marker_rows(batch)
        if self.hidden:
            keep &= ~in_spans(offsets, self.reaching(int(offsets.min()), int(offsets.max())))
        if bool(keep.all()):
            return got._replace(next_offset=next_offset)
        # The frames' checksums (hot reads) cover rows no longer there: the reader gets none.
        kept = batch.filter(pa.array(keep))
        return got._replace(batch=kept, next_offset=next_offset, frames=())


def _last(span: tuple[int, int]) -> int:
    return span[1]


class PartitionTxns:
    """A partition's spans on its leader: the ongoing ones by producer (a marker closes
    one producer's, without a look at the rest) and the ended ones (aborted, markers),
    whose sorted ranges each read hides are kept until they change. A busy partition
    gathers a marker per transaction until retention prunes them: a scan of all per
    marker or per read grew with them."""

    def __init__(self, leader_epoch: int, spans: list[Span]) -> None:
        self.leader_epoch = leader_epoch
        self._ongoing: dict[int, list[Span]] = {}  # producer id -> its spans, by offset
        self._ended: list[Span] = []
        self._hidden: dict[bool, tuple[tuple[int, int], ...]] = {}  # committed -> ranges
        self.spans = spans
        self.lock = asyncio.Lock()
        # (producer id, epoch) found in a transaction under way with this partition added:
        # it stays so until its marker is written here (every way a transaction ends, a
        # fencing InitProducerId and a timeout included, writes one to each of its
        # partitions), so its next batches skip Postgres.
        self.verified: set[tuple[int, int]] = set()
        self.pending: set[asyncio.Future[list[AppendResult]]] = set()  # spans being recorded
        # The log end offset when each of those was queued: its records lie at or past it,
        # and none may be read as stable before its span is known here.
        self.floors: dict[asyncio.Future[list[AppendResult]], int] = {}

    @property
    def spans(self) -> list[Span]:
        """Every span known here, ended ones first (a new list)."""
        return [*self._ended, *(s for mine in self._ongoing.values() for s in mine)]

    @spans.setter
    def spans(self, spans: Iterable[Span]) -> None:
        self._ongoing, self._ended, self._hidden = {}, [], {}
        for s in sorted(spans, key=_first):
            if s.kind == "ongoing":
                self._ongoing.setdefault(s.producer_id, []).append(s)
            else:
                self._ended.append(s)

    def add_ongoing(self, spans: Iterable[Span]) -> None:
        for s in spans:
            self._ongoing.setdefault(s.producer_id, []).append(s)

    def aborting(self, pid: int) -> tuple[Span, ...]:
        """Producer `pid`'s ongoing spans as an abort records them."""
        return tuple(s._replace(kind="aborted") for s in self._ongoing.get(pid, ()))

    def close(self, pid: int, commit: bool, marker: Span) -> None:
        """Producer `pid`'s marker is written: its ongoing spans become data or aborted."""
        ongoing = self._ongoing.pop(pid, [])
        if not commit:
            self._ended += [s._replace(kind="aborted") for s in ongoing]
        self._ended.append(marker)
        self._hidden.clear()

    def stable(self, high_watermark: int) -> int:
        ongoing = [mine[0].first_offset for mine in self._ongoing.values() if mine]
        return min([high_watermark, *ongoing, *self.floors.values()])

    def view(self, high_watermark: int, committed: bool) -> TxnView:
        hidden = self._hidden.get(committed)
        if hidden is None:
            kinds = ("aborted", "marker") if committed else ("marker",)
            ranges = ((s.first_offset, s.last_offset) for s in self._ended if s.kind in kinds)
            hidden = self._hidden[committed] = tuple(sorted(ranges))
        stable = self.stable(high_watermark) if committed else high_watermark
        return TxnView(stable, hidden, bool(self._ended or self._ongoing))


def _first(span: Span) -> int:
    return span.first_offset
