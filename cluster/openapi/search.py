"""The search path of the OpenAPI document (ingest/api/search.py, cluster/search_run.py)."""

from __future__ import annotations

from typing import Any

from cluster.openapi.schemas import TOPIC, error_responses


def _q(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


_INT = {"type": "integer", "minimum": 0}
_TEXT = {"type": "string"}  # at most 4096 characters (longer: 400)
_LINES = """One JSON document per line (application/x-ndjson), as the search goes:
- `{"type": "hit", "partition", "tier": "cold"|"hot", "offset", "timestamp", "key", "value",
  "headers"}` (key/value rendered as by fetch's value_format; hits of one partition come in
  offset order, partitions interleave);
- `{"type": "progress", "hits", "files_scanned", "files_total", "bytes_scanned",
  "cold_bytes_scanned", "bytes_total", "table_bytes", "row_groups_read", "row_groups_total",
  "hot_records_scanned", "hot_records_total", "partitions_done", "partitions"}`: totals over
  the partitions so far (bytes_scanned: bytes fetched from S3 plus the hot records' Arrow
  bytes; cold_bytes_scanned: the table's bytes read, each at most once, never more than
  bytes_total; bytes_total: the cold files left after pruning by offset/time; table_bytes:
  all of them);
- `{"type": "error", "partition", "error_code", "message"}`: that partition failed, the
  others go on;
- last, `{"type": "done", "capped", "errors", "elapsed_ms", ...the progress fields}`.
Closing the connection cancels the search."""

SEARCH_PATHS: dict[str, Any] = {
    "/topics/{topic}/search": {
        "parameters": [TOPIC],
        "get": {
            "summary": "Search records by key, value substring or JSON field, across both tiers",
            "description": (
                "Every given condition must hold. Cold files are pruned by their manifest "
                "offset/timestamp ranges and row-group statistics, and only the columns the "
                "condition needs are read from S3. A key search over all offsets is the key's "
                "history. Needs Read on the topic."
            ),
            "parameters": [
                _q("partition", _INT, "one partition (default: all)"),
                _q("key", _TEXT, "exact key, as UTF-8 text"),
                _q("key_b64", _TEXT, "exact key, as base64 bytes"),
                _q("value", _TEXT, "substring of the value (UTF-8 text)"),
                _q("json_path", _TEXT, "a field of a JSON value: user.id, items.0.sku"),
                _q("json_value", {"type": "string"}, "JSON the field equals (bare text: a string)"),
                _q(
                    "typed_path",
                    _TEXT,
                    "fetch nodes: a field of a typed lake table's value_typed struct, such as "
                    "ship.city (docs/lake-tables.md); cold files match their value_typed "
                    "column, hot records are decoded by the node. 400 on a broker, or for a "
                    "topic whose lake.mode is key_value",
                ),
                _q(
                    "typed_value",
                    {"type": "string"},
                    "JSON the typed field equals: a string, number or boolean (bare text: a "
                    "string); a value the field's type cannot hold matches nothing",
                ),
                _q("start_offset", _INT, "first offset searched"),
                _q("end_offset", _INT, "offsets below this are searched"),
                _q("start_timestamp", _INT, "records at or after this time (ms)"),
                _q("end_timestamp", _INT, "records before this time (ms)"),
                _q("max_hits", {"type": "integer", "minimum": 1, "maximum": 10000}, "the cap"),
                _q(
                    "value_format",
                    {"type": "string", "enum": ["auto", "base64", "string"]},
                    "as for fetch",
                ),
            ],
            "responses": {
                "200": {
                    "description": _LINES,
                    "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                },
                **error_responses(400, 404, 429),
            },
        },
    }
}
