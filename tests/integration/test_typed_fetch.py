"""Typed columns in a fetch node's Arrow answers (issue 29 item 5, docs/lake-tables.md
"Readers") on real processes: a broker with its registry, confluent-kafka's Avro serializer,
moto's S3, a tiering worker in this process and a `tierlog fetch` node. `?columns=` adds
value_typed / value_error to cold records (from the files, of several schema versions) and
to hot ones (decoded by the node as tiering decodes); the record columns stay byte-exact.
A search by a typed field (typed_path + typed_value) finds cold and hot records alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry.avro import AvroSerializer

from logformat.schema import CONSUMER_SCHEMA
from tests.integration.fetch_nodes import FetchNodeProcess, s3_env
from tests.integration.s3 import MotoServer, moto_s3_fixture  # noqa: F401
from tests.integration.typed_lake_env import Env, env_fixture  # noqa: F401 (fixture)
from tests.integration.typed_lake_values import AVRO_VERSIONS, EXPECTED, PRODUCED, value_ctx

ARROW = {"accept": "application/vnd.apache.arrow.stream"}
TOPIC = "typed-fetch"


class Stack:
    def __init__(self, env: Env, node: FetchNodeProcess) -> None:
        self.env, self.node = env, node
        self.values: list[bytes | None] = []
        self.cold: list[int] = []
        self.hot: list[int] = []

    def fetch(self, offset: int, **params: Any) -> pa.Table:
        r = self.node.http.get(
            f"/topics/{TOPIC}/partitions/0/records",
            params={"offset": offset, "max_records": 1000, **params},
            headers=ARROW,
        )
        assert r.status_code == 200, r.text
        return pa.ipc.open_stream(r.content).read_all()


@pytest.fixture(scope="module")
def stack(
    env: Env, tmp_path_factory: pytest.TempPathFactory, db_factory: Callable[..., str]
) -> Iterator[Stack]:
    """Three schema versions and a poisoned value tiered (files of different typed structs),
    then the same values again, hot."""
    env.topic(TOPIC)
    values: list[bytes | None] = [
        AvroSerializer(env.registry, schema)(record, value_ctx(TOPIC))
        for schema, record in zip(AVRO_VERSIONS, PRODUCED, strict=True)
    ]
    values.insert(2, b"\x00\x00\x00")  # poisoned: magic byte, truncated id
    log = tmp_path_factory.mktemp("typed-fetch") / "fetch.log"
    node = FetchNodeProcess(env.broker.database_url, log, s3_env(env.s3)).start()
    s = Stack(env, node)
    s.values = values
    try:
        s.cold = env.produce(TOPIC, values)
        env.tier(TOPIC, s.cold)
        s.hot = env.produce(TOPIC, values)
        yield s
    finally:
        node.stop()


def _typed(table: pa.Table, offsets: list[int]) -> list[tuple[Any, Any]]:
    rows = {r["offset"]: r for r in table.to_pylist()}
    return [(rows[o]["value_typed"], rows[o]["value_error"]) for o in offsets]


def _check(got: list[tuple[Any, Any]]) -> None:
    assert [t for t, _ in got] == [EXPECTED[0], EXPECTED[1], None, EXPECTED[2]]
    errors = [e for _, e in got]
    assert errors[:2] == [None, None] and errors[3] is None
    assert "too short for a schema id" in errors[2]


def test_cold_records_carry_the_files_typed_columns(stack: Stack) -> None:
    table = stack.fetch(stack.cold[0], columns="value_typed,value_error")
    assert table.schema.names == [*CONSUMER_SCHEMA.names, "value_typed", "value_error"]
    assert [f.name for f in table.schema.field("value_typed").type] == [
        "id",
        "item",
        "note",
        "ship",
    ]  # files of v1 (id, item only) and of v3 merged into the table's struct
    _check(_typed(table, stack.cold))
    rows = {r["offset"]: r["value"] for r in table.to_pylist()}
    assert [rows[o] for o in stack.cold] == stack.values


def test_hot_records_are_decoded_as_tiering_decodes(stack: Stack) -> None:
    table = stack.fetch(stack.hot[0], columns="value_error,value_typed")
    assert table.schema.names[-2:] == ["value_typed", "value_error"]
    _check(_typed(table, stack.hot))


def test_only_the_asked_column_is_added(stack: Stack) -> None:
    table = stack.fetch(stack.cold[0], columns="value_error")
    assert table.schema.names == [*CONSUMER_SCHEMA.names, "value_error"]


def test_answers_without_columns_are_the_record_columns_byte_for_byte(stack: Stack) -> None:
    for offsets in (stack.cold, stack.hot):
        table = stack.fetch(offsets[0])
        assert table.schema.equals(CONSUMER_SCHEMA)
        rows = {r["offset"]: r["value"] for r in table.to_pylist()}
        assert [rows[o] for o in offsets] == stack.values


def test_an_unknown_column_is_a_400_naming_it(stack: Stack) -> None:
    r = stack.node.http.get(
        f"/topics/{TOPIC}/partitions/0/records",
        params={"offset": stack.cold[0], "columns": "value_typed,shoe_size"},
        headers=ARROW,
    )
    assert r.status_code == 400
    assert "'shoe_size'" in r.json()["message"] and "value_typed" in r.json()["message"]


def test_typed_columns_need_an_arrow_answer_and_a_typed_topic(stack: Stack) -> None:
    path = f"/topics/{TOPIC}/partitions/0/records"
    r = stack.node.http.get(path, params={"offset": 0, "columns": "value_typed"})
    assert r.status_code == 400 and "Arrow" in r.json()["message"]
    stack.env.topic("untyped-fetch", mode="key_value")
    r = stack.node.http.get(
        "/topics/untyped-fetch/partitions/0/records",
        params={"columns": "value_typed"},
        headers=ARROW,
    )
    assert r.status_code == 400 and "key_value" in r.json()["message"]
    r = stack.node.http.get(  # a broker does not add them: it says so rather than ignore it
        f"{stack.env.broker.url}{path}", params={"columns": "value_typed"}, headers=ARROW
    )
    assert r.status_code == 400 and "fetch node" in r.json()["message"]


def _search(stack: Stack, url: str, **params: Any) -> tuple[int, list[dict[str, Any]]]:
    r = stack.node.http.get(f"{url}/topics/{TOPIC}/search", params=params)
    if r.status_code != 200:
        return r.status_code, [r.json()]
    return 200, [orjson.loads(line) for line in r.text.splitlines() if line]


def test_a_search_by_typed_field_finds_cold_and_hot_records(stack: Stack) -> None:
    status, lines = _search(stack, "", typed_path="ship.city", typed_value="Oslo")
    assert status == 200, lines
    hits = [(d["offset"], d["tier"]) for d in lines if d["type"] == "hit"]
    assert hits == [(stack.cold[3], "cold"), (stack.hot[3], "hot")]
    assert lines[-1]["type"] == "done" and lines[-1]["errors"] == 0
    status, lines = _search(stack, "", typed_path="value_typed.id", typed_value="2")
    assert [d["offset"] for d in lines if d["type"] == "hit"] == [stack.cold[1], stack.hot[1]]
    status, lines = _search(stack, "", typed_path="id", typed_value='"2"')  # text: not a long
    assert status == 200 and [d for d in lines if d["type"] == "hit"] == []


def test_a_typed_search_is_refused_where_it_cannot_be_served(stack: Stack) -> None:
    status, docs = _search(stack, stack.env.broker.url, typed_path="ship.city", typed_value="Oslo")
    assert status == 400 and "fetch node" in docs[0]["message"]
    stack.env.topic("untyped-search", mode="key_value")
    r = stack.node.http.get(
        "/topics/untyped-search/search", params={"typed_path": "a", "typed_value": "1"}
    )
    assert r.status_code == 400 and "key_value" in r.json()["message"]
    status, docs = _search(stack, "", typed_path="ship.city")
    assert status == 400 and "typed_value" in docs[0]["message"]
