"""What fetch needs of the object store: async ranged GETs (docs/design.md §4).

coldstore.object_store.AsyncObjectStore (aiobotocore) fits this Protocol; fetch does not import
tiering (they are independent layers), the composition root (tierlog/) passes one in.
"""

from __future__ import annotations

from typing import Protocol


class RangeStore(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object; raises KeyError when it does not exist."""
        ...
