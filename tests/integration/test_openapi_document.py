"""The OpenAPI document's structure (issue 18 item 10): 401 and 403 on every operation behind
the bearer scheme, shared component schemas referenced with $ref, and the auth-off view
that brokers and fetch nodes started with --insecure serve. (test_openapi_fuzz*.py drive the
served documents against real nodes.)"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from cluster.openapi.document import OPENAPI, for_auth
from fetch.node_api import routes as fetch_node_routes
from fetch.node_api import served_openapi

ERROR_REF = {"$ref": "#/components/schemas/Error"}
WRITES = ("post", "put", "patch", "delete")
DOCUMENTS = {
    "broker": OPENAPI,
    "broker --insecure": for_auth(OPENAPI, auth_enabled=False),
    "fetch node": served_openapi(fetch_node_routes),
    "fetch node --insecure": for_auth(served_openapi(fetch_node_routes), auth_enabled=False),
}


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method != "parameters":
                yield path, method, op


def test_every_keyed_operation_lists_401_and_403_with_the_error_schema() -> None:
    keyed = 0
    for path, method, op in operations(OPENAPI):
        if op.get("security", OPENAPI["security"]):
            keyed += 1
            for code in ("401", "403"):
                content = op["responses"][code]["content"]["application/json"]
                assert content["schema"] == ERROR_REF, (path, method, code)
        else:  # the open paths: nothing asks for a key, so nothing answers 401
            assert "401" not in op["responses"], (path, method)
    assert keyed >= 20 and OPENAPI["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_component_schemas_are_referenced_and_resolve(name: str) -> None:
    doc = DOCUMENTS[name]
    schemas = doc["components"]["schemas"]
    refs = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(doc)))
    assert refs <= set(schemas), refs - set(schemas)  # every $ref resolves
    assert {"Error", "TopicDescription", "ProduceRequest", "FetchResponse"} <= set(schemas)
    if not name.startswith("fetch node"):  # the node serves a subset of the paths
        assert refs == set(schemas), set(schemas) - refs  # no schema is dead weight
    for path, method, op in operations(doc):
        for code, response in op["responses"].items():
            if code.startswith(("4", "5")) and "application/json" in response["content"]:
                schema = response["content"]["application/json"]["schema"]
                assert schema == ERROR_REF or code == "503", (path, method, code)


@pytest.mark.parametrize("name", ["broker --insecure", "fetch node --insecure"])
def test_auth_off_documents_no_key_and_no_acl_refusals(name: str) -> None:
    doc = DOCUMENTS[name]
    assert "security" not in doc and "securitySchemes" not in doc["components"]
    for path, method, op in operations(doc):
        assert "security" not in op and "401" not in op["responses"], (path, method)
        # Without ACLs only a cross-site write is refused.
        assert ("403" in op["responses"]) == (method in WRITES), (path, method)


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_docs_page_is_not_an_operation(name: str) -> None:
    assert not [p for p in DOCUMENTS[name]["paths"] if p.startswith("/docs")]
