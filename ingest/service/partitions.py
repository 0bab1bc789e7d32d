"""The partition state the services hand to the front-ends, under the names the front-ends
may import (they import services, never ingest.replication or ingest.log themselves)."""

from __future__ import annotations

from ingest.log.epoch_cache import Epochs
from ingest.replication.group_commit import AppendResult
from ingest.replication.partition import Partition, Role

__all__ = ["AppendResult", "Epochs", "Partition", "Role"]


# What the front-ends read of a partition's hot log, without reaching into it.
def log_start(state: Partition) -> int:
    return state.log.log_start_offset


def log_end(state: Partition) -> int:
    return state.log.log_end_offset


def leader_epochs(state: Partition) -> Epochs:
    """The log's leader-epoch cache: (epoch, start offset), oldest first."""
    return state.log.leader_epochs()


def latest_epoch(state: Partition) -> int:
    return state.log.latest_epoch
