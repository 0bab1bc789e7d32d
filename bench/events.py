"""Benchmark records: ~1 KB JSON shop events keyed by user id, distinct and of realistic
compressibility (ids, user agents, prices, words), and the Arrow body that produces them."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pyarrow as pa

_WORDS = (
    "order",
    "shipped",
    "delivered",
    "returned",
    "refund",
    "pending",
    "paid",
    "cart",
    "checkout",
    "coupon",
    "discount",
    "express",
    "standard",
    "warehouse",
    "berlin",
    "paris",
    "madrid",
    "lisbon",
    "vienna",
    "prague",
    "oslo",
    "dublin",
    "rome",
    "blue",
    "red",
    "green",
    "black",
    "white",
    "large",
    "small",
    "medium",
    "cotton",
    "wool",
    "leather",
    "steel",
    "wood",
    "glass",
    "gift",
    "review",
    "rating",
    "support",
    "ticket",
    "priority",
    "customer",
    "premium",
    "basic",
    "trial",
    "renewal",
)
_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/124.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 Version/17.4 Safari",
    "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
)
_EVENTS = ("page_view", "add_to_cart", "checkout", "payment", "search", "login")
_COUNTRIES = ("DE", "FR", "ES", "PT", "AT", "CZ", "NO", "IE", "IT", "NL", "US", "GB")


def make_records(rng: random.Random, n: int, value_bytes: int) -> tuple[list[bytes], list[bytes]]:
    """n (key, value) pairs: a user-id key and a JSON event of about `value_bytes`."""
    keys, values = [], []
    for _ in range(n):
        user = rng.randrange(200_000)
        event: dict[str, Any] = {
            "event_id": f"{rng.getrandbits(128):032x}",
            "type": rng.choice(_EVENTS),
            "ts": 1_700_000_000_000 + rng.randrange(10**9),
            "user": {"id": f"u{user:06d}", "country": rng.choice(_COUNTRIES), "tier": user % 3},
            "session": f"{rng.getrandbits(64):016x}",
            "device": {
                "ua": rng.choice(_AGENTS),
                "ip": f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}",
            },
            "page": f"https://shop.example.com/{rng.choice(_WORDS)}/{rng.randrange(50_000):05d}",
            "cart": [
                {
                    "sku": f"SKU-{rng.randrange(50_000):05d}",
                    "qty": rng.randint(1, 4),
                    "price_cents": rng.randrange(199, 99_999),
                }
                for _ in range(rng.randint(1, 5))
            ],
        }
        base = len(orjson.dumps(event))
        words: list[str] = []
        size = base + 10
        while size < value_bytes:
            w = rng.choice(_WORDS)
            words.append(w)
            size += len(w) + 1
        event["note"] = " ".join(words)
        keys.append(f"u{user:06d}".encode())
        values.append(orjson.dumps(event))
    return keys, values


def arrow_body(keys: list[bytes], values: list[bytes]) -> bytes:
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
