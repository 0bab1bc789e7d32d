"""How the Messages page shows records (console/message_view.py): JSON pretty-printed,
text as text, other bytes as hex or base64; times and tail positions parsed strictly."""

from __future__ import annotations

import base64

import pytest

from console.cluster_api import ConsoleApiError
from console.message_view import decode_nexts, encode_nexts, parse_time, payload, record_view


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_payloads_by_kind() -> None:
    assert payload(None).kind == "null"
    doc = payload(b64(b'{"a":{"b":[1,2]}}'))
    assert doc.kind == "json" and doc.text.startswith('{\n  "a": {')
    assert payload(b64(b"[not json")).kind == "text"
    assert payload(b64("héllo".encode())) == ("text", "héllo", 6)
    assert payload(b64(b"\xde\xad\xbe\xef")) == ("binary", "de ad be ef", 4)
    assert payload(b64(b"\xff\x00"), "base64").text == "/wA="


def test_a_record_view_with_headers_and_tier() -> None:
    rec = {
        "offset": 7,
        "timestamp": 1_700_000_000_123,
        "key_b64": b64(b"k"),
        "value_b64": None,
        "headers": [{"key": "h", "value_b64": b64(b"\xff")}],
        "tier": "cold",
    }
    view = record_view(rec, 2, "hex")
    assert view["time"] == "2023-11-14 22:13:20.123" and view["tier"] == "cold"
    assert view["key"].text == "k" and view["value"].kind == "null"
    assert view["headers"] == [("h", ("binary", "ff", 1))]


def test_times_and_tail_positions() -> None:
    assert parse_time("1700000000000") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20") == 1_700_000_000_000
    assert parse_time("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    with pytest.raises(ConsoleApiError):
        parse_time("yesterday")
    assert decode_nexts(encode_nexts({1: 5, 0: 9})) == {0: 9, 1: 5}
    with pytest.raises(ConsoleApiError):
        decode_nexts("0:x")
