"""The cold tier's storage: the object store, the table layout, Parquet files and Delta commits."""
