"""The broker's public HTTP API (DESIGN §5), one module per resource."""
