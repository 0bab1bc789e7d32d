"""The caches one cold read goes through, handed as one value to the reader, the prefetcher
and the timestamp lookup (they share them: a prefetched range is a reader's cache hit)."""

from __future__ import annotations

from typing import NamedTuple

from fetch.cold.cold_index import ColdIndex
from fetch.cold.footer_cache import FooterCache
from fetch.cold.range_cache import RangeCache
from fetch.cold.row_groups import RowGroupCache


class ColdCaches(NamedTuple):
    manifest: ColdIndex  # offset → cold file, through the Postgres manifest
    footers: FooterCache  # cold file → its row groups
    ranges: RangeCache  # raw bytes of objects
    groups: RowGroupCache  # decoded row groups
