"""The query of `GET /topics/{topic}/search`, validated: bad input is a 400 naming the
parameter, never a scan of the wrong thing."""

from __future__ import annotations

import base64
import binascii
from typing import NamedTuple

import orjson
from starlette.requests import Request

from cluster.http.responses import query_int
from cluster.search_contract import MAX_OFFSET, SearchQuery
from logformat.errors import ErrorCode, TierlogError
from logformat.render import VALUE_FORMATS, ValueFormat

DEFAULT_MAX_HITS = 100
MAX_HITS = 10_000
MAX_PATTERN = 4096  # a key, substring or JSON value longer than this is refused


class SearchParams(NamedTuple):
    query: SearchQuery
    partition: int | None  # None: every partition
    max_hits: int
    value_format: ValueFormat


def _bad(message: str) -> TierlogError:
    return TierlogError(ErrorCode.INVALID_REQUEST, message)


def _text(request: Request, name: str) -> str | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if len(raw) > MAX_PATTERN:
        raise _bad(f"query parameter {name!r} is longer than {MAX_PATTERN} characters")
    return raw


def _key(request: Request) -> bytes | None:
    text, b64 = _text(request, "key"), _text(request, "key_b64")
    if text is not None and b64 is not None:
        raise _bad("give key or key_b64, not both")
    if b64 is None:
        return None if text is None else text.encode()
    try:
        return base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(f"key_b64 is not valid base64: {b64[:40]!r}") from None


def json_path(raw: str) -> tuple[str | int, ...]:
    """`a.b.0` (or `$.a.b[0]`): field names, and list indices as integers."""
    path = raw.removeprefix("$").removeprefix(".").replace("[", ".").replace("]", "")
    steps = path.split(".")
    if not path or any(s == "" for s in steps):
        raise _bad(f"json_path {raw!r} is not a dotted path such as user.id or items.0.sku")
    return tuple(int(s) if s.lstrip("-").isdigit() else s for s in steps)


def _json(request: Request) -> tuple[tuple[str | int, ...] | None, object]:
    path, value = _text(request, "json_path"), request.query_params.get("json_value")
    if path is None:
        if value is not None:
            raise _bad("json_value needs json_path (the field it is compared with)")
        return None, None
    if value is None:
        raise _bad(
            'json_path needs json_value (JSON, e.g. 42, true, "text"; bare text is a string)'
        )
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        parsed = value  # bare text: a JSON string
    if isinstance(parsed, dict | list):
        raise _bad("json_value must be a string, number, boolean or null, not an object or array")
    return json_path(path), parsed


def _typed(request: Request, typed: bool) -> tuple[tuple[str, ...] | None, object]:
    """typed_path + typed_value: a field of a typed lake table's value (docs/lake-tables.md),
    searched by fetch nodes only (`typed`), which decode hot records as tiering does."""
    raw, value = _text(request, "typed_path"), request.query_params.get("typed_value")
    if raw is None:
        if value is not None:
            raise _bad(
                "typed_value needs typed_path (the field of value_typed it is compared with)"
            )
        return None, None
    if not typed:
        raise _bad("a search by typed_path is served by fetch nodes: send it to a fetch node")
    if value is None:
        raise _bad(
            'typed_path needs typed_value (JSON, e.g. 42, true, "text"; bare text is a string)'
        )
    path = json_path(raw.removeprefix("value_typed."))
    if not all(isinstance(p, str) for p in path):
        raise _bad(f"typed_path {raw!r} names struct fields only, such as ship.city")
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        parsed = value  # bare text: a string
    if parsed is None or isinstance(parsed, dict | list):
        raise _bad("typed_value must be a string, number or boolean, not null, an object or array")
    return tuple(str(p) for p in path), parsed


def search_params(request: Request, typed: bool = False) -> SearchParams:
    """`typed`: this node serves typed_path searches (fetch nodes)."""
    key = _key(request)
    value = _text(request, "value")
    path, wanted = _json(request)
    typed_path, typed_value = _typed(request, typed)
    if key is None and value is None and path is None and typed_path is None:
        raise _bad(
            "a search needs a condition: key (or key_b64), value, json_path + json_value, "
            "or typed_path + typed_value"
        )
    start = query_int(request, "start_offset", 0, 0, MAX_OFFSET)
    end = query_int(request, "end_offset", MAX_OFFSET, 0, MAX_OFFSET)
    t0 = _optional(request, "start_timestamp")
    t1 = _optional(request, "end_timestamp")
    if end <= start or (t0 is not None and t1 is not None and t1 <= t0):
        raise _bad("the end of a range (end_offset, end_timestamp) must be after its start")
    fmt = request.query_params.get("value_format", "auto")
    if fmt not in VALUE_FORMATS:
        raise _bad(f"value_format must be auto, base64 or string; got {fmt!r}")
    raw_p = request.query_params.get("partition")
    partition = None if raw_p in (None, "") else query_int(request, "partition", 0, 0, 1 << 20)
    query = SearchQuery(key, value, path, wanted, start, end, t0, t1, typed_path, typed_value)
    max_hits = query_int(request, "max_hits", DEFAULT_MAX_HITS, 1, MAX_HITS)
    return SearchParams(query, partition, max_hits, fmt)


def _optional(request: Request, name: str) -> int | None:
    if request.query_params.get(name) in (None, ""):
        return None
    return query_int(request, name, None, 0, MAX_OFFSET)
