"""The partition state the services hand to the front-ends, under the names the front-ends
may import (they import services, never ingest.replication or ingest.log themselves)."""

from __future__ import annotations

from ingest.log.epoch_cache import Epochs
from ingest.replication.group_commit import AppendResult
from ingest.replication.partition import Partition, Role

__all__ = ["AppendResult", "Epochs", "Partition", "Role"]
