"""The OpenAPI document as a contract for the parsers that read the API's answers (the
Python client's, the console's): `example()` builds an answer holding every field a schema
declares, as `Declared` objects that refuse to read a field the schema does not declare.
A parser fed such an answer either works or names the field it reads outside the contract
(tests/unit/test_api_contract.py)."""

from __future__ import annotations

from typing import Any

from cluster.openapi.document import OPENAPI


class UndeclaredField(KeyError):
    """A parser read a field the API's document does not declare."""


def component(name: str, document: dict[str, Any] = OPENAPI) -> dict[str, Any]:
    schema: dict[str, Any] = document["components"]["schemas"][name]
    return schema


def response_schema(
    path: str, method: str, status: str = "200", document: dict[str, Any] = OPENAPI
) -> dict[str, Any]:
    """The JSON schema of an operation's answer, as the document states it."""
    answer = document["paths"][path][method]["responses"][status]
    schema: dict[str, Any] = answer["content"]["application/json"]["schema"]
    return schema


def resolve(schema: dict[str, Any], document: dict[str, Any] = OPENAPI) -> dict[str, Any]:
    while "$ref" in schema:
        schema = component(schema["$ref"].rsplit("/", 1)[-1], document)
    return schema


class Declared(dict[str, Any]):
    """An object of the answer: reading a field its schema does not declare raises (a
    free-form object, without `properties`, takes any name)."""

    def __init__(self, values: dict[str, Any], declared: frozenset[str] | None, where: str):
        super().__init__(values)
        self._declared, self._where = declared, where

    def _check(self, key: object) -> None:
        if self._declared is not None and key not in self._declared:
            raise UndeclaredField(f"{self._where}: {key!r} is not in the API's document")

    def __getitem__(self, key: str) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._check(key)
        return super().__contains__(key)


_SCALARS: dict[str, Any] = {
    "integer": 7,
    "number": 1.5,
    "string": "x",
    "boolean": True,
    "null": None,
}


def example(
    schema: dict[str, Any], where: str = "answer", document: dict[str, Any] = OPENAPI
) -> Any:
    """An instance of `schema` with every declared property set (a nullable one to a value,
    an array to two items) and refusing undeclared reads."""
    schema = resolve(schema, document)
    kinds = schema.get("type", "object" if "properties" in schema else "string")
    kind = next((k for k in kinds if k != "null"), "null") if isinstance(kinds, list) else kinds
    if kind == "array":
        item = schema.get("items", {})
        return [example(item, f"{where}[{i}]", document) for i in range(2)]
    if kind == "string" and schema.get("format") == "uri":
        return "http://127.0.0.1:8080"
    if kind != "object":
        return _SCALARS[kind]
    props: dict[str, Any] = schema.get("properties", {})
    free = "properties" not in schema or schema.get("additionalProperties") not in (None, False)
    values = {name: example(sub, f"{where}.{name}", document) for name, sub in props.items()}
    return Declared(values, None if free else frozenset(props), where)
