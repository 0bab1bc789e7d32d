"""One public contract: the Python client's and the console's parsers of the HTTP API's
answers read only what the OpenAPI document (cluster/openapi/) declares. Each parser is fed
an answer built from the document's schema, holding every declared field and refusing to
read any other (cluster/openapi/contract.py); a field a parser reads that the document
lacks fails here, naming it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from cluster.openapi.contract import UndeclaredField, example, resolve, response_schema
from cluster.openapi.document import OPENAPI
from console.topic_details import summary, topic_names
from tierlog.client.metadata import parse_brokers, parse_partitions

# (who reads it, the operation whose answer it parses, the parser)
PARSERS: list[tuple[str, str, str, Callable[[Any], object]]] = [
    ("client", "/topics/{topic}", "get", parse_partitions),
    ("client", "/brokers", "get", parse_brokers),
    ("console", "/topics/{topic}", "get", summary),
    ("console", "/topics", "get", topic_names),
]


def _id(case: tuple[str, str, str, object]) -> str:
    return f"{case[0]}-{case[2]}-{case[1]}"


def _plain(value: Any) -> Any:
    """The example as plain JSON values (for jsonschema, which reads every key)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@pytest.mark.parametrize("case", PARSERS, ids=_id)
def test_the_parser_reads_only_documented_fields(
    case: tuple[str, str, str, Callable[[Any], object]],
) -> None:
    _, path, method, parse = case
    schema = response_schema(path, method)
    answer = example(schema, f"{method.upper()} {path}")
    jsonschema.validate(_plain(answer), {**resolve(schema), "components": OPENAPI["components"]})
    assert parse(answer)  # reads every field it needs from the documented ones


def test_a_field_missing_from_the_document_fails_the_parser() -> None:
    """The check has teeth: drop `leader_epoch` from the document's PartitionDescription
    and the client's topic parser is caught reading it."""
    doc = copy.deepcopy(OPENAPI)
    del doc["components"]["schemas"]["PartitionDescription"]["properties"]["leader_epoch"]
    answer = example(response_schema("/topics/{topic}", "get", document=doc), document=doc)
    with pytest.raises(UndeclaredField, match="leader_epoch"):
        parse_partitions(answer)


def test_the_parsers_results_come_from_the_documented_fields() -> None:
    answer = example(response_schema("/brokers", "get"))
    assert parse_brokers(answer) == {7: "http://127.0.0.1:8080"}
    described = summary(example(response_schema("/topics/{topic}", "get")))
    assert described["name"] == "x" and described["replication_factor"] == 7
