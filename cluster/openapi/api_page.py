"""docs/api.md, generated from the OpenAPI document brokers serve at /openapi.json: every
call with its summary, so the page never leaves one out.

    .venv/bin/python -m cluster.openapi.api_page > docs/api.md

tests/unit/docs/test_api_page.py fails when the page and the document differ.
"""

from __future__ import annotations

from typing import Any

from cluster.openapi.document import OPENAPI

_METHODS = ("get", "post", "put", "patch", "delete")

_HEAD = """# HTTP API

Generated from the OpenAPI 3.1 document that brokers serve at `/openapi.json`
(`cluster/openapi/document.py`) by `python -m cluster.openapi.api_page > docs/api.md`; a test
keeps the two equal. The contracts behind it (bodies, acks, fetch formats, groups) are in
[design.md](design.md#5-http-api-starlette-openapi-served-at-openapijson), and how each call
behaves in [architecture.md](architecture.md).

Browse and try the calls at `http://127.0.0.1:8080/docs` (Swagger UI, served by the node
itself from the pinned `swagger-ui-py` package: nothing is loaded from a CDN). `/docs` and
`/openapi.json` need no key; with auth on, paste a key into **Authorize**. A fetch node's
document lists the calls it serves (reads, offsets, groups, search, lake, operations).

"""

_TAIL = """
Errors are JSON `{"error_code": "UNKNOWN_TOPIC_OR_PARTITION", "message": "..."}` with Kafka's
error names and the matching HTTP status (400, 404, 409, 413, 415, 416, 429, 503); the
document names that body `Error` (`components/schemas`). With auth on, every call but
`/healthz`, `/readyz`, `/openapi.json` and `/docs` may answer 401 (no valid key), 403 (the
ACLs refuse it) or 429 (too many failed logins from the client's address or key id: its next
turn is further off than `--failed-auth-max-wait-ms`); `/metrics` wants DESCRIBE on the
cluster. See [access-control.md](access-control.md), and [limits.md](limits.md) for every
limit and its knob.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(`METHOD path`, summary) for every operation, in the document's order."""
    out = []
    for path, item in doc["paths"].items():
        for method in _METHODS:
            op = item.get(method)
            if op is not None:
                call = f"`{method.upper()} {path}`"
                out.append((call, _cell(op.get("summary", ""))))
    return out


def render(doc: dict[str, Any] | None = None) -> str:
    lines = [_HEAD.rstrip("\n"), "", "| call | what |", "| --- | --- |"]
    lines += [f"| {call} | {summary} |" for call, summary in rows(doc or OPENAPI)]
    return "\n".join(lines) + "\n" + _TAIL


if __name__ == "__main__":
    print(render(), end="")
