"""Retention, small-file merge and key compaction of the cold tier (docs/design.md §1, §2, §4)."""
