"""Tiering: sealed hot segments → Parquet files of each topic's Delta table in S3 (DESIGN §4).

Building blocks, following the data: `object_store` moves bytes, `parquet_writer` turns a
segment into a data file, `layout` names the objects, `delta_table` commits them.
"""
