"""The leader-epoch cache of one partition (Kafka's LeaderEpochFileCache), kept in the index.

Each entry is (epoch, start offset): where that leader epoch's first frame is. Followers ask
a leader for the end of an epoch (OffsetsForLeaderEpoch) to find where their logs diverge.
`latest` mirrors the newest entry so the append path checks it without an index read.
"""

from __future__ import annotations

from rocksdict import WriteBatch

from ingest.log.index import LogIndex, PartitionIndex

Epochs = list[tuple[int, int]]  # (leader epoch, start offset), oldest first


class LeaderEpochCache:
    def __init__(self, idx: PartitionIndex, log_index: LogIndex) -> None:
        self._idx, self._log_index = idx, log_index
        self.latest = -1

    def epochs(self) -> Epochs:
        return self._idx.epochs()

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int] | None:
        """(largest epoch <= epoch, the offset where it ended)."""
        return self._idx.end_offset_for_epoch(epoch, log_end)

    def reload(self) -> None:
        """Read `latest` back from the index (after truncation or recovery)."""
        self.latest = max((e for e, _ in self._idx.epochs()), default=-1)

    def new_epoch(self, epoch: int, start: int) -> Epochs:
        """The entry a leader's append at `start` in `epoch` adds, if the epoch is new."""
        return [(epoch, start)] if epoch > self.latest else []

    def put(self, batch: WriteBatch, epochs: Epochs) -> None:
        """Add `epochs` to the batch; call `advance(epochs)` once the batch is written."""
        for epoch, start in epochs:
            self._idx.put_epoch(batch, epoch, start)

    def advance(self, epochs: Epochs) -> None:
        if epochs:
            self.latest = epochs[-1][0]

    def begin(self, epoch: int, start: int) -> None:
        """Record now that `epoch` starts at `start` (a new leader, before it appends)."""
        epochs = self.new_epoch(epoch, start)
        if not epochs:
            return
        batch = self._log_index.batch()
        self.put(batch, epochs)
        self._log_index.write(batch)
        self.advance(epochs)

    def truncate_from_end(self, offset: int) -> None:
        """Forget the epochs that start at or after `offset` (one write, if any)."""
        if all(start < offset for _, start in self._idx.epochs()):
            return
        batch = self._log_index.batch()
        self._idx.truncate_epochs_from_end(batch, offset)
        self._log_index.write(batch)
        self.reload()
