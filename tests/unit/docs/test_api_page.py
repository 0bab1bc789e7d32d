"""docs/api.md is the table the OpenAPI document generates: a call the nodes serve is never
missing from it (issue 27 S7)."""

from __future__ import annotations

from pathlib import Path

from cluster.openapi.api_page import render, rows
from cluster.openapi.document import OPENAPI

DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"


def test_the_api_page_matches_the_openapi_document() -> None:
    assert DOC.read_text() == render(), (
        "docs/api.md is stale: run `.venv/bin/python -m cluster.openapi.api_page > docs/api.md`"
    )


def test_every_operation_of_the_document_has_a_row() -> None:
    served = {
        f"`{m.upper()} {p}`"
        for p, item in OPENAPI["paths"].items()
        for m in item
        if m != "parameters"
    }
    page = DOC.read_text()
    assert served == {call for call, _ in rows(OPENAPI)}
    assert all(f"| {call} |" in page for call in served)
    # The calls the README's old table left out are there (search, lake, ACLs, quotas, keys).
    for call in (
        "GET /topics/{topic}/search",
        "GET /topics/{topic}/lake",
        "POST /acls",
        "PUT /quotas/{entity}",
        "POST /security/keys",
    ):
        assert f"| `{call}` |" in page
