"""The browsable API docs at /docs: Swagger UI over the node's own /openapi.json.

The assets come from the pinned swagger-ui-py package (Swagger UI 5, which renders OpenAPI
3.1), served by this node under /docs/static: the page loads nothing from another origin, so
it works offline and behind firewalls. Like /openapi.json it needs no API key
(cluster/http/auth.py); requests tried from the page carry the key given to its Authorize
button. /docs is not in the OpenAPI document: it is a page, not part of the API.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

DOCS_PATH = "/docs"
STATIC_PATH = f"{DOCS_PATH}/static"


def swagger_ui_dir() -> Path:
    """The package's asset directory, found without importing it (its __init__ imports its
    framework handlers, PyYAML and Jinja2, none of which the page needs)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("swagger-ui-py is not installed (a dependency of tierlog)")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


# BaseLayout, no standalone preset: no top bar to load other documents from, and
# validatorUrl null: no badge fetched from validator.swagger.io.
_PAGE = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tierlog API</title>
<link rel="stylesheet" href="{STATIC_PATH}/swagger-ui.css">
<link rel="icon" type="image/png" href="{STATIC_PATH}/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{STATIC_PATH}/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({{
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  persistAuthorization: true,
  displayRequestDuration: true,
  validatorUrl: null,
}});
</script>
</body>
</html>
"""


async def docs_page(request: Request) -> HTMLResponse:
    return HTMLResponse(_PAGE)


def docs_routes() -> list[BaseRoute]:
    """The page and its assets, for a node's routes (brokers and fetch nodes)."""
    return [
        Route(DOCS_PATH, docs_page, methods=["GET"]),
        Mount(STATIC_PATH, app=StaticFiles(directory=swagger_ui_dir()), name="docs-static"),
    ]


def is_docs_path(path: str) -> bool:
    return path == DOCS_PATH or path.startswith(f"{DOCS_PATH}/")
