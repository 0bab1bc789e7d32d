"""The registry's REST API as Confluent answers it: shapes, status and error codes, settings,
modes, deletes, references and bad input, on the registry's routes in process over a real
Postgres (no broker: these are the API's rules, not its serving)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from cluster.authorizer import Authorizer, AuthSettings
from cluster.http.auth import AuthMiddleware
from cluster.notify_hub import NotifyHub
from metadata.db import make_engine
from registry.mount import RegistryMount

V1 = "application/vnd.schemaregistry.v1+json"


def record(name: str, *fields: dict[str, Any], namespace: str | None = None) -> str:
    doc: dict[str, Any] = {"type": "record", "name": name, "fields": list(fields)}
    if namespace:
        doc["namespace"] = namespace
    return json.dumps(doc, separators=(",", ":"))


F1 = {"name": "f1", "type": "string"}
F2_DEFAULT = {"name": "f2", "type": "string", "default": "foo"}
F2 = {"name": "f2", "type": "string"}


@pytest.fixture(scope="module")
def api(db_factory: Any) -> Iterator[TestClient]:
    url = db_factory()
    mount = RegistryMount(url)
    engine = make_engine(url)
    auth = Authorizer(engine, NotifyHub(url), AuthSettings(enabled=False), lambda: "")

    @contextlib.asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[None]:
        async with mount.running():
            yield

    app = AuthMiddleware(Starlette(routes=mount.routes, lifespan=lifespan), auth)
    with TestClient(app, base_url="http://testserver/schema-registry") as client:
        client.headers["content-type"] = V1
        yield client
    engine.dispose()


def register(api: TestClient, subject: str, schema: str, **extra: Any) -> Any:
    return api.post(f"/subjects/{subject}/versions", json={"schema": schema, **extra})


def error(r: Any) -> tuple[int, int]:
    return r.status_code, r.json()["error_code"]


def test_register_and_read_back(api: TestClient) -> None:
    schema = record("basic", F1)
    r = register(api, "basic-value", schema)
    assert r.status_code == 200 and r.headers["content-type"] == V1
    sid = r.json()["id"]
    # the same schema again (spelled differently): the same id, no new version
    spaced = json.dumps(json.loads(schema), indent=2)
    assert register(api, "basic-value", spaced).json()["id"] == sid
    assert api.get("/subjects/basic-value/versions").json() == [1]
    assert api.get(f"/schemas/ids/{sid}").json() == {"schema": schema}
    assert json.loads(api.get(f"/schemas/ids/{sid}/schema").text) == json.loads(schema)
    assert api.get(f"/schemas/ids/{sid}/subjects").json() == ["basic-value"]
    assert api.get(f"/schemas/ids/{sid}/versions").json() == [
        {"subject": "basic-value", "version": 1}
    ]
    latest = api.get("/subjects/basic-value/versions/latest").json()
    assert latest == {"subject": "basic-value", "version": 1, "id": sid, "schema": schema}
    assert api.get("/subjects/basic-value/versions/1").json() == latest
    # one id per schema across subjects
    assert register(api, "other-value", schema).json()["id"] == sid
    assert "basic-value" in api.get("/subjects").json()
    assert api.get("/subjects", params={"subjectPrefix": "oth"}).json() == ["other-value"]
    assert api.get("/schemas/types").json() == ["AVRO", "JSON", "PROTOBUF"]
    # look-up: found, schema unknown to the subject, subject unknown
    found = api.post("/subjects/basic-value", json={"schema": schema}).json()
    assert found == latest
    assert error(api.post("/subjects/basic-value", json={"schema": record("x", F1)})) == (
        404,
        40403,
    )
    assert error(api.post("/subjects/nobody", json={"schema": schema})) == (404, 40401)


def test_plain_json_content_type_is_accepted(api: TestClient) -> None:
    r = api.post(
        "/subjects/plain-value/versions",
        content=json.dumps({"schema": '"string"'}),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 200, r.text


def test_backward_default_refuses_a_field_without_default(api: TestClient) -> None:
    assert register(api, "evolve-value", record("evolve", F1)).status_code == 200
    r = register(api, "evolve-value", record("evolve", F1, F2))
    assert error(r) == (409, 409)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in r.json()["message"]
    check = api.post(
        "/compatibility/subjects/evolve-value/versions/latest",
        params={"verbose": "true"},
        json={"schema": record("evolve", F1, F2)},
    ).json()
    assert check["is_compatible"] is False and check["messages"]
    ok = register(api, "evolve-value", record("evolve", F1, F2_DEFAULT))
    assert ok.status_code == 200 and ok.json()["version"] == 2
    assert api.post(
        "/compatibility/subjects/evolve-value/versions/1",
        json={"schema": record("evolve", F1, F2_DEFAULT)},
    ).json() == {"is_compatible": True}


def test_config_levels(api: TestClient) -> None:
    assert api.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert error(api.get("/config/cfg-value")) == (404, 40408)
    both = api.get("/config/cfg-value", params={"defaultToGlobal": "true"}).json()
    assert both == {"compatibilityLevel": "BACKWARD"}
    assert api.put("/config/cfg-value", json={"compatibility": "NONE"}).json() == {
        "compatibility": "NONE"
    }
    assert api.get("/config/cfg-value").json() == {"compatibilityLevel": "NONE"}
    assert error(api.put("/config/cfg-value", json={"compatibility": "SIDEWAYS"})) == (422, 42203)
    register(api, "cfg-value", record("cfg", F1))
    assert register(api, "cfg-value", record("cfg", F1, F2)).status_code == 200  # NONE
    assert api.delete("/config/cfg-value").json() == {"compatibilityLevel": "NONE"}
    assert error(api.get("/config/cfg-value")) == (404, 40408)


def test_modes_and_import(api: TestClient) -> None:
    assert api.get("/mode").json() == {"mode": "READWRITE"}
    assert error(api.put("/mode/ro-value", json={"mode": "SOMETIMES"})) == (422, 42204)
    assert api.put("/mode/ro-value", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    assert error(register(api, "ro-value", record("ro", F1))) == (422, 42205)
    assert error(api.get("/mode/rw-value")) == (404, 40409)
    # an id outside IMPORT mode is refused; IMPORT keeps the id given
    assert error(register(api, "imp-value", record("imp", F1), id=5000)) == (422, 42205)
    assert api.put("/mode/imp-value", json={"mode": "IMPORT"}).status_code == 200
    r = register(api, "imp-value", record("imp", F1), id=5000, version=3)
    assert r.json() == {"id": 5000, "version": 3}
    clash = register(api, "imp-value", record("imp2", F1), id=5000, version=4)
    assert error(clash) == (422, 42207)
    taken = register(api, "imp-value", record("imp3", F1), id=5001, version=3)
    assert error(taken) == (422, 42207)  # version 3 holds another schema
    # later ids are allocated past the imported one
    assert api.delete("/mode/imp-value").status_code == 200
    assert register(api, "after-import-value", record("after", F1)).json()["id"] > 5000
    # IMPORT over a non-empty registry needs force=true
    assert error(api.put("/mode", json={"mode": "IMPORT"})) == (422, 42205)


def test_soft_then_hard_delete(api: TestClient) -> None:
    sid = register(api, "del-value", record("del", F1)).json()["id"]
    register(api, "del-value", record("del", F1, F2_DEFAULT))
    assert api.delete("/subjects/del-value/versions/1").json() == 1
    assert api.get("/subjects/del-value/versions").json() == [2]
    assert api.get("/subjects/del-value/versions", params={"deleted": "true"}).json() == [1, 2]
    assert error(api.get("/subjects/del-value/versions/1")) == (404, 40402)
    assert api.get("/subjects/del-value/versions/1", params={"deleted": "true"}).status_code == 200
    assert error(api.delete("/subjects/del-value/versions/1")) == (404, 40406)
    assert error(api.delete("/subjects/del-value/versions/2?permanent=true")) == (404, 40407)
    assert api.delete("/subjects/del-value/versions/1?permanent=true").json() == 1
    assert error(api.get(f"/schemas/ids/{sid}")) == (404, 40403)  # used nowhere now
    assert error(api.delete("/subjects/del-value?permanent=true")) == (404, 40405)
    assert api.delete("/subjects/del-value").json() == [2]
    assert error(api.delete("/subjects/del-value")) == (404, 40404)
    assert "del-value" not in api.get("/subjects").json()
    assert "del-value" in api.get("/subjects", params={"deleted": "true"}).json()
    assert api.delete("/subjects/del-value?permanent=true").json() == [2]
    assert error(api.get("/subjects/del-value/versions")) == (404, 40401)
    # an id is never reused: the same schema gets its old id back
    assert register(api, "del-value", record("del", F1)).json()["id"] == sid


def test_references(api: TestClient) -> None:
    address = record("Address", {"name": "street", "type": "string"}, namespace="com.acme")
    addr_id = register(api, "address-value", address).json()["id"]
    person = record("Person", {"name": "home", "type": "com.acme.Address"}, namespace="com.acme")
    refs = [{"name": "com.acme.Address", "subject": "address-value", "version": 1}]
    r = register(api, "person-value", person, references=refs)
    assert r.status_code == 200, r.text
    pid = r.json()["id"]
    assert api.get(f"/schemas/ids/{pid}").json()["references"] == refs
    assert api.get("/subjects/address-value/versions/1/referencedby").json() == [pid]
    assert error(api.delete("/subjects/address-value/versions/1")) == (422, 42206)
    assert addr_id != pid
    unknown = [{"name": "com.acme.Nowhere", "subject": "nowhere-value", "version": 1}]
    assert error(register(api, "person2-value", person, references=unknown)) == (422, 42201)
    assert error(register(api, "person2-value", person)) == (422, 42201)  # type unresolved


def _nested(depth: int) -> str:
    """Arrays of arrays of ... `depth` deep, written out (json.dumps would recurse)."""
    return '{"type":"array","items":' * depth + '"string"' + "}" * depth


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        ("post", "/subjects/bad-value/versions", {"schema": "{not json"}, (422, 42201)),
        ("post", "/subjects/bad-value/versions", {"schema": '{"type": "nope"}'}, (422, 42201)),
        ("post", "/subjects/bad-value/versions", {"schema": _nested(5000)}, (422, 42201)),
        (
            "post",
            "/subjects/bad-value/versions",
            {"schema": "1", "schemaType": "XML"},
            (422, 42201),
        ),
        ("post", "/subjects/bad-value/versions", {"nothing": 1}, (422, 42201)),
        ("post", "/subjects/bad%01value/versions", {"schema": '"int"'}, (422, 42208)),
        ("post", "/subjects/" + "s" * 1000 + "/versions", {"schema": '"int"'}, (422, 42208)),
        ("get", "/subjects/basic-value/versions/-2", None, (422, 42202)),
        ("get", "/subjects/basic-value/versions/abc", None, (422, 42202)),
        ("get", "/subjects/basic-value/versions/0", None, (422, 42202)),
        ("get", "/subjects/basic-value/versions/99", None, (404, 40402)),
        ("get", "/subjects/never-value/versions/1", None, (404, 40401)),
        ("get", "/schemas/ids/987654", None, (404, 40403)),
        ("get", "/schemas/ids/abc", None, (404, 40403)),
    ],
)
def test_bad_input_answers_its_code_and_stores_nothing(
    api: TestClient, method: str, path: str, body: Any, expected: tuple[int, int]
) -> None:
    before = api.get("/subjects", params={"deleted": "true"}).json()
    r = api.request(method.upper(), path, json=body)
    assert error(r) == expected, r.text
    assert api.get("/subjects", params={"deleted": "true"}).json() == before


def test_a_10_mib_schema_is_refused_unread(api: TestClient) -> None:
    huge = json.dumps({"schema": record("big", F1) + " " * (10 * 1024 * 1024)})
    r = api.post("/subjects/huge-value/versions", content=huge)
    assert error(r) == (422, 42209)
    assert error(api.get("/subjects/huge-value/versions")) == (404, 40401)


def test_malformed_json_body(api: TestClient) -> None:
    r = api.post("/subjects/mal-value/versions", content=b"{")
    assert r.status_code == 400 and r.json()["error_code"] == 400
