"""Tiering: sealed hot segments → Parquet files of each topic's Delta table in S3 (docs/design.md
§4).

The worker (worker.py) copies a segment from an in-sync replica (segment_source.py) and uses
coldstore/ for the rest: `parquet_writer` turns the segment into a data file, `object_store`
moves the bytes, `layout` names the objects, `delta_table` commits them.
"""
