"""The Groups page's reset form → API body, its lag-in-time text and lag history, and the Lake
page's Spark snippet (bad input is a readable ConsoleApiError, never a 500)."""

from __future__ import annotations

import asyncio
import time

import pytest

from console.cluster_api import ClusterApi, ConsoleApiError
from console.group_lag import EVERY_S, chart_data, lag_source, record
from console.group_reset import reset_body
from console.history import History, Sampler
from console.pages.groups import format_age
from console.pages.lake import spark_snippet


def form(**fields: str) -> dict[str, str]:
    return {"topic": "t", "partition": "", "to": "earliest", "value": "", **fields}


def test_reset_body_for_each_target() -> None:
    assert reset_body(form(), None) == {"at": "earliest", "topics": ["t"]}
    assert reset_body(form(to="latest", partition="2"), None) == {
        "at": "latest",
        "partitions": [{"topic": "t", "partition": 2}],
    }
    assert reset_body(form(to="datetime", value="1970-01-01T00:00:01"), None)["at"] == 1000
    assert (
        reset_body(form(to="datetime", value="2026-01-01T01:00+01:00"), None)["at"]
        == (reset_body(form(to="datetime", value="2026-01-01T00:00Z"), None)["at"])
    )
    assert reset_body(form(to="datetime", value="1234"), None)["at"] == 1234
    assert reset_body(form(to="offset", value="5"), 3)["offsets"] == [
        {"topic": "t", "partition": p, "offset": 5} for p in range(3)
    ]


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"topic": ""}, "choose a topic"),
        ({"partition": "-1"}, "partition must be a whole number"),
        ({"to": "yesterday"}, "reset to one of"),
        ({"to": "offset"}, "give an offset"),
        ({"to": "offset", "value": "x"}, "offset must be a whole number"),
        ({"to": "datetime", "value": "soon"}, "not a date and time"),
    ],
)
def test_reset_body_refuses_bad_input(fields: dict[str, str], says: str) -> None:
    with pytest.raises(ConsoleApiError) as caught:
        reset_body(form(**fields), 1)
    assert caught.value.name == "INVALID_REQUEST" and says in caught.value.message


def test_format_age() -> None:
    assert [format_age(ms) for ms in (None, 0, 999, 12_345, 245_000, 7_380_000, 273_600_000)] == [
        "\u2013", "0 ms", "999 ms", "12.3 s", "4 min 05 s", "2 h 03 min", "3 d 04 h",
    ]  # fmt: skip


@pytest.mark.parametrize("topic", ["orders", "2024-orders", "a.b_c"])
def test_spark_snippet_is_python_naming_the_table(topic: str) -> None:
    text = spark_snippet(f"s3://bkt/some/prefix/topics/{topic}", topic, "http://b:8080")
    compile(text, "snippet", "exec")
    assert '.option("bucket", "bkt")' in text and '.option("prefix", "some/prefix")' in text
    assert f'.load("{topic}")' in text and f"s3a://bkt/some/prefix/topics/{topic}" in text


def test_group_lag_history_and_chart_data() -> None:
    history = History(3600, 5)
    now = 1_000.0
    record(history, "g", {"lag": 8, "lag_ms": 2500}, now - 10)
    record(history, "g", {"lag": 0, "lag_ms": 0}, now)
    record(history, "g", {"lag": None, "lag_ms": None}, now + 1)  # unknown age: no point
    doc = chart_data(history, "g")
    assert doc["window_s"] == 3600
    # series() keeps the last hour of wall-clock time: these points are far older.
    assert doc["series"] == {"records": [], "age_s": []}
    history = History(3600, 5)
    at = time.time()
    record(history, "g", {"lag": 8, "lag_ms": 2500}, at)
    assert chart_data(history, "g")["series"] == {"records": [(at, 8.0)], "age_s": [(at, 2.5)]}


def test_group_lag_source_samples_at_most_every_few_seconds() -> None:
    api = ClusterApi("http://127.0.0.1:9")  # nothing listens: a sample is a network error
    history = History(3600, 1)
    sample = lag_source(Sampler(api, history, None))

    async def run() -> None:
        with pytest.raises(ConsoleApiError) as caught:
            await sample(api, history, 100.0)
        assert caught.value.name == "NETWORK_EXCEPTION"
        await sample(api, history, 100.0 + EVERY_S / 2)  # too soon: not even tried
        with pytest.raises(ConsoleApiError):
            await sample(api, history, 100.0 + EVERY_S)
        await api.aclose()

    asyncio.run(run())
