"""Consumer reads across tiers (docs/design.md §2, §4, §5): cold reads straight from S3 through the
Postgres manifest, caches and prefetch for sequential replay, and the `tierlog fetch` node."""
