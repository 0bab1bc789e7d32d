"""Retention, small-file merge and key compaction of the cold tier (DESIGN §1, §2, §4)."""
