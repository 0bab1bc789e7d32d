"""The registry's media types: Confluent's clients send and accept
`application/vnd.schemaregistry.v1+json` (and plain JSON); answers carry the first."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

V1 = "application/vnd.schemaregistry.v1+json"
ACCEPTED = (V1, "application/vnd.schemaregistry+json", "application/json")


def registry_json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status, media_type=V1)
