"""Schema types, one module each, behind `types.base.SchemaKind`."""
