"""The broker's public HTTP API (docs/design.md §5), one module per resource."""
